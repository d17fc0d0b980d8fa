/*
 * test_testkill.c - unit tests of src/util/testkill.c, the crash tests' kill
 * points: with PBX_TEST_KILL_AT=PHASE:N a forked child that passes the
 * points 0, 1, ... of PHASE dies of SIGKILL at N exactly (each point passed
 * before it is reported on a pipe), also when a count jumps past N; it
 * lives through every point when the variable is unset or empty, names
 * another phase, a prefix or extension of the phase, or has no ':N'.
 */
#include "common/tap.h"
#include "util/testkill.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* In a child with PBX_TEST_KILL_AT=env (unset when NULL), passes the kill
 * points phase:from..to, writing one byte to a pipe after each one passed,
 * then exits 0.  Returns the wait status; *passed is how many it passed. */
static int child(const char *env, const char *phase, uint64_t from, uint64_t to, int *passed)
{
	int fd[2], status = -1;
	pid_t pid;
	char c;
	ssize_t n;
	*passed = 0;
	if (pipe(fd) < 0)
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		uint64_t r;
		close(fd[0]);
		if (env)
			setenv("PBX_TEST_KILL_AT", env, 1);
		else
			unsetenv("PBX_TEST_KILL_AT");
		for (r = from;; r++) {
			pbx_test_kill_point(phase, r);
			if (write(fd[1], "p", 1) != 1)
				_exit(2);
			if (r == to)
				break;
		}
		_exit(0);
	}
	close(fd[1]);
	while ((n = read(fd[0], &c, 1)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		(*passed)++;
	}
	close(fd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

/* phase:from..to under env dies of SIGKILL after passing `want` points. */
static void killed(const char *env, const char *phase, uint64_t from, uint64_t to, int want)
{
	int passed, status = child(env, phase, from, to, &passed);
	CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && passed == want,
	       "PBX_TEST_KILL_AT=%s: points %s:%llu..%llu: SIGKILL after %d passed "
	       "(status 0x%x, %d passed)",
	       env, phase, (unsigned long long)from, (unsigned long long)to, want, status, passed);
}

/* phase:from..to under env (NULL: unset) passes every point. */
static void lives(const char *env, const char *phase, uint64_t from, uint64_t to)
{
	int passed, status = child(env, phase, from, to, &passed);
	int want = (int)(to - from + 1);
	CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0 && passed == want,
	       "PBX_TEST_KILL_AT=%s: points %s:%llu..%llu all passed (status 0x%x, %d of %d)",
	       env ? env : "(unset)", phase, (unsigned long long)from, (unsigned long long)to,
	       status, passed, want);
}

int main(void)
{
	/* killed exactly at N, never before */
	killed("start:1", "start", 0, 5, 1);
	killed("start:2", "start", 0, 5, 2);
	killed("stream:3", "stream", 0, 10, 3);
	killed("ingest:0", "ingest", 0, 3, 0);
	killed("install:1000", "install", 990, 1010, 10);
	killed("start:1", "start", 1, 1, 0);
	/* a count that jumps past N is killed at the first point past it */
	killed("stream:5", "stream", 7, 9, 0);
	/* the largest N */
	killed("power:18446744073709551615", "power", UINT64_MAX - 2, UINT64_MAX, 2);

	/* nothing: unset, empty, another phase, a near name, no ':N' */
	lives(NULL, "start", 0, 100);
	lives("", "start", 0, 100);
	lives("stream:1", "start", 0, 100);
	lives("start:1", "stream", 0, 100);
	lives("start:1", "star", 0, 100);
	lives("start:1", "starts", 0, 100);
	lives("sta:1", "start", 0, 100);
	lives("Start:1", "start", 0, 100);
	lives("start", "start", 0, 100);
	lives("start=1", "start", 0, 100);
	lives(" start:1", "start", 0, 100);
	lives("start:101", "start", 0, 100);
	/* no number, or not only a number: never (strtoull alone read 0) */
	lives("start:", "start", 0, 100);
	lives("start:abc", "start", 0, 100);
	lives("start:1x", "start", 0, 100);
	lives("start:-1", "start", 0, 100);
	return tap_done();
}
