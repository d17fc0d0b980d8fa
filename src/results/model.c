/*
 * model.c - the report model: tasks with their parameters, per-metric
 * final/best values and curves, built from store rows (see report.h);
 * filtering, sorting and grouping are in query.c.
 */
#include "results/cost.h"
#include "results/model_internal.h"
#include "results/num.h"

#include "util/fs.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int contains_nocase(const char *s, const char *word)
{
	size_t n = strlen(word);
	for (; *s; s++)
		if (!strncasecmp(s, word, n))
			return 1;
	return 0;
}

int pbx_metric_lower_is_better(const char *name)
{
	return contains_nocase(name, "loss") || contains_nocase(name, "err");
}

int pbx_report_key(const struct pbx_report *r, const char *name, struct pbx_key *k)
{
	static const struct {
		const char *name;
		enum pbx_key_kind kind;
	} fixed[] = { { "state", PBX_KEY_STATE },
		      { "runtime", PBX_KEY_RUNTIME },
		      { "task", PBX_KEY_TASK },
		      { "node_hours", PBX_KEY_NODE_HOURS },
		      { "cost", PBX_KEY_COST } };
	size_t i;
	for (i = 0; i < r->nparams; i++)
		if (!strcmp(r->params[i], name)) {
			k->kind = PBX_KEY_PARAM;
			k->i = i;
			return 0;
		}
	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (!strcmp(fixed[i].name, name)) {
			k->kind = fixed[i].kind;
			return 0;
		}
	for (i = 0; i < r->nmetric_names; i++)
		if (!strcmp(r->metric_names[i], name)) {
			k->kind = PBX_KEY_METRIC;
			k->i = i;
			return 0;
		}
	return -1;
}

static long find_name(char *const *names, size_t n, const char *name)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return (long)i;
	return -1;
}

/* Parameter names: the union of the tasks' params_json keys, first seen first. */
static void model_params(struct pbx_report *r, json_t **params, size_t n)
{
	size_t t, cap = 0;
	for (t = 0; t < n; t++) {
		const char *key;
		json_t *v;
		json_object_foreach(params[t], key, v)
		{
			(void)v;
			if (find_name(r->params, r->nparams, key) >= 0)
				continue;
			if (r->nparams == cap) {
				cap = cap ? 2 * cap : 8;
				r->params = xreallocarray(r->params, cap, sizeof(char *));
			}
			r->params[r->nparams++] = xstrdup(key);
		}
	}
}

static char *param_text(const json_t *v)
{
	char *s, *out;
	if (!v)
		return xstrdup("");
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	out = xstrdup(s ? s : "");
	free(s);
	return out;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Metric names: distinct, sorted. */
static void model_metric_names(struct pbx_report *r, const struct pbx_metric *pts, size_t n)
{
	size_t i, k = 0;
	char **names = xcalloc(n ? n : 1, sizeof(char *));
	for (i = 0; i < n; i++)
		names[i] = (char *)pts[i].name;
	qsort(names, n, sizeof(char *), cmp_str);
	r->metric_names = xcalloc(n ? n : 1, sizeof(char *));
	for (i = 0; i < n; i++)
		if (i == 0 || strcmp(names[i], names[i - 1]))
			r->metric_names[k++] = xstrdup(names[i]);
	r->nmetric_names = k;
	free(names);
}

static void model_task(struct pbx_report *r, struct pbx_report_task *t,
		       const struct pbx_task_row *row, json_t *params,
		       const struct pbx_task_cost *cost)
{
	size_t p;
	t->idx = row->idx;
	t->node_hours = cost ? cost->node_hours : -1;
	t->cost = cost ? cost->nanos : -1;
	t->state = xstrdup(row->state ? row->state : "");
	t->runtime = row->start_time && row->end_time && row->end_time >= row->start_time
			     ? row->end_time - row->start_time
			     : -1;
	t->values = xcalloc(r->nparams ? r->nparams : 1, sizeof(char *));
	for (p = 0; p < r->nparams; p++)
		t->values[p] = param_text(json_object_get(params, r->params[p]));
	t->stats = xcalloc(r->nmetric_names ? r->nmetric_names : 1, sizeof(*t->stats));
}

static struct pbx_report_task *task_by_idx(struct pbx_report *r, int64_t idx)
{
	size_t lo = 0, hi = r->ntasks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->tasks[mid].idx == idx)
			return &r->tasks[mid];
		if (r->tasks[mid].idx < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void stat_add(struct pbx_report_stat *s, const char *name, const struct pbx_metric *m,
		     int64_t *last_step)
{
	if (m->step >= *last_step) {
		*last_step = m->step;
		s->has_final = !m->is_null;
		s->final = m->value;
	}
	if (m->is_null)
		return;
	if (!s->has_best ||
	    (pbx_metric_lower_is_better(name) ? m->value < s->best : m->value > s->best)) {
		s->best = m->value;
		s->has_best = 1;
	}
	s->steps = xreallocarray(s->steps, s->npoints + 1, sizeof(int64_t));
	s->values = xreallocarray(s->values, s->npoints + 1, sizeof(double));
	s->steps[s->npoints] = m->step;
	s->values[s->npoints++] = m->value;
}

/* Points must come by task, name, step (as pbx_store_metrics_list gives). */
static void model_points(struct pbx_report *r, const struct pbx_metric *pts, size_t n)
{
	size_t i, nm = r->nmetric_names;
	int64_t *last = xmalloc((r->ntasks * nm + 1) * sizeof(int64_t));
	for (i = 0; i < r->ntasks * nm; i++)
		last[i] = -1;
	for (i = 0; i < n; i++) {
		struct pbx_report_task *t = task_by_idx(r, pts[i].idx);
		char *key = (char *)pts[i].name;
		char **m = bsearch(&key, r->metric_names, nm, sizeof(char *), cmp_str);
		size_t mi;
		if (!t || !m)
			continue;
		mi = (size_t)(m - r->metric_names);
		stat_add(&t->stats[mi], *m, &pts[i], &last[(size_t)(t - r->tasks) * nm + mi]);
	}
	free(last);
}

static int cmp_task_idx(const void *a, const void *b)
{
	const struct pbx_report_task *x = a, *y = b;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

static void model_tasks(struct pbx_report *r, const struct pbx_task_row *rows, size_t n,
			const struct pbx_cost *cost)
{
	json_t **params = xcalloc(n ? n : 1, sizeof(json_t *));
	size_t i;
	for (i = 0; i < n; i++) {
		params[i] = json_loads(rows[i].params_json ? rows[i].params_json : "{}", 0, NULL);
		if (!json_is_object(params[i])) {
			json_decref(params[i]);
			params[i] = json_object();
		}
	}
	model_params(r, params, n);
	r->tasks = xcalloc(n ? n : 1, sizeof(*r->tasks));
	for (i = 0; i < n; i++)
		model_task(r, &r->tasks[i], &rows[i], params[i],
			   cost && i < cost->n ? &cost->tasks[i] : NULL);
	r->ntasks = r->ntasks_total = n;
	qsort(r->tasks, n, sizeof(*r->tasks), cmp_task_idx);
	for (i = 0; i < n; i++)
		json_decref(params[i]);
	free(params);
}

static int model_choose_metrics(struct pbx_report *r, const struct pbx_report_opts *o,
				struct pbx_err *err)
{
	size_t i;
	r->metrics = xcalloc(r->nmetric_names + o->nmetrics + 1, sizeof(size_t));
	if (!o->nmetrics) {
		for (i = 0; i < r->nmetric_names; i++)
			r->metrics[i] = i;
		r->nmetrics = r->nmetric_names;
		return 0;
	}
	for (i = 0; i < o->nmetrics; i++) {
		long m = find_name(r->metric_names, r->nmetric_names, o->metrics[i]);
		if (m < 0 && !r->nmetric_names)
			return pbx_err_setc(err, PBX_EXIT_USAGE,
					    "no metric of %s is home yet: 'pbx harvest %s' brings "
					    "them (tasks write them to metrics.jsonl)",
					    r->short_id, r->short_id);
		if (m < 0) {
			struct pbx_buf names = PBX_BUF_INIT;
			size_t k;
			for (k = 0; k < r->nmetric_names && k < 12; k++)
				pbx_buf_addf(&names, "%s%s", k ? ", " : "", r->metric_names[k]);
			if (k < r->nmetric_names)
				pbx_buf_adds(&names, ", ...");
			pbx_err_setc(err, PBX_EXIT_USAGE,
				     "no metric named '%s' in %s (its metrics: %s)", o->metrics[i],
				     r->short_id, names.buf);
			pbx_buf_release(&names);
			return -1;
		}
		r->metrics[r->nmetrics++] = (size_t)m;
	}
	return 0;
}

/* Numeric flags (over all tasks) and distinct counts (over shown tasks). */
static void model_param_info(struct pbx_report *r)
{
	size_t p, t, u;
	r->param_numeric = xcalloc(r->nparams + 1, sizeof(int));
	r->param_nvalues = xcalloc(r->nparams + 1, sizeof(size_t));
	for (p = 0; p < r->nparams; p++) {
		double d;
		r->param_numeric[p] = 1;
		for (t = 0; t < r->ntasks; t++) {
			const char *v = r->tasks[t].values[p];
			if (!pbx_num_parse(v, &d))
				r->param_numeric[p] = 0;
			for (u = 0; u < t && strcmp(r->tasks[u].values[p], v); u++)
				;
			if (u == t)
				r->param_nvalues[p]++;
		}
	}
}

static int model_param_opt(const struct pbx_report *r, const char *name, const char *opt, long *out,
			   struct pbx_err *err)
{
	*out = name ? find_name(r->params, r->nparams, name) : -1;
	if (name && *out < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: no parameter named '%s'", opt, name);
	return 0;
}

/* --color-by default: the first parameter other than repeat with more
 * than one value, else repeat. */
static void model_default_color(struct pbx_report *r)
{
	size_t p;
	for (p = 0; p < r->nparams; p++)
		if (r->param_nvalues[p] > 1 && strcmp(r->params[p], "repeat")) {
			r->color_by = (long)p;
			return;
		}
	r->color_by = find_name(r->params, r->nparams, "repeat");
	if (r->color_by >= 0 && r->param_nvalues[r->color_by] < 2)
		r->color_by = -1;
}

static int model_group_opt(struct pbx_report *r, const struct pbx_report_opts *o,
			   struct pbx_err *err)
{
	size_t i, cap = 0;
	for (i = 0; i < o->ngroup_by; i++) {
		char *list = xstrdup(o->group_by[i]), *save = NULL, *name;
		for (name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
			long p = find_name(r->params, r->nparams, name);
			if (p < 0) {
				pbx_err_setc(err, PBX_EXIT_USAGE,
					     "--group-by: no parameter named '%s'", name);
				free(list);
				return -1;
			}
			if (r->ngroup_by == cap) {
				cap = cap ? 2 * cap : 4;
				r->group_by = xreallocarray(r->group_by, cap, sizeof(size_t));
			}
			r->group_by[r->ngroup_by++] = (size_t)p;
		}
		free(list);
	}
	return 0;
}

static int model_options(struct pbx_report *r, const struct pbx_report_opts *o, struct pbx_err *err)
{
	if (model_choose_metrics(r, o, err) < 0 || model_group_opt(r, o, err) < 0 ||
	    model_param_opt(r, o->x, "--x", &r->x_param, err) < 0 ||
	    model_param_opt(r, o->color_by, "--color-by", &r->color_by, err) < 0 ||
	    pbx_report_where(r, o->where, o->nwhere, err) < 0)
		return -1;
	model_param_info(r);
	r->x_scale = o->x_scale;
	if (!o->color_by)
		model_default_color(r);
	if (r->ngroup_by)
		pbx_report_group(r);
	return pbx_report_sort(r, o->sort, err);
}

/* The experiment's totals, and whether the columns are shown. */
static void model_cost(struct pbx_report *r, const struct pbx_cost *cost)
{
	r->node_hours = -1;
	r->cost = -1;
	if (!cost)
		return;
	r->cost_shown = cost->tracked;
	r->node_hours = cost->node_hours;
	r->cost = cost->nanos;
	memcpy(r->currency, cost->currency, sizeof(r->currency));
}

int pbx_report_from_rows(const struct pbx_package_row *pkg, const struct pbx_submission_row *sub,
			 const struct pbx_task_row *tasks, size_t ntasks,
			 const struct pbx_metric *pts, size_t npts, const struct pbx_report_opts *o,
			 struct pbx_report **out, struct pbx_err *err)
{
	return pbx_report_from_rows_cost(pkg, sub, tasks, ntasks, pts, npts, NULL, o, out, err);
}

int pbx_report_from_rows_cost(const struct pbx_package_row *pkg,
			      const struct pbx_submission_row *sub,
			      const struct pbx_task_row *tasks, size_t ntasks,
			      const struct pbx_metric *pts, size_t npts,
			      const struct pbx_cost *cost, const struct pbx_report_opts *o,
			      struct pbx_report **out, struct pbx_err *err)
{
	static const struct pbx_report_opts none;
	struct pbx_report *r = xcalloc(1, sizeof(*r));
	r->package_id = xstrdup(pkg->id);
	r->short_id = xstrdup(pkg->short_id);
	r->name = xstrdup(pkg->name);
	r->created = pkg->created;
	r->cluster = xstrdup(sub->cluster_name ? sub->cluster_name : "");
	r->submission_id = sub->id;
	r->x_param = r->color_by = -1;
	model_metric_names(r, pts, npts);
	model_cost(r, cost);
	model_tasks(r, tasks, ntasks, cost);
	model_points(r, pts, npts);
	if (model_options(r, o ? o : &none, err) < 0) {
		pbx_report_free(r);
		return -1;
	}
	*out = r;
	return 0;
}

static int find_package(struct pbx_store *st, const char *ref, struct pbx_package_row *pkg,
			struct pbx_err *err)
{
	struct pbx_package_row *rows;
	size_t n;
	if (ref)
		return pbx_store_package_find(st, ref, pkg, err);
	if (pbx_store_package_list(st, &rows, &n, err) < 0)
		return -1;
	if (!n) {
		free(rows);
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no experiments yet (see pbx parrun)");
	}
	*pkg = rows[0];
	memset(&rows[0], 0, sizeof(rows[0]));
	pbx_package_rows_free(rows, n);
	return 0;
}

/* r's environment: the submission's status line, and the environment.txt
 * of the first task whose results are home (every task has the same). */
static void report_environment(struct pbx_report *r, const struct pbx_submission_row *sub,
			       const struct pbx_task_row *tasks, size_t ntasks)
{
	size_t i;
	r->environment = sub->environment ? xstrdup(sub->environment) : NULL;
	for (i = 0; i < ntasks && !r->environment_txt; i++) {
		struct pbx_buf b = PBX_BUF_INIT;
		struct pbx_err err = PBX_ERR_INIT;
		char *path = xasprintf("%s/results/%s/%lld/environment.txt", pbx_home(),
				       r->short_id, (long long)tasks[i].idx);
		if (pbx_read_file(path, &b, &err) == 0 && b.len && b.len < 1048576)
			r->environment_txt = pbx_buf_detach(&b, NULL);
		pbx_buf_release(&b);
		free(path);
	}
}

int pbx_report_build(struct pbx_store *st, const char *ref, const struct pbx_report_opts *o,
		     struct pbx_report **out, struct pbx_err *err)
{
	struct pbx_package_row pkg = { 0 };
	struct pbx_submission_row *subs = NULL;
	struct pbx_task_row *tasks = NULL;
	struct pbx_metric *pts = NULL;
	struct pbx_cost cost;
	size_t nsubs = 0, ntasks = 0, npts = 0;
	int rc = -1;
	memset(&cost, 0, sizeof(cost));
	if (find_package(st, ref, &pkg, err) < 0)
		return -1;
	if (pbx_store_submissions_of(st, pkg.id, &subs, &nsubs, err) < 0)
		goto out;
	if (!nsubs) {
		pbx_err_setc(err, PBX_EXIT_NOTFOUND, "package %s was never submitted",
			     pkg.short_id);
		goto out;
	}
	if (pbx_store_tasks_list(st, subs[nsubs - 1].id, &tasks, &ntasks, err) < 0 ||
	    pbx_store_metrics_list(st, subs[nsubs - 1].id, &pts, &npts, err) < 0 ||
	    pbx_cost_of(st, &subs[nsubs - 1], tasks, ntasks, (int64_t)time(NULL), &cost, err) < 0)
		goto out;
	rc = pbx_report_from_rows_cost(&pkg, &subs[nsubs - 1], tasks, ntasks, pts, npts, &cost, o,
				       out, err);
	if (rc == 0)
		report_environment(*out, &subs[nsubs - 1], tasks, ntasks);
	if (rc == 0 && o->summary && pbx_report_summary(*out, o, err) < 0) {
		pbx_report_free(*out);
		*out = NULL;
		rc = -1;
	}
out:
	pbx_cost_free(&cost);
	pbx_metrics_free(pts, npts);
	pbx_task_rows_free(tasks, ntasks);
	pbx_submission_rows_free(subs, nsubs);
	pbx_package_row_free(&pkg);
	return rc;
}

void pbx_report_task_free(const struct pbx_report *r, struct pbx_report_task *t)
{
	size_t i;
	for (i = 0; i < r->nparams; i++)
		free(t->values[i]);
	for (i = 0; i < r->nmetric_names; i++) {
		free(t->stats[i].steps);
		free(t->stats[i].values);
	}
	free(t->values);
	free(t->stats);
	free(t->state);
	free(t->summary);
	free(t->has_summary);
}

static void groups_free(struct pbx_report *r)
{
	size_t g, i;
	for (g = 0; g < r->ngroups; g++) {
		for (i = 0; i < r->ngroup_by; i++)
			free(r->groups[g].values[i]);
		free(r->groups[g].values);
		free(r->groups[g].tasks);
		free(r->groups[g].aggs);
		free(r->groups[g].disagree);
		free(r->groups[g].summary_aggs);
	}
	free(r->groups);
}

void pbx_report_free(struct pbx_report *r)
{
	size_t i;
	if (r) {
		free(r->environment);
		free(r->environment_txt);
	}
	if (!r)
		return;
	for (i = 0; i < r->ntasks; i++)
		pbx_report_task_free(r, &r->tasks[i]);
	groups_free(r);
	for (i = 0; i < r->nparams; i++)
		free(r->params[i]);
	for (i = 0; i < r->nmetric_names; i++)
		free(r->metric_names[i]);
	free(r->tasks);
	free(r->params);
	free(r->param_numeric);
	free(r->param_nvalues);
	free(r->metric_names);
	free(r->metrics);
	for (i = 0; i < r->nsummary; i++)
		free(r->summary_keys[i]);
	free(r->summary_keys);
	free(r->group_by);
	free(r->package_id);
	free(r->short_id);
	free(r->name);
	free(r->cluster);
	free(r);
}
