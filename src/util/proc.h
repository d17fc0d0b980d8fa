/*
 * proc.h - running local programs from argv (never through a shell).
 */
#ifndef PBX_UTIL_PROC_H
#define PBX_UTIL_PROC_H

#include "util/buf.h"
#include "util/err.h"

#include <sys/types.h>

/*
 * Runs argv[0] (searched in PATH) with argv, stdin from /dev/null, and
 * waits for it.  Its stdout+stderr are captured into `out` when non-NULL
 * (otherwise discarded).  Returns the exit status (128+N when killed by
 * signal N), or -1 with err set when it could not be started.
 */
int pbx_run(const char *const *argv, struct pbx_buf *out, struct pbx_err *err);

/* Like pbx_run, but a non-zero status is an error naming the program and
 * quoting its output; returns 0 or -1. */
int pbx_run_ok(const char *const *argv, struct pbx_err *err);

/* Starts argv (searched in PATH) in a session of its own, stdin/stdout/
 * stderr on /dev/null, and does not wait: for daemons that stay in the
 * foreground (sshd -D), so pbx knows their pid and sees them die.  The
 * caller reaps it (waitpid) or leaves it to init when pbx exits. */
/* The path of this program (/proc/self/exe); caller frees; NULL when it
 * cannot be read. */
char *pbx_self_path(void);
/* The local build of pbx-train: $PBX_TRAIN_BIN when it is an absolute path
 * to an executable, else next to this program (installed) or in the build
 * tree (src/cli/pbx -> src/train/pbx-train); resolved with realpath.
 * Caller frees; NULL when there is none. */
char *pbx_find_pbx_train(void);
/* "ID VERSION_ID MACHINE" of this host (/etc/os-release, uname -m): what a
 * binary built here needs of a node.  Caller frees. */
char *pbx_host_target(void);

int pbx_spawn_detached(const char *const *argv, pid_t *pid, struct pbx_err *err);

/* Receives a command's output as it arrives: stream 1 (stdout) or 2
 * (stderr); `data` is valid during the call only. */
typedef void (*pbx_run_output_fn)(void *ctx, int stream, const char *data, size_t len);

/*
 * Runs `cmdline` with /bin/sh -c on this machine, as pbx_ssh_exec runs one
 * on a node: `in` (inlen bytes; may be NULL) on its stdin, then EOF (a
 * command that does not read it all is fine), its stdout and stderr to
 * `out` (may be NULL: discarded) as they come, in the calling thread.
 * *status gets its exit status (128+N when killed by signal N).  Returns 0,
 * or -1 with err set when it could not be run.  For pbx on a cluster's head
 * running the head's own commands (docs/head-identity.md).
 */
int pbx_run_sh(const char *cmdline, const void *in, size_t inlen, pbx_run_output_fn out, void *ctx,
	       int *status, struct pbx_err *err);

/* As pbx_run_sh, with the command's stdin the caller's `in_fd` (read by
 * the command until its end, as it comes: nothing is held here; in_fd
 * stays open and the caller's, made blocking if it was not).  The head's pbx staging a dataset streams
 * it to its own script so (src/jobs/data.c), as it does over SSH. */
int pbx_run_sh_fd(const char *cmdline, int in_fd, pbx_run_output_fn out, void *ctx, int *status,
		  struct pbx_err *err);

#endif
