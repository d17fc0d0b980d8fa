/*
 * sacctmgr.c - `sacctmgr -nP` parsing and the user's submit limit (see
 * sacctmgr.h).  -P prints fields separated by '|', no header (-n) and no
 * '|' after the last field; an unset limit is an empty field.  The
 * formats are pbx's own choice, so the parsers are strict.
 */
#include "slurm/sacctmgr.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SACCT_MAX_FIELDS 5

/* A field of a name (account, partition, QOS list): printable ASCII other
 * than '|', at most 200 bytes, possibly empty. */
static int sacct_name_ok(const char *p, size_t len)
{
	size_t i;
	if (len > 200)
		return 0;
	for (i = 0; i < len; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return 0;
	return 1;
}

/* A limit field: empty (unset, -1) or 1 to 10 digits; -2 when neither. */
static long sacct_limit(const char *p, size_t len)
{
	long v = 0;
	size_t i;
	if (len == 0)
		return -1;
	if (len > 10)
		return -2;
	for (i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -2;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

/* Splits [p, eol) at '|' into exactly `want` fields (starts and lengths);
 * 0 when it has another count. */
static int sacct_split(const char *p, const char *eol, size_t want, const char **f, size_t *fl)
{
	size_t k = 0;
	for (;;) {
		const char *bar = memchr(p, '|', (size_t)(eol - p)), *e = bar ? bar : eol;
		if (k == want)
			return 0;
		f[k] = p;
		fl[k++] = (size_t)(e - p);
		if (!bar)
			return k == want;
		p = bar + 1;
	}
}

/* Calls line(fields) for each non-blank line of [text, text+len) split into
 * `want` fields; an error naming `what` and the line when a line has
 * another count or line() refuses it. */
static int sacct_lines(const char *text, size_t len, size_t want, const char *what,
		       int (*line)(const char **f, const size_t *fl, void *ctx), void *ctx,
		       struct pbx_err *err)
{
	const char *p = text, *end = text + len;
	size_t lineno = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
		const char *f[SACCT_MAX_FIELDS];
		size_t fl[SACCT_MAX_FIELDS];
		lineno++;
		if (eol > p && eol[-1] == '\r')
			eol--;
		if (eol > p && (!sacct_split(p, eol, want, f, fl) || line(f, fl, ctx) < 0))
			return pbx_err_set(err, "sacctmgr %s line %zu: expected %zu fields (%s)",
					   what, lineno, want,
					   want == 5 ? PBX_SACCTMGR_ASSOC_FORMAT
						     : PBX_SACCTMGR_QOS_FORMAT);
		p = nl ? nl + 1 : end;
	}
	return 0;
}

struct assoc_list {
	struct pbx_slurm_assoc *rows;
	size_t n, cap;
};

static int assoc_line(const char **f, const size_t *fl, void *ctx)
{
	struct assoc_list *l = ctx;
	struct pbx_slurm_assoc *a;
	long max = sacct_limit(f[2], fl[2]);
	if (max < -1 || !fl[0] || !sacct_name_ok(f[0], fl[0]) || !sacct_name_ok(f[1], fl[1]) ||
	    !sacct_name_ok(f[3], fl[3]) || !sacct_name_ok(f[4], fl[4]))
		return -1;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 8;
		l->rows = xreallocarray(l->rows, l->cap, sizeof(*l->rows));
	}
	a = &l->rows[l->n++];
	a->account = xstrndup(f[0], fl[0]);
	a->partition = xstrndup(f[1], fl[1]);
	a->max_submit = max;
	a->qos = xstrndup(f[3], fl[3]);
	a->def_qos = xstrndup(f[4], fl[4]);
	return 0;
}

int pbx_sacctmgr_assoc_parse(const char *text, size_t len, struct pbx_slurm_assoc **rows, size_t *n,
			     struct pbx_err *err)
{
	struct assoc_list l = { 0 };
	int rc = sacct_lines(text, len, 5, "association", assoc_line, &l, err);
	if (rc < 0) {
		pbx_sacctmgr_assoc_free(l.rows, l.n);
		l.rows = NULL;
		l.n = 0;
	}
	*rows = l.rows;
	*n = l.n;
	return rc;
}

void pbx_sacctmgr_assoc_free(struct pbx_slurm_assoc *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(rows[i].account);
		free(rows[i].partition);
		free(rows[i].qos);
		free(rows[i].def_qos);
	}
	free(rows);
}

struct qos_list {
	struct pbx_slurm_qos *rows;
	size_t n, cap;
};

static int qos_line(const char **f, const size_t *fl, void *ctx)
{
	struct qos_list *l = ctx;
	long max = sacct_limit(f[1], fl[1]);
	if (max < -1 || !fl[0] || !sacct_name_ok(f[0], fl[0]))
		return -1;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 8;
		l->rows = xreallocarray(l->rows, l->cap, sizeof(*l->rows));
	}
	l->rows[l->n].name = xstrndup(f[0], fl[0]);
	l->rows[l->n++].max_submit_pu = max;
	return 0;
}

int pbx_sacctmgr_qos_parse(const char *text, size_t len, struct pbx_slurm_qos **rows, size_t *n,
			   struct pbx_err *err)
{
	struct qos_list l = { 0 };
	int rc = sacct_lines(text, len, 2, "QOS", qos_line, &l, err);
	if (rc < 0) {
		pbx_sacctmgr_qos_free(l.rows, l.n);
		l.rows = NULL;
		l.n = 0;
	}
	*rows = l.rows;
	*n = l.n;
	return rc;
}

void pbx_sacctmgr_qos_free(struct pbx_slurm_qos *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(rows[i].name);
	free(rows);
}

/* The QOS a job of association a runs under: `want` when given, else the
 * default QOS, else the only QOS it may use; NULL when none of these. */
static const struct pbx_slurm_qos *assoc_qos(const struct pbx_slurm_assoc *a,
					     const struct pbx_slurm_qos *qos, size_t nq,
					     const char *want)
{
	const char *name = want && *want ? want : a->def_qos[0] ? a->def_qos : NULL;
	size_t i;
	if (!name && a->qos[0] && !strchr(a->qos, ','))
		name = a->qos;
	for (i = 0; name && i < nq; i++)
		if (!strcmp(qos[i].name, name))
			return &qos[i];
	return NULL;
}

void pbx_slurm_submit_limit(const struct pbx_slurm_assoc *assoc, size_t na,
			    const struct pbx_slurm_qos *qos, size_t nq, const char *account,
			    const char *qos_name, struct pbx_submit_limit *out)
{
	size_t i, matching = 0;
	out->kind = PBX_SUBMIT_LIMIT_NONE;
	out->max = -1;
	out->source[0] = '\0';
	for (i = 0; account && *account && i < na; i++)
		matching += !strcmp(assoc[i].account, account);
	for (i = 0; i < na; i++) {
		const struct pbx_slurm_qos *q = assoc_qos(&assoc[i], qos, nq, qos_name);
		long lim = q && q->max_submit_pu >= 0 ? q->max_submit_pu : assoc[i].max_submit;
		if (matching && strcmp(assoc[i].account, account) != 0)
			continue;
		if (lim < 0 || (out->kind == PBX_SUBMIT_LIMIT_SET && lim >= out->max))
			continue;
		out->kind = PBX_SUBMIT_LIMIT_SET;
		out->max = lim;
		if (q && q->max_submit_pu >= 0)
			snprintf(out->source, sizeof(out->source),
				 "QOS %.60s, MaxSubmitJobsPerUser", q->name);
		else
			snprintf(out->source, sizeof(out->source),
				 "account %.60s%s%.60s, MaxSubmitJobs", assoc[i].account,
				 assoc[i].partition[0] ? " partition " : "", assoc[i].partition);
	}
}

int pbx_sacctmgr_limit_parse(const char *text, size_t len, const char *account,
			     const char *qos_name, struct pbx_submit_limit *out,
			     struct pbx_err *err)
{
	static const char assoc_mark[] = "PBX-ASSOC\n", qos_mark[] = "\nPBX-QOS\n";
	struct pbx_slurm_assoc *assoc = NULL;
	struct pbx_slurm_qos *qos = NULL;
	const char *q = NULL, *p;
	size_t na = 0, nq = 0, al = sizeof(assoc_mark) - 1, ql = sizeof(qos_mark) - 1;
	int rc;
	memset(out, 0, sizeof(*out));
	out->max = -1;
	if (len >= 8 && !memcmp(text, "PBX-NODB", 8) && (len == 8 || text[8] == '\n'))
		return 0; /* PBX_SUBMIT_LIMIT_UNKNOWN */
	if (len < al || memcmp(text, assoc_mark, al) != 0)
		return pbx_err_set(err, "sacctmgr: unexpected answer");
	for (p = text + al - 1; p + ql <= text + len; p++)
		if (!memcmp(p, qos_mark, ql)) {
			q = p;
			break;
		}
	if (!q)
		return pbx_err_set(err, "sacctmgr: no QOS part in the answer");
	rc = pbx_sacctmgr_assoc_parse(text + al, q < text + al ? 0 : (size_t)(q - text - al),
				      &assoc, &na, err);
	if (rc == 0)
		rc = pbx_sacctmgr_qos_parse(q + ql, (size_t)(text + len - q - ql), &qos, &nq, err);
	if (rc == 0)
		pbx_slurm_submit_limit(assoc, na, qos, nq, account, qos_name, out);
	pbx_sacctmgr_assoc_free(assoc, na);
	pbx_sacctmgr_qos_free(qos, nq);
	return rc;
}
