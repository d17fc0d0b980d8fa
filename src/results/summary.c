/*
 * summary.c - `pbx report --summary`: the numbers a task's program wrote
 * in its summary.json at the end (a test accuracy, a fitted parameter, a
 * run's seconds), harvested with its results, as columns of the table:
 * each top-level key whose value is a number (true/false count as 1/0)
 * and whose name is plain (summary_key_ok: the file is the task's),
 * read from $PBX_HOME/results/PKG/IDX/summary.json of each shown task.
 * With --summary alone, every such key some shown task has, in the order
 * first met, at most PBX_REPORT_SUMMARY_MAX; with --summary=a,b those.
 * Grouped, each key's mean, std, min, max and n over the group's tasks
 * (grid.c shows the mean).
 */
#include "results/model_internal.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SUMMARY_MAX_BYTES (1 << 20) /* a summary.json read at the most */

/* Task t's summary.json, or NULL (none, unreadable, too big, not an
 * object). */
static json_t *summary_load(const struct pbx_report *r, const struct pbx_report_task *t)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *path = xasprintf("%s/results/%s/%lld/summary.json", pbx_home(), r->short_id,
			       (long long)t->idx);
	json_t *o = NULL;
	struct stat st;
	/* a regular file, and not too big to read (checked before reading) */
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < SUMMARY_MAX_BYTES &&
	    pbx_read_file(path, &b, &err) == 0 && b.len < SUMMARY_MAX_BYTES)
		o = json_loadb(b.buf ? b.buf : "", b.len, 0, NULL);
	if (o && !json_is_object(o)) {
		json_decref(o);
		o = NULL;
	}
	pbx_buf_release(&b);
	free(path);
	return o;
}

/* A value's number: 1 with *v for a number or a boolean, else 0. */
static int summary_number(json_t *v, double *out)
{
	if (json_is_number(v))
		*out = json_number_value(v);
	else if (json_is_boolean(v))
		*out = json_is_true(v) ? 1 : 0;
	else
		return 0;
	return isfinite(*out);
}

/* A key fit to be a column's name: 1 to 64 of [A-Za-z0-9_.:-].  The file
 * is the task's: a key with a terminal's escape or a newline in it is
 * never shown. */
static int summary_key_ok(const char *k)
{
	size_t n = strlen(k);
	return n >= 1 && n <= 64 &&
	       strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") == n;
}

static long summary_key_index(const struct pbx_report *r, const char *key)
{
	size_t i;
	for (i = 0; i < r->nsummary; i++)
		if (!strcmp(r->summary_keys[i], key))
			return (long)i;
	return -1;
}

/* The keys: every numeric one met (in order), or the list's. */
static int summary_keys(struct pbx_report *r, json_t **docs, const char *list, struct pbx_err *err)
{
	size_t i;
	r->summary_keys = xcalloc(PBX_REPORT_SUMMARY_MAX + 1, sizeof(char *));
	if (*list) {
		char *copy = xstrdup(list), *save = NULL, *k;
		for (k = strtok_r(copy, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
			if (!*k || summary_key_index(r, k) >= 0)
				continue;
			if (!summary_key_ok(k)) {
				free(copy);
				return pbx_err_setc(err, PBX_EXIT_USAGE,
						    "--summary: a key is 1 to 64 letters, digits, "
						    "'_', '.', ':' or '-'");
			}
			if (r->nsummary == PBX_REPORT_SUMMARY_MAX) {
				free(copy);
				return pbx_err_setc(err, PBX_EXIT_USAGE,
						    "--summary: at most %d keys",
						    PBX_REPORT_SUMMARY_MAX);
			}
			r->summary_keys[r->nsummary++] = xstrdup(k);
		}
		free(copy);
		return 0;
	}
	for (i = 0; i < r->ntasks; i++) {
		const char *k;
		json_t *v;
		double d;
		json_object_foreach(docs[i], k, v)
		{
			if (r->nsummary < PBX_REPORT_SUMMARY_MAX && summary_key_ok(k) &&
			    summary_number(v, &d) && summary_key_index(r, k) < 0)
				r->summary_keys[r->nsummary++] = xstrdup(k);
		}
	}
	return 0;
}

static void summary_agg(const struct pbx_report *r, const struct pbx_report_group *g, size_t k,
			struct pbx_report_agg *a)
{
	size_t i;
	double ss = 0;
	memset(a, 0, sizeof(*a));
	for (i = 0; i < g->ntasks; i++) {
		const struct pbx_report_task *t = &r->tasks[g->tasks[i]];
		double v = t->summary[k];
		if (!t->has_summary[k])
			continue;
		if (!a->n || v < a->min)
			a->min = v;
		if (!a->n || v > a->max)
			a->max = v;
		a->n++;
		a->mean += (v - a->mean) / (double)a->n; /* running mean */
	}
	for (i = 0; a->n > 1 && i < g->ntasks; i++) {
		const struct pbx_report_task *t = &r->tasks[g->tasks[i]];
		if (t->has_summary[k])
			ss += (t->summary[k] - a->mean) * (t->summary[k] - a->mean);
	}
	a->std = a->n > 1 ? sqrt(ss / (double)(a->n - 1)) : 0;
}

int pbx_report_summary(struct pbx_report *r, const struct pbx_report_opts *o, struct pbx_err *err)
{
	json_t **docs = xcalloc(r->ntasks + 1, sizeof(*docs));
	size_t i, k, *seen;
	int rc;
	for (i = 0; i < r->ntasks; i++)
		docs[i] = summary_load(r, &r->tasks[i]);
	rc = summary_keys(r, docs, o->summary, err);
	seen = xcalloc(r->nsummary + 1, sizeof(*seen));
	for (i = 0; rc == 0 && i < r->ntasks; i++) {
		struct pbx_report_task *t = &r->tasks[i];
		t->summary = xcalloc(r->nsummary + 1, sizeof(double));
		t->has_summary = xcalloc(r->nsummary + 1, 1);
		for (k = 0; k < r->nsummary; k++) {
			t->has_summary[k] = (unsigned char)summary_number(
				json_object_get(docs[i], r->summary_keys[k]), &t->summary[k]);
			seen[k] += t->has_summary[k];
		}
	}
	for (k = 0; rc == 0 && k < r->nsummary; k++)
		if (!seen[k])
			rc = pbx_err_setc(err, PBX_EXIT_USAGE,
					  "--summary: no shown task's summary.json has a number "
					  "named '%s' ('pbx harvest' brings summary.json home)",
					  r->summary_keys[k]);
	for (i = 0; rc == 0 && i < r->ngroups; i++) {
		r->groups[i].summary_aggs = xcalloc(r->nsummary + 1, sizeof(struct pbx_report_agg));
		for (k = 0; k < r->nsummary; k++)
			summary_agg(r, &r->groups[i], k, &r->groups[i].summary_aggs[k]);
	}
	for (i = 0; i < r->ntasks; i++)
		json_decref(docs[i]);
	free(docs);
	free(seen);
	return rc;
}
