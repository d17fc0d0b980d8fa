/*
 * spend_plan.c - the arithmetic of spend and budget (docs/cost.md), apart
 * from the store and the clock that spend.c reads: which node states are
 * paid for, a node's price in a quote, where a node's run begins and ends,
 * what a run has cost, how much of a budget is spent and when it runs out.
 * Pure (cluster_plan.h; tests/cluster/test_plan.c).
 *
 * Money is in 1e-9 units of currency (int64_t, "nanos"); an hour's price
 * times seconds goes through a long double, which keeps the product exact
 * to well below a cent for years of a node.  A sum or a time that would not
 * fit an int64_t stops at INT64_MAX (a budget is spent, a deadline far).
 */
#include "cluster/cluster_internal.h"
#include "util/money.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int pbx_spend_state_runs(const char *state)
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

int64_t pbx_spend_stopped_at(const struct pbx_cluster *c, const char *name)
{
	size_t i;
	for (i = 0; i < c->nstops; i++)
		if (!strcmp(c->stops[i].name, name))
			return c->stops[i].at;
	return c->stopped_at;
}

int64_t pbx_spend_run_from(const struct pbx_cluster *c, const struct pbx_node_run *runs, size_t nr,
			   const char *name, int64_t now)
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

/* a + b, b >= 0, stopping at INT64_MAX. */
static int64_t spend_add(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

int64_t pbx_spend_run_cost(int64_t seconds, int64_t nanos)
{
	long double v;
	if (seconds <= 0 || nanos <= 0)
		return 0;
	v = (long double)seconds * nanos / 3600.0L + 0.5L;
	return v >= (long double)INT64_MAX ? INT64_MAX : (int64_t)v;
}

void pbx_spend_add_run(struct pbx_spend *s, const struct pbx_node_run *r, int64_t now)
{
	int64_t end = r->ended ? r->ended : now;
	int64_t secs = end > r->started ? end - r->started : 0;
	s->seconds = spend_add(s->seconds, secs);
	s->runs++;
	if (!r->ended)
		s->running++;
	if (r->nanos < 0) {
		s->unpriced++;
		return;
	}
	if (!s->currency[0])
		snprintf(s->currency, sizeof(s->currency), "%s", r->currency);
	s->spent = spend_add(s->spent, pbx_spend_run_cost(secs, r->nanos));
	if (!r->ended)
		s->hourly = spend_add(s->hourly, r->nanos);
}

int pbx_budget_percent(int64_t spent, int64_t budget)
{
	long double p;
	if (budget <= 0)
		return 0;
	p = (long double)spent * 100.0L / (long double)budget;
	if (p >= (long double)INT_MAX)
		return INT_MAX;
	if (p <= (long double)INT_MIN)
		return INT_MIN;
	return (int)p;
}

int pbx_budget_spent(const struct pbx_budget *b)
{
	return b->spend.spent >= b->budget;
}

void pbx_budget_text(const struct pbx_budget *b, char *out, size_t size)
{
	char spent[32], budget[32];
	pbx_money_format(b->spend.spent, 4, spent, sizeof(spent));
	pbx_money_format(b->budget, 2, budget, sizeof(budget));
	snprintf(out, size, "%s of its budget %s%s%s (%d%%)", spent, budget,
		 b->spend.currency[0] ? " " : "", b->spend.currency, b->percent);
}

int64_t pbx_budget_deadline(int64_t now, int64_t budget, int64_t spent, int64_t hourly,
			    int64_t margin)
{
	long double secs;
	int64_t until;
	if (spent >= budget || hourly <= 0)
		return now;
	/* every node of the template running from now on: the earliest the
	 * budget can run out, less the time the cluster takes to power off */
	secs = ((long double)budget - (long double)spent) * 3600.0L / (long double)hourly;
	if (secs >= (long double)INT64_MAX - (long double)now)
		return INT64_MAX;
	until = now + (int64_t)secs;
	if (margin < 0 && until > INT64_MAX + margin)
		return INT64_MAX;
	until = margin > 0 && until < INT64_MIN + margin ? now : until - margin;
	return until < now ? now : until;
}
