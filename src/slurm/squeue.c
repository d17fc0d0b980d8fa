/*
 * squeue.c - squeue and scontrol output parsing (see squeue.h).  The
 * squeue format is pbx's own choice, so the parser is strict.
 */
#include "slurm/squeue.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Parses a non-negative decimal in [p, end); returns -1 when not one. */
static long squeue_number(const char *p, const char *end)
{
	long v = 0;
	if (p >= end || end - p > 12)
		return -1;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

int pbx_slurm_job_id_ok(const char *s)
{
	size_t n = s ? strspn(s, "0123456789") : 0;
	return n > 0 && n <= 18 && s[n] == '\0';
}

/* "1234", "1234_7" or "1234_[8-99]" / "1234_[8-99%4]" / "1234_[8]". */
static int squeue_job_id(const char *p, const char *end, struct pbx_squeue_job *j)
{
	const char *us = memchr(p, '_', (size_t)(end - p));
	j->array_task = j->range_lo = j->range_hi = -1;
	if (!us) {
		j->array_job = squeue_number(p, end);
		return j->array_job < 0 ? -1 : 0;
	}
	j->array_job = squeue_number(p, us);
	if (j->array_job < 0 || us + 1 >= end)
		return -1;
	if (us[1] != '[') {
		j->array_task = squeue_number(us + 1, end);
		return j->array_task < 0 ? -1 : 0;
	}
	{
		const char *lo = us + 2, *close = end - 1, *dash, *pct;
		if (*close != ']' || close <= lo)
			return -1;
		pct = memchr(lo, '%', (size_t)(close - lo));
		if (pct)
			close = pct;
		dash = memchr(lo, '-', (size_t)(close - lo));
		j->range_lo = squeue_number(lo, dash ? dash : close);
		j->range_hi = dash ? squeue_number(dash + 1, close) : j->range_lo;
		return j->range_lo < 0 || j->range_hi < j->range_lo ? -1 : 0;
	}
}

static int squeue_state_ok(const char *p, const char *end)
{
	if (p >= end || end - p > 32)
		return 0;
	for (; p < end; p++)
		if (!(isupper((unsigned char)*p) || *p == '_'))
			return 0;
	return 1;
}

int pbx_squeue_parse(const char *text, size_t len, struct pbx_squeue_job **jobs, size_t *n,
		     struct pbx_err *err)
{
	const char *p = text, *end = text + len;
	size_t cap = 0, lineno = 0;
	*jobs = NULL;
	*n = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end, *sp;
		struct pbx_squeue_job j;
		lineno++;
		if (eol > p && eol[-1] == '\r')
			eol--;
		if (eol == p) {
			p = nl ? nl + 1 : end;
			continue;
		}
		sp = memchr(p, ' ', (size_t)(eol - p));
		if (!sp || squeue_job_id(p, sp, &j) < 0 || !squeue_state_ok(sp + 1, eol)) {
			pbx_squeue_free(*jobs, *n);
			*jobs = NULL;
			*n = 0;
			return pbx_err_set(err, "squeue output line %zu: expected 'JOBID STATE'",
					   lineno);
		}
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			*jobs = xreallocarray(*jobs, cap, sizeof(**jobs));
		}
		j.job_id = xstrndup(p, (size_t)(sp - p));
		j.state = xstrndup(sp + 1, (size_t)(eol - sp - 1));
		(*jobs)[(*n)++] = j;
		p = nl ? nl + 1 : end;
	}
	return 0;
}

void pbx_squeue_free(struct pbx_squeue_job *jobs, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(jobs[i].job_id);
		free(jobs[i].state);
	}
	free(jobs);
}

/* Finds "KEY = VALUE" at the start of a line; returns the value as a
 * number or -1. */
static long scontrol_value(const char *text, size_t len, const char *key)
{
	const char *p = text, *end = text + len;
	size_t klen = strlen(key);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end, *q;
		if ((size_t)(eol - p) > klen && !memcmp(p, key, klen) &&
		    (p[klen] == ' ' || p[klen] == '=')) {
			q = p + klen;
			while (q < eol && (*q == ' ' || *q == '='))
				q++;
			{
				const char *v = q;
				while (q < eol && *q >= '0' && *q <= '9')
					q++;
				return q > v ? squeue_number(v, q) : -1;
			}
		}
		p = nl ? nl + 1 : end;
	}
	return -1;
}

int pbx_scontrol_limits_parse(const char *text, size_t len, struct pbx_slurm_limits *out,
			      struct pbx_err *err)
{
	out->max_array_size = scontrol_value(text, len, "MaxArraySize");
	out->max_job_count = scontrol_value(text, len, "MaxJobCount");
	if (out->max_array_size <= 0)
		return pbx_err_set(err, "scontrol show config: no numeric MaxArraySize");
	if (out->max_job_count <= 0)
		return pbx_err_set(err, "scontrol show config: no numeric MaxJobCount");
	return 0;
}

const char *pbx_slurm_task_state(const char *s)
{
	static const char *const same[] = { "PENDING",       "RUNNING", "COMPLETED", "FAILED",
					    "CANCELLED",     "TIMEOUT", "PREEMPTED", "NODE_FAIL",
					    "OUT_OF_MEMORY", NULL };
	static const char *const map[][2] = {
		{ "CONFIGURING", "PENDING" },   { "REQUEUED", "PENDING" },
		{ "REQUEUE_HOLD", "PENDING" },  { "REQUEUE_FED", "PENDING" },
		{ "RESV_DEL_HOLD", "PENDING" }, { "COMPLETING", "RUNNING" },
		{ "RESIZING", "RUNNING" },      { "SUSPENDED", "RUNNING" },
		{ "STOPPED", "RUNNING" },       { "SIGNALING", "RUNNING" },
		{ "STAGE_OUT", "RUNNING" },     { "BOOT_FAIL", "NODE_FAIL" },
		{ "DEADLINE", "TIMEOUT" },      { "SPECIAL_EXIT", "FAILED" },
		{ "REVOKED", "CANCELLED" },     { "REQUEUED_CRON", "PENDING" }, /* 20.11 only */
	};
	size_t i;
	for (i = 0; same[i]; i++)
		if (!strcmp(s, same[i]))
			return same[i];
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(s, map[i][0]))
			return map[i][1];
	return "UNKNOWN";
}
