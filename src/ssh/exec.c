/*
 * exec.c - running a remote command on an exec channel: stdin from memory
 * or from a file descriptor (optionally through a filter), stdout and
 * stderr read as they arrive so neither can block the other, and the exit
 * status (128+N when the command died of signal N).
 *
 * One loop drives everything: write what stdin we have, drain both output
 * streams, and when nothing moved wait on the socket (and on the input fd).
 * Output callbacks are called without the session lock held.
 *
 * What the remote user's shell prints before it runs the command (bash
 * sources ~/.bashrc for commands run by sshd, and some print a greeting)
 * would otherwise land in output pbx parses or unpacks: squeue lines, tar
 * streams.  So every command goes out as "echo MARK" and then the command,
 * and stdout is passed on from just after the first MARK line.  A server
 * that never sends the mark (a forced command in authorized_keys) has its
 * stdout passed on as it is, once EXEC_PREAMBLE_MAX bytes or the end of
 * the stream came without one.
 */
#define _GNU_SOURCE /* memmem */
#include "ssh/proc.h"
#include "ssh/ssh_internal.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define EXEC_CHUNK        32768
#define EXEC_CAPTURE_MAX  (1u << 20)
#define EXEC_MARK         "pbx-output-begins-7c1d"
#define EXEC_PREAMBLE_MAX 65536

struct exec_job {
	struct pbx_ssh *s;
	LIBSSH2_CHANNEL *ch;
	const struct pbx_ssh_io *io;
	struct pbx_buf pend; /* stdin bytes read from io->in_fd, not yet sent */
	const char *wp;      /* next stdin byte to send */
	size_t wlen;         /* bytes left at wp */
	int in_done;         /* no more stdin will come */
	int eof_sent;
	int remote_eof;
	struct pbx_buf preamble; /* stdout held until the mark (or its absence) is seen */
	int passing;             /* stdout now goes straight to the sink */
	int saw_mark;            /* the remote shell started the command */
};

/* ------------------------------------------------------------ stdin */

/* Refills the write window from io->in_fd; 0, or -1 with err set. */
static int exec_refill(struct exec_job *j, struct pbx_err *err)
{
	char chunk[EXEC_CHUNK];
	ssize_t n = read(j->io->in_fd, chunk, sizeof(chunk));
	pbx_buf_reset(&j->pend);
	if (n < 0)
		return (errno == EAGAIN || errno == EINTR)
			       ? 0
			       : pbx_err_set(err, "cannot read command input: %s", strerror(errno));
	if (n == 0)
		j->in_done = 1;
	if (j->io->filter) {
		if (j->io->filter(j->io->filter_ctx, chunk, (size_t)n, &j->pend, err) < 0)
			return -1;
	} else {
		pbx_buf_add(&j->pend, chunk, (size_t)n);
	}
	j->wp = j->pend.buf;
	j->wlen = j->pend.len;
	return 0;
}

/* The remote end stopped reading stdin (exited or closed it). */
static int exec_input_refused(int rc)
{
	return rc == LIBSSH2_ERROR_CHANNEL_EOF_SENT || rc == LIBSSH2_ERROR_CHANNEL_CLOSED ||
	       rc == LIBSSH2_ERROR_CHANNEL_FAILURE;
}

static int exec_write(struct exec_job *j, int *moved, struct pbx_err *err)
{
	ssize_t n;
	while (j->wlen) {
		PBX_SSH_CALL(j->s, n, libssh2_channel_write(j->ch, j->wp, j->wlen));
		if (n == LIBSSH2_ERROR_EAGAIN)
			return 0;
		if (n < 0 && (exec_input_refused((int)n) || j->remote_eof)) {
			j->wlen = 0;
			j->in_done = j->eof_sent = 1;
			return 0;
		}
		if (n < 0)
			return pbx_ssh_fail_rc(j->s, err, "cannot send command input", (int)n);
		j->wp += n;
		j->wlen -= (size_t)n;
		*moved = 1;
	}
	return 0;
}

static int exec_feed(struct exec_job *j, int *moved, struct pbx_err *err)
{
	int rc;
	if (!j->wlen && !j->in_done && j->io->in_fd >= 0 && exec_refill(j, err) < 0)
		return -1;
	if (exec_write(j, moved, err) < 0)
		return -1;
	if (j->wlen || !j->in_done || j->eof_sent)
		return 0;
	PBX_SSH_CALL(j->s, rc, libssh2_channel_send_eof(j->ch));
	if (rc == 0 || rc != LIBSSH2_ERROR_EAGAIN) {
		j->eof_sent = 1; /* an error here means the channel is going away */
		*moved = 1;
	}
	return 0;
}

/* ------------------------------------------------------------ output */

static int exec_sink(struct exec_job *j, int stream, const char *data, size_t len,
		     struct pbx_err *err)
{
	if (!len || !j->io->sink)
		return 0;
	return j->io->sink(j->io->sink_ctx, stream, data, len, err);
}

/* Stdout before the mark is the remote shell's, not the command's: held
 * until the mark line shows up (then dropped), or until it cannot (then
 * passed on after all, see the top of the file). */
static int exec_stdout(struct exec_job *j, const char *data, size_t len, struct pbx_err *err)
{
	static const char mark[] = EXEC_MARK "\n";
	const char *at;
	size_t skip;
	if (j->passing)
		return exec_sink(j, 1, data, len, err);
	pbx_buf_add(&j->preamble, data, len);
	at = memmem(j->preamble.buf, j->preamble.len, mark, sizeof(mark) - 1);
	if (!at && j->preamble.len < EXEC_PREAMBLE_MAX)
		return 0;
	skip = at ? (size_t)(at - j->preamble.buf) + sizeof(mark) - 1 : 0;
	j->passing = 1;
	j->saw_mark = at != NULL;
	return exec_sink(j, 1, j->preamble.buf + skip, j->preamble.len - skip, err);
}

/* At the end of the stream: stdout still held had no mark; pass it on. */
static int exec_stdout_end(struct exec_job *j, struct pbx_err *err)
{
	if (j->passing)
		return 0;
	j->passing = 1;
	return exec_sink(j, 1, j->preamble.buf, j->preamble.len, err);
}

static int exec_drain(struct exec_job *j, int stream, int *moved, struct pbx_err *err)
{
	char chunk[EXEC_CHUNK];
	ssize_t n;
	int id = stream == 2 ? SSH_EXTENDED_DATA_STDERR : 0, rounds;
	for (rounds = 0; rounds < 64; rounds++) {
		PBX_SSH_CALL(j->s, n, libssh2_channel_read_ex(j->ch, id, chunk, sizeof(chunk)));
		if (n == LIBSSH2_ERROR_EAGAIN || n == 0)
			return 0;
		if (n < 0)
			return pbx_ssh_fail_rc(j->s, err, "cannot read command output", (int)n);
		*moved = 1;
		if ((stream == 1 ? exec_stdout(j, chunk, (size_t)n, err)
				 : exec_sink(j, stream, chunk, (size_t)n, err)) < 0)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ the loop */

static int exec_wait(struct exec_job *j)
{
	int want_in = !j->wlen && !j->in_done && j->io->in_fd >= 0;
	return pbx_ssh_wait(j->s, want_in ? j->io->in_fd : -1, POLLIN, 1000);
}

static int exec_pump(struct exec_job *j, struct pbx_err *err)
{
	for (;;) {
		int moved = 0, eof;
		if (exec_feed(j, &moved, err) < 0 || exec_drain(j, 1, &moved, err) < 0 ||
		    exec_drain(j, 2, &moved, err) < 0)
			return -1;
		PBX_SSH_CALL(j->s, eof, libssh2_channel_eof(j->ch));
		if (eof < 0)
			return pbx_ssh_fail_rc(j->s, err, "lost command channel", eof);
		j->remote_eof = eof;
		if (eof && !moved)
			return 0;
		if (!moved && exec_wait(j) < 0)
			return pbx_err_set(err, "connection to %s lost", j->s->label);
	}
}

/* Maps an exit-signal name ("TERM") to 128+N. */
static int exec_signal_status(const char *name)
{
	static const struct {
		const char *name;
		int num;
	} sigs[] = {
		{ "HUP", 1 },   { "INT", 2 },   { "QUIT", 3 },  { "ILL", 4 },   { "TRAP", 5 },
		{ "ABRT", 6 },  { "BUS", 7 },   { "FPE", 8 },   { "KILL", 9 },  { "USR1", 10 },
		{ "SEGV", 11 }, { "USR2", 12 }, { "PIPE", 13 }, { "ALRM", 14 }, { "TERM", 15 },
		{ "XCPU", 24 }, { "XFSZ", 25 },
	};
	size_t i;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcmp(name, sigs[i].name))
			return 128 + sigs[i].num;
	return 255;
}

static int exec_status(struct exec_job *j, int *exit_status, struct pbx_err *err)
{
	char *sig = NULL;
	size_t siglen = 0;
	int rc = pbx_ssh_chan_op(j->s, j->ch, libssh2_channel_close, err, "cannot close channel");
	if (rc == 0)
		rc = pbx_ssh_chan_op(j->s, j->ch, libssh2_channel_wait_closed, err,
				     "cannot close channel");
	if (rc < 0)
		return -1;
	pbx_ssh_lock(j->s);
	*exit_status = libssh2_channel_get_exit_status(j->ch);
	libssh2_channel_get_exit_signal(j->ch, &sig, &siglen, NULL, NULL, NULL, NULL);
	if (sig) {
		*exit_status = exec_signal_status(sig);
		libssh2_free(j->s->sess, sig);
	}
	pbx_ssh_unlock(j->s);
	return 0;
}

/* Opens the channel and starts the command (under req_lock, see ssh_internal.h). */
static int exec_start_locked(struct exec_job *j, const char *marked, struct pbx_err *err)
{
	int64_t deadline = pbx_ssh_now_ms() + j->s->timeout_ms;
	int eagain, rc;
	for (;;) {
		PBX_SSH_CALLP(j->s, j->ch, eagain, libssh2_channel_open_session(j->s->sess));
		if (j->ch || !eagain)
			break;
		if (pbx_ssh_wait_until(j->s, deadline, "cannot open a channel", err) < 0)
			return -1;
	}
	if (!j->ch)
		return pbx_ssh_fail(j->s, err, "cannot open a channel");
	for (;;) {
		PBX_SSH_CALL(j->s, rc, libssh2_channel_exec(j->ch, marked));
		if (rc != LIBSSH2_ERROR_EAGAIN)
			break;
		if (pbx_ssh_wait_until(j->s, deadline, "cannot start command", err) < 0)
			return -1;
	}
	return rc < 0 ? pbx_ssh_fail_rc(j->s, err, "cannot start command", rc) : 0;
}

/* Commands started by this process (remote round trips), for PBX_STATS. */
static unsigned long exec_started;

unsigned long pbx_ssh_exec_count(void)
{
	return __atomic_load_n(&exec_started, __ATOMIC_RELAXED);
}

static int exec_start(struct exec_job *j, const char *cmdline, struct pbx_err *err)
{
	char *marked = xasprintf("echo " EXEC_MARK "\n%s", cmdline);
	int rc;
	__atomic_add_fetch(&exec_started, 1, __ATOMIC_RELAXED);
	pbx_ssh_req_begin(j->s);
	rc = exec_start_locked(j, marked, err);
	pbx_ssh_req_end(j->s);
	free(marked);
	return rc;
}

/* ------------------------------------------------------------ OpenSSH */

/* The same engine over an `ssh` process (transport: openssh, openssh.c):
 * stdin and stdout are sockets to it, its stderr a file passed on at the
 * end; ssh exits with the command's status, or 255 for its own failure,
 * which is told from the command's by the mark never having come. */
static int exec_proc_write(struct exec_job *j, struct pbx_proc *p, int *moved)
{
	while (j->wlen) {
		ssize_t n = send(p->in_fd, j->wp, j->wlen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0) { /* the command stopped reading (EPIPE): not an error */
			j->wlen = 0;
			j->in_done = 1;
			break;
		}
		j->wp += n;
		j->wlen -= (size_t)n;
		*moved = 1;
	}
	if (!j->wlen && j->in_done && !j->eof_sent) {
		shutdown(p->in_fd, SHUT_WR);
		j->eof_sent = 1;
		*moved = 1;
	}
	return 0;
}

/* Until ssh's stdout ends. */
static int exec_proc_pump(struct exec_job *j, struct pbx_proc *p, struct pbx_err *err)
{
	char chunk[EXEC_CHUNK];
	for (;;) {
		struct pollfd pf[2];
		nfds_t n = 0;
		int moved = 0;
		ssize_t r;
		if (!j->wlen && !j->in_done && j->io->in_fd >= 0 && exec_refill(j, err) < 0)
			return -1;
		exec_proc_write(j, p, &moved);
		while ((r = read(p->out_fd, chunk, sizeof(chunk))) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (r < 0)
				return pbx_err_set(err, "cannot read from ssh: %s",
						   strerror(errno));
			moved = 1;
			if (exec_stdout(j, chunk, (size_t)r, err) < 0)
				return -1;
		}
		if (r == 0)
			return 0;
		if (moved)
			continue;
		pf[n].fd = p->out_fd;
		pf[n++].events = POLLIN;
		if (j->wlen) {
			pf[n].fd = p->in_fd;
			pf[n++].events = POLLOUT;
		} else if (!j->in_done && j->io->in_fd >= 0) {
			pf[n].fd = j->io->in_fd;
			pf[n++].events = POLLIN;
		}
		poll(pf, n, 1000);
	}
}

/* ssh's stderr (all of it) to the sink as the command's; its last line
 * into last[] for a message. */
static int exec_proc_stderr(struct exec_job *j, struct pbx_proc *p, char *last, size_t size,
			    struct pbx_err *err)
{
	char chunk[EXEC_CHUNK];
	off_t off = 0;
	ssize_t n;
	int rc = 0;
	last[0] = '\0';
	while (rc == 0 && (n = pread(p->err_fd, chunk, sizeof(chunk), off)) > 0) {
		rc = exec_sink(j, 2, chunk, (size_t)n, err);
		off += n;
	}
	pbx_buf_rtrim(&p->errtext);
	if (p->errtext.len) {
		const char *nl = strrchr(p->errtext.buf, '\n');
		snprintf(last, size, "%s", nl ? nl + 1 : p->errtext.buf);
	}
	return rc;
}

static int exec_openssh(struct exec_job *j, const char *marked, int *exit_status,
			struct pbx_err *err)
{
	const char **argv = pbx_ssh_openssh_argv(j->s, marked);
	struct pbx_proc p;
	char last[256];
	int rc = pbx_proc_start(argv, 1, 1, &p, err), st = -1;
	free(argv);
	if (rc < 0)
		return -1;
	p.keep_err = 1;
	rc = exec_proc_pump(j, &p, err);
	if (rc == 0)
		rc = exec_stdout_end(j, err);
	if (pbx_proc_finish(&p, rc < 0, &st, err) < 0 && rc == 0)
		rc = -1;
	if (exec_proc_stderr(j, &p, last, sizeof(last), err) < 0 && rc == 0)
		rc = -1;
	close(p.err_fd);
	pbx_buf_release(&p.errtext);
	if (rc == 0 && st == 255 && !j->saw_mark)
		rc = pbx_err_set(err, "ssh to %s failed: %s", j->s->label,
				 last[0] ? last : "exit status 255");
	if (rc == 0)
		*exit_status = st;
	return rc;
}

int pbx_ssh_exec_io(struct pbx_ssh *s, const char *cmdline, const struct pbx_ssh_io *io,
		    int *exit_status, struct pbx_err *err)
{
	struct exec_job j;
	int rc;
	memset(&j, 0, sizeof(j));
	j.s = s;
	j.io = io;
	j.pend = (struct pbx_buf)PBX_BUF_INIT;
	j.preamble = (struct pbx_buf)PBX_BUF_INIT;
	j.wp = io->in;
	j.wlen = io->in ? io->inlen : 0;
	j.in_done = io->in_fd < 0;
	*exit_status = -1;
	if (s->argv_base) {
		char *marked = xasprintf("echo " EXEC_MARK "\n%s", cmdline);
		__atomic_add_fetch(&exec_started, 1, __ATOMIC_RELAXED);
		pbx_ssh_slot_take(s); /* the server's MaxSessions counts the master's too */
		rc = exec_openssh(&j, marked, exit_status, err);
		pbx_ssh_slot_give(s);
		free(marked);
		pbx_buf_release(&j.pend);
		pbx_buf_release(&j.preamble);
		return rc;
	}
	pbx_ssh_enter(s);
	pbx_ssh_slot_take(s);
	rc = exec_start(&j, cmdline, err);
	if (rc == 0)
		rc = exec_pump(&j, err);
	if (rc == 0)
		rc = exec_stdout_end(&j, err);
	if (rc == 0)
		rc = exec_status(&j, exit_status, err);
	if (j.ch)
		pbx_ssh_chan_free(s, j.ch);
	pbx_ssh_slot_give(s);
	pbx_ssh_leave(s);
	pbx_buf_release(&j.pend);
	pbx_buf_release(&j.preamble);
	return rc;
}

/* ------------------------------------------------------------ public API */

struct exec_user_sink {
	pbx_ssh_output_fn fn;
	void *ctx;
};

static int exec_user_sink(void *ctx, int stream, const char *data, size_t len, struct pbx_err *err)
{
	struct exec_user_sink *u = ctx;
	(void)err;
	u->fn(u->ctx, stream, data, len);
	return 0;
}

int pbx_ssh_exec(struct pbx_ssh *s, const char *cmdline, const void *in, size_t inlen,
		 pbx_ssh_output_fn out, void *ctx, int *exit_status, struct pbx_err *err)
{
	struct exec_user_sink u = { out, ctx };
	struct pbx_ssh_io io = { in, inlen, -1, NULL, NULL, out ? exec_user_sink : NULL, &u };
	return pbx_ssh_exec_io(s, cmdline, &io, exit_status, err);
}

int pbx_ssh_exec_fd(struct pbx_ssh *s, const char *cmdline, int in_fd, pbx_ssh_output_fn out,
		    void *ctx, int *exit_status, struct pbx_err *err)
{
	struct exec_user_sink u = { out, ctx };
	struct pbx_ssh_io io = { NULL, 0, in_fd, NULL, NULL, out ? exec_user_sink : NULL, &u };
	int fl = fcntl(in_fd, F_GETFL);
	if (fl < 0 || fcntl(in_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return pbx_err_set(err, "cannot read command input: %s", strerror(errno));
	return pbx_ssh_exec_io(s, cmdline, &io, exit_status, err);
}

int pbx_ssh_exec_argv(struct pbx_ssh *s, const char *const *argv, const void *in, size_t inlen,
		      pbx_ssh_output_fn out, void *ctx, int *exit_status, struct pbx_err *err)
{
	struct pbx_buf cmd = PBX_BUF_INIT;
	int rc;
	if (!argv || !argv[0])
		return pbx_err_setc(err, PBX_EXIT_USAGE, "empty remote command");
	pbx_shell_join(&cmd, argv);
	rc = pbx_ssh_exec(s, cmd.buf, in, inlen, out, ctx, exit_status, err);
	pbx_buf_release(&cmd);
	return rc;
}

struct exec_capture {
	struct pbx_buf *out, *errout;
};

static void exec_capture_fn(void *ctx, int stream, const char *data, size_t len)
{
	struct exec_capture *c = ctx;
	struct pbx_buf *b = stream == 2 ? c->errout : c->out;
	if (b)
		pbx_buf_add(b, data, len);
}

int pbx_ssh_capture(struct pbx_ssh *s, const char *cmdline, struct pbx_buf *out,
		    struct pbx_buf *errout, int *exit_status, struct pbx_err *err)
{
	struct exec_capture c = { out, errout };
	return pbx_ssh_exec(s, cmdline, NULL, 0, exec_capture_fn, &c, exit_status, err);
}

/* Collects output for pbx_ssh_run_ok, each stream capped at
 * EXEC_CAPTURE_MAX (the rest is dropped). */
static int exec_capped_sink(void *ctx, int stream, const char *data, size_t len,
			    struct pbx_err *err)
{
	struct exec_capture *c = ctx;
	struct pbx_buf *b = stream == 2 ? c->errout : c->out;
	(void)err;
	if (b && b->len < EXEC_CAPTURE_MAX)
		pbx_buf_add(b, data,
			    len < EXEC_CAPTURE_MAX - b->len ? len : EXEC_CAPTURE_MAX - b->len);
	return 0;
}

int pbx_ssh_run_ok(struct pbx_ssh *s, const char *const *argv, struct pbx_buf *out,
		   const char *what, struct pbx_err *err)
{
	struct pbx_buf cmd = PBX_BUF_INIT, eb = PBX_BUF_INIT;
	struct exec_capture c = { out, &eb };
	struct pbx_ssh_io io = { NULL, 0, -1, NULL, NULL, exec_capped_sink, &c };
	int status = -1, rc;
	pbx_shell_join(&cmd, argv);
	rc = pbx_ssh_exec_io(s, cmd.buf, &io, &status, err);
	if (rc == 0 && status != 0) {
		pbx_buf_rtrim(&eb);
		rc = pbx_err_set(err, "%s on %s failed (exit %d)%s%.512s", what, s->label, status,
				 eb.len ? ": " : "", eb.buf);
	}
	pbx_buf_release(&cmd);
	pbx_buf_release(&eb);
	return rc;
}
