/*
 * test_size.c - unit tests of src/util/size.c: the sizes users write
 * (decimal and binary units, any case, a fraction, one space), what is
 * refused (no number, an unknown unit, signs, two spaces, a long
 * fraction, overflow) and that a refusal changes nothing.
 */
#include "common/tap.h"
#include "util/size.h"

#include <inttypes.h>
#include <stdio.h>

static void good(const char *s, uint64_t want)
{
	uint64_t got = 7;
	int rc = pbx_size_parse(s, &got);
	ok(rc == 0 && got == want, "'%s' is %" PRIu64 " bytes (rc %d, got %" PRIu64 ")", s, want,
	   rc, got);
}

static void bad(const char *s)
{
	uint64_t got = 7;
	int rc = pbx_size_parse(s, &got);
	ok(rc < 0 && got == 7, "'%s' is refused and changes nothing (rc %d)", s, rc);
}

int main(void)
{
	good("0", 0);
	good("512", 512);
	good("512B", 512);
	good("20GB", UINT64_C(20000000000));
	good("20 GB", UINT64_C(20000000000));
	good("20gb", UINT64_C(20000000000));
	good("500MiB", UINT64_C(500) << 20);
	good("1.5TB", UINT64_C(1500000000000));
	good("1.25KiB", 1280);
	good("2TiB", UINT64_C(2) << 40);
	good("4611686018427387904", UINT64_C(1) << 62);
	bad("");
	bad("GB");
	bad("-1GB");
	bad("+1GB");
	bad(" 1GB");
	bad("1  GB");
	bad("1 ");
	bad("1XB");
	bad("1.GB");
	bad("1.2345GB");
	bad("1GB ");
	bad("4611686018427387905");
	bad("5000000TB");
	bad("99999999999999999999999");
	return tap_done();
}
