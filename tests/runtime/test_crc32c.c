/*
 * test_crc32c.c - CRC-32C check value, RFC 3720's vectors, chaining at
 * every split (unaligned starts of the 8-byte steps) and the TFRecord mask
 * (src/util/crc32c.h).
 */
#include "util/crc32c.h"

#include <stdlib.h>

#include "common/tap.h"

int main(void)
{
	const char *s = "123456789";
	uint32_t part;

	/* the standard check value */
	CHECK(pbx_crc32c(0, s, 9) == 0xE3069283u);
	CHECK(pbx_crc32c(0, "", 0) == 0);

	/* chaining equals one pass */
	part = pbx_crc32c(0, s, 4);
	CHECK(pbx_crc32c(part, s + 4, 5) == 0xE3069283u);

	/* the mask is a bijection with the TF formula */
	CHECK(pbx_crc32c_mask(0xE3069283u) ==
	      (((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u));
	{
		/* 14286 values: counted here, one TAP line for all */
		int bad = 0;
		uint32_t first = 0;
		for (uint32_t v = 0; v < 100000; v += 7)
			if (pbx_crc32c_unmask(pbx_crc32c_mask(v * 2654435761u)) !=
				    v * 2654435761u &&
			    !bad++)
				first = v * 2654435761u;
		if (!CHECKF(bad == 0, "pbx_crc32c_unmask(pbx_crc32c_mask(x)) == x for "
				      "x = v * 2654435761u, v = 0, 7, .. 99995"))
			tap_diag("%d differ, the first x = 0x%08x", bad, first);
	}
	CHECK(pbx_crc32c_masked(s, 9) == pbx_crc32c_mask(0xE3069283u));
	/* 32 zero bytes: a second published CRC-32C vector (RFC 3720, B.4) */
	{
		unsigned char z[32] = { 0 };
		CHECK(pbx_crc32c(0, z, 32) == 0x8A9136AAu);
	}
	/* the other RFC 3720 B.4 vectors: 32 bytes of 0xff, 0..31, 31..0
	 * (8 bytes a step and the rest, on a CPU with SSE4.2) */
	{
		unsigned char ff[32], up[32], down[32];
		for (int i = 0; i < 32; i++) {
			ff[i] = 0xff;
			up[i] = (unsigned char)i;
			down[i] = (unsigned char)(31 - i);
		}
		CHECK(pbx_crc32c(0, ff, 32) == 0x62A8AB43u);
		CHECK(pbx_crc32c(0, up, 32) == 0x46DD794Eu);
		CHECK(pbx_crc32c(0, down, 32) == 0x113FDB5Cu);
	}
	/* chained at every split and from every (unaligned) start of 1,000
	 * bytes: the same as one pass over the same bytes, byte by byte */
	{
		static unsigned char b[1000];
		uint32_t whole, byte = 0;
		int bad = 0;
		for (int i = 0; i < 1000; i++)
			b[i] = (unsigned char)(i * 7 + 3);
		whole = pbx_crc32c(0, b, 1000);
		for (int i = 0; i < 1000; i++)
			byte = pbx_crc32c(byte, b + i, 1);
		for (int k = 0; k <= 1000; k++)
			bad += pbx_crc32c(pbx_crc32c(0, b, (size_t)k), b + k, (size_t)(1000 - k)) !=
			       whole;
		CHECKF(byte == whole && bad == 0,
		       "1,000 bytes: byte by byte and split at each of 1,001 points, as one pass");
	}
	/* combined from the pieces' CRCs alone (ranges read at once): the same
	 * as one pass, at every split, and for pieces of 0 bytes */
	{
		static unsigned char b[1000];
		uint32_t whole;
		int bad = 0;
		for (int i = 0; i < 1000; i++)
			b[i] = (unsigned char)(i * 13 + 5);
		whole = pbx_crc32c(0, b, 1000);
		for (int k = 0; k <= 1000; k++)
			bad += pbx_crc32c_combine(pbx_crc32c(0, b, (size_t)k),
						  pbx_crc32c(0, b + k, (size_t)(1000 - k)),
						  (uint64_t)(1000 - k)) != whole;
		CHECKF(bad == 0,
		       "1,000 bytes split at each of 1,001 points: combined CRCs as one pass");
		CHECK(pbx_crc32c_combine(0xE3069283u, 0, 0) == 0xE3069283u);
		CHECK(pbx_crc32c_combine(0, 0xE3069283u, 9) == 0xE3069283u);
	}
	/* a large second piece (the exponent's high bits): 3 MiB + 5 of a
	 * pattern, split at 1 MiB - 3 */
	{
		size_t n = (3u << 20) + 5, k = (1u << 20) - 3;
		unsigned char *big = malloc(n);
		uint32_t whole;
		for (size_t i = 0; i < n; i++)
			big[i] = (unsigned char)(i * 2654435761u >> 13);
		whole = pbx_crc32c(0, big, n);
		CHECK(pbx_crc32c_combine(pbx_crc32c(0, big, k), pbx_crc32c(0, big + k, n - k),
					 n - k) == whole);
		free(big);
	}
	return tap_done();
}
