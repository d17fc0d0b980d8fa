/*
 * proc.h - running a local helper (tar) from an argv, never through a
 * shell, with its stdin or stdout joined to a socket we hold.
 *
 * Sockets rather than pipes so writes can use MSG_NOSIGNAL: a helper that
 * dies early gives EPIPE, not SIGPIPE.  The helper's stderr goes to an
 * unlinked temporary file (so it can never block on a full pipe); its first
 * few KiB are kept for error messages.
 */
#ifndef PBX_SSH_PROC_H
#define PBX_SSH_PROC_H

#include <sys/types.h>

#include "util/buf.h"
#include "util/err.h"

struct pbx_proc {
	pid_t pid;
	int in_fd;              /* our end of its stdin, or -1 (then /dev/null) */
	int out_fd;             /* our end of its stdout (non-blocking), or -1 (/dev/null) */
	int err_fd;             /* its stderr file */
	struct pbx_buf errtext; /* its stderr, filled by pbx_proc_finish */
	int keep_err;           /* set before pbx_proc_finish: err_fd stays open
	                           (the caller reads all of it, then closes it) */
};

/* Starts argv[0] (looked up in PATH).  The fds in *p belong to *p until
 * pbx_proc_finish, which must be called once pbx_proc_start succeeded. */
int pbx_proc_start(const char *const *argv, int want_in, int want_out, struct pbx_proc *p,
		   struct pbx_err *err);
/* Writes all of data to its stdin (blocking). */
int pbx_proc_send(struct pbx_proc *p, const void *data, size_t len, struct pbx_err *err);
/* Closes our ends of its stdin/stdout, or kills it first when `kill_it`;
 * reaps it and sets *status to its exit code (128+N for signal N).  Fills
 * p->errtext; the caller releases it with pbx_buf_release. */
int pbx_proc_finish(struct pbx_proc *p, int kill_it, int *status, struct pbx_err *err);

#endif
