/*
 * visible.h - untrusted text made safe to show on a terminal.
 *
 * Text from jobs and nodes (task states and output, node names, file
 * names, squeue reasons, remote stderr carried in errors) may hold escape
 * sequences that retitle, clear or reprogram a terminal.  Before pbx shows
 * such text it goes through this one helper: every C0 control (except \n
 * and \t where they are layout), DEL, every C1 control (U+0080..U+009F),
 * and every byte that is not part of valid UTF-8 is written as "\xHH"
 * (ESC is "\x1b"); printable ASCII and valid UTF-8 pass unchanged.
 * Overlong and surrogate forms are invalid UTF-8, so no encoding of a
 * control character gets through.
 *
 * Ownership: pbx_visible returns fresh memory (caller frees).
 */
#ifndef PBX_UTIL_VISIBLE_H
#define PBX_UTIL_VISIBLE_H

#include <stddef.h>
#include <stdio.h>

#include "util/buf.h"

/* What is kept as is: nothing but printable text (one-line fields: a
 * table cell, a state), or also \n and \t (messages, logs). */
enum pbx_visible_mode { PBX_VISIBLE_LINE = 0, PBX_VISIBLE_LAYOUT = 1 };

/* The state of a stream fed in pieces: a UTF-8 sequence cut between two
 * pieces is held until its end arrives. */
struct pbx_visible {
	unsigned char held[4];
	int nheld, need;      /* bytes held, continuation bytes still due */
	unsigned char lo, hi; /* the range the next continuation byte must be in */
};
#define PBX_VISIBLE_INIT          \
	{                         \
		{ 0 }, 0, 0, 0, 0 \
	}

/* Appends data[0..len) to `out`, made visible. */
void pbx_visible_feed(struct pbx_visible *v, struct pbx_buf *out, const char *data, size_t len,
		      enum pbx_visible_mode mode);
/* Ends the stream: a sequence still cut is appended as "\xHH" bytes. */
void pbx_visible_end(struct pbx_visible *v, struct pbx_buf *out);
/* `s` (NULL gives "") made visible; caller frees. */
char *pbx_visible(const char *s, enum pbx_visible_mode mode);
/* Writes data[0..len) to f made visible (layout kept), through stream
 * state v; flushes f. */
void pbx_visible_write(FILE *f, struct pbx_visible *v, const char *data, size_t len);

#endif
