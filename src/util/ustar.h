/*
 * ustar.h - writing a small POSIX ustar archive into memory.
 *
 * For archives pbx makes from bytes it already holds (the cluster stage:
 * bootstrap script, slurm.conf, munge key), so no files and no local tar
 * process are needed.  Members belong to root (uid/gid 0).  Reading tar
 * streams is tarcheck.h's job, not this file's.
 */
#ifndef PBX_UTIL_USTAR_H
#define PBX_UTIL_USTAR_H

#include <stddef.h>
#include <time.h>

#include "util/buf.h"
#include "util/err.h"

/* Appends a directory member NAME (relative, under 100 bytes with the
 * trailing '/' this adds). */
int pbx_ustar_dir(struct pbx_buf *tar, const char *name, int mode, time_t mtime,
		  struct pbx_err *err);
/* Appends a regular file member NAME (relative, under 100 bytes) holding
 * DATA[0, LEN). */
int pbx_ustar_file(struct pbx_buf *tar, const char *name, int mode, time_t mtime,
		   const void *data, size_t len, struct pbx_err *err);
/* Appends the end-of-archive marker (two zero blocks). */
void pbx_ustar_end(struct pbx_buf *tar);

/* The raw pieces, unchecked: a header with whatever NAME (first 100 bytes),
 * TYPE and LINK (first 100 bytes, may be NULL) it is given, and member
 * data padded to a block.  The tests build hostile archives with them. */
void pbx_ustar_header(struct pbx_buf *tar, const char *name, char type, unsigned mode,
		      time_t mtime, size_t size, const char *link);
void pbx_ustar_data(struct pbx_buf *tar, const void *data, size_t len);

#endif
