/*
 * buf.h - the one growable string/byte buffer used everywhere in pbx.
 *
 * Invariants: `buf` is never NULL and is always NUL-terminated at `len`
 * (so it can be passed to printf), yet binary-safe.  Initialise with
 * PBX_BUF_INIT.  pbx_buf_release() frees the storage and re-initialises;
 * pbx_buf_detach() hands the storage to the caller (free with free(3)).
 * A buffer may carry a size cap (`max`, 0 = none): an append that would
 * pass it fails with -1 and leaves the buffer released (like curl's dynbuf),
 * so a half-built buffer is never used by mistake.
 */
#ifndef PBX_UTIL_BUF_H
#define PBX_UTIL_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct pbx_buf {
	char *buf;    /* never NULL; NUL-terminated at len */
	size_t len;   /* bytes in use, excluding the NUL */
	size_t alloc; /* bytes allocated, 0 while pointing at the static empty string */
	size_t max;   /* cap on len, 0 for none */
};

extern char pbx_buf_empty[];
#define PBX_BUF_INIT                   \
	{                              \
		pbx_buf_empty, 0, 0, 0 \
	}

void pbx_buf_init(struct pbx_buf *b, size_t max);
void pbx_buf_release(struct pbx_buf *b);
/* Caller owns the returned string (free(3)); the buffer is re-initialised. */
char *pbx_buf_detach(struct pbx_buf *b, size_t *len);
void pbx_buf_reset(struct pbx_buf *b); /* len = 0, keeps storage */
/* The appenders return 0, or -1 when the cap would be passed.  What they
 * append must not point into b itself (growing b moves its storage). */
int pbx_buf_add(struct pbx_buf *b, const void *data, size_t len);
int pbx_buf_adds(struct pbx_buf *b, const char *s);
int pbx_buf_addc(struct pbx_buf *b, char c);
int pbx_buf_addf(struct pbx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int pbx_buf_vaddf(struct pbx_buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
/* Grows b by len bytes left for the caller to fill (not initialised;
 * the NUL after them set): 0 with *out pointing at them (valid until b
 * changes again), or -1 when the cap would be passed. */
int pbx_buf_extend(struct pbx_buf *b, size_t len, char **out);
/* Remove trailing whitespace (spaces, tabs, newlines). */
void pbx_buf_rtrim(struct pbx_buf *b);

#endif
