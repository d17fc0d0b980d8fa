/*
 * record.c - a published task's provenance record, pbx-task.json: who
 * published it, the package (id, experiment, commit, a hash of the dirty
 * diff, the experiment file), the task (parameters, state, exit code,
 * attempt, times, node), the cluster and cloud, the environment, cost when
 * known, the pbx version, the files and every metric point.  Documented
 * in docs/pooling.md; read back (and checked) by pull.  Fuzzed:
 * tests/fuzz/fuzz_pool_record.c.
 */
#include "pool/pool_internal.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *record_package(const struct pool_record_in *in)
{
	const struct pbx_package_row *p = in->pkg;
	json_t *o = json_object();
	json_object_set_new(o, "id", json_string(p->id));
	json_object_set_new(o, "short_id", json_string(p->short_id));
	json_object_set_new(o, "experiment", json_string(p->name));
	json_object_set_new(o, "experiment_text", json_string(p->experiment_text));
	json_object_set_new(o, "git_commit", str_or_null(p->git_commit));
	if (p->git_diff) {
		char hex[65];
		pbx_sha256_hex(p->git_diff, strlen(p->git_diff), hex);
		json_object_set_new(o, "git_diff_sha256", json_string(hex));
	} else {
		json_object_set_new(o, "git_diff_sha256", json_null());
	}
	json_object_set_new(o, "created", json_integer(p->created));
	return o;
}

static json_t *time_or_null(int64_t t)
{
	return t ? json_integer(t) : json_null();
}

static json_t *record_task(const struct pool_record_in *in)
{
	const struct pbx_task_row *t = in->task;
	json_t *o = json_object(), *params = json_loads(t->params_json, 0, NULL);
	json_object_set_new(o, "idx", json_integer(t->idx));
	json_object_set_new(o, "params", json_is_object(params) ? params : json_object());
	if (params && !json_is_object(params))
		json_decref(params);
	json_object_set_new(o, "state", json_string(t->state));
	json_object_set_new(o, "exit_code",
			    t->exit_code >= 0 ? json_integer(t->exit_code) : json_null());
	json_object_set_new(o, "attempt", json_integer(t->attempt));
	json_object_set_new(o, "start_time", time_or_null(t->start_time));
	json_object_set_new(o, "end_time", time_or_null(t->end_time));
	json_object_set_new(o, "node", str_or_null(t->node));
	return o;
}

static json_t *record_cost(const struct pbx_task_cost *c)
{
	json_t *o;
	if (!c)
		return json_null();
	o = json_object();
	json_object_set_new(o, "node_hours", json_real(c->node_hours));
	json_object_set_new(o, "nanos", c->nanos >= 0 ? json_integer(c->nanos) : json_null());
	json_object_set_new(o, "currency", json_string(c->currency));
	return o;
}

static json_t *record_files(const struct pool_record_in *in)
{
	json_t *a = json_array();
	size_t i;
	for (i = 0; i < in->nfiles; i++) {
		json_t *f = json_object();
		json_object_set_new(f, "path", json_string(in->files[i].path));
		json_object_set_new(f, "size", json_integer(in->files[i].size));
		json_array_append_new(a, f);
	}
	return a;
}

/* [name, step, value-or-null] per point */
static json_t *record_metrics(const struct pool_record_in *in)
{
	json_t *a = json_array();
	size_t i;
	for (i = 0; i < in->npts; i++) {
		const struct pbx_metric *m = &in->pts[i];
		json_t *p = json_array();
		json_array_append_new(p, json_string(m->name));
		json_array_append_new(p, json_integer(m->step));
		json_array_append_new(p, m->is_null || !isfinite(m->value) ? json_null()
									   : json_real(m->value));
		json_array_append_new(a, p);
	}
	return a;
}

char *pool_record_make(const struct pool_record_in *in)
{
	json_t *o = json_object(), *cl = json_object();
	char *text;
	json_object_set_new(o, "format", json_string(POOL_RECORD_FORMAT));
	json_object_set_new(o, "publisher", json_string(in->publisher));
	json_object_set_new(o, "published", json_integer(in->now));
	json_object_set_new(o, "pbx_version", json_string(PBX_VERSION));
	json_object_set_new(o, "package", record_package(in));
	json_object_set_new(o, "task", record_task(in));
	json_object_set_new(cl, "name", str_or_null(in->sub->cluster_name));
	json_object_set_new(cl, "cloud", json_string(in->cloud ? in->cloud : ""));
	json_object_set_new(cl, "resources",
			    in->sub->resources_json ? json_loads(in->sub->resources_json, 0, NULL)
						    : json_null());
	json_object_set_new(o, "cluster", cl);
	json_object_set_new(o, "environment", str_or_null(in->sub->environment));
	json_object_set_new(o, "cost", record_cost(in->cost));
	json_object_set_new(o, "files", record_files(in));
	json_object_set_new(o, "metrics", record_metrics(in));
	text = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return text;
}

/* ------------------------------------------------------------- reading */

/* A string member 1 to `max` bytes without control bytes into *out. */
static int get_str(json_t *o, const char *key, size_t max, char **out, struct pbx_err *err)
{
	json_t *v = json_object_get(o, key);
	const char *s = json_string_value(v);
	size_t i, n;
	if (!s)
		return pbx_err_set(err, "'%s' is missing or not a string", key);
	n = json_string_length(v);
	if (n == 0 || n > max || strlen(s) != n)
		return pbx_err_set(err, "'%s' is empty, too long or holds a NUL", key);
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return pbx_err_set(err, "'%s' holds a control character", key);
	*out = xstrdup(s);
	return 0;
}

/* An integer member >= 0 (null = 0 when nullable). */
static int get_int(json_t *o, const char *key, int nullable, int64_t *out, struct pbx_err *err)
{
	json_t *v = json_object_get(o, key);
	if (nullable && (!v || json_is_null(v))) {
		*out = 0;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return pbx_err_set(err, "'%s' is not an integer >= 0", key);
	*out = json_integer_value(v);
	return 0;
}

static int parse_point(json_t *p, struct pbx_pool_metric *m, struct pbx_err *err)
{
	json_t *name = json_array_get(p, 0), *step = json_array_get(p, 1),
	       *v = json_array_get(p, 2);
	const char *s = json_string_value(name);
	if (!json_is_array(p) || json_array_size(p) != 3 || !s || !*s ||
	    json_string_length(name) > 256 || strlen(s) != json_string_length(name) ||
	    !json_is_integer(step) || json_integer_value(step) < 0 ||
	    !(json_is_number(v) || json_is_null(v)))
		return pbx_err_set(err, "a metrics point is not [name, step >= 0, number or null]");
	m->name = xstrdup(s);
	m->step = json_integer_value(step);
	m->is_null = json_is_null(v);
	m->value = m->is_null ? 0 : json_number_value(v);
	return 0;
}

static int parse_metrics(json_t *a, struct pool_record *r, struct pbx_err *err)
{
	size_t i;
	if (!json_is_array(a))
		return pbx_err_set(err, "'metrics' is not an array");
	r->metrics = xcalloc(json_array_size(a) + 1, sizeof(*r->metrics));
	for (i = 0; i < json_array_size(a); i++) {
		if (parse_point(json_array_get(a, i), &r->metrics[i], err) < 0)
			return -1;
		r->nmetrics++;
	}
	return 0;
}

static int parse_task(json_t *t, struct pool_record *r, struct pbx_err *err)
{
	json_t *params = json_object_get(t, "params");
	if (!json_is_object(t))
		return pbx_err_set(err, "'task' is not an object");
	if (get_int(t, "idx", 0, &r->idx, err) < 0 || get_str(t, "state", 32, &r->state, err) < 0 ||
	    get_int(t, "start_time", 1, &r->start_time, err) < 0 ||
	    get_int(t, "end_time", 1, &r->end_time, err) < 0)
		return -1;
	if (!json_is_object(params))
		return pbx_err_set(err, "'task.params' is not an object");
	r->params_json = json_dumps(params, JSON_COMPACT | JSON_PRESERVE_ORDER);
	return 0;
}

static int parse_record(json_t *o, struct pool_record *r, struct pbx_err *err)
{
	json_t *pkg = json_object_get(o, "package");
	const char *format = json_string_value(json_object_get(o, "format"));
	if (!json_is_object(o))
		return pbx_err_set(err, "not a JSON object");
	if (!format || strcmp(format, POOL_RECORD_FORMAT) != 0)
		return pbx_err_set(err, "'format' is not \"%s\"", POOL_RECORD_FORMAT);
	if (get_str(o, "publisher", 64, &r->publisher, err) < 0)
		return -1;
	if (!json_is_object(pkg))
		return pbx_err_set(err, "'package' is not an object");
	if (get_str(pkg, "id", 64, &r->package_id, err) < 0 ||
	    get_str(pkg, "experiment", 256, &r->experiment, err) < 0)
		return -1;
	if (strlen(r->package_id) != 64 || strspn(r->package_id, "0123456789abcdef") != 64)
		return pbx_err_set(err, "'package.id' is not 64 hex digits");
	if (parse_task(json_object_get(o, "task"), r, err) < 0)
		return -1;
	return parse_metrics(json_object_get(o, "metrics"), r, err);
}

int pool_record_parse(const char *text, size_t len, struct pool_record *out, struct pbx_err *err)
{
	json_error_t je;
	json_t *o;
	int rc;
	memset(out, 0, sizeof(*out));
	if (len > POOL_RECORD_MAX)
		return pbx_err_set(err, "%s: larger than %zu bytes", POOL_RECORD_NAME,
				   POOL_RECORD_MAX);
	o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return pbx_err_set(err, "%s: line %d: %s", POOL_RECORD_NAME, je.line, je.text);
	rc = parse_record(o, out, err);
	json_decref(o);
	if (rc < 0) {
		pool_record_free(out);
		return pbx_err_prefix(err, "%s", POOL_RECORD_NAME);
	}
	return 0;
}

void pool_record_free(struct pool_record *r)
{
	size_t i;
	free(r->publisher);
	free(r->package_id);
	free(r->experiment);
	free(r->state);
	free(r->params_json);
	for (i = 0; i < r->nmetrics; i++)
		free(r->metrics[i].name);
	free(r->metrics);
	memset(r, 0, sizeof(*r));
}
