/*
 * test_buf.c - unit tests of src/util/buf.c, the growable buffer: the
 * empty buffer, growth by one byte at a time past many reallocations and by
 * large blocks, pbx_buf_addf with long formatted strings (against
 * snprintf), bytes with embedded NULs kept by length, detach (the caller
 * owns the storage, the buffer starts again empty) and release, reset
 * keeping its storage, the size cap (an append past it fails and releases),
 * extend (room filled in place), and rtrim.
 */
#include "common/tap.h"
#include "util/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The invariants of buf.h: buf never NULL, NUL at len, len < alloc. */
static int sane(const struct pbx_buf *b)
{
	return b->buf && b->buf[b->len] == '\0' && (b->alloc ? b->len < b->alloc : b->len == 0);
}

static int is_empty(const struct pbx_buf *b)
{
	return b->buf == pbx_buf_empty && b->len == 0 && b->alloc == 0 && b->buf[0] == '\0';
}

static void empty(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	CHECK(is_empty(&b));
	CHECK(b.max == 0);
	CHECK_STR(b.buf, "");
	pbx_buf_release(&b); /* releasing what holds nothing is fine */
	CHECK(is_empty(&b));
	pbx_buf_reset(&b);
	CHECK(is_empty(&b));
	pbx_buf_rtrim(&b);
	CHECK(is_empty(&b));
	CHECK(pbx_buf_add(&b, "", 0) == 0);
	CHECK(sane(&b) && b.len == 0);
	pbx_buf_release(&b);
	pbx_buf_init(&b, 123);
	CHECK(is_empty(&b) && b.max == 123);
}

static void growth(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i, n = 1000000, reallocs = 0, last_alloc = 0, bad = 0;
	for (i = 0; i < n; i++) {
		if (pbx_buf_addc(&b, (char)('a' + i % 26)) != 0)
			bad++;
		if (b.alloc != last_alloc) {
			reallocs++;
			last_alloc = b.alloc;
		}
		if (!sane(&b) || b.len != i + 1)
			bad++;
	}
	CHECKF(!bad, "one million addc: each returned 0 and kept the invariants (%zu did not)",
	       bad);
	CHECKF(reallocs >= 10, "the storage grew %zu times", reallocs);
	CHECKF(b.len == n && strlen(b.buf) == n, "len %zu, strlen %zu", b.len, strlen(b.buf));
	for (i = 0, bad = 0; i < n; i++)
		if (b.buf[i] != (char)('a' + i % 26))
			bad++;
	CHECKF(!bad, "every byte is where it was put (%zu are not)", bad);

	/* large blocks appended to what is there */
	{
		char *block = malloc(300000);
		REQUIRE(block != NULL);
		memset(block, 'z', 300000);
		for (i = 0; i < 5; i++)
			CHECK(pbx_buf_add(&b, block, 300000) == 0);
		CHECK(b.len == n + 1500000 && sane(&b));
		CHECK(b.buf[n - 1] == (char)('a' + (n - 1) % 26) && b.buf[n] == 'z' &&
		      b.buf[b.len - 1] == 'z');
		free(block);
	}
	pbx_buf_release(&b);
	CHECK(is_empty(&b));
}

static int vaddf_twice(struct pbx_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int vaddf_twice(struct pbx_buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;
	va_start(ap, fmt);
	rc = pbx_buf_vaddf(b, fmt, ap);
	va_end(ap);
	va_start(ap, fmt);
	rc |= pbx_buf_vaddf(b, fmt, ap);
	va_end(ap);
	return rc;
}

static void formatted(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	char *big = malloc(100001), *want = malloc(300000);
	size_t i;
	int n;
	REQUIRE(big && want);
	for (i = 0; i < 100000; i++)
		big[i] = (char)('A' + i % 26);
	big[100000] = '\0';

	CHECK(pbx_buf_addf(&b, "%s", "") == 0);
	CHECK(sane(&b) && b.len == 0);
	CHECK(pbx_buf_addf(&b, "x=%d y=%s z=%05.1f %%", -42, "str", 3.14159) == 0);
	CHECK_STR(b.buf, "x=-42 y=str z=003.1 %");
	CHECK(b.len == strlen("x=-42 y=str z=003.1 %"));

	pbx_buf_reset(&b);
	CHECK(pbx_buf_adds(&b, "head:") == 0);
	CHECK(pbx_buf_addf(&b, "[%s|%*d|%s]", big, 5000, 7, big + 99990) == 0);
	n = snprintf(want, 300000, "head:[%s|%*d|%s]", big, 5000, 7, big + 99990);
	CHECKF(n > 0 && b.len == (size_t)n, "a %d-byte formatted append: len %zu", n, b.len);
	CHECKF(b.len == (size_t)n && memcmp(b.buf, want, (size_t)n) == 0 && sane(&b),
	       "the %d bytes are snprintf's", n);

	/* many formatted appends in a row, each landing after the last */
	pbx_buf_release(&b);
	for (i = 0; i < 20000; i++)
		pbx_buf_addf(&b, "%zu,", i);
	{
		size_t bad = 0, at = 0;
		char one[32];
		for (i = 0; i < 20000; i++) {
			int k = snprintf(one, sizeof(one), "%zu,", i);
			if (at + (size_t)k > b.len || memcmp(b.buf + at, one, (size_t)k) != 0)
				bad++;
			at += (size_t)k;
		}
		CHECKF(!bad && at == b.len && sane(&b),
		       "20000 formatted appends are in order (%zu wrong, %zu of %zu bytes)", bad,
		       at, b.len);
	}

	/* pbx_buf_vaddf through a caller's va_list */
	pbx_buf_release(&b);
	CHECK(vaddf_twice(&b, "<%s:%d>", "v", 1) == 0);
	CHECK_STR(b.buf, "<v:1><v:1>");
	pbx_buf_release(&b);
	free(big);
	free(want);
}

static void binary(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	static const char bytes[] = { 'a', '\0', 'b', '\0', '\0', '\xff', 'c' };
	char *s;
	size_t len = 99;

	CHECK(pbx_buf_add(&b, bytes, sizeof(bytes)) == 0);
	CHECKF(b.len == sizeof(bytes), "embedded NULs count: len %zu", b.len);
	CHECK(memcmp(b.buf, bytes, sizeof(bytes)) == 0 && sane(&b));
	CHECK(pbx_buf_addc(&b, '\0') == 0);
	CHECK(pbx_buf_adds(&b, "tail") == 0);
	CHECK(b.len == sizeof(bytes) + 5 && sane(&b));
	CHECK(memcmp(b.buf + sizeof(bytes), "\0tail", 5) == 0);
	CHECK(strlen(b.buf) == 1); /* a C string sees up to the first NUL */

	s = pbx_buf_detach(&b, &len);
	CHECKF(len == sizeof(bytes) + 5, "detach gives the length with the NULs: %zu", len);
	CHECK(s && memcmp(s, bytes, sizeof(bytes)) == 0 &&
	      memcmp(s + sizeof(bytes), "\0tail", 5) == 0 && s[len] == '\0');
	free(s);
	CHECK(is_empty(&b));

	/* rtrim removes whitespace only: a trailing NUL byte is data */
	CHECK(pbx_buf_add(&b, "x\0", 2) == 0);
	pbx_buf_rtrim(&b);
	CHECKF(b.len == 2, "rtrim keeps a trailing NUL byte (len %zu)", b.len);
	pbx_buf_release(&b);
}

static void ownership(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	char *storage, *s;
	size_t len = 99, alloc;

	pbx_buf_init(&b, 1000);
	pbx_buf_adds(&b, "hello");
	storage = b.buf;
	s = pbx_buf_detach(&b, &len);
	CHECK(s == storage);
	CHECK_STR(s, "hello");
	CHECK(len == 5);
	CHECKF(is_empty(&b) && b.max == 1000,
	       "after detach the buffer is empty again, its cap kept");
	/* the buffer can be used again, and the detached string is the caller's */
	pbx_buf_adds(&b, "again");
	CHECK(b.buf != s);
	CHECK_STR(b.buf, "again");
	CHECK_STR(s, "hello");
	free(s);
	pbx_buf_release(&b);
	CHECK(is_empty(&b) && b.max == 1000);

	/* detaching an empty buffer gives a fresh "" that free(3) takes */
	s = pbx_buf_detach(&b, &len);
	CHECK(s != NULL && s != pbx_buf_empty && s[0] == '\0' && len == 0);
	free(s);
	s = pbx_buf_detach(&b, NULL);
	CHECK(s != NULL && s[0] == '\0');
	free(s);

	/* reset keeps the storage */
	pbx_buf_adds(&b, "some text");
	storage = b.buf;
	alloc = b.alloc;
	pbx_buf_reset(&b);
	CHECK(b.buf == storage && b.alloc == alloc && b.len == 0 && b.buf[0] == '\0');
	pbx_buf_adds(&b, "new");
	CHECK(b.buf == storage);
	CHECK_STR(b.buf, "new");
	pbx_buf_release(&b);
	CHECK(is_empty(&b));
	pbx_buf_release(&b);
	CHECK(is_empty(&b));
	CHECK(pbx_buf_empty[0] == '\0');
}

static void cap(void)
{
	struct pbx_buf b;
	pbx_buf_init(&b, 10);
	CHECK(pbx_buf_adds(&b, "0123456789") == 0);
	CHECK(b.len == 10);
	CHECK(pbx_buf_add(&b, "", 0) == 0);
	CHECK(b.len == 10);
	CHECK(pbx_buf_addc(&b, 'x') == -1);
	CHECKF(is_empty(&b) && b.max == 10, "an append past the cap releases the buffer");
	CHECK(pbx_buf_adds(&b, "abc") == 0);
	CHECK(pbx_buf_addf(&b, "%s", "defghijk") == -1);
	CHECK(is_empty(&b) && b.max == 10);
	CHECK(pbx_buf_adds(&b, "abc") == 0);
	CHECK(pbx_buf_addf(&b, "%d", 1234567) == 0);
	CHECK_STR(b.buf, "abc1234567");
	CHECK(pbx_buf_add(&b, "y", (size_t)-1) == -1); /* a length that would overflow */
	CHECK(is_empty(&b));
	CHECK(pbx_buf_adds(&b, "01234567890") == -1);
	CHECK(is_empty(&b));
	pbx_buf_release(&b);
}

/* pbx_buf_extend: room for a caller to fill in place (a ranged read's
 * buffer), the NUL after it, the cap kept. */
static void extend(void)
{
	struct pbx_buf b;
	char *p = NULL;
	pbx_buf_init(&b, 10);
	CHECK(pbx_buf_adds(&b, "ab") == 0);
	CHECK(pbx_buf_extend(&b, 3, &p) == 0);
	CHECKF(b.len == 5 && p == b.buf + 2 && b.buf[5] == '\0',
	       "extended by 3, the NUL after them");
	memcpy(p, "cde", 3);
	CHECK_STR(b.buf, "abcde");
	CHECKF(pbx_buf_extend(&b, 6, &p) == -1 && is_empty(&b), "an extend past the cap releases");
	CHECK(pbx_buf_extend(&b, 0, &p) == 0 && b.len == 0 && b.buf[0] == '\0');
	pbx_buf_release(&b);
}

static void rtrim(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	pbx_buf_adds(&b, " keep inner \t space \t\r\n \n");
	pbx_buf_rtrim(&b);
	CHECK_STR(b.buf, " keep inner \t space");
	CHECK(b.len == strlen(" keep inner \t space"));
	pbx_buf_reset(&b);
	pbx_buf_adds(&b, " \t\r\n");
	pbx_buf_rtrim(&b);
	CHECK(b.len == 0 && b.buf[0] == '\0');
	pbx_buf_reset(&b);
	pbx_buf_adds(&b, "none");
	pbx_buf_rtrim(&b);
	CHECK_STR(b.buf, "none");
	pbx_buf_release(&b);
}

int main(void)
{
	empty();
	growth();
	formatted();
	binary();
	ownership();
	cap();
	extend();
	rtrim();
	return tap_done();
}
