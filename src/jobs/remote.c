/*
 * remote.c - running pbx's small remote scripts on a cluster's head and
 * building sbatch calls (see jobs_internal.h).
 */
#include "jobs/jobs_internal.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void jobs_collect(void *ctx, int stream, const char *data, size_t len)
{
	struct jobs_output *o = ctx;
	pbx_buf_add(stream == 2 ? &o->err : &o->out, data, len);
}

int jobs_remote(struct pbx_cluster *c, const char *script, const struct pbx_buf *in,
		struct jobs_output *o, struct pbx_err *err)
{
	struct pbx_buf cmd = PBX_BUF_INIT;
	struct pbx_ssh *s;
	int status = 0, rc;
	const char *env;
	pbx_buf_init(&o->out, 0);
	pbx_buf_init(&o->err, 0);
	if (pbx_cluster_connect(c, 0, &s, err) < 0)
		return -1;
	/* The script travels as an argument of sh -c; stdin stays free for data. */
	env = c->nodes[0].root;
	pbx_buf_adds(&cmd, ". ");
	{
		char *envsh = xasprintf("%s/etc/pbx/env.sh", env);
		pbx_shell_quote(&cmd, envsh);
		free(envsh);
	}
	pbx_buf_adds(&cmd, " && cd \"$PBX_SHARED\" && exec /bin/sh -c ");
	pbx_shell_quote(&cmd, script);
	{
		char *line = pbx_cluster_as_root(c, cmd.buf);   /* sudo -n for a non-root login */
		rc = pbx_ssh_exec(s, line, in ? in->buf : NULL, in ? in->len : 0, jobs_collect, o,
				  &status, err);
		free(line);
	}
	pbx_buf_release(&cmd);
	if (rc == 0 && status != 0) {
		pbx_buf_rtrim(&o->err);
		rc = pbx_err_set(err, "remote command on %s failed (status %d): %s", c->row.name,
				 status, o->err.buf);
	}
	if (rc < 0)
		jobs_output_release(o);
	return rc;
}

void jobs_output_release(struct jobs_output *o)
{
	pbx_buf_release(&o->out);
	pbx_buf_release(&o->err);
}

int jobs_split(const char *text, size_t len, const char *sep, const char **after,
	       size_t *before_len, size_t *after_len)
{
	size_t slen = strlen(sep), pos = 0;
	while (pos + slen <= len) {
		if ((pos == 0 || text[pos - 1] == '\n') && !memcmp(text + pos, sep, slen) &&
		    (pos + slen == len || text[pos + slen] == '\n')) {
			*before_len = pos;
			pos += slen;
			if (pos < len)
				pos++;
			*after = text + pos;
			*after_len = len - pos;
			return 0;
		}
		pos++;
	}
	return -1;
}

void jobs_sbatch_line(struct pbx_buf *script, const struct pbx_array_row *a,
		      const char *const *sbatch_args, size_t nargs)
{
	size_t i;
	pbx_buf_addf(script, "submit %" PRId64 " %" PRId64 " ", a->id, a->first_task);
	pbx_shell_quote(script, a->spec);
	for (i = 0; i < nargs; i++) {
		pbx_buf_addc(script, ' ');
		pbx_shell_quote(script, sbatch_args[i]);
	}
	pbx_buf_addc(script, '\n');
}

char *jobs_array_spec(const int64_t *idx, size_t n, int64_t offset, int throttle)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j + 1 < n && idx[j + 1] == idx[j] + 1)
			j++;
		if (b.len)
			pbx_buf_addc(&b, ',');
		if (j == i)
			pbx_buf_addf(&b, "%" PRId64, idx[i] - offset);
		else
			pbx_buf_addf(&b, "%" PRId64 "-%" PRId64, idx[i] - offset, idx[j] - offset);
		i = j + 1;
	}
	if (throttle > 0)
		pbx_buf_addf(&b, "%%%d", throttle);
	return pbx_buf_detach(&b, NULL);
}

int jobs_spec_tasks(const char *spec, int64_t offset, int64_t **idx, size_t *n)
{
	const char *p = spec;
	size_t cap = 16;
	*idx = xcalloc(cap, sizeof(int64_t));
	*n = 0;
	while (*p && *p != '%') {
		char *end;
		long long lo = strtoll(p, &end, 10), hi = lo, v;
		if (end == p || lo < 0)
			goto bad;
		p = end;
		if (*p == '-') {
			hi = strtoll(p + 1, &end, 10);
			if (end == p + 1 || hi < lo)
				goto bad;
			p = end;
		}
		for (v = lo; v <= hi; v++) {
			if (*n == cap) {
				cap *= 2;
				*idx = xreallocarray(*idx, cap, sizeof(int64_t));
			}
			(*idx)[(*n)++] = offset + v;
		}
		if (*p == ',')
			p++;
		else if (*p && *p != '%')
			goto bad;
	}
	return 0;
bad:
	free(*idx);
	*idx = NULL;
	*n = 0;
	return -1;
}
