/*
 * ssh.h - the SSH layer (libssh2): connect with public-key auth (key file or
 * ssh-agent), pinned host keys, exec with streamed output and exit status,
 * file and tree transfer with integrity checks, connection reuse, bounded
 * parallel fan-out, and reaching private nodes through a jump host
 * (direct-tcpip).
 *
 * Thread model: a struct pbx_ssh may be used by several threads at once
 * (the pool hands one connection to many callers): every libssh2 call on it
 * is serialized by a mutex inside the connection, and each exec or transfer
 * runs on its own channel.  At most 8 exec/SFTP channels are open at once
 * per connection (OpenSSH allows 10 by default); further calls wait for a
 * free slot.  Closing a connection must not race with its other users.
 * Library code: never prints; errors go to struct pbx_err.
 *
 * Implementation map: ssh.c (locking, waiting, errors), connect.c, exec.c,
 * sftp.c, tree.c + tarcheck.c + untar.c + proc.c (tar streams), pool.c, fanout.c,
 * jump.c (direct-tcpip pump), hostkeys.c (store-backed policy).
 */
#ifndef PBX_SSH_SSH_H
#define PBX_SSH_SSH_H

#include <stddef.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fanout.h"

struct pbx_store;
struct pbx_ssh;

/*
 * Host key policy.  `check` is called with the server's host key after the
 * handshake; it returns 0 to accept or -1 (with err set, code
 * PBX_EXIT_SECURITY) to refuse.  `hostport` is "host:port" (or the
 * target's name when set).  key_type is e.g. "ssh-ed25519"; key_b64 is the
 * base64 key blob as in known_hosts.
 */
struct pbx_hostkeys {
	int (*check)(void *ctx, const char *hostport, const char *key_type, const char *key_b64,
		     struct pbx_err *err);
	void *ctx;
};

/* Pins keys into the store on first contact; refuses a changed key with a
 * message naming `pbx cluster forget-host HOSTPORT` to reset it.  The store
 * must outlive every connection made with the policy. */
void pbx_hostkeys_from_store(struct pbx_hostkeys *hk, struct pbx_store *store);

struct pbx_ssh_target {
	const char *host;     /* address to connect to (or to reach via `via`) */
	int port;             /* 22 if 0 */
	const char *user;     /* login user */
	const char *key_path; /* private key file (public key at key_path.pub
	                             or derived); NULL = ssh-agent */
	const char *name;     /* host-key pin name; NULL = "host:port" */
	struct pbx_ssh *via;  /* jump host connection for direct-tcpip, or NULL;
	                             must outlive this connection */
	int timeout_ms;       /* connect/handshake/auth timeout; 0 = 20000 */
	int openssh;          /* connect with the user's OpenSSH client (its
	                         ~/.ssh/config, agent, ProxyJump, known_hosts,
	                         keyboard-interactive prompts) through one
	                         control connection that later verbs reuse
	                         (openssh.c); host may be a Host alias, user,
	                         port and key_path may be NULL/0 (ssh_config's) */
};

/*
 * Connects and authenticates.  On success *out is owned by the caller and
 * released with pbx_ssh_close().  A refused key gives code PBX_EXIT_FAIL
 * with "permission denied (publickey) for USER@HOST:PORT"; a changed host
 * key gives PBX_EXIT_SECURITY.  `hk` is required (no policy = refused with
 * PBX_EXIT_USAGE); it is only used during the call.  t->timeout_ms bounds
 * the TCP connect, the handshake, authentication, and later channel opens.
 */
int pbx_ssh_connect(const struct pbx_ssh_target *t, const struct pbx_hostkeys *hk,
		    struct pbx_ssh **out, struct pbx_err *err);
/* Disconnects and frees; NULL is fine.  Close connections tunnelled
 * through `s` first. */
void pbx_ssh_close(struct pbx_ssh *s);
/* For `pbx cluster ssh` on a connection through OpenSSH (t->openssh): the
 * argv of an interactive ssh on its control connection, running `command`
 * (NULL: a login shell); NULL for any other connection.  The caller frees
 * the array alone. */
const char **pbx_ssh_interactive_argv(const struct pbx_ssh *s, const char *command);
/* Whether s is such a connection (its host keys are OpenSSH's, not pbx's
 * pins). */
int pbx_ssh_is_openssh(const struct pbx_ssh *s);
/* Closes the control connection that OpenSSH keeps for target t (the
 * next verb logs in again), without prompting: 1 when one was open and is
 * closed, 0 when none was open, -1 with err. */
int pbx_ssh_openssh_disconnect(const struct pbx_ssh_target *t, struct pbx_err *err);
/* "user@host:port" of a connection, for messages; owned by the connection. */
const char *pbx_ssh_label(const struct pbx_ssh *s);

/* Receives output as it arrives; stream is 1 (stdout) or 2 (stderr). */
typedef void (*pbx_ssh_output_fn)(void *ctx, int stream, const char *data, size_t len);

/*
 * Runs `cmdline` through the remote user's shell; what that shell prints
 * on stdout before the command starts (a chatty ~/.bashrc) is dropped (see
 * exec.c).  `in`/`inlen` (may be NULL/0) is sent as stdin, then EOF.
 * Output streams to `out` (may be NULL to discard); the callback runs in
 * the calling thread, without locks held, and `data` is only valid during
 * the call.  *exit_status gets the remote exit code, or 128+N when killed
 * by signal N.  Returns -1 only when the command could not be run or the
 * connection broke (a non-zero exit status is not an error).  A command
 * that exits without reading all of stdin is not an error either.
 */
int pbx_ssh_exec(struct pbx_ssh *s, const char *cmdline, const void *in, size_t inlen,
		 pbx_ssh_output_fn out, void *ctx, int *exit_status, struct pbx_err *err);
/* Same, with stdin read from `in_fd` (which the caller keeps and closes)
 * until its end, as the bytes arrive: a producer in another thread can
 * stream a tar to the command while it is still making it.  in_fd is set
 * non-blocking. */
int pbx_ssh_exec_fd(struct pbx_ssh *s, const char *cmdline, int in_fd, pbx_ssh_output_fn out,
		    void *ctx, int *exit_status, struct pbx_err *err);
/* Same, with the command line built from argv (NULL-terminated), each word
 * shell-quoted. */
int pbx_ssh_exec_argv(struct pbx_ssh *s, const char *const *argv, const void *in, size_t inlen,
		      pbx_ssh_output_fn out, void *ctx, int *exit_status, struct pbx_err *err);
/* Runs `cmdline` and appends stdout/stderr to the buffers (either may be
 * NULL); the buffers stay the caller's. */
int pbx_ssh_capture(struct pbx_ssh *s, const char *cmdline, struct pbx_buf *out,
		    struct pbx_buf *errout, int *exit_status, struct pbx_err *err);

/*
 * File transfer over SFTP.  Uploads write REMOTE.pbx-tmp.RANDOM (created
 * exclusively) then rename, and downloads a mkostemp file beside LOCAL then
 * rename, so a file appears whole or not at all, and never through a link
 * planted at a temporary name.  Both verify the SHA-256 of the two ends (remote `sha256sum`) and
 * fail on a mismatch (the temporary file is removed).  Remote paths
 * containing a ".." component are refused with PBX_EXIT_SECURITY.  `mode`
 * is applied to the uploaded file (0 = 0644); a download keeps the remote
 * permission bits.  Relative remote paths are relative to the remote home.
 */
int pbx_ssh_put_file(struct pbx_ssh *s, const char *local, const char *remote, int mode,
		     struct pbx_err *err);
int pbx_ssh_put_data(struct pbx_ssh *s, const void *data, size_t len, const char *remote, int mode,
		     struct pbx_err *err);
int pbx_ssh_get_file(struct pbx_ssh *s, const char *remote, const char *local, struct pbx_err *err);
/*
 * Whole trees as a tar stream (one exec each way): put_tree copies the
 * contents of local_dir into remote_dir (created); get_tree the reverse.
 * The stream is checked member by member (see tarcheck.h: absolute
 * names, "..", links leaving the tree, files written through a symlink,
 * devices, and setuid bits are refused or cleared), with
 * PBX_EXIT_SECURITY: put_tree between the local and the remote tar,
 * get_tree between the remote tar and pbx's own extractor (untar.h).  A
 * refused or cut get_tree may leave the members that came whole before it
 * in local_dir, never a partial file and never anything outside it.  Local
 * tar runs from an argv (never a shell); remote_dir is shell-quoted.
 */
int pbx_ssh_put_tree(struct pbx_ssh *s, const char *local_dir, const char *remote_dir,
		     struct pbx_err *err);
int pbx_ssh_get_tree(struct pbx_ssh *s, const char *remote_dir, const char *local_dir,
		     struct pbx_err *err);
/* The tar commands of put_tree/get_tree/get_files run as root through
 * `sudo -n sh -c` from now on (a non-root login on a cloud image reading
 * files the cluster's root-run jobs wrote).  Other execs are unchanged. */
void pbx_ssh_set_as_root(struct pbx_ssh *s, int on);
/* Told how many bytes of a transfer just arrived (for progress displays). */
typedef void (*pbx_ssh_bytes_fn)(void *ctx, size_t bytes);
struct pbx_tar_member;
/* What a caller of pbx_ssh_get_files adds to a transfer (each may be NULL). */
struct pbx_ssh_get_hooks {
	pbx_ssh_bytes_fn progress; /* told of every chunk received */
	/* Asked about every member the checker accepted, before anything of it
	 * is written: -1 (err set) refuses it and ends the transfer. */
	int (*member)(void *ctx, const struct pbx_tar_member *m, struct pbx_err *err);
	/* Told of the member the checker refused, and why (tarcheck.h). */
	void (*refused)(void *ctx, const char *name, const char *why);
	void *ctx;
};
/*
 * Like get_tree, but only the members named in `list` (NUL-separated paths
 * relative to remote_dir, each directory listed before what it holds; tar
 * does not recurse into them); list == NULL copies the whole tree.  The
 * same checks apply, then hooks->member's.  hooks may be NULL.
 */
int pbx_ssh_get_files(struct pbx_ssh *s, const char *remote_dir, const struct pbx_buf *list,
		      const char *local_dir, const struct pbx_ssh_get_hooks *hooks,
		      struct pbx_err *err);

/*
 * Connection reuse: a pool returns the same live connection for the same
 * user@host:port (and pin name and jump host).  The pool owns its
 * connections; callers must not close them.  pbx_ssh_pool_get is safe to
 * call from several threads; connecting happens outside the pool's lock.
 * A connection whose transport failed is replaced on the next get (the old
 * one is closed by pbx_ssh_pool_free, as callers may still hold it).
 * pbx_ssh_pool_free must not run while gets are in progress; it closes
 * tunnelled connections before their jump hosts.
 */
struct pbx_ssh_pool;
/* The pool copies *hk (its ctx must outlive the pool). */
struct pbx_ssh_pool *pbx_ssh_pool_new(const struct pbx_hostkeys *hk);
int pbx_ssh_pool_get(struct pbx_ssh_pool *p, const struct pbx_ssh_target *t, struct pbx_ssh **out,
		     struct pbx_err *err);
void pbx_ssh_pool_free(struct pbx_ssh_pool *p); /* closes every connection */

/* pbx_fanout (bounded parallel calls) is in util/fanout.h. */

/* How many remote commands (exec channels) this process has started: its
 * SSH round trips, reported by `PBX_STATS=1 pbx ...`. */
unsigned long pbx_ssh_exec_count(void);

/* Process-wide setup (libssh2_init); call once from main (pbx_ssh_connect
 * also calls it; it runs only once). */
int pbx_ssh_global_init(struct pbx_err *err);

#endif
