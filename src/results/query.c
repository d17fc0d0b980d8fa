/*
 * query.c - the report's --where filters, --sort order and --group-by
 * aggregates over the model's tasks (see report.h for the definitions).
 */
#include "results/model_internal.h"
#include "results/num.h"

#include "util/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum where_op { OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE };

struct where {
	struct pbx_key key;
	enum where_op op;
	const char *value;
	double num;
	int is_num;
};

/* A number for the key in task t: 1 and *v, or 0 when it has none. */
static int key_number(const struct pbx_report *r, const struct pbx_report_task *t,
		      const struct pbx_key *k, double *v)
{
	switch (k->kind) {
	case PBX_KEY_PARAM:
		return pbx_num_parse(t->values[k->i], v);
	case PBX_KEY_METRIC:
		*v = t->stats[k->i].final;
		return t->stats[k->i].has_final;
	case PBX_KEY_RUNTIME:
		*v = (double)t->runtime;
		return t->runtime >= 0;
	case PBX_KEY_TASK:
		*v = (double)t->idx;
		return 1;
	case PBX_KEY_NODE_HOURS:
		*v = t->node_hours;
		return t->node_hours >= 0;
	case PBX_KEY_COST:
		*v = (double)t->cost / 1e9;
		return t->cost >= 0;
	case PBX_KEY_STATE:
		break;
	}
	(void)r;
	return 0;
}

static int op_holds(enum where_op op, int c)
{
	switch (op) {
	case OP_EQ:
		return c == 0;
	case OP_NE:
		return c != 0;
	case OP_LT:
		return c < 0;
	case OP_GT:
		return c > 0;
	case OP_LE:
		return c <= 0;
	case OP_GE:
		return c >= 0;
	}
	return 0;
}

static int where_match(const struct pbx_report *r, const struct pbx_report_task *t,
		       const struct where *w)
{
	double v;
	if (w->key.kind == PBX_KEY_STATE)
		return op_holds(w->op, strcasecmp(t->state, w->value));
	if (w->key.kind == PBX_KEY_PARAM && (!w->is_num || !pbx_num_parse(t->values[w->key.i], &v)))
		return (w->op == OP_EQ || w->op == OP_NE) &&
		       op_holds(w->op, strcmp(t->values[w->key.i], w->value));
	if (!key_number(r, t, &w->key, &v))
		return 0;
	return op_holds(w->op, (v > w->num) - (v < w->num));
}

static int where_op_parse(const char *s, enum where_op *op, size_t *len)
{
	static const struct {
		const char *text;
		enum where_op op;
	} ops[] = { { "!=", OP_NE }, { "<=", OP_LE }, { ">=", OP_GE }, { "==", OP_EQ },
		    { "=", OP_EQ },  { "<", OP_LT },  { ">", OP_GT } };
	size_t i;
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strncmp(s, ops[i].text, strlen(ops[i].text))) {
			*op = ops[i].op;
			*len = strlen(ops[i].text);
			return 0;
		}
	return -1;
}

static int where_parse(const struct pbx_report *r, const char *expr, struct where *w,
		       struct pbx_err *err)
{
	size_t klen = strcspn(expr, "!<>="), oplen;
	char *key;
	int found;
	if (!klen || !expr[klen] || where_op_parse(expr + klen, &w->op, &oplen) < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--where '%s': expected KEY=VALUE, KEY!=VALUE or KEY<NUMBER "
				    "(also >, <=, >=)",
				    expr);
	key = xstrndup(expr, klen);
	found = pbx_report_key(r, key, &w->key) == 0;
	free(key);
	if (!found)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--where '%s': not a parameter, metric, state, runtime or task",
				    expr);
	w->value = expr + klen + oplen;
	w->is_num = pbx_num_parse(w->value, &w->num);
	if (w->key.kind == PBX_KEY_STATE && w->op != OP_EQ && w->op != OP_NE)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--where '%s': state takes = or !=", expr);
	if (w->key.kind != PBX_KEY_STATE && w->key.kind != PBX_KEY_PARAM && !w->is_num)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--where '%s': '%s' is not a number", expr,
				    w->value);
	if (w->key.kind == PBX_KEY_PARAM && !w->is_num && w->op != OP_EQ && w->op != OP_NE)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--where '%s': '%s' is not a number", expr,
				    w->value);
	return 0;
}

int pbx_report_where(struct pbx_report *r, const char *const *exprs, size_t n, struct pbx_err *err)
{
	struct where *w = xcalloc(n + 1, sizeof(*w));
	size_t i, t, kept = 0;
	for (i = 0; i < n; i++)
		if (where_parse(r, exprs[i], &w[i], err) < 0) {
			free(w);
			return -1;
		}
	for (t = 0; t < r->ntasks; t++) {
		for (i = 0; i < n && where_match(r, &r->tasks[t], &w[i]); i++)
			;
		if (i < n)
			pbx_report_task_free(r, &r->tasks[t]);
		else
			r->tasks[kept++] = r->tasks[t];
	}
	r->ntasks = kept;
	free(w);
	return 0;
}

/* ------------------------------------------------------------------ sort */

struct sorter {
	const struct pbx_report *r;
	struct pbx_key key;
	int desc, numeric;
};

static struct sorter sort_ctx; /* qsort has no context argument in C11 */

/* Compares two values where `has` says which exist: missing ones last. */
static int cmp_present(int ha, int hb, double a, double b, int desc)
{
	if (!ha || !hb)
		return hb - ha;
	return desc ? (a < b) - (a > b) : (a > b) - (a < b);
}

static int cmp_task(const void *pa, const void *pb)
{
	const struct pbx_report_task *a = pa, *b = pb;
	const struct sorter *s = &sort_ctx;
	int c = 0;
	double x = 0, y = 0;
	if (s->key.kind == PBX_KEY_STATE || (s->key.kind == PBX_KEY_PARAM && !s->numeric)) {
		const char *sa = s->key.kind == PBX_KEY_STATE ? a->state : a->values[s->key.i];
		const char *sb = s->key.kind == PBX_KEY_STATE ? b->state : b->values[s->key.i];
		c = strcmp(sa, sb);
		c = s->desc ? -c : c;
	} else {
		int ha = key_number(s->r, a, &s->key, &x), hb = key_number(s->r, b, &s->key, &y);
		c = cmp_present(ha, hb, x, y, s->desc);
	}
	return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

static int sort_spec(struct pbx_report *r, const char *spec, struct sorter *s, struct pbx_err *err)
{
	const char *colon = strrchr(spec, ':');
	char *key = xstrndup(spec, colon ? (size_t)(colon - spec) : strlen(spec));
	int found = pbx_report_key(r, key, &s->key) == 0;
	free(key);
	s->r = r;
	s->desc = colon && !strcmp(colon, ":desc");
	if (colon && !s->desc && strcmp(colon, ":asc"))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--sort '%s': expected KEY, KEY:asc or KEY:desc", spec);
	if (!found)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--sort '%s': not a parameter, metric, state, runtime or task",
				    spec);
	s->numeric = s->key.kind == PBX_KEY_PARAM ? r->param_numeric[s->key.i] : 1;
	return 0;
}

static int cmp_group(const void *pa, const void *pb);

static size_t group_col(const struct pbx_report *r, size_t param)
{
	size_t i;
	for (i = 0; i < r->ngroup_by && r->group_by[i] != param; i++)
		;
	return i;
}

int pbx_report_sort(struct pbx_report *r, const char *spec, struct pbx_err *err)
{
	if (!spec)
		return 0;
	if (sort_spec(r, spec, &sort_ctx, err) < 0)
		return -1;
	if (r->ngroup_by &&
	    !(sort_ctx.key.kind == PBX_KEY_METRIC ||
	      (sort_ctx.key.kind == PBX_KEY_PARAM && group_col(r, sort_ctx.key.i) < r->ngroup_by)))
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"--sort '%s': groups sort by a --group-by parameter or a metric", spec);
	if (r->ngroup_by)
		qsort(r->groups, r->ngroups, sizeof(*r->groups), cmp_group);
	else
		qsort(r->tasks, r->ntasks, sizeof(*r->tasks), cmp_task);
	sort_ctx.r = NULL;
	return 0;
}

/* ----------------------------------------------------------------- group */

static void agg_compute(const struct pbx_report *r, struct pbx_report_group *g, size_t mi,
			struct pbx_report_agg *a)
{
	size_t i;
	double sum = 0, ss = 0;
	memset(a, 0, sizeof(*a));
	for (i = 0; i < g->ntasks; i++) {
		const struct pbx_report_stat *s = &r->tasks[g->tasks[i]].stats[mi];
		if (!s->has_final)
			continue;
		if (!a->n || s->final < a->min)
			a->min = s->final;
		if (!a->n || s->final > a->max)
			a->max = s->final;
		sum += s->final;
		a->n++;
	}
	if (!a->n)
		return;
	a->mean = sum / (double)a->n;
	for (i = 0; i < g->ntasks; i++) {
		const struct pbx_report_stat *s = &r->tasks[g->tasks[i]].stats[mi];
		if (s->has_final)
			ss += (s->final - a->mean) * (s->final - a->mean);
	}
	a->std = a->n > 1 ? sqrt(ss / (double)(a->n - 1)) : 0;
}

static int group_has(const struct pbx_report *r, const struct pbx_report_group *g,
		     const struct pbx_report_task *t)
{
	size_t i;
	for (i = 0; i < r->ngroup_by; i++)
		if (strcmp(g->values[i], t->values[r->group_by[i]]))
			return 0;
	return 1;
}

static struct pbx_report_group *group_for(struct pbx_report *r, const struct pbx_report_task *t)
{
	struct pbx_report_group *g;
	size_t i;
	for (i = 0; i < r->ngroups; i++)
		if (group_has(r, &r->groups[i], t))
			return &r->groups[i];
	g = &r->groups[r->ngroups++];
	g->values = xcalloc(r->ngroup_by, sizeof(char *));
	g->tasks = xcalloc(r->ntasks, sizeof(size_t));
	for (i = 0; i < r->ngroup_by; i++)
		g->values[i] = xstrdup(t->values[r->group_by[i]]);
	return g;
}

static int cmp_group_key(const void *pa, const void *pb)
{
	const struct pbx_report_group *a = pa, *b = pb;
	const struct sorter *s = &sort_ctx;
	const struct pbx_report *r = s->r;
	double x = 0, y = 0;
	size_t col, m;
	int c;
	if (s->key.kind == PBX_KEY_PARAM) {
		col = group_col(r, s->key.i);
		if (!s->numeric) {
			c = strcmp(a->values[col], b->values[col]);
			return s->desc ? -c : c;
		}
		return cmp_present(pbx_num_parse(a->values[col], &x),
				   pbx_num_parse(b->values[col], &y), x, y, s->desc);
	}
	for (m = 0; m < r->nmetrics && r->metrics[m] != s->key.i; m++)
		;
	if (m == r->nmetrics)
		return 0;
	return cmp_present(a->aggs[m].n > 0, b->aggs[m].n > 0, a->aggs[m].mean, b->aggs[m].mean,
			   s->desc);
}

static int cmp_group_stable(const struct pbx_report_group *a, const struct pbx_report_group *b,
			    int c)
{
	return c ? c : (a->tasks[0] > b->tasks[0]) - (a->tasks[0] < b->tasks[0]);
}

static int cmp_group(const void *pa, const void *pb)
{
	return cmp_group_stable(pa, pb, cmp_group_key(pa, pb));
}

/* Groups in order of first appearance (tasks by index); pbx_report_sort
 * may reorder them. */
void pbx_report_group(struct pbx_report *r)
{
	size_t t, g, m;
	r->groups = xcalloc(r->ntasks ? r->ntasks : 1, sizeof(*r->groups));
	for (t = 0; t < r->ntasks; t++) {
		struct pbx_report_group *grp = group_for(r, &r->tasks[t]);
		grp->tasks[grp->ntasks++] = t;
	}
	for (g = 0; g < r->ngroups; g++) {
		struct pbx_report_group *grp = &r->groups[g];
		grp->aggs = xcalloc(r->nmetrics + 1, sizeof(struct pbx_report_agg));
		for (m = 0; m < r->nmetrics; m++)
			agg_compute(r, grp, r->metrics[m], &grp->aggs[m]);
		for (t = 0; t < grp->ntasks; t++) { /* sums: exact for the cost */
			const struct pbx_report_task *task = &r->tasks[grp->tasks[t]];
			grp->node_hours += task->node_hours > 0 ? task->node_hours : 0;
			grp->cost = task->cost < 0 || grp->cost < 0 ? -1 : grp->cost + task->cost;
		}
	}
}
