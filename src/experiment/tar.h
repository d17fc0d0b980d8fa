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
#include <sys/types.h>

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
/* What pbx_tar_reader takes a member's bytes from: up to max of them into
 * buf, blocking until it has some; > 0, or -1 with err set (0: none will
 * come, an error "changed while being packaged"). */
typedef ssize_t (*pbx_tar_read_fn)(void *ctx, char *buf, size_t max, struct pbx_err *err);
/* Streams `size` bytes that read(ctx, ...) gives as `path`: a member
 * whose bytes are still coming (a download written as it arrives). */
int pbx_tar_reader(struct pbx_tar *t, const char *path, unsigned mode, unsigned long long size,
		   pbx_tar_read_fn read, void *ctx);
/* The end-of-archive marker. */
int pbx_tar_end(struct pbx_tar *t);

#endif
