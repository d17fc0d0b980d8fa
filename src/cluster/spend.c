/*
 * spend.c - what a cluster has cost, and its budget (issue 20, docs/cost.md).
 *
 * The store keeps each node's running intervals (node_runs): a run begins
 * when pbx sees the node's instance made or powered on, and ends when it
 * is deleted or powered off, at the cloud's own stop time where the cloud
 * gives one (an autostop while the laptop was off).  Each run carries the
 * node's price an hour when it began, from the price cache (never fetched
 * here), so spend = the sum over runs of hours x that price: stopped and
 * deleted time is free.
 *
 * pbx_cluster_spend_sync brings the runs in line with the store's node and
 * cluster states; pbx_cluster_close calls it, so every verb that starts,
 * stops, resizes or finds a cluster powered off leaves the runs true.  The
 * nodes a cloud head makes (power saving) have the head's own runs where
 * this verb took them (headruns.c): sync leaves those alone.
 *
 * The budget (template key `budget:`) is enforced twice: on the laptop,
 * where a verb warns from 80% on and a submission is refused at 100%
 * (pbx_cluster_budget_refuse), and on the head, which powers the cluster
 * off at the time the budget runs out with every node running
 * (pbx_cluster_budget_until, given to templates/autostop.sh), so the
 * cluster stops with the laptop off.
 */
#include "cluster/cluster_internal.h"
#include "cloud/price/price.h"
#include "util/money.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether a node in store state `state` has an instance that runs (and is
 * paid for) while its cluster is not powered off. */
static int spend_node_runs(const char *state)
{
	return state && strcmp(state, PBX_NODE_NOT_CREATED) != 0 && strcmp(state, "deleted") != 0 &&
	       strcmp(state, PBX_NODE_ASLEEP) != 0;
}

/* The quote line of a node: the head's (the first), or its group's (the
 * template's, pbx_cloud_group_of); NULL when none fits. */
static const struct pbx_price_line *spend_line(const struct pbx_price_quote *q,
					       const struct pbx_cluster_template *t,
					       const char *name, const char *role)
{
	const struct pbx_node_group *g;
	size_t i;
	if (!strcmp(role, "head"))
		return q->n ? &q->lines[0] : NULL;
	g = t ? pbx_cloud_group_of(t, name) : NULL;
	for (i = 1; g && i < q->n; i++)
		if (q->lines[i].group && !strcmp(q->lines[i].group, g->name))
			return &q->lines[i];
	return NULL;
}

int64_t pbx_spend_node_price(const struct pbx_price_quote *q, const struct pbx_cluster_template *t,
			     const char *name, const char *role)
{
	const struct pbx_price_line *l = q ? spend_line(q, t, name, role) : NULL;
	return l ? l->each : -1;
}

/* Whether node `name`'s runs are the head's (headruns.c): this verb took
 * them, and it may sleep. */
static int spend_head_owns(const struct pbx_cluster *c, const char *name)
{
	return c->head_runs && c->spec.t && pbx_power_may_sleep(c->spec.t, name);
}

/* The open run of `node` among v, or NULL. */
static struct pbx_node_run *spend_open_run(struct pbx_node_run *v, size_t n, const char *node)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!v[i].ended && !strcmp(v[i].node, node))
			return &v[i];
	return NULL;
}

static const struct pbx_node_row *spend_node(const struct pbx_node_row *v, size_t n,
					     const char *name)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

/* Whether the live cluster named like c is c, powered on. */
static int spend_cluster_on(struct pbx_cluster *c)
{
	struct pbx_cluster_row row;
	struct pbx_err err = PBX_ERR_INIT;
	int on;
	if (pbx_store_cluster_get(c->store, c->row.name, &row, &err) < 0)
		return 0; /* deleted */
	on = row.id == c->row.id && strcmp(row.state, "stopped") != 0 &&
	     strcmp(row.state, "deleted") != 0;
	pbx_cluster_row_free(&row);
	return on;
}

/* When node `name` powered off, as the cloud said: its own instance's stop
 * time, else its head's; 0 when not known. */
static int64_t spend_stopped_at(const struct pbx_cluster *c, const char *name)
{
	size_t i;
	for (i = 0; i < c->nstops; i++)
		if (!strcmp(c->stops[i].name, name))
			return c->stops[i].at;
	return c->stopped_at;
}

/* Where a new run of node `name` begins: when this verb began (a start's
 * instances run from then), or earlier when the cloud says its instance
 * started before (a node the head woke that the laptop's view just learnt
 * up: c->starts), but never before a run of it ended. */
static int64_t spend_run_from(const struct pbx_cluster *c, const struct pbx_node_run *runs,
			      size_t nr, const char *name, int64_t now)
{
	int64_t from = c->opened_at > 0 && c->opened_at <= now ? c->opened_at : now, last = 0;
	size_t i;
	for (i = 0; i < nr; i++)
		if (!strcmp(runs[i].node, name) && runs[i].ended > last)
			last = runs[i].ended;
	for (i = 0; i < c->nstarts; i++)
		if (!strcmp(c->starts[i].name, name) && c->starts[i].at < from &&
		    c->starts[i].at >= last)
			from = c->starts[i].at;
	return from;
}

void pbx_cluster_spend_sync(struct pbx_cluster *c, int64_t now)
{
	struct pbx_node_row *nodes = NULL;
	struct pbx_node_run *runs = NULL;
	struct pbx_price_quote q;
	struct pbx_err err = PBX_ERR_INIT;
	size_t nn = 0, nr = 0, i;
	int on, quoted = 0;
	if (!c->store || !c->row.id || !c->row.name || !c->row.cloud ||
	    !strcmp(c->row.cloud, "local")) /* processes on this machine: no price */
		return;
	memset(&q, 0, sizeof(q));
	on = spend_cluster_on(c);
	if (pbx_store_node_list(c->store, c->row.id, &nodes, &nn, &err) < 0 ||
	    pbx_store_runs_list(c->store, c->row.id, &runs, &nr, &err) < 0)
		goto out;
	/* runs that end: their node is gone, or off, or the cluster is */
	for (i = 0; i < nr; i++) {
		const struct pbx_node_row *n = spend_node(nodes, nn, runs[i].node);
		int64_t at = now;
		if (runs[i].ended || (on && n && spend_node_runs(n->state)) ||
		    (on && spend_head_owns(c, runs[i].node)))
			continue;
		if (!on) { /* powered off while pbx was not looking: the cloud says when */
			at = spend_stopped_at(c, runs[i].node);
			if (at <= 0 || at > now)
				at = now;
		}
		pbx_store_run_close(c->store, runs[i].id, at, &err);
	}
	if (!on)
		goto out;
	for (i = 0; i < nn; i++) {
		int64_t nanos;
		if (!spend_node_runs(nodes[i].state) || spend_open_run(runs, nr, nodes[i].name) ||
		    spend_head_owns(c, nodes[i].name))
			continue;
		if (!quoted && c->spec.t) {
			struct pbx_err qerr = PBX_ERR_INIT;
			quoted = pbx_price_quote(c->store, c->cfg, c->spec.t, 1, &q, &qerr) == 0
					 ? 1
					 : -1;
		}
		nanos = pbx_spend_node_price(quoted == 1 ? &q : NULL, c->spec.t, nodes[i].name,
					     nodes[i].role);
		pbx_store_run_open(c->store, c->row.id, nodes[i].name,
				   spend_run_from(c, runs, nr, nodes[i].name, now), nanos,
				   q.currency, &err);
	}
out:
	pbx_price_quote_free(&q);
	pbx_node_runs_free(runs, nr);
	pbx_node_rows_free(nodes, nn);
}

int pbx_cluster_spend_of(struct pbx_store *st, int64_t cluster_id, int64_t now, struct pbx_spend *s,
			 struct pbx_err *err)
{
	struct pbx_node_run *runs = NULL;
	size_t n = 0, i;
	memset(s, 0, sizeof(*s));
	if (pbx_store_runs_list(st, cluster_id, &runs, &n, err) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		int64_t end = runs[i].ended ? runs[i].ended : now;
		int64_t secs = end > runs[i].started ? end - runs[i].started : 0;
		s->seconds += secs;
		if (!runs[i].ended)
			s->running++;
		if (runs[i].nanos < 0) {
			s->unpriced++;
			continue;
		}
		if (!s->currency[0])
			snprintf(s->currency, sizeof(s->currency), "%s", runs[i].currency);
		/* hours x price, in 1e-9 units; a long double keeps the product
		 * exact to well below a cent for years of a node */
		s->spent += (int64_t)((long double)secs * runs[i].nanos / 3600.0L + 0.5L);
		if (!runs[i].ended)
			s->hourly += runs[i].nanos;
	}
	s->runs = n;
	pbx_node_runs_free(runs, n);
	return 0;
}

int pbx_cluster_budget(struct pbx_cluster *c, int64_t now, struct pbx_budget *b)
{
	struct pbx_err err = PBX_ERR_INIT;
	memset(b, 0, sizeof(*b));
	if (!c->spec.t || c->spec.t->budget <= 0 || !c->row.id)
		return 0;
	b->budget = c->spec.t->budget;
	if (pbx_cluster_spend_of(c->store, c->row.id, now, &b->spend, &err) < 0)
		return 0;
	b->percent = (int)((long double)b->spend.spent * 100.0L / (long double)b->budget);
	return 1;
}

/* "12.3456 of the budget 10.00 USD (123%)" into out. */
static void budget_text(const struct pbx_budget *b, char *out, size_t size)
{
	char spent[32], budget[32];
	pbx_money_format(b->spend.spent, 4, spent, sizeof(spent));
	pbx_money_format(b->budget, 2, budget, sizeof(budget));
	snprintf(out, size, "%s of its budget %s%s%s (%d%%)", spent, budget,
		 b->spend.currency[0] ? " " : "", b->spend.currency, b->percent);
}

int pbx_cluster_budget_refuse(struct pbx_cluster *c, const char *what, struct pbx_err *err)
{
	struct pbx_budget b;
	char text[160];
	if (!pbx_cluster_budget(c, time(NULL), &b) || b.spend.spent < b.budget)
		return 0;
	budget_text(&b, text, sizeof(text));
	return pbx_err_setc(err, PBX_EXIT_SECURITY,
			    "%s refused: cluster %s has spent %s; raise "
			    "budget: in %s's template (or set it off) to go on",
			    what, c->row.name, text, c->row.name);
}

char *pbx_cluster_budget_warning(struct pbx_cluster *c)
{
	struct pbx_budget b;
	char text[160];
	if (!pbx_cluster_budget(c, time(NULL), &b) || b.percent < 80)
		return NULL;
	budget_text(&b, text, sizeof(text));
	if (b.spend.spent >= b.budget)
		return xasprintf("cluster %s has spent %s: new submissions are refused, and its "
				 "head powers it off (disks kept)",
				 c->row.name, text);
	return xasprintf("cluster %s has spent %s", c->row.name, text);
}

/* Seconds before the budget runs out that the head begins to power the
 * cluster off (its compute nodes first, each VM's shutdown): 120, or
 * PBX_BUDGET_MARGIN_S (tests). */
static int64_t budget_margin(void)
{
	const char *v = getenv("PBX_BUDGET_MARGIN_S");
	if (v && *v && strlen(v) < 7 && strspn(v, "0123456789") == strlen(v))
		return atoll(v);
	return 120;
}

/* Why quote q cannot hold a budget: its first unpriced line, or that it
 * is free; caller frees. */
static char *budget_unpriced(const struct pbx_price_quote *q)
{
	size_t i;
	for (i = 0; i < q->n; i++)
		if (q->lines[i].each < 0)
			return xasprintf("%s (%s): %s", q->lines[i].group, q->lines[i].machine_type,
					 q->lines[i].why ? q->lines[i].why : "no price");
	return xstrdup("every node's price is 0");
}

int pbx_cluster_budget_until(struct pbx_cluster *c, int64_t now, int64_t *until,
			     struct pbx_err *err)
{
	struct pbx_price_quote q;
	struct pbx_budget b;
	char *why;
	*until = 0;
	if (!pbx_cluster_budget(c, now, &b))
		return 0;
	if (b.spend.spent >= b.budget) {
		*until = now;
		return 0;
	}
	if (pbx_price_quote(c->store, c->cfg, c->spec.t, 0, &q, err) < 0)
		return pbx_err_prefix(err, "cluster %s has a budget, and no price to hold it to",
				      c->row.name);
	if (q.total <= 0) {
		why = budget_unpriced(&q);
		pbx_price_quote_free(&q);
		pbx_err_setc(err, PBX_EXIT_USAGE,
			     "cluster %s has a budget, and no price to hold it to: %s (prices: in "
			     "docs/cost.md); or set budget: off",
			     c->row.name, why);
		free(why);
		return -1;
	}
	/* every node of the template running from now on: the earliest the
	 * budget can run out, less the time the cluster takes to power off */
	*until = now +
		 (int64_t)((long double)(b.budget - b.spend.spent) * 3600.0L /
			   (long double)q.total) -
		 budget_margin();
	if (*until < now)
		*until = now;
	pbx_price_quote_free(&q);
	return 0;
}
