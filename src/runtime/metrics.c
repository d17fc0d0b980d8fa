/*
 * metrics.c - metrics.jsonl + TensorBoard events + summary.json
 * (see metrics.h).  JSON is built and printed with jansson, never printf.
 */
#include "runtime/metrics.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/tfevents.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define METRICS_JSON_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

struct pbx_metrics {
	char *dir;
	char *jsonl_path; /* DIR/metrics.jsonl */
	FILE *jsonl;
	struct pbx_tfevents *events;
	struct pbx_err err; /* last failure, for pbx_metrics_error */
};

/* ---------------------------------------------------------------------- */
/* metrics.jsonl repair for append */

/* Cuts a trailing partial line (no final '\n') so appended lines start
 * clean.  A missing file is fine. */
static int jsonl_cut_partial(const char *path, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t keep;
	if (access(path, F_OK) < 0)
		return 0;
	if (pbx_read_file(path, &b, err) < 0)
		return -1;
	keep = b.len;
	while (keep > 0 && b.buf[keep - 1] != '\n')
		keep--;
	if (keep != b.len && truncate(path, (off_t)keep) < 0) {
		pbx_buf_release(&b);
		return pbx_err_set(err, "cannot truncate %s: %s", path, strerror(errno));
	}
	pbx_buf_release(&b);
	return 0;
}

/* The "step" of one JSONL line, or -1 if it has none. */
static int line_step(const char *line, size_t len, int64_t *step)
{
	json_t *o = json_loadb(line, len, 0, NULL);
	json_t *s = o ? json_object_get(o, "step") : NULL;
	int rc = -1;
	if (json_is_integer(s)) {
		*step = (int64_t)json_integer_value(s);
		rc = 0;
	}
	json_decref(o);
	return rc;
}

int pbx_metrics_truncate_after(const char *dir, int64_t step, struct pbx_err *err)
{
	char *path = xasprintf("%s/metrics.jsonl", dir);
	struct pbx_buf in = PBX_BUF_INIT, out = PBX_BUF_INIT;
	int rc = 0;
	if (access(path, F_OK) == 0 && (rc = pbx_read_file(path, &in, err)) == 0) {
		const char *p = in.buf, *end = in.buf + in.len;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			int64_t s;
			if (!nl)
				break; /* partial last line */
			if (line_step(p, (size_t)(nl - p), &s) == 0 && s <= step)
				pbx_buf_add(&out, p, (size_t)(nl - p + 1));
			p = nl + 1;
		}
		rc = pbx_write_file_atomic(path, out.buf, out.len, 0644, err);
	}
	pbx_buf_release(&in);
	pbx_buf_release(&out);
	free(path);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* open / close */

struct pbx_metrics *pbx_metrics_open(const char *dir, int append, struct pbx_err *err)
{
	struct pbx_metrics *m;
	char *evpath;
	if (pbx_mkdir_p(dir, 0755, err) < 0)
		return NULL;
	m = xcalloc(1, sizeof(*m));
	m->dir = xstrdup(dir);
	m->jsonl_path = xasprintf("%s/metrics.jsonl", dir);
	if (append && jsonl_cut_partial(m->jsonl_path, err) < 0)
		goto fail;
	m->jsonl = fopen(m->jsonl_path, append ? "a" : "w");
	if (!m->jsonl) {
		pbx_err_set(err, "cannot open %s: %s", m->jsonl_path, strerror(errno));
		goto fail;
	}
	evpath = pbx_tfevents_filename(dir);
	m->events = pbx_tfevents_open(evpath, err);
	free(evpath);
	if (!m->events)
		goto fail;
	return m;
fail:
	pbx_metrics_close(m);
	return NULL;
}

void pbx_metrics_close(struct pbx_metrics *m)
{
	if (!m)
		return;
	if (m->jsonl)
		fclose(m->jsonl);
	pbx_tfevents_close(m->events, NULL);
	free(m->dir);
	free(m->jsonl_path);
	free(m);
}

const char *pbx_metrics_error(const struct pbx_metrics *m)
{
	return m->err.msg;
}

const char *pbx_metrics_event_path(const struct pbx_metrics *m)
{
	return pbx_tfevents_path(m->events);
}

/* ---------------------------------------------------------------------- */
/* logging */

/* A JSON number for v: integer when whole and exact, null when not finite. */
static json_t *json_number(double v)
{
	if (!isfinite(v))
		return json_null();
	if (v == floor(v) && fabs(v) < 9007199254740992.0)
		return json_integer((json_int_t)v);
	return json_real(v);
}

/* Builds the line for one record; NULL + err on a bad name. */
static char *metrics_line(int64_t step, int n, const char *const *names, const double *values,
			  struct pbx_err *err)
{
	json_t *o = json_object();
	char *text;
	json_object_set_new(o, "step", json_integer((json_int_t)step));
	for (int i = 0; i < n; i++) {
		if (!names[i] || !names[i][0] || strcmp(names[i], "step") == 0) {
			json_decref(o);
			pbx_err_set(err, "bad metric name '%s' (must be non-empty and not 'step')",
				    names[i] ? names[i] : "(null)");
			return NULL;
		}
		json_object_set_new(o, names[i], json_number(values[i]));
	}
	text = json_dumps(o, METRICS_JSON_FLAGS);
	json_decref(o);
	if (!text)
		pbx_err_set(err, "cannot encode metrics as JSON");
	return text;
}

int pbx_metrics_log(struct pbx_metrics *m, int64_t step, int n, const char *const *names,
		    const double *values)
{
	double now = pbx_wall_time();
	char *line = metrics_line(step, n, names, values, &m->err);
	int ok;
	if (!line)
		return -1;
	ok = fputs(line, m->jsonl) >= 0 && fputc('\n', m->jsonl) != EOF && fflush(m->jsonl) == 0;
	free(line);
	if (!ok)
		return pbx_err_set(&m->err, "cannot write %s: %s", m->jsonl_path, strerror(errno));
	for (int i = 0; i < n; i++)
		if (pbx_tfevents_scalar_at(m->events, now, step, names[i], (float)values[i],
					   &m->err) < 0)
			return -1;
	return 0;
}

int pbx_metrics_summary(struct pbx_metrics *m, const char *json_text)
{
	json_error_t jerr;
	json_t *check = json_loads(json_text, JSON_DECODE_ANY, &jerr);
	char *path;
	int rc;
	if (!check)
		return pbx_err_set(&m->err, "summary is not valid JSON: %s (line %d)", jerr.text,
				   jerr.line);
	json_decref(check);
	path = xasprintf("%s/summary.json", m->dir);
	rc = pbx_write_file_atomic(path, json_text, strlen(json_text), 0644, &m->err);
	free(path);
	return rc;
}
