/*
 * proc.c - fork/exec of argv with captured output (see proc.h).  Every
 * descriptor above 2 is closed in the child so nothing of pbx (sockets,
 * the store) leaks into programs it starts, including daemons.
 */
#define _GNU_SOURCE
#include "util/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void pbx_run_child(const char *const *argv, int outfd)
{
	int devnull = open("/dev/null", O_RDWR);
	dup2(devnull, 0);
	dup2(outfd >= 0 ? outfd : devnull, 1);
	dup2(outfd >= 0 ? outfd : devnull, 2);
	closefrom(3);
	execvp(argv[0], (char *const *)argv);
	_exit(127);
}

int pbx_run(const char *const *argv, struct pbx_buf *out, struct pbx_err *err)
{
	int pipefd[2] = { -1, -1 }, status;
	pid_t pid;
	if (out && pipe2(pipefd, O_CLOEXEC) < 0)
		return pbx_err_set(err, "cannot create pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		if (out) {
			close(pipefd[0]);
			close(pipefd[1]);
		}
		return pbx_err_set(err, "cannot run %s: %s", argv[0], strerror(errno));
	}
	if (pid == 0)
		pbx_run_child(argv, out ? pipefd[1] : -1);
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
	if (WEXITSTATUS(status) == 127)
		return pbx_err_set(err, "cannot run %s: not found or not executable", argv[0]);
	return WEXITSTATUS(status);
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
