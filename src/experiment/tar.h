/*
 * tar.h - a ustar writer (pax headers for long names) on a stdio stream:
 * the experiment package's (package.c) and a published task's
 * (src/pool/archive.c).  Members are owned by root:root with mtime
 * t->mtime; errors go to t->err, naming t->what.
 */
#ifndef PBX_EXPERIMENT_TAR_H
#define PBX_EXPERIMENT_TAR_H

#include <stddef.h>
#include <stdio.h>

#include "util/err.h"

struct pbx_tar {
	FILE *f;
	long long mtime;
	const char *what; /* the tar's name, for messages */
	struct pbx_err *err;
	/* called (when set) as each chunk of a pbx_tar_file member's bytes
	 * is written: n more bytes of it (for a progress display) */
	void (*on_bytes)(void *ctx, unsigned long long n);
	void *on_bytes_ctx;
};
int pbx_tar_dir(struct pbx_tar *t, const char *path, unsigned mode);
int pbx_tar_mem(struct pbx_tar *t, const char *path, unsigned mode, const void *data, size_t len);
int pbx_tar_link(struct pbx_tar *t, const char *path, const char *target);
/* Streams file `src` (expected `size` bytes and digest `sha`) as `path`;
 * sha NULL: any content of that size. */
int pbx_tar_file(struct pbx_tar *t, const char *path, unsigned mode, const char *src,
		 unsigned long long size, const unsigned char sha[32]);
/* The end-of-archive marker. */
int pbx_tar_end(struct pbx_tar *t);

#endif
