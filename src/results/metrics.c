/*
 * metrics.c - metrics.jsonl parsing and ingestion (format in metrics.h).
 * jansson parses each line; this file only splits lines, maps Python's
 * NaN/Infinity tokens to null and turns objects into points.
 */
#include "results/metrics.h"

#include "util/fs.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <string.h>

struct mparse {
	const char *label;
	int64_t idx;
	struct pbx_metric *pts;
	size_t n, cap;
	struct pbx_buf *warn;
	size_t nwarn, line;
};

static void __attribute__((format(printf, 2, 3))) mp_warn(struct mparse *p, const char *fmt, ...)
{
	va_list ap;
	if (++p->nwarn > PBX_METRICS_MAX_WARNINGS || !p->warn)
		return;
	pbx_buf_addf(p->warn, "%s:%zu: ", p->label, p->line);
	va_start(ap, fmt);
	pbx_buf_vaddf(p->warn, fmt, ap);
	va_end(ap);
	pbx_buf_addc(p->warn, '\n');
}

static void mp_add(struct mparse *p, const char *name, int64_t step, const json_t *v)
{
	struct pbx_metric *m;
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		p->pts = xreallocarray(p->pts, p->cap, sizeof(*p->pts));
	}
	m = &p->pts[p->n++];
	m->idx = p->idx;
	m->step = step;
	m->name = xstrdup(name);
	m->is_null = json_is_null(v);
	m->value = m->is_null ? 0 : json_number_value(v);
}

static int is_word(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* Copies a line, replacing the bare tokens NaN, Infinity and -Infinity
 * outside strings by null. */
static void mp_nan_to_null(const char *s, size_t len, struct pbx_buf *out)
{
	static const char *const toks[] = { "-Infinity", "Infinity", "NaN" };
	size_t i = 0, t;
	int in_str = 0;
	while (i < len) {
		char c = s[i];
		if (in_str) {
			if (c == '\\' && i + 1 < len)
				pbx_buf_addc(out, s[i++]);
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (i == 0 || !is_word(s[i - 1])) {
			for (t = 0; t < 3; t++) {
				size_t tl = strlen(toks[t]);
				if (tl <= len - i && !memcmp(s + i, toks[t], tl) &&
				    (i + tl == len || !is_word(s[i + tl])))
					break;
			}
			if (t < 3) {
				pbx_buf_adds(out, "null");
				i += strlen(toks[t]);
				continue;
			}
		}
		pbx_buf_addc(out, s[i++]);
	}
}

static int mp_name_ok(struct mparse *p, const char *name)
{
	size_t l = strlen(name);
	if (l == 0 || l > PBX_METRICS_MAX_NAME) {
		mp_warn(p, "metric name must be 1 to %d bytes, line skipped", PBX_METRICS_MAX_NAME);
		return 0;
	}
	return 1;
}

static void mp_long_form(struct mparse *p, json_t *o, int64_t step)
{
	json_t *name = json_object_get(o, "name"), *v = json_object_get(o, "value");
	if (!json_is_string(name)) {
		mp_warn(p, "\"name\" is not a string, line skipped");
		return;
	}
	if (!json_is_number(v) && !json_is_null(v)) {
		mp_warn(p, "\"value\" is not a number, line skipped");
		return;
	}
	if (mp_name_ok(p, json_string_value(name)))
		mp_add(p, json_string_value(name), step, v);
}

/* The keys that count a line's step, in the order they are looked for:
 * "step", else "epoch" (Keras, Lightning), else "iteration". */
static const char *const step_keys[] = { "step", "epoch", "iteration", NULL };

static void mp_wide_form(struct mparse *p, json_t *o, const char *step_key, int64_t step)
{
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		if (!strcmp(key, step_key))
			continue;
		if (!json_is_number(v) && !json_is_null(v)) {
			mp_warn(p, "\"%s\" is not a number, skipped", key);
			continue;
		}
		if (mp_name_ok(p, key))
			mp_add(p, key, step, v);
	}
}

static void mp_object(struct mparse *p, json_t *o)
{
	json_t *step = NULL;
	size_t k;
	for (k = 0; step_keys[k] && !(step = json_object_get(o, step_keys[k])); k++)
		;
	if (!step) {
		mp_warn(p, "no \"step\" (nor \"epoch\" or \"iteration\"), line skipped");
		return;
	}
	if (!json_is_integer(step) || json_integer_value(step) < 0) {
		mp_warn(p, "\"%s\" must be an integer >= 0, line skipped", step_keys[k]);
		return;
	}
	if (json_object_get(o, "name") && json_object_get(o, "value"))
		mp_long_form(p, o, json_integer_value(step));
	else
		mp_wide_form(p, o, step_keys[k], json_integer_value(step));
}

static int blank(const char *s, size_t len)
{
	size_t i;
	for (i = 0; i < len; i++)
		if (!isspace((unsigned char)s[i]))
			return 0;
	return 1;
}

static void mp_line(struct mparse *p, const char *s, size_t len)
{
	struct pbx_buf b = PBX_BUF_INIT;
	json_error_t e;
	json_t *o;
	if (p->line == 1 && len >= 3 && !memcmp(s, "\xef\xbb\xbf", 3)) {
		s += 3; /* a UTF-8 byte order mark */
		len -= 3;
	}
	if (blank(s, len))
		return;
	mp_nan_to_null(s, len, &b);
	o = json_loadb(b.buf, b.len, JSON_REJECT_DUPLICATES, &e);
	pbx_buf_release(&b);
	if (!o)
		mp_warn(p, "invalid JSON: %s", e.text);
	else if (!json_is_object(o))
		mp_warn(p, "not a JSON object, line skipped");
	else
		mp_object(p, o);
	json_decref(o);
}

int pbx_metrics_parse(const char *file_label, const char *text, size_t len, int64_t task_idx,
		      struct pbx_metric **out, size_t *n, struct pbx_buf *warnings)
{
	struct mparse p = { file_label, task_idx, NULL, 0, 0, warnings, 0, 0 };
	size_t pos = 0;
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		if (!nl)
			break; /* partial last line: the task is still writing */
		p.line++;
		mp_line(&p, text + pos, (size_t)(nl - (text + pos)));
		pos = (size_t)(nl - text) + 1;
	}
	if (warnings && p.nwarn > PBX_METRICS_MAX_WARNINGS)
		pbx_buf_addf(warnings, "%s: %zu more problems not shown\n", file_label,
			     p.nwarn - PBX_METRICS_MAX_WARNINGS);
	*out = p.pts;
	*n = p.n;
	return 0;
}

int pbx_results_ingest_locked(struct pbx_store *st, int64_t submission_id, int64_t task_idx,
			      const char *path, size_t *added, struct pbx_buf *warnings,
			      struct pbx_err *err)
{
	struct pbx_buf text = PBX_BUF_INIT;
	struct pbx_metric *pts;
	size_t n;
	int rc;
	*added = 0;
	if (pbx_read_file(path, &text, err) < 0)
		return -1;
	pbx_metrics_parse(path, text.buf, text.len, task_idx, &pts, &n, warnings);
	pbx_buf_release(&text);
	rc = pbx_store_metrics_put(st, submission_id, pts, n, added, err);
	if (rc < 0)
		*added = 0;
	pbx_metrics_free(pts, n);
	return rc;
}

int pbx_results_ingest(struct pbx_store *st, int64_t submission_id, int64_t task_idx,
		       const char *path, size_t *added, struct pbx_buf *warnings,
		       struct pbx_err *err)
{
	*added = 0;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	if (pbx_results_ingest_locked(st, submission_id, task_idx, path, added, warnings, err) <
		    0 ||
	    pbx_store_commit(st, err) < 0) {
		pbx_store_rollback(st);
		*added = 0;
		return -1;
	}
	return 0;
}
