/*
 * report.c - `pbx report --pool URL`: the tasks pulled from a pool, of one
 * experiment, as one report (results/report.h) over every publisher:
 * "publisher" is the first parameter, so the table says whose each row is
 * and --group-by over the other parameters pools every publisher's repeats
 * of a point.
 */
#include "pool/pool_internal.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The experiment reported when none is named: that of the task pulled
 * last. */
static const char *newest_experiment(const struct pbx_pool_task *v, size_t n)
{
	size_t i, best = 0;
	for (i = 1; i < n; i++)
		if (v[i].pulled >= v[best].pulled)
			best = i;
	return v[best].experiment;
}

static int task_matches(const struct pbx_pool_task *t, const char *ref)
{
	return !strcmp(t->experiment, ref) ||
	       (strlen(ref) >= 4 && !strncmp(t->package_id, ref, strlen(ref)));
}

/* {"publisher": P, ...the task's parameters} */
static char *params_with_publisher(const struct pbx_pool_task *t)
{
	json_t *o = json_object(), *params = json_loads(t->params_json, 0, NULL);
	const char *k;
	json_t *v;
	char *s;
	json_object_set_new(o, "publisher", json_string(t->publisher));
	json_object_foreach(params, k, v)
	{
		if (strcmp(k, "publisher") != 0)
			json_object_set(o, k, v);
	}
	json_decref(params);
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* Task rows (idx = position) of the chosen tasks; sel[i] indexes v. */
static struct pbx_task_row *pool_task_rows(const struct pbx_pool_task *v, const size_t *sel,
					   size_t n)
{
	struct pbx_task_row *rows = xcalloc(n + 1, sizeof(*rows));
	size_t i;
	for (i = 0; i < n; i++) {
		const struct pbx_pool_task *t = &v[sel[i]];
		rows[i].idx = (int64_t)i;
		rows[i].params_json = params_with_publisher(t);
		rows[i].state = xstrdup(t->state);
		rows[i].exit_code = -1;
		rows[i].start_time = t->start_time;
		rows[i].end_time = t->end_time;
	}
	return rows;
}

/* The metric points of the chosen tasks, each with its row's index. */
static struct pbx_metric *pool_points(const struct pbx_pool_task *v, const size_t *sel, size_t n,
				      const struct pbx_pool_metric *m, size_t nm, size_t *npts)
{
	struct pbx_metric *pts = xcalloc(nm + 1, sizeof(*pts));
	size_t i, j;
	*npts = 0;
	for (j = 0; j < nm; j++)
		for (i = 0; i < n; i++)
			if (!strcmp(m[j].object, v[sel[i]].object)) {
				struct pbx_metric *p = &pts[(*npts)++];
				p->idx = (int64_t)i;
				p->step = m[j].step;
				p->name = m[j].name;
				p->value = m[j].value;
				p->is_null = m[j].is_null;
				break;
			}
	return pts;
}

static int report_rows(const char *pool, const char *experiment, const struct pbx_pool_task *v,
		       const size_t *sel, size_t n, const struct pbx_pool_metric *m, size_t nm,
		       const struct pbx_report_opts *o, struct pbx_report **out,
		       struct pbx_err *err)
{
	struct pbx_package_row pkg;
	struct pbx_submission_row sub;
	struct pbx_task_row *rows = pool_task_rows(v, sel, n);
	size_t npts, i;
	struct pbx_metric *pts = pool_points(v, sel, n, m, nm, &npts);
	int rc;
	memset(&pkg, 0, sizeof(pkg));
	memset(&sub, 0, sizeof(sub));
	pkg.id = v[sel[0]].package_id;
	pkg.short_id = "pool";
	pkg.name = (char *)experiment;
	sub.cluster_name = (char *)pool;
	rc = pbx_report_from_rows(&pkg, &sub, rows, n, pts, npts, o, out, err);
	if (rc == 0)
		pool_mark_disagreements(*out);
	for (i = 0; i < n; i++) {
		free(rows[i].params_json);
		free(rows[i].state);
	}
	free(rows);
	free(pts);
	return rc;
}

int pbx_pool_report(struct pbx_store *st, const char *url, const char *ref,
		    const struct pbx_report_opts *o, struct pbx_report **out, struct pbx_err *err)
{
	struct pbx_pool_task *v = NULL;
	struct pbx_pool_metric *m = NULL;
	size_t n = 0, nm = 0, nsel = 0, i;
	size_t *sel = NULL;
	char *pool = pbx_pool_url_normal(url, err), *experiment = NULL;
	int rc = -1;
	if (!pool || pbx_store_pool_tasks(st, pool, &v, &n, err) < 0)
		goto out;
	if (!n) {
		pbx_err_setc(err, PBX_EXIT_NOTFOUND,
			     "nothing was pulled from %s yet: 'pbx pull %s' brings its results",
			     pool, pool);
		goto out;
	}
	sel = xcalloc(n, sizeof(*sel));
	for (i = 0; i < n; i++)
		if (task_matches(&v[i], ref ? ref : newest_experiment(v, n)))
			sel[nsel++] = i;
	if (!nsel) {
		pbx_err_setc(err, PBX_EXIT_NOTFOUND,
			     "no experiment or package '%s' among the results pulled from %s", ref,
			     pool);
		goto out;
	}
	experiment = xstrdup(v[sel[0]].experiment);
	if (pbx_store_pool_metrics(st, pool, &m, &nm, err) < 0)
		goto out;
	rc = report_rows(pool, experiment, v, sel, nsel, m, nm, o, out, err);
out:
	free(sel);
	free(experiment);
	free(pool);
	pbx_pool_tasks_free(v, n);
	pbx_pool_metrics_free(m, nm);
	return rc;
}
