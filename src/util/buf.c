/*
 * buf.c - growable buffer (see buf.h for the invariants).
 */
#include "util/buf.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char pbx_buf_empty[1];

void pbx_buf_init(struct pbx_buf *b, size_t max)
{
	b->buf = pbx_buf_empty;
	b->len = 0;
	b->alloc = 0;
	b->max = max;
}

void pbx_buf_release(struct pbx_buf *b)
{
	size_t max = b->max;
	if (b->alloc)
		free(b->buf);
	pbx_buf_init(b, max);
}

char *pbx_buf_detach(struct pbx_buf *b, size_t *len)
{
	char *s = b->alloc ? b->buf : xstrdup("");
	if (len)
		*len = b->len;
	pbx_buf_init(b, b->max);
	return s;
}

void pbx_buf_reset(struct pbx_buf *b)
{
	b->len = 0;
	b->buf[0] = '\0';
	if (!b->alloc)
		pbx_buf_empty[0] = '\0';
}

static int buf_grow(struct pbx_buf *b, size_t extra)
{
	size_t want;
	if (b->max && (extra > b->max || b->len > b->max - extra)) {
		pbx_buf_release(b);
		return -1;
	}
	want = b->len + extra + 1;
	if (want <= b->alloc)
		return 0;
	if (want < b->alloc * 2)
		want = b->alloc * 2;
	if (want < 64)
		want = 64;
	if (b->alloc) {
		b->buf = xrealloc(b->buf, want);
	} else {
		b->buf = xmalloc(want);
		b->buf[0] = '\0';
	}
	b->alloc = want;
	return 0;
}

int pbx_buf_extend(struct pbx_buf *b, size_t len, char **out)
{
	if (buf_grow(b, len) < 0)
		return -1;
	*out = b->buf + b->len;
	b->len += len;
	b->buf[b->len] = '\0';
	return 0;
}

int pbx_buf_add(struct pbx_buf *b, const void *data, size_t len)
{
	if (buf_grow(b, len) < 0)
		return -1;
	if (len)
		memcpy(b->buf + b->len, data, len);
	b->len += len;
	b->buf[b->len] = '\0';
	return 0;
}

int pbx_buf_adds(struct pbx_buf *b, const char *s)
{
	return pbx_buf_add(b, s, strlen(s));
}

int pbx_buf_addc(struct pbx_buf *b, char c)
{
	return pbx_buf_add(b, &c, 1);
}

int pbx_buf_vaddf(struct pbx_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;
	char small[1];

	va_copy(cp, ap);
	n = vsnprintf(small, sizeof(small), fmt, cp);
	va_end(cp);
	if (n < 0)
		return -1;
	if (buf_grow(b, (size_t)n) < 0)
		return -1;
	vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int pbx_buf_addf(struct pbx_buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;
	va_start(ap, fmt);
	rc = pbx_buf_vaddf(b, fmt, ap);
	va_end(ap);
	return rc;
}

void pbx_buf_rtrim(struct pbx_buf *b)
{
	/* a NUL is data, not the terminator strchr would match */
	while (b->len && b->buf[b->len - 1] && strchr(" \t\r\n", b->buf[b->len - 1]))
		b->len--;
	if (b->alloc)
		b->buf[b->len] = '\0';
}
