/*
 * test_run_sh.c - unit tests of pbx_run_sh (src/util/proc.c), the local
 * twin of pbx_ssh_exec that pbx on a cluster's head uses for the head's own
 * commands: stdin arrives whole (more than a pipe holds, while the command
 * writes more than a pipe holds on both outputs: no deadlock), stdout and
 * stderr arrive apart and whole, the exit status and a signal's are
 * reported, a command that reads none of its stdin is not an error, and
 * shell metacharacters are the command's own (the caller quotes).  And
 * pbx_run_sh_fd, stdin from the caller's descriptor: the command reads it
 * as it comes (it answers the first line before the rest is written: the
 * head's pbx streams a dataset so, never holding it whole), to its end.
 */
#include "common/tap.h"
#include "util/proc.h"
#include "util/xalloc.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct got {
	struct pbx_buf out, err;
};

static void collect(void *ctx, int stream, const char *data, size_t len)
{
	struct got *g = ctx;
	pbx_buf_add(stream == 1 ? &g->out : &g->err, data, len);
}

static int run(const char *cmd, const char *in, size_t inlen, struct got *g, int *status)
{
	struct pbx_err err = PBX_ERR_INIT;
	pbx_buf_init(&g->out, 0);
	pbx_buf_init(&g->err, 0);
	*status = -1;
	return pbx_run_sh(cmd, in, inlen, collect, g, status, &err);
}

static void release(struct got *g)
{
	pbx_buf_release(&g->out);
	pbx_buf_release(&g->err);
}

/* The writer of pbx_run_sh_fd's stdin: a first line, then (once the
 * command says it read it, by making `seen`, or after 10 s) 1 MiB more. */
struct feeder {
	int fd;
	const char *seen;
	int waited_ok; /* the command answered before the rest was written */
};

static void *feed(void *arg)
{
	struct feeder *f = arg;
	static char chunk[65536];
	struct timespec pause = { 0, 10 * 1000 * 1000 };
	struct stat st;
	int i;
	if (write(f->fd, "first\n", 6) != 6)
		return NULL;
	for (i = 0; i < 1000 && stat(f->seen, &st) < 0; i++)
		nanosleep(&pause, NULL);
	f->waited_ok = i < 1000;
	memset(chunk, 'x', sizeof(chunk));
	for (i = 0; i < 16; i++)
		if (write(f->fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
			break;
	close(f->fd);
	return NULL;
}

static void test_fd(void)
{
	char dir[] = "/tmp/pbx-run-sh.XXXXXX", *seen, *cmd;
	struct feeder f = { -1, NULL, 0 };
	struct pbx_err err = PBX_ERR_INIT;
	struct got g;
	pthread_t th;
	int sv[2], status = -1;
	if (!ok(mkdtemp(dir) && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "a socket pair"))
		return;
	seen = xasprintf("%s/seen", dir);
	cmd = xasprintf("read first && touch '%s' && echo \"$first\" && wc -c", seen);
	f.fd = sv[1];
	f.seen = seen;
	/* as pbx_ssh_exec_fd leaves a descriptor: non-blocking */
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	pthread_create(&th, NULL, feed, &f);
	pbx_buf_init(&g.out, 0);
	pbx_buf_init(&g.err, 0);
	ok(pbx_run_sh_fd(cmd, sv[0], collect, &g, &status, &err) == 0 && status == 0,
	   "pbx_run_sh_fd runs (%s)", err.msg);
	ok(fcntl(sv[0], F_GETFD) >= 0, "the caller's descriptor stays open");
	close(sv[0]); /* a command that stopped reading: the feeder's writes fail */
	pthread_join(th, NULL);
	ok(f.waited_ok, "the command read its first line before the rest was written");
	pbx_buf_addc(&g.out, '\0');
	ok(!strcmp(g.out.buf, "first\n1048576\n"), "and the rest to its end (%s)", g.out.buf);
	release(&g);
	unlink(seen);
	rmdir(dir);
	free(seen);
	free(cmd);
}

int main(void)
{
	struct got g;
	int status;
	size_t big = 1 << 20, i;
	char *in = xmalloc(big);
	signal(SIGPIPE, SIG_IGN); /* as pbx's main does */

	ok(run("echo out; echo err >&2; exit 3", NULL, 0, &g, &status) == 0, "runs");
	ok(status == 3, "exit status 3");
	ok(g.out.len == 4 && !memcmp(g.out.buf, "out\n", 4), "stdout apart");
	ok(g.err.len == 4 && !memcmp(g.err.buf, "err\n", 4), "stderr apart");
	release(&g);

	/* 1 MiB in and back on stdout as it comes (cat), then 1 MiB on stderr */
	for (i = 0; i < big; i++)
		in[i] = (char)('a' + i % 26);
	ok(run("cat; head -c 1048576 /dev/zero >&2", in, big, &g, &status) == 0 && status == 0,
	   "a command that reads and writes more than a pipe holds ends");
	ok(g.out.len == big && !memcmp(g.out.buf, in, big), "stdin arrives whole (%zu bytes back)",
	   g.out.len);
	ok(g.err.len == big, "stderr whole (%zu bytes)", g.err.len);
	release(&g);

	ok(run("exit 0", in, big, &g, &status) == 0 && status == 0,
	   "a command that reads none of its stdin is not an error");
	release(&g);

	ok(run("kill -TERM $$", NULL, 0, &g, &status) == 0 && status == 128 + 15,
	   "killed by SIGTERM: 143");
	release(&g);

	ok(run("printf '%s' \"$0\"; x='a;b'; printf '%s' \"$x\" >&2", NULL, 0, &g, &status) == 0 &&
		   g.out.len == 2 && !memcmp(g.out.buf, "sh", 2) && g.err.len == 3 &&
		   !memcmp(g.err.buf, "a;b", 3),
	   "run by sh -c, the command line its own");
	release(&g);
	free(in);
	test_fd();
	return tap_done();
}
