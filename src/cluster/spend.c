/*
 * spend.c - what a cluster has cost, and its budget (docs/cost.md).
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
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		if (runs[i].ended || (on && n && pbx_spend_state_runs(n->state)) ||
		    (on && spend_head_owns(c, runs[i].node)))
			continue;
		if (!on) { /* powered off while pbx was not looking: the cloud says when */
			at = pbx_spend_stopped_at(c, runs[i].node);
			if (at <= 0 || at > now)
				at = now;
		}
		pbx_store_run_close(c->store, runs[i].id, at, &err);
	}
	if (!on)
		goto out;
	for (i = 0; i < nn; i++) {
		int64_t nanos;
		if (!pbx_spend_state_runs(nodes[i].state) ||
		    spend_open_run(runs, nr, nodes[i].name) || spend_head_owns(c, nodes[i].name))
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
				   pbx_spend_run_from(c, runs, nr, nodes[i].name, now), nanos,
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
	for (i = 0; i < n; i++)
		pbx_spend_add_run(s, &runs[i], now);
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
	b->percent = pbx_budget_percent(b->spend.spent, b->budget);
	return 1;
}

int pbx_cluster_budget_refuse(struct pbx_cluster *c, const char *what, struct pbx_err *err)
{
	struct pbx_budget b;
	char text[160];
	if (!pbx_cluster_budget(c, time(NULL), &b) || !pbx_budget_spent(&b))
		return 0;
	pbx_budget_text(&b, text, sizeof(text));
	return pbx_err_setc(err, PBX_EXIT_SECURITY,
			    "%s refused: cluster %s has spent %s; raise "
			    "budget: in %s's template (or set it off) to go on",
			    what, c->row.name, text, c->row.name);
}

char *pbx_cluster_budget_warning(struct pbx_cluster *c)
{
	struct pbx_budget b;
	char text[160];
	if (!pbx_cluster_budget(c, time(NULL), &b) || b.percent < PBX_BUDGET_WARN_PERCENT)
		return NULL;
	pbx_budget_text(&b, text, sizeof(text));
	if (pbx_budget_spent(&b))
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
	if (pbx_budget_spent(&b)) {
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
	*until = pbx_budget_deadline(now, b.budget, b.spend.spent, q.total, budget_margin());
	pbx_price_quote_free(&q);
	return 0;
}
