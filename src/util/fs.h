/*
 * fs.h - small file-system helpers: directories, atomic writes, whole-file
 * reads, permission checks, SHA-256 of files, and $PBX_HOME.
 *
 * All return 0 on success or -1 with `err` filled (naming the path).
 */
#ifndef PBX_UTIL_FS_H
#define PBX_UTIL_FS_H

#include <stddef.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/err.h"

/* mkdir -p with `mode` for the directories it creates. */
int pbx_mkdir_p(const char *path, mode_t mode, struct pbx_err *err);
/* rm -rf; a missing path is not an error.  Refuses "/" and "". */
int pbx_rm_rf(const char *path, struct pbx_err *err);
/* Writes `len` bytes to `path` atomically: a new temporary file beside it
 * (pbx_tmpfile_beside), fchmod to `mode`, fsync, rename, fsync of the
 * directory.  A link planted at `path` is replaced, never followed. */
int pbx_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
			  struct pbx_err *err);
/* Creates a new empty file beside `path` (its directory, so that a
 * rename onto `path` is atomic) named PATH.tmp.XXXXXX by mkostemp: a name
 * nobody can guess, created O_EXCL (never an existing file, never through
 * a link), mode 0600, close-on-exec.  Returns its descriptor with *tmp its
 * name (caller frees, and unlinks it unless renamed), or -1 with err,
 * errno as mkostemp left it (ENOENT: no such directory) and *tmp NULL.
 * Every temporary file pbx writes locally comes from here. */
int pbx_tmpfile_beside(const char *path, char **tmp, struct pbx_err *err);
/* write(2) until all `len` bytes are written (EINTR retried); 0, or -1
 * with errno set. */
int pbx_write_all(int fd, const void *data, size_t len);
/* Appends the whole file to `out`.  On failure (-1 with err) `out` is as
 * it was: emptied and released when it was empty, so a caller that gives
 * up leaks nothing. */
int pbx_read_file(const char *path, struct pbx_buf *out, struct pbx_err *err);
/* Appends the whole of `path` to `out` when it is a regular file of at most
 * `max` bytes, checked on the open descriptor before anything is read (a
 * directory, FIFO or device such as /dev/zero is refused without reading
 * it; a file that grows past `max` while read is refused too).  Errors name
 * the path, with code PBX_EXIT_USAGE, except a failing open or read of a
 * file that exists (PBX_EXIT_FAIL); *missing (may be NULL) is set when the
 * path does not exist.  On error `out` is left as it was. */
int pbx_read_regular(const char *path, size_t max, struct pbx_buf *out, int *missing,
		     struct pbx_err *err);
/* The mode of a cluster's directory in PBX_HOME (node bodies' disks and
 * shared directory among its files): others may pass through it, not list
 * it, so a node body's task user reaches the files a task needs, each of
 * which has its own mode (docs/SECURITY.md, "Who is who on a node"). */
#define PBX_CLUSTER_DIR_MODE 0711

/* Refuses a file that group or others can write (and, when `secret`, read),
 * with a message that says how to fix it (code PBX_EXIT_SECURITY). */
int pbx_check_private(const char *path, int secret, struct pbx_err *err);
/* Lowercase hex SHA-256 of a file into hex[65]. */
int pbx_sha256_file(const char *path, char hex[65], struct pbx_err *err);
/* Lowercase hex of n bytes into hex[2n+1]. */
void pbx_hex(const unsigned char *bytes, size_t n, char *hex);
/* Lowercase hex SHA-256 of memory into hex[65]. */
void pbx_sha256_hex(const void *data, size_t len, char hex[65]);

/* $PBX_HOME, or ~/.pbx.  Returned string is static; valid for the process. */
const char *pbx_home(void);
/* Returns a fresh "$PBX_HOME/rel"; caller frees. */
char *pbx_home_path(const char *rel);
/* Expands a leading "~/" to $HOME; caller frees. */
char *pbx_expand_tilde(const char *path);

#endif
