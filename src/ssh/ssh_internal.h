/*
 * ssh_internal.h - what the files of src/ssh share and nobody else sees: the
 * connection struct, the session lock, waiting on the socket, and error
 * reporting from libssh2.
 *
 * Locking model.  Every session runs in non-blocking mode once it is
 * authenticated, and every libssh2 call on it is made with `lock` held, so
 * several threads (callers sharing a pooled connection, and the pump threads
 * of tunnels riding on a jump connection) can each drive their own channel.
 * A call that returns EAGAIN with a packet half written is repeated under
 * the lock until the packet is out (PBX_SSH_CALL), because libssh2 refuses
 * to start another packet before the pending one is sent.  Waiting for the
 * socket happens without the lock; as another thread may already have read
 * our data into libssh2's queues, a shared session polls with a short
 * timeout.
 *
 * Channel opens and channel requests (exec, subsystem) additionally hold
 * `req_lock` until their reply arrived: libssh2 1.10 waits for those
 * replies by packet type and gives up when it reads a reply of the same
 * type meant for another channel (_libssh2_packet_requirev), so two such
 * waits on one session must never overlap.
 */
#ifndef PBX_SSH_SSH_INTERNAL_H
#define PBX_SSH_SSH_INTERNAL_H

#include <libssh2.h>
#include <pthread.h>
#include <stdint.h>

#include "ssh/ssh.h"

/* Session channels (exec, sftp) open at once on one connection; OpenSSH
 * refuses more than MaxSessions (10 by default). */
#define PBX_SSH_MAX_CHANNELS       8
/* connect/handshake/auth timeout when the target names none */
#define PBX_SSH_DEFAULT_TIMEOUT_MS 20000

struct pbx_ssh_jump;

struct pbx_ssh {
	LIBSSH2_SESSION *sess;     /* owned; freed by pbx_ssh_close */
	int sock;                  /* TCP socket, or our end of a tunnel socketpair */
	pthread_mutex_t lock;      /* held around every libssh2 call on sess */
	pthread_mutex_t req_lock;  /* one channel open/request awaiting its reply at a time */
	pthread_cond_t slot_cv;    /* signalled when a channel slot frees */
	int channels;              /* session channels open now (<= MAX_CHANNELS) */
	int active;                /* threads working on the session now, tunnels included */
	int broken;                /* the transport failed; the pool replaces it */
	int established;           /* handshake done (a disconnect message makes sense) */
	int timeout_ms;            /* connect/handshake timeout, also used for teardown */
	char *label;               /* "user@host:port", owned */
	struct pbx_ssh_jump *jump; /* tunnel we ride on (via a jump host), or NULL */
	struct pbx_ssh *via;       /* that jump host's connection (not owned), or NULL */
	int as_root;               /* tree commands through `sudo -n` (pbx_ssh_set_as_root) */
	/* transport: openssh (openssh.c): no libssh2 session (sess NULL);
	 * each command is an `ssh` process through the user's control
	 * connection.  argv_base: ssh and its options up to the destination,
	 * NULL-terminated, owned. */
	char **argv_base;
	size_t nargv_base;
	char *dest; /* the destination ssh is given (a host or a Host alias), owned */
};

/* --------------------------------------------------------------- ssh.c */

int64_t pbx_ssh_now_ms(void);
void pbx_ssh_lock(struct pbx_ssh *s);
void pbx_ssh_unlock(struct pbx_ssh *s);
/* With the lock held: 1 when libssh2 is waiting to write (a packet is half
 * sent); then waits (up to a bound) for the socket to become writable. */
int pbx_ssh_out_blocked(struct pbx_ssh *s, int64_t *deadline);
/* Waits, without the lock, until the socket is ready in the directions
 * libssh2 needs, or `fd` (if >= 0) has `events`, or at most `ms`.  Returns
 * 0, or -1 when poll failed or the socket reports an error/hangup. */
int pbx_ssh_wait(struct pbx_ssh *s, int fd, short events, int ms);
/* Waits like pbx_ssh_wait, but fails with "WHAT on LABEL: timed out" once
 * `deadline` (pbx_ssh_now_ms() time) has passed, or "connection lost". */
int pbx_ssh_wait_until(struct pbx_ssh *s, int64_t deadline, const char *what, struct pbx_err *err);
/* Marks the start/end of an operation (shortens poll timeouts when the
 * session is shared). */
void pbx_ssh_enter(struct pbx_ssh *s);
void pbx_ssh_leave(struct pbx_ssh *s);
/* Brackets a channel open or channel request (see req_lock above). */
void pbx_ssh_req_begin(struct pbx_ssh *s);
void pbx_ssh_req_end(struct pbx_ssh *s);
/* Takes/returns one of the PBX_SSH_MAX_CHANNELS channel slots. */
void pbx_ssh_slot_take(struct pbx_ssh *s);
void pbx_ssh_slot_give(struct pbx_ssh *s);
/* Sets err to "WHAT on LABEL: <libssh2's last error>" and marks the
 * connection broken when the error is a transport one; returns -1. */
int pbx_ssh_fail(struct pbx_ssh *s, struct pbx_err *err, const char *what);
/* Same, for an error code already fetched (rc < 0). */
int pbx_ssh_fail_rc(struct pbx_ssh *s, struct pbx_err *err, const char *what, int rc);
/* Runs an int-returning channel operation (close, wait_closed, send_eof,
 * free) until it stops answering EAGAIN; bounded by the session timeout. */
int pbx_ssh_chan_op(struct pbx_ssh *s, LIBSSH2_CHANNEL *ch, int (*op)(LIBSSH2_CHANNEL *),
		    struct pbx_err *err, const char *what);
/* Closes and frees a channel (best effort, errors ignored). */
void pbx_ssh_chan_free(struct pbx_ssh *s, LIBSSH2_CHANNEL *ch);

/*
 * PBX_SSH_CALL(s, rc, expr): evaluates the libssh2 call `expr` with s->lock
 * held, repeating it while it left a packet half sent.  rc gets its result.
 * PBX_SSH_CALLP is the same for calls returning a pointer (NULL + EAGAIN).
 */
#define PBX_SSH_CALL(s, rc, expr)                                                             \
	do {                                                                                  \
		int64_t pbx_dl_ = 0;                                                          \
		pbx_ssh_lock(s);                                                              \
		do {                                                                          \
			(rc) = (expr);                                                        \
		} while ((rc) == LIBSSH2_ERROR_EAGAIN && pbx_ssh_out_blocked((s), &pbx_dl_)); \
		pbx_ssh_unlock(s);                                                            \
	} while (0)

#define PBX_SSH_CALLP(s, ptr, eagain, expr)                                                       \
	do {                                                                                      \
		int64_t pbx_dl_ = 0;                                                              \
		pbx_ssh_lock(s);                                                                  \
		for (;;) {                                                                        \
			(ptr) = (expr);                                                           \
			(eagain) = !(ptr) &&                                                      \
				   libssh2_session_last_errno((s)->sess) == LIBSSH2_ERROR_EAGAIN; \
			if (!(eagain) || !pbx_ssh_out_blocked((s), &pbx_dl_))                     \
				break;                                                            \
		}                                                                                 \
		pbx_ssh_unlock(s);                                                                \
	} while (0)

/* ------------------------------------------------------------ connect.c */

/* Releases everything a connection holds (used by close and by a failed
 * connect). */
void pbx_ssh_free(struct pbx_ssh *s);

/* ------------------------------------------------------------- exec.c */

/* Where an exec's output goes; returns -1 (err set) to abort the command. */
typedef int (*pbx_ssh_sink_fn)(void *ctx, int stream, const char *data, size_t len,
			       struct pbx_err *err);
/* Turns bytes read from an input fd into bytes to send (len 0 = end of
 * input); appends to `out`; -1 with err set aborts. */
typedef int (*pbx_ssh_filter_fn)(void *ctx, const char *data, size_t len, struct pbx_buf *out,
				 struct pbx_err *err);

struct pbx_ssh_io {
	const void *in; /* stdin from memory, or NULL */
	size_t inlen;
	int in_fd;                /* or stdin read from this fd (non-blocking), or -1 */
	pbx_ssh_filter_fn filter; /* applied to in_fd's bytes; NULL = as is */
	void *filter_ctx;
	pbx_ssh_sink_fn sink; /* output, or NULL to discard */
	void *sink_ctx;
};

/* The exec engine behind pbx_ssh_exec and the tree transfers. */
int pbx_ssh_exec_io(struct pbx_ssh *s, const char *cmdline, const struct pbx_ssh_io *io,
		    int *exit_status, struct pbx_err *err);
/* Runs argv remotely, collecting stdout (capped at 1 MiB) into `out`; a
 * non-zero exit is an error naming `what` and carrying the remote stderr. */
int pbx_ssh_run_ok(struct pbx_ssh *s, const char *const *argv, struct pbx_buf *out,
		   const char *what, struct pbx_err *err);

/* ---------------------------------------------------------- openssh.c */

/* Connects through OpenSSH (t->openssh): makes sure the control
 * connection for t runs (starts it when not, which may ask the user on the
 * terminal: a password, a second factor), and sets s->argv_base. */
int pbx_ssh_openssh_connect(const struct pbx_ssh_target *t, struct pbx_ssh **out,
			    struct pbx_err *err);
/* argv for running `cmdline` on s: argv_base, the destination, then
 * cmdline as one word; NULL-terminated; caller frees the array alone (the
 * strings are s's and the caller's). */
const char **pbx_ssh_openssh_argv(const struct pbx_ssh *s, const char *cmdline);

/* ------------------------------------------------------------- jump.c */

/* Opens a direct-tcpip channel to host:port on `via` and a pump thread that
 * joins it to a socketpair; *fd (owned by the caller, close it when done)
 * is the end to run the inner SSH session over. */
int pbx_ssh_jump_open(struct pbx_ssh *via, const char *host, int port, struct pbx_ssh_jump **out,
		      int *fd, struct pbx_err *err);
/* Stops the pump (call after closing the inner fd) and frees the tunnel. */
void pbx_ssh_jump_close(struct pbx_ssh_jump *j);

/* ------------------------------------------------------------- sftp.c */

/* Refuses an empty remote path or one with a ".." component. */
int pbx_ssh_check_remote_path(const char *path, struct pbx_err *err);

#endif
