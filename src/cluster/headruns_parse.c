/*
 * headruns_parse.c - reading the head's node runs (the reply of `pbx
 * cluster runs NAME` on a cluster's head; struct pbx_head_run in
 * cluster_plan.h, headruns.c) as hostile input: a compromised head must not
 * crash the user's pbx nor make its spend absurd.  The whole reply is
 * refused on the first fault: not JSON, another version or cluster, a
 * missing, unknown or mistyped field, too many runs, a node that is not
 * one of the template's nodes that may sleep, a time out of range, runs
 * of a node that overlap.  An error names the field, never echoes a
 * string of the reply.  pbx_head_runs_fit then fits the times to this
 * machine's clock, and pbx_head_runs_clip to the times the cluster ran as
 * this machine's store knows them.
 */
#include "cluster/cluster_internal.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The latest time a reply may hold (unix s, year 36812): far beyond any
 * clock, small enough that sums of them never overflow. */
#define HEAD_RUN_TIME_MAX (1LL << 40)

static int hr_fail(struct pbx_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int hr_fail(struct pbx_err *err, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return pbx_err_set(err, "the head's node runs: %s", msg);
}

/* o is an object with exactly the fields `keys` ("runs[3]" is `where`). */
static int hr_fields(json_t *o, const char *const *keys, const char *where, struct pbx_err *err)
{
	size_t i, n = 0;
	if (!json_is_object(o))
		return hr_fail(err, "%s: not a JSON object", where);
	for (i = 0; keys[i]; i++, n++)
		if (!json_object_get(o, keys[i]))
			return hr_fail(err, "%s%s%s: missing", where, *where ? "." : "", keys[i]);
	if (json_object_size(o) != n)
		return hr_fail(err, "%s: an unknown field (a new field is a new version)",
			       *where ? where : "the reply");
	return 0;
}

int pbx_head_runs_node_ok(const struct pbx_cluster_template *t, const char *name)
{
	const struct pbx_node_group *g = pbx_cloud_group_of(t, name);
	const char *digits = g ? name + strlen(g->name) : NULL;
	return digits && strlen(digits) <= 5 && atoi(digits) <= g->count &&
	       pbx_power_may_sleep(t, name);
}

/* Run i of the reply, o, into *r. */
static int hr_run(const struct pbx_cluster_template *t, json_t *o, size_t i, struct pbx_head_run *r,
		  struct pbx_err *err)
{
	static const char *const keys[] = { "node", "started", "ended", NULL };
	json_t *node = json_object_get(o, "node"), *s = json_object_get(o, "started"),
	       *e = json_object_get(o, "ended");
	char where[32];
	snprintf(where, sizeof(where), "runs[%zu]", i);
	if (hr_fields(o, keys, where, err) < 0)
		return -1;
	if (!json_is_string(node) || json_string_length(node) >= sizeof(r->node) ||
	    strlen(json_string_value(node)) != json_string_length(node) ||
	    !pbx_head_runs_node_ok(t, json_string_value(node)))
		return hr_fail(err, "%s.node: not a node of the cluster that may sleep", where);
	if (!json_is_integer(s) || json_integer_value(s) < 1 ||
	    json_integer_value(s) > HEAD_RUN_TIME_MAX)
		return hr_fail(err, "%s.started: not a time (an integer in 1..%lld)", where,
			       HEAD_RUN_TIME_MAX);
	if (!json_is_null(e) &&
	    (!json_is_integer(e) || json_integer_value(e) < json_integer_value(s) ||
	     json_integer_value(e) > HEAD_RUN_TIME_MAX))
		return hr_fail(err, "%s.ended: neither null nor a time from started on", where);
	snprintf(r->node, sizeof(r->node), "%s", json_string_value(node));
	r->started = json_integer_value(s);
	r->ended = json_is_null(e) ? 0 : json_integer_value(e);
	return 0;
}

/* By node, then start. */
static int hr_cmp(const void *a, const void *b)
{
	const struct pbx_head_run *x = a, *y = b;
	int c = strcmp(x->node, y->node);
	return c ? c : (x->started > y->started) - (x->started < y->started);
}

/* v (sorted) holds no two runs of a node that overlap: each begins when
 * the one before it ended or later, and only a node's last may be open. */
static int hr_disjoint(const struct pbx_head_run *v, size_t n, struct pbx_err *err)
{
	size_t i;
	for (i = 1; i < n; i++)
		if (!strcmp(v[i - 1].node, v[i].node) &&
		    (!v[i - 1].ended || v[i].started < v[i - 1].ended))
			return hr_fail(err, "two runs of one node overlap (started %lld and %lld)",
				       (long long)v[i - 1].started, (long long)v[i].started);
	return 0;
}

/* The header fields of reply o: this version, cluster and id. */
static int hr_header(json_t *o, const char *name, const char *uid, struct pbx_err *err)
{
	static const char *const keys[] = { "version", "cluster", "id", "runs", NULL };
	json_t *v;
	if (hr_fields(o, keys, "", err) < 0)
		return -1;
	v = json_object_get(o, "version");
	if (!json_is_integer(v) || json_integer_value(v) != PBX_HEAD_RUNS_VERSION)
		return hr_fail(err, "version: not %d (the head's pbx is another version)",
			       PBX_HEAD_RUNS_VERSION);
	v = json_object_get(o, "cluster");
	if (!json_is_string(v) || strcmp(json_string_value(v), name) != 0)
		return hr_fail(err, "cluster: not %s", name);
	v = json_object_get(o, "id");
	if (!json_is_string(v) || strcmp(json_string_value(v), uid) != 0)
		return hr_fail(err, "id: not %s (the head's store has another cluster)", uid);
	v = json_object_get(o, "runs");
	if (!json_is_array(v))
		return hr_fail(err, "runs: not an array");
	if (json_array_size(v) > PBX_HEAD_RUNS_MAX)
		return hr_fail(err, "runs: more than %d", PBX_HEAD_RUNS_MAX);
	return 0;
}

int pbx_head_runs_parse(const char *text, size_t len, const char *name, const char *uid,
			const struct pbx_cluster_template *t, struct pbx_head_run **v, size_t *n,
			struct pbx_err *err)
{
	json_error_t je;
	json_t *root = NULL, *o;
	size_t i;
	int rc = 0;
	*v = NULL;
	*n = 0;
	if (!t || !name || !uid)
		return hr_fail(err, "no template to check them against");
	if (len > PBX_HEAD_RUNS_BYTES_MAX)
		return hr_fail(err, "more than %u bytes", PBX_HEAD_RUNS_BYTES_MAX);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return hr_fail(err, "not JSON (at byte %d)", je.position);
	rc = hr_header(root, name, uid, err);
	if (rc == 0 && json_array_size(json_object_get(root, "runs")))
		*v = xcalloc(json_array_size(json_object_get(root, "runs")), sizeof(**v));
	json_array_foreach(json_object_get(root, "runs"), i, o)
	{
		if (rc < 0 || (rc = hr_run(t, o, i, &(*v)[i], err)) < 0)
			break;
		++*n;
	}
	json_decref(root);
	if (rc == 0 && *n)
		qsort(*v, *n, sizeof(**v), hr_cmp);
	if (rc == 0)
		rc = hr_disjoint(*v, *n, err);
	if (rc < 0) {
		free(*v);
		*v = NULL;
		*n = 0;
	}
	return rc;
}

/* t, checked against [lo - skew, hi + skew] and clamped into [lo, hi]. */
static int hr_fit_one(int64_t *t, int64_t lo, int64_t hi, struct pbx_err *err)
{
	if (*t > hi + PBX_HEAD_RUNS_SKEW_S)
		return hr_fail(err, "a time %lld s ahead of this machine's clock (more than %d)",
			       (long long)(*t - hi), PBX_HEAD_RUNS_SKEW_S);
	if (*t < lo - PBX_HEAD_RUNS_SKEW_S)
		return hr_fail(err, "a time %lld s before the cluster was made (more than %d)",
			       (long long)(lo - *t), PBX_HEAD_RUNS_SKEW_S);
	*t = *t < lo ? lo : *t > hi ? hi : *t;
	return 0;
}

int pbx_head_runs_fit(struct pbx_head_run *v, size_t n, int64_t created, int64_t now,
		      struct pbx_err *err)
{
	size_t i;
	if (created > now)
		created = now;
	for (i = 0; i < n; i++)
		if (hr_fit_one(&v[i].started, created, now, err) < 0 ||
		    (v[i].ended && hr_fit_one(&v[i].ended, created, now, err) < 0))
			return -1;
	/* clamping keeps the order: runs stay disjoint, and none ends
	 * before it began */
	return 0;
}

/* A growing array of runs. */
struct hr_vec {
	struct pbx_head_run *v;
	size_t n, cap;
};

/* Appends to *out the part of run r within [s, e] (e 0: open), if any:
 * a run that is only an instant stays where it lies within. */
static void hr_piece(struct hr_vec *out, const struct pbx_head_run *r, int64_t s, int64_t e)
{
	struct pbx_head_run p = *r;
	int64_t re = r->ended ? r->ended : INT64_MAX, oe = e ? e : INT64_MAX;
	p.started = r->started > s ? r->started : s;
	p.ended = re < oe ? re : oe;
	if (p.started > p.ended || (p.started == p.ended && r->started != re))
		return;
	p.ended = p.ended == INT64_MAX ? 0 : p.ended;
	if (out->n == out->cap) {
		out->cap = out->cap ? 2 * out->cap : 16;
		out->v = xreallocarray(out->v, out->cap, sizeof(*out->v));
	}
	out->v[out->n++] = p;
}

void pbx_head_runs_clip(struct pbx_head_run **v, size_t *n, const struct pbx_head_run *on,
			size_t non)
{
	struct hr_vec out = { NULL, 0, 0 };
	size_t i, k;
	if (!non)
		return;
	for (i = 0; i < *n; i++)
		for (k = 0; k < non; k++)
			hr_piece(&out, &(*v)[i], on[k].started, on[k].ended);
	free(*v);
	*v = out.v;
	*n = out.n;
}
