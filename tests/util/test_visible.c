/*
 * test_visible.c - unit tests of src/util/visible.c: terminal escape
 * sequences a task or node could print (retitle: ESC ]0;title BEL, clear:
 * ESC [2J), C1 controls raw and UTF-8 encoded, DEL, carriage return,
 * overlong and invalid UTF-8 are shown as \xHH; printable ASCII and valid
 * UTF-8 pass unchanged; newline and tab only where they are layout; a
 * sequence cut between two pieces of a stream is joined, one cut at the
 * end is shown.
 */
#include "common/tap.h"
#include "util/visible.h"

#include <stdlib.h>
#include <string.h>

static void check(const char *in, enum pbx_visible_mode mode, const char *want, const char *name)
{
	char *got = pbx_visible(in, mode);
	is_str(got, want, name);
	free(got);
}

/* No byte of `s` is a control character or DEL (C1 is checked by the
 * cases themselves). */
static int clean(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			return 0;
	return 1;
}

static void test_cases(void)
{
	check("\x1b]0;pwned\x07 done", PBX_VISIBLE_LINE, "\\x1b]0;pwned\\x07 done",
	      "retitle (OSC 0 ... BEL) shown");
	check("\x1b[2J\x1b[H", PBX_VISIBLE_LINE, "\\x1b[2J\\x1b[H", "clear screen shown");
	check("a\rb\x7f\x08", PBX_VISIBLE_LAYOUT, "a\\x0db\\x7f\\x08", "CR, DEL, BS shown");
	check("line 1\n\tline 2\n", PBX_VISIBLE_LAYOUT, "line 1\n\tline 2\n", "layout kept");
	check("a\nb\tc", PBX_VISIBLE_LINE, "a\\x0ab\\x09c", "one-line: newline and tab shown");
	check("x\xc2\x9b"
	      "2Jy",
	      PBX_VISIBLE_LINE, "x\\xc2\\x9b2Jy", "C1 CSI in UTF-8 shown");
	check("x\x9b"
	      "2J",
	      PBX_VISIBLE_LINE, "x\\x9b2J", "raw 8-bit CSI shown");
	check("\xc0\x9b \xe0\x80\x9b \xf0\x80\x80\x9b", PBX_VISIBLE_LINE,
	      "\\xc0\\x9b \\xe0\\x80\\x9b \\xf0\\x80\\x80\\x9b", "overlong forms of ESC/CSI shown");
	check("\xed\xa0\x80", PBX_VISIBLE_LINE, "\\xed\\xa0\\x80", "a surrogate shown");
	check("\xe2\x82", PBX_VISIBLE_LINE, "\\xe2\\x82", "a sequence cut at the end shown");
	check("\xe2\x82"
	      "A",
	      PBX_VISIBLE_LINE, "\\xe2\\x82A", "a sequence cut by ASCII shown");
	check("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0", PBX_VISIBLE_LINE,
	      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0", "valid UTF-8 unchanged");
	check("plain text / with \\ and 'quotes'", PBX_VISIBLE_LINE,
	      "plain text / with \\ and 'quotes'", "printable ASCII unchanged");
	check(NULL, PBX_VISIBLE_LINE, "", "NULL is empty");
}

static void test_stream(void)
{
	struct pbx_visible v = PBX_VISIBLE_INIT;
	struct pbx_buf out = PBX_BUF_INIT;
	pbx_visible_feed(&v, &out, "a\xe2", 2, PBX_VISIBLE_LAYOUT);
	pbx_visible_feed(&v, &out, "\x82", 1, PBX_VISIBLE_LAYOUT);
	pbx_visible_feed(&v, &out, "\xac\x1b[2J\xc2", 6, PBX_VISIBLE_LAYOUT);
	pbx_visible_feed(&v, &out, "\x9b", 1, PBX_VISIBLE_LAYOUT);
	pbx_visible_feed(&v, &out, "\xf0\x9f", 2, PBX_VISIBLE_LAYOUT);
	pbx_visible_end(&v, &out);
	is_str(out.buf, "a\xe2\x82\xac\\x1b[2J\\xc2\\x9b\\xf0\\x9f",
	       "a stream: sequences joined across pieces, C1 and a cut end shown");
	pbx_buf_release(&out);
}

/* Every single byte and every pair: the result never holds a control. */
static void test_exhaustive(void)
{
	char in[3] = { 0 };
	int a, b, bad = 0;
	for (a = 1; a < 256; a++)
		for (b = 0; b < 256; b++) {
			char *got;
			in[0] = (char)a;
			in[1] = (char)b;
			got = pbx_visible(in, PBX_VISIBLE_LINE);
			bad += !clean(got) || strstr(got, "\xc2\x80") || strstr(got, "\xc2\x9b");
			free(got);
		}
	ok(!bad, "no pair of bytes yields a control character (%d did)", bad);
}

int main(void)
{
	test_cases();
	test_stream();
	test_exhaustive();
	return tap_done();
}
