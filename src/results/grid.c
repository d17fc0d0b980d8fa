/*
 * grid.c - the report as rows of cells with named columns, what every
 * tabular format prints:
 *   per task:  task, PARAM..., METRIC.final, METRIC.best ..., summary.KEY ...,
 *              state, runtime
 *   grouped:   GROUP_PARAM..., tasks, METRIC.mean, .std, .min, .max, .n ...,
 *              summary.KEY.mean ...,
 *              and disagree in a pooled report (src/pool/disagree.c)
 * then node_hours and cost (sums for a group) when the report shows them
 * (report->cost_shown; cost in report->currency units).
 */
#include "results/model_internal.h"
#include "results/num.h"

#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const task_stats[] = { "final", "best" };
static const char *const group_stats[] = { "mean", "std", "min", "max", "n" };

static size_t grid_add_col(struct pbx_grid *g, char *name, int numeric)
{
	g->cols[g->ncols] = name;
	g->numeric[g->ncols] = numeric;
	return g->ncols++;
}

static void grid_columns(const struct pbx_report *r, struct pbx_grid *g)
{
	size_t i, s, c, max = r->nparams + 7 + 5 * r->nmetrics + r->nsummary;
	g->cols = xcalloc(max, sizeof(char *));
	g->numeric = xcalloc(max, sizeof(int));
	g->group = xcalloc(max, sizeof(char *));
	g->sub = xcalloc(max, sizeof(char *));
	if (!r->ngroup_by) {
		grid_add_col(g, xstrdup("task"), 1);
		for (i = 0; i < r->nparams; i++)
			grid_add_col(g, xstrdup(r->params[i]), r->param_numeric[i]);
	} else {
		for (i = 0; i < r->ngroup_by; i++)
			grid_add_col(g, xstrdup(r->params[r->group_by[i]]),
				     r->param_numeric[r->group_by[i]]);
		grid_add_col(g, xstrdup("tasks"), 1);
	}
	for (i = 0; i < r->nmetrics; i++) {
		const char *m = r->metric_names[r->metrics[i]];
		size_t nst = r->ngroup_by ? 5 : 2;
		for (s = 0; s < nst; s++) {
			const char *st = r->ngroup_by ? group_stats[s] : task_stats[s];
			c = grid_add_col(g, xasprintf("%s.%s", m, st), 1);
			g->group[c] = m;
			g->sub[c] = st;
		}
	}
	for (i = 0; i < r->nsummary; i++) { /* grouped: the mean */
		c = grid_add_col(
			g,
			xasprintf("summary.%s%s", r->summary_keys[i], r->ngroup_by ? ".mean" : ""),
			1);
		g->group[c] = "summary";
		g->sub[c] = g->cols[c] + 8;
	}
	if (!r->ngroup_by) {
		grid_add_col(g, xstrdup("state"), 0);
		grid_add_col(g, xstrdup("runtime"), 1);
	} else if (r->disagree_shown) {
		grid_add_col(g, xstrdup("disagree"), 0);
	}
	if (r->cost_shown) {
		grid_add_col(g, xstrdup("node_hours"), 1);
		grid_add_col(g, xstrdup("cost"), 1);
	}
}

static void cell_real(struct pbx_cell *c, int has, double v)
{
	c->kind = has ? PBX_CELL_REAL : PBX_CELL_NONE;
	c->d = v;
}

static void cell_int(struct pbx_cell *c, int has, int64_t v)
{
	c->kind = has ? PBX_CELL_INT : PBX_CELL_NONE;
	c->i = v;
}

static void cell_text(struct pbx_cell *c, enum pbx_cell_kind kind, const char *s)
{
	c->kind = kind;
	c->text = s;
}

static void grid_task_row(const struct pbx_report *r, const struct pbx_report_task *t,
			  struct pbx_cell *c)
{
	size_t i;
	cell_int(c++, 1, t->idx);
	for (i = 0; i < r->nparams; i++)
		cell_text(c++, PBX_CELL_PARAM, t->values[i]);
	for (i = 0; i < r->nmetrics; i++) {
		const struct pbx_report_stat *s = &t->stats[r->metrics[i]];
		cell_real(c++, s->has_final, s->final);
		cell_real(c++, s->has_best, s->best);
	}
	for (i = 0; i < r->nsummary; i++)
		cell_real(c++, t->has_summary[i], t->summary[i]);
	cell_text(c++, PBX_CELL_TEXT, t->state);
	cell_int(c++, t->runtime >= 0, t->runtime);
	if (r->cost_shown) {
		cell_real(c++, t->node_hours >= 0, t->node_hours);
		cell_real(c, t->cost >= 0, (double)t->cost / 1e9);
	}
}

static void grid_group_row(const struct pbx_report *r, const struct pbx_report_group *grp,
			   struct pbx_cell *c)
{
	size_t i;
	for (i = 0; i < r->ngroup_by; i++)
		cell_text(c++, PBX_CELL_PARAM, grp->values[i]);
	cell_int(c++, 1, (int64_t)grp->ntasks);
	for (i = 0; i < r->nmetrics; i++) {
		const struct pbx_report_agg *a = &grp->aggs[i];
		cell_real(c++, a->n > 0, a->mean);
		cell_real(c++, a->n > 1, a->std);
		cell_real(c++, a->n > 0, a->min);
		cell_real(c++, a->n > 0, a->max);
		cell_int(c++, 1, (int64_t)a->n);
	}
	for (i = 0; i < r->nsummary; i++)
		cell_real(c++, grp->summary_aggs[i].n > 0, grp->summary_aggs[i].mean);
	if (r->disagree_shown)
		cell_text(c++, grp->disagree ? PBX_CELL_TEXT : PBX_CELL_NONE, grp->disagree);
	if (r->cost_shown) {
		cell_real(c++, 1, grp->node_hours);
		cell_real(c, grp->cost >= 0, (double)grp->cost / 1e9);
	}
}

void pbx_grid_build(const struct pbx_report *r, struct pbx_grid *g)
{
	size_t i;
	g->ncols = 0;
	grid_columns(r, g);
	g->nrows = r->ngroup_by ? r->ngroups : r->ntasks;
	g->cells = xcalloc(g->nrows * g->ncols + 1, sizeof(*g->cells));
	for (i = 0; i < g->nrows; i++) {
		if (r->ngroup_by)
			grid_group_row(r, &r->groups[i], &g->cells[i * g->ncols]);
		else
			grid_task_row(r, &r->tasks[i], &g->cells[i * g->ncols]);
	}
}

void pbx_grid_free(struct pbx_grid *g)
{
	size_t i;
	for (i = 0; i < g->ncols; i++)
		free(g->cols[i]);
	free(g->cols);
	free(g->numeric);
	free(g->group);
	free(g->sub);
	free(g->cells);
}

const char *pbx_cell_str(const struct pbx_cell *c, int exact, char *buf, size_t size)
{
	switch (c->kind) {
	case PBX_CELL_NONE:
		snprintf(buf, size, "%s", "");
		break;
	case PBX_CELL_TEXT:
	case PBX_CELL_PARAM:
		return c->text;
	case PBX_CELL_INT:
		snprintf(buf, size, "%lld", (long long)c->i);
		break;
	case PBX_CELL_REAL:
		if (exact)
			pbx_num_exact(c->d, buf, size);
		else
			pbx_num_short(c->d, buf, size);
		break;
	}
	return buf;
}
