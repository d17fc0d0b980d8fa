/*
 * ustar.h - writing a small POSIX ustar archive into memory.
 *
 * For archives pbx makes from bytes it already holds (the cluster stage:
 * bootstrap script, slurm.conf, munge key), so no files and no local tar
 * process are needed.  Members belong to root (uid/gid 0).  The experiment
 * package, streamed from files with pax headers for long names, is written
 * by experiment/tar.c on top of pbx_ustar_fill; reading tar streams is
 * ssh/tarcheck.h's job.
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
int pbx_ustar_file(struct pbx_buf *tar, const char *name, int mode, time_t mtime, const void *data,
		   size_t len, struct pbx_err *err);
/* Appends the end-of-archive marker (two zero blocks). */
void pbx_ustar_end(struct pbx_buf *tar);

/* The raw pieces, unchecked.  pbx_ustar_fill completes a 512-byte header
 * whose name (and prefix) fields the caller has set in a zeroed block:
 * mode, owner root, size, mtime, TYPE, LINK (first 100 bytes, may be NULL),
 * magic and checksum (experiment/tar.c builds its pax-aware headers on it).
 * pbx_ustar_header appends a header for whatever NAME (first 100 bytes) it
 * is given, and pbx_ustar_data member data padded to a block: the tests
 * build hostile archives with them. */
#define PBX_USTAR_BLOCK 512
void pbx_ustar_fill(unsigned char h[PBX_USTAR_BLOCK], char type, unsigned mode, time_t mtime,
		    unsigned long long size, const char *link);
void pbx_ustar_header(struct pbx_buf *tar, const char *name, char type, unsigned mode, time_t mtime,
		      size_t size, const char *link);
void pbx_ustar_data(struct pbx_buf *tar, const void *data, size_t len);

#endif
