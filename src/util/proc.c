/*
 * proc.c - running argv with captured output (see proc.h).  Every
 * descriptor above 2 is closed in the child so nothing of pbx (sockets,
 * the store) leaks into programs it starts, including daemons.
 */
#define _GNU_SOURCE
#include "util/proc.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Starts argv with stdin from /dev/null and stdout+stderr on outfd (or
 * /dev/null), in a session of its own when `own_session`.  posix_spawn,
 * not fork: pbx runs programs from threads (fan-outs), and vfork-style
 * spawning neither copies pbx's page tables nor runs code in a child that
 * may have inherited a held lock.  Returns 0 or an errno value. */
static int run_spawn(const char *const *argv, int outfd, int own_session, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int rc;
	if ((rc = posix_spawnattr_init(&attr)) != 0)
		return rc;
	if (own_session && (rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID)) != 0) {
		posix_spawnattr_destroy(&attr);
		return rc;
	}
	if ((rc = posix_spawn_file_actions_init(&fa)) != 0) {
		posix_spawnattr_destroy(&attr);
		return rc;
	}
	rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (rc == 0 && outfd >= 0)
		rc = posix_spawn_file_actions_adddup2(&fa, outfd, 1);
	else if (rc == 0)
		rc = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (rc == 0)
		rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	if (rc == 0)
		rc = posix_spawnp(pid, argv[0], &fa, &attr, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return rc;
}

static int spawn_error(const char *prog, int rc, struct pbx_err *err)
{
	if (rc == ENOENT || rc == EACCES)
		return pbx_err_set(err, "cannot run %s: not found or not executable", prog);
	return pbx_err_set(err, "cannot run %s: %s", prog, strerror(rc));
}

int pbx_spawn_detached(const char *const *argv, pid_t *pid, struct pbx_err *err)
{
	int rc = run_spawn(argv, -1, 1, pid);
	return rc ? spawn_error(argv[0], rc, err) : 0;
}

int pbx_run(const char *const *argv, struct pbx_buf *out, struct pbx_err *err)
{
	int pipefd[2] = { -1, -1 }, status, rc;
	pid_t pid;
	if (out && pipe2(pipefd, O_CLOEXEC) < 0)
		return pbx_err_set(err, "cannot create pipe: %s", strerror(errno));
	rc = run_spawn(argv, out ? pipefd[1] : -1, 0, &pid);
	if (rc != 0) {
		if (out) {
			close(pipefd[0]);
			close(pipefd[1]);
		}
		return spawn_error(argv[0], rc, err);
	}
	if (out) {
		char chunk[4096];
		ssize_t n;
		close(pipefd[1]);
		while ((n = read(pipefd[0], chunk, sizeof(chunk))) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				break;
			pbx_buf_add(out, chunk, (size_t)n);
		}
		close(pipefd[0]);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return pbx_err_set(err, "waiting for %s: %s", argv[0], strerror(errno));
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status); /* an exec failure was posix_spawn's error */
}

int pbx_run_ok(const char *const *argv, struct pbx_err *err)
{
	struct pbx_buf out = PBX_BUF_INIT;
	int rc = pbx_run(argv, &out, err);
	if (rc > 0) {
		pbx_buf_rtrim(&out);
		pbx_err_set(err, "%s failed (status %d): %s", argv[0], rc, out.buf);
	}
	pbx_buf_release(&out);
	return rc == 0 ? 0 : -1;
}

char *pbx_self_path(void)
{
	char self[1024];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return NULL;
	self[n] = '\0';
	return xstrdup(self);
}

char *pbx_find_pbx_train(void)
{
	const char *env = getenv("PBX_TRAIN_BIN");
	char *self, *slash, *cand;
	if (env && env[0] == '/' && access(env, X_OK) == 0)
		return realpath(env, NULL);
	self = pbx_self_path();
	slash = self ? strrchr(self, '/') : NULL;
	if (!slash) {
		free(self);
		return NULL;
	}
	*slash = '\0';
	cand = xasprintf("%s/pbx-train", self);
	if (access(cand, X_OK) != 0) {
		free(cand);
		cand = xasprintf("%s/../train/pbx-train", self);
	}
	free(self);
	slash = access(cand, X_OK) == 0 ? realpath(cand, NULL) : NULL;
	free(cand);
	return slash;
}

/* The value of KEY= in os-release text (quotes dropped), or "unknown". */
static void os_field(const char *text, const char *key, char *out, size_t size)
{
	size_t klen = strlen(key);
	const char *p = text;
	snprintf(out, size, "unknown");
	while (p && *p) {
		if (!strncmp(p, key, klen) && p[klen] == '=') {
			const char *v = p + klen + 1;
			size_t len = strcspn(v, "\n");
			if (len >= 2 && (v[0] == '"' || v[0] == '\'') && v[len - 1] == v[0]) {
				v++;
				len -= 2;
			}
			if (len && len < size)
				snprintf(out, size, "%.*s", (int)len, v);
			return;
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
}

char *pbx_host_target(void)
{
	struct pbx_buf os = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	struct utsname u;
	char id[64], ver[64];
	char *out;
	const char *text;
	if (pbx_read_file("/etc/os-release", &os, &err) < 0)
		pbx_buf_reset(&os);
	text = os.len ? os.buf : "";
	os_field(text, "ID", id, sizeof(id));
	os_field(text, "VERSION_ID", ver, sizeof(ver));
	pbx_buf_release(&os);
	if (uname(&u) < 0)
		snprintf(u.machine, sizeof(u.machine), "unknown");
	out = xasprintf("%s %s %s", id, ver, u.machine);
	return out;
}

/* Starts /bin/sh -c cmdline with its stdin, stdout and stderr on the
 * pipes' far ends (fds[0] read end of stdin, [1] and [2] write ends). */
static int sh_spawn(const char *cmdline, const int fds[3], pid_t *pid)
{
	const char *argv[] = { "sh", "-c", cmdline, NULL };
	posix_spawn_file_actions_t fa;
	int rc, k;
	if ((rc = posix_spawn_file_actions_init(&fa)) != 0)
		return rc;
	for (k = 0; rc == 0 && k < 3; k++)
		rc = posix_spawn_file_actions_adddup2(&fa, fds[k], k);
	if (rc == 0)
		rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	if (rc == 0)
		rc = posix_spawn(pid, "/bin/sh", &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

/* One read of stream `k`'s pipe into out; closes it (-1) at EOF. */
static void sh_drain(int *fd, int k, pbx_run_output_fn out, void *ctx)
{
	char chunk[8192];
	ssize_t n = read(*fd, chunk, sizeof(chunk));
	if (n > 0 && out)
		out(ctx, k, chunk, (size_t)n);
	else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		close(*fd);
		*fd = -1;
	}
}

/* One write of what is left of `in` to the stdin pipe; closes it (-1) when
 * all is sent or the command stopped reading (EPIPE: SIGPIPE is ignored). */
static void sh_feed(int *fd, const char *in, size_t inlen, size_t *sent)
{
	ssize_t n = write(*fd, in + *sent, inlen - *sent);
	if (n > 0)
		*sent += (size_t)n;
	if (*sent >= inlen || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		close(*fd);
		*fd = -1;
	}
}

/* pbx_run_sh's and pbx_run_sh_fd's body: the command's stdin is in_fd
 * (>= 0: the caller's, dup'ed onto it) or in[inlen] through a pipe. */
static int run_sh(const char *cmdline, int in_fd, const void *in, size_t inlen,
		  pbx_run_output_fn out, void *ctx, int *status, struct pbx_err *err)
{
	int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } }, theirs[3], ours[3], k, rc, wst;
	size_t sent = 0;
	pid_t pid;
	for (k = in_fd >= 0 ? 1 : 0; k < 3; k++)
		if (pipe2(p[k], O_CLOEXEC) < 0) {
			rc = errno;
			while (k-- > 0)
				if (p[k][0] >= 0)
					close(p[k][0]), close(p[k][1]);
			return pbx_err_set(err, "cannot create a pipe: %s", strerror(rc));
		}
	for (k = 0; k < 3; k++) { /* stdin: the child reads p[0][0]; outputs: it writes [1] */
		theirs[k] = k == 0 ? p[k][0] : p[k][1];
		ours[k] = k == 0 ? p[k][1] : p[k][0];
	}
	if (in_fd >= 0)
		theirs[0] = in_fd;
	rc = sh_spawn(cmdline, theirs, &pid);
	for (k = in_fd >= 0 ? 1 : 0; k < 3; k++)
		close(theirs[k]);
	if (rc != 0) {
		for (k = 0; k < 3; k++)
			if (ours[k] >= 0)
				close(ours[k]);
		return spawn_error("/bin/sh", rc, err);
	}
	for (k = 0; k < 3; k++)
		if (ours[k] >= 0)
			fcntl(ours[k], F_SETFL, O_NONBLOCK);
	if (ours[0] >= 0 && (!in || !inlen)) {
		close(ours[0]);
		ours[0] = -1;
	}
	while (ours[1] >= 0 || ours[2] >= 0) {
		struct pollfd pf[3];
		for (k = 0; k < 3; k++) {
			pf[k].fd = ours[k];
			pf[k].events = k == 0 ? POLLOUT : POLLIN;
			pf[k].revents = 0;
		}
		if (poll(pf, 3, -1) < 0 && errno != EINTR)
			break;
		if (ours[0] >= 0 && pf[0].revents)
			sh_feed(&ours[0], in, inlen, &sent);
		for (k = 1; k < 3; k++)
			if (ours[k] >= 0 && pf[k].revents)
				sh_drain(&ours[k], k, out, ctx);
	}
	for (k = 0; k < 3; k++)
		if (ours[k] >= 0)
			close(ours[k]);
	while (waitpid(pid, &wst, 0) < 0)
		if (errno != EINTR)
			return pbx_err_set(err, "waiting for sh: %s", strerror(errno));
	*status = WIFSIGNALED(wst) ? 128 + WTERMSIG(wst) : WEXITSTATUS(wst);
	return 0;
}

int pbx_run_sh(const char *cmdline, const void *in, size_t inlen, pbx_run_output_fn out, void *ctx,
	       int *status, struct pbx_err *err)
{
	return run_sh(cmdline, -1, in, inlen, out, ctx, status, err);
}

int pbx_run_sh_fd(const char *cmdline, int in_fd, pbx_run_output_fn out, void *ctx, int *status,
		  struct pbx_err *err)
{
	/* the command reads it as any program reads its stdin: blocking (the
	 * flag is the open file's, which the command shares) */
	int fl = fcntl(in_fd, F_GETFL);
	if (fl < 0 || ((fl & O_NONBLOCK) && fcntl(in_fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
		return pbx_err_set(err, "cannot read command input: %s", strerror(errno));
	return run_sh(cmdline, in_fd, NULL, 0, out, ctx, status, err);
}
