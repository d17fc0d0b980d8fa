/*
 * remote.c - helpers for pbx's remote scripts (run with pbx_cluster_run):
 * splitting their answers and building sbatch calls (see jobs_internal.h).
 */
#include "jobs/jobs_internal.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

int jobs_lock(const char *package_id, int64_t cluster_id, struct pbx_err *err)
{
	char *dir = pbx_home_path("locks"), *path;
	int fd;
	if (pbx_mkdir_p(dir, 0700, err) < 0) {
		free(dir);
		return -1;
	}
	path = xasprintf("%s/submit-%s-%" PRId64, dir, package_id, cluster_id);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		pbx_err_set(err, "cannot lock %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	free(path);
	free(dir);
	return fd;
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
