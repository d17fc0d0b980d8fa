/*
 * proc.c - local helper processes for the tree transfers (see proc.h).
 * posix_spawnp is used instead of fork so it is safe from threaded code.
 */
#define _GNU_SOURCE
#include "ssh/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROC_ERRTEXT_MAX 4096

extern char **environ;

/* An unlinked temporary file for the helper's stderr. */
static int proc_errfile(void)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int fd;
	snprintf(path, sizeof(path), "%s/pbx-stderr-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static void proc_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Joins child fd `target` to a new socketpair; *ours gets our end. */
static int proc_wire(posix_spawn_file_actions_t *fa, int target, int *ours, int *theirs)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	*ours = sv[0];
	*theirs = sv[1];
	return posix_spawn_file_actions_adddup2(fa, sv[1], target);
}

static int proc_actions(posix_spawn_file_actions_t *fa, int want_in, int want_out,
			struct pbx_proc *p, int theirs[2])
{
	if (want_in ? proc_wire(fa, 0, &p->in_fd, &theirs[0]) < 0
		    : posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0) != 0)
		return -1;
	if (want_out ? proc_wire(fa, 1, &p->out_fd, &theirs[1]) < 0
		     : posix_spawn_file_actions_addopen(fa, 1, "/dev/null", O_WRONLY, 0) != 0)
		return -1;
	return posix_spawn_file_actions_adddup2(fa, p->err_fd, 2) == 0 ? 0 : -1;
}

static int proc_spawn(const char *const *argv, posix_spawn_file_actions_t *fa, pid_t *pid)
{
	posix_spawnattr_t attr;
	sigset_t none, def;
	int rc;
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawnp(pid, argv[0], fa, &attr, (char *const *)argv, environ);
	posix_spawnattr_destroy(&attr);
	return rc;
}

int pbx_proc_start(const char *const *argv, int want_in, int want_out, struct pbx_proc *p,
		   struct pbx_err *err)
{
	posix_spawn_file_actions_t fa;
	int theirs[2] = { -1, -1 }, rc = -1, erc;
	memset(p, 0, sizeof(*p));
	p->in_fd = p->out_fd = -1;
	p->pid = -1;
	p->errtext = (struct pbx_buf)PBX_BUF_INIT;
	p->err_fd = proc_errfile();
	if (p->err_fd < 0)
		return pbx_err_set(err, "cannot create a temporary file: %s", strerror(errno));
	posix_spawn_file_actions_init(&fa);
	if (proc_actions(&fa, want_in, want_out, p, theirs) < 0)
		pbx_err_set(err, "cannot set up %s: %s", argv[0], strerror(errno));
	else if ((erc = proc_spawn(argv, &fa, &p->pid)) != 0)
		pbx_err_set(err, "cannot run %s: %s", argv[0], strerror(erc));
	else
		rc = 0;
	posix_spawn_file_actions_destroy(&fa);
	proc_close(&theirs[0]);
	proc_close(&theirs[1]);
	if (rc == 0 && p->out_fd >= 0)
		fcntl(p->out_fd, F_SETFL, fcntl(p->out_fd, F_GETFL) | O_NONBLOCK);
	if (rc < 0) {
		proc_close(&p->in_fd);
		proc_close(&p->out_fd);
		proc_close(&p->err_fd);
	}
	return rc;
}

int pbx_proc_send(struct pbx_proc *p, const void *data, size_t len, struct pbx_err *err)
{
	const char *d = data;
	while (len) {
		ssize_t n = send(p->in_fd, d, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return pbx_err_set(err, "local tar stopped reading: %s", strerror(errno));
		d += n;
		len -= (size_t)n;
	}
	return 0;
}

static void proc_read_errtext(struct pbx_proc *p)
{
	char chunk[PROC_ERRTEXT_MAX];
	ssize_t n = pread(p->err_fd, chunk, sizeof(chunk), 0);
	if (n > 0)
		pbx_buf_add(&p->errtext, chunk, (size_t)n);
	pbx_buf_rtrim(&p->errtext);
}

int pbx_proc_finish(struct pbx_proc *p, int kill_it, int *status, struct pbx_err *err)
{
	int ws = 0;
	pid_t r;
	if (kill_it && p->pid > 0)
		kill(p->pid, SIGKILL);
	proc_close(&p->in_fd);
	proc_close(&p->out_fd);
	do {
		r = waitpid(p->pid, &ws, 0);
	} while (r < 0 && errno == EINTR);
	proc_read_errtext(p);
	if (!p->keep_err)
		proc_close(&p->err_fd);
	if (r < 0)
		return pbx_err_set(err, "cannot wait for local tar: %s", strerror(errno));
	*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	return 0;
}
