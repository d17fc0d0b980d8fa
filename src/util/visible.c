/*
 * visible.c - untrusted text made safe to show on a terminal (see
 * visible.h).  A small UTF-8 validator: a lead byte opens a sequence whose
 * continuation bytes must fall in the ranges of RFC 3629 (so overlong
 * forms and surrogates are refused); a complete sequence is copied unless
 * it encodes a C1 control; anything else is written byte by byte as \xHH.
 */
#include "util/visible.h"

#include <stdlib.h>
#include <string.h>

static void add_hex(struct pbx_buf *out, unsigned char b)
{
	pbx_buf_addf(out, "\\x%02x", b);
}

/* The held bytes of a sequence that did not complete, made visible. */
static void drop_held(struct pbx_visible *v, struct pbx_buf *out)
{
	int i;
	for (i = 0; i < v->nheld; i++)
		add_hex(out, v->held[i]);
	v->nheld = v->need = 0;
}

/* Opens a sequence at lead byte b (0xC2..0xF4): its length and the range
 * of its second byte (RFC 3629, table 3-7). */
static void open_sequence(struct pbx_visible *v, unsigned char b)
{
	v->held[0] = b;
	v->nheld = 1;
	v->need = b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
	v->lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
	v->hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
}

/* Takes continuation byte b of the open sequence; 0 when b does not fit. */
static int continue_sequence(struct pbx_visible *v, struct pbx_buf *out, unsigned char b)
{
	if (b < v->lo || b > v->hi)
		return 0;
	v->held[v->nheld++] = b;
	v->lo = 0x80;
	v->hi = 0xBF;
	if (--v->need == 0) {
		if (v->held[0] == 0xC2 && v->held[1] <= 0x9F) /* U+0080..U+009F: C1 */
			drop_held(v, out);
		else
			pbx_buf_add(out, v->held, (size_t)v->nheld);
		v->nheld = 0;
	}
	return 1;
}

/* Bytes shown as they are outside a sequence. */
static int plain(unsigned char b, enum pbx_visible_mode mode)
{
	return (b >= 0x20 && b < 0x7f) || (mode == PBX_VISIBLE_LAYOUT && (b == '\n' || b == '\t'));
}

void pbx_visible_feed(struct pbx_visible *v, struct pbx_buf *out, const char *data, size_t len,
		      enum pbx_visible_mode mode)
{
	const unsigned char *p = (const unsigned char *)data, *end = p + len;
	while (p < end) {
		const unsigned char *run = p;
		if (v->need) {
			if (continue_sequence(v, out, *p)) {
				p++;
				continue;
			}
			drop_held(v, out); /* cut short: *p starts afresh */
		}
		while (p < end && plain(*p, mode))
			p++;
		if (p > run) {
			pbx_buf_add(out, run, (size_t)(p - run));
			continue;
		}
		if (*p >= 0xC2 && *p <= 0xF4)
			open_sequence(v, *p);
		else
			add_hex(out, *p);
		p++;
	}
}

void pbx_visible_end(struct pbx_visible *v, struct pbx_buf *out)
{
	drop_held(v, out);
}

char *pbx_visible(const char *s, enum pbx_visible_mode mode)
{
	struct pbx_visible v = PBX_VISIBLE_INIT;
	struct pbx_buf out = PBX_BUF_INIT;
	size_t len;
	if (s)
		pbx_visible_feed(&v, &out, s, strlen(s), mode);
	pbx_visible_end(&v, &out);
	return pbx_buf_detach(&out, &len);
}

void pbx_visible_write(FILE *f, struct pbx_visible *v, const char *data, size_t len)
{
	struct pbx_buf out = PBX_BUF_INIT;
	pbx_visible_feed(v, &out, data, len, PBX_VISIBLE_LAYOUT);
	if (out.len)
		fwrite(out.buf, 1, out.len, f);
	fflush(f);
	pbx_buf_release(&out);
}
