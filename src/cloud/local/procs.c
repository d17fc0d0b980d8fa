/*
 * procs.c - processes of a local cluster (see procs.h).
 */
#include "cloud/local/procs.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Whether the text before offset i ends a path: `needle` (an absolute
 * directory) found at i is that directory, not the tail of a longer path
 * (/tmp/h/clusters/c/ holds /h/clusters/c/, another pbx home's). */
static int procs_path_starts(const char *buf, size_t i)
{
	return i == 0 || strchr("\n =:,;\"'", buf[i - 1]) != NULL;
}

/* True if the NUL-separated blob at `path` mentions directory `needle`. */
static int procs_file_mentions(const char *path, const char *needle)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i, nlen = strlen(needle);
	int found = 0;
	if (pbx_read_file(path, &b, NULL) < 0)
		return 0;
	for (i = 0; i < b.len; i++)
		if (b.buf[i] == '\0')
			b.buf[i] = '\n';
	for (i = 0; !found && i + nlen <= b.len; i++)
		found = !memcmp(b.buf + i, needle, nlen) && procs_path_starts(b.buf, i);
	pbx_buf_release(&b);
	return found;
}

static int procs_cwd_under(pid_t pid, const char *dir)
{
	char link[64], target[PATH_MAX];
	ssize_t n;
	snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
	n = readlink(link, target, sizeof(target) - 2);
	if (n <= 0)
		return 0;
	target[n] = '/'; /* `dir` ends in '/', so compare "cwd/" */
	target[n + 1] = '\0';
	return !strncmp(target, dir, strlen(dir));
}

static int procs_is_ancestor(pid_t pid)
{
	pid_t p = getpid();
	while (p > 1) {
		char path[64];
		FILE *f;
		int ppid = 0;
		if (p == pid)
			return 1;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
		f = fopen(path, "r");
		if (!f)
			return 0;
		if (fscanf(f, "%*d (%*[^)]) %*c %d", &ppid) != 1)
			ppid = 0;
		fclose(f);
		p = ppid;
	}
	return 0;
}

static int procs_mentions(pid_t pid, const char *dir)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (procs_file_mentions(path, dir))
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if (procs_file_mentions(path, dir))
		return 1;
	return procs_cwd_under(pid, dir);
}

size_t pbx_local_procs_find(const char *dir, pid_t **pids)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0, cap = 0;
	*pids = NULL;
	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long v = strtol(e->d_name, &end, 10);
		pid_t pid = (pid_t)v;
		if (*end || v <= 1 || procs_is_ancestor(pid) || !procs_mentions(pid, dir))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			*pids = xreallocarray(*pids, cap, sizeof(pid_t));
		}
		(*pids)[n++] = pid;
	}
	closedir(d);
	return n;
}

size_t pbx_local_procs_kill(const char *dir, int grace_ms)
{
	pid_t *pids;
	size_t n = pbx_local_procs_find(dir, &pids), i, total = n;
	struct timespec delay = { 0, 50 * 1000 * 1000 };
	int waited;
	for (i = 0; i < n; i++)
		kill(pids[i], SIGTERM);
	free(pids);
	for (waited = 0; n && waited < grace_ms; waited += 50) {
		nanosleep(&delay, NULL);
		n = pbx_local_procs_find(dir, &pids);
		free(pids);
	}
	if (n) {
		n = pbx_local_procs_find(dir, &pids);
		for (i = 0; i < n; i++)
			kill(pids[i], SIGKILL);
		free(pids);
		for (waited = 0; waited < 2000; waited += 50) {
			nanosleep(&delay, NULL);
			n = pbx_local_procs_find(dir, &pids);
			free(pids);
			if (!n)
				break;
		}
	}
	return total;
}
