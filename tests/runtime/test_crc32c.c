/*
 * test_crc32c.c - CRC-32C check value, chaining and the TFRecord mask
 * (src/util/crc32c.h).
 */
#include "util/crc32c.h"

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
	return tap_done();
}
