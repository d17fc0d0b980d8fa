/*
 * test_duration.c - unit tests of src/util/duration.c: the forms users
 * write (units d h m s, combined in that order, a bare number of minutes,
 * "off"), what is refused (no number, a unit twice or out of order, a bare
 * number after a unit, signs, spaces, overflow, above the maximum), and
 * that every formatted value reads back as itself.
 */
#include "common/tap.h"
#include "util/duration.h"

#include <limits.h>
#include <stdio.h>

static void good(const char *s, long want)
{
	long got = -7;
	int rc = pbx_duration_parse(s, 30L * 86400, &got);
	ok(rc == 0 && got == want, "'%s' is %ld s (rc %d, got %ld)", s, want, rc, got);
}

static void bad(const char *s)
{
	long got = -7;
	int rc = pbx_duration_parse(s, 30L * 86400, &got);
	ok(rc < 0 && got == -7, "'%s' is refused and changes nothing (rc %d)", s, rc);
}

int main(void)
{
	char buf[32];
	long v, back;
	int mismatches = 0;
	good("off", 0);
	good("0", 0);
	good("90s", 90);
	good("30m", 1800);
	good("60", 3600);
	good("2h", 7200);
	good("1h30m", 5400);
	good("1d2h3m4s", 93784);
	good("30d", 30L * 86400);
	bad("");
	bad("m");
	bad("10x");
	bad("1h1h");
	bad("30m1h");
	bad("1h30");
	bad("-5m");
	bad("+5m");
	bad(" 5m");
	bad("5m ");
	bad("31d");
	bad("99999999999999999999999s");
	bad("Off");
	ok(pbx_duration_parse(NULL, 100, &v) < 0, "NULL is refused");
	for (v = 0; v <= 200000; v += 37) {
		pbx_duration_format(v, buf, sizeof(buf));
		if (pbx_duration_parse(buf, LONG_MAX / 2, &back) < 0 || back != v)
			mismatches++;
	}
	ok(!mismatches, "every formatted duration reads back as itself (%d did not)", mismatches);
	pbx_duration_format(5400, buf, sizeof(buf));
	is_str(buf, "1h30m", "5400 s is written 1h30m");
	pbx_duration_format(0, buf, sizeof(buf));
	is_str(buf, "off", "0 is written off");
	/* autostop: only "off" turns it off; 0 is refused like 9 s */
	v = 7;
	ok(pbx_autostop_parse("off", 10, 100, &v) == 0 && v == 0, "autostop off: 0");
	ok(pbx_autostop_parse("10s", 10, 100, &v) == 0 && v == 10, "autostop 10s: the least");
	v = 7;
	ok(pbx_autostop_parse("0", 10, 100, &v) < 0 && pbx_autostop_parse("0s", 10, 100, &v) < 0 &&
		   pbx_autostop_parse("9s", 10, 100, &v) < 0 &&
		   pbx_autostop_parse("2m", 10, 100, &v) < 0 && v == 7,
	   "autostop 0, 0s, 9s and above the most: refused, nothing written");
	return tap_done();
}
