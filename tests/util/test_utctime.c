/*
 * test_utctime.c - unit tests of src/util/utctime.c, pbx_utc_datetime: the
 * form it reads ("YYYY-MM-DD?HH:MM:SS", ? one of the given separators, what
 * follows the 19 characters left to the caller), exact unix seconds of
 * known dates (the numbers computed once with `date -u -d ... +%s`), leap
 * days and the leap second, every day of 1970-2400 against a day count kept
 * by the test, and each malformed or out-of-range form it must refuse (0).
 */
#include "common/tap.h"
#include "util/utctime.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

static void good(const char *s, const char *seps, int64_t want)
{
	int64_t got = pbx_utc_datetime(s, seps);
	ok(got == want, "'%s' (separators '%s') is %" PRId64 " (got %" PRId64 ")", s, seps, want,
	   got);
}

static void bad(const char *s, const char *seps, const char *why)
{
	int64_t got = pbx_utc_datetime(s, seps);
	ok(got == 0, "'%s' (separators '%s') is refused: %s (got %" PRId64 ")", s ? s : "(null)",
	   seps, why, got);
}

static int leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int y, int m)
{
	switch (m) {
	case 2:
		return leap(y) ? 29 : 28;
	case 4:
	case 6:
	case 9:
	case 11:
		return 30;
	default:
		return 31;
	}
}

/* Every date of 1970-01-01 .. 2400-12-31 (and days 29-31 of every month,
 * valid or not) against a day counter kept here, with a time of day that
 * changes from day to day. */
static void every_day(void)
{
	int64_t days = 0;
	long wrong = 0, checked = 0;
	int y, m, d;
	char s[32];
	for (y = 1970; y <= 2400; y++)
		for (m = 1; m <= 12; m++)
			for (d = 1; d <= 31; d++) {
				int valid = d <= month_days(y, m);
				int h = (int)(days % 24), mi = (int)(days * 7 % 60),
				    sec = (int)(days * 13 % 60);
				int64_t want, got;
				snprintf(s, sizeof(s), "%04d-%02d-%02dT%02d:%02d:%02d", y, m, d, h,
					 mi, sec);
				/* (day 0 is 1970-01-01T00:00:00: 0, not after 1970) */
				want = valid ? days * 86400 + h * 3600 + mi * 60 + sec : 0;
				got = pbx_utc_datetime(s, "T");
				checked++;
				if (got != want && wrong++ == 0)
					tap_diag("first wrong: '%s' gave %" PRId64
						 ", want %" PRId64,
						 s, got, want);
				if (valid)
					days++;
			}
	ok(wrong == 0,
	   "every day of 1970-2400 (%ld strings, impossible days included) reads as "
	   "the day count says (%ld wrong)",
	   checked, wrong);
}

int main(void)
{
	/* Known dates; the numbers are date -u -d '... UTC' +%s. */
	good("1970-01-01T00:00:01", "T", 1);
	good("1970-01-02T00:00:00", "T", 86400);
	good("1999-12-31T23:59:59", "T", 946684799);
	good("2000-02-29T12:34:56", "T", 951827696);
	good("2000-02-29t12:34:56", "Tt", 951827696);
	good("2024-02-29T00:00:00", "Tt", 1709164800);
	good("2026-11-26 10:00:00", " ", 1795687200);
	good("2026-11-26T10:00:00", "T ", 1795687200);
	good("2026-11-26 10:00:00", "T ", 1795687200);
	good("2038-01-19T03:14:08", "T", 2147483648);
	good("2100-03-01T00:00:00", "T", 4107542400);
	good("2400-02-29T23:59:59", "T", 13574649599);
	good("9999-12-31T23:59:59", "T", 253402300799);
	/* The leap second 23:59:60 is the next day's first second. */
	good("2016-12-31T23:59:60", "T", 1483228800);
	good("2016-12-31T23:59:59", "T", 1483228799);
	/* Only the 19 characters are read: fractions, Z, offsets and EC2's
	 * " GMT)" are the callers' (src/cloud/{gce,aws}/parse.c). */
	good("2026-11-26T10:00:00Z", "T", 1795687200);
	good("2026-11-26T10:00:00.123456Z", "T", 1795687200);
	good("2026-11-26T10:00:00-08:00", "T", 1795687200);
	good("2026-11-26 10:00:00 GMT)", " ", 1795687200);

	every_day();

	/* Refused: shape. */
	bad(NULL, "T", "NULL");
	bad("", "T", "empty");
	bad("2026-11-26T10:00:0", "T", "18 characters");
	bad("2026-11-26T10:00", "T", "no seconds");
	bad("2026-11-26", "T", "a date alone");
	bad("2026-11-26 10:00:00", "Tt", "a space where only T or t may be");
	bad("2026-11-26T10:00:00", " ", "a T where only a space may be");
	bad("2026-11-26t10:00:00", "T", "a lowercase t where only T may be");
	bad("2026-11-26T10:00:00", "", "no separator allowed at all");
	bad("2026-11-26X10:00:00", "Tt", "X for the separator");
	bad("2026/11/26T10:00:00", "T", "slashes in the date");
	bad("2026-11-26T10-00-00", "T", "dashes in the time");
	bad("2026-11-26T10:00.00", "T", "a dot for a colon");
	bad("26-11-26T10:00:00Z00", "T", "a two-digit year");
	bad("20261-11-26T10:00:0", "T", "a five-digit year");
	bad("2026-1-26T10:00:00Z", "T", "a one-digit month");
	bad("2026-11-6T10:00:00Z", "T", "a one-digit day");
	bad("2026-11-26T1:00:00Z", "T", "a one-digit hour");
	bad(" 2026-11-26T10:00:00", "T", "a leading space");
	bad("+026-11-26T10:00:00", "T", "a sign in the year");
	bad("2026--1-26T10:00:00", "T", "a sign in the month");
	bad("2026-11-26T-1:00:00", "T", "a sign in the hour");
	bad("2026-1a-26T10:00:00", "T", "a letter in the month");
	bad("2026-11-26T1 :00:00", "T", "a space in the hour");
	bad("2026-11-26T10:00:0Z", "T", "a letter in the seconds");
	bad("2026-11-26T10:00:0\xff", "T", "a byte >= 0x80 in the seconds");
	bad("\xb2"
	    "026-11-26T10:00:00",
	    "T", "Latin-1 superscript two for a digit");
	/* Refused: a field out of range. */
	bad("2026-00-10T00:00:00", "T", "month 0");
	bad("2026-13-01T00:00:00", "T", "month 13");
	bad("2026-99-01T00:00:00", "T", "month 99");
	bad("2026-11-00T00:00:00", "T", "day 0");
	bad("2026-01-32T00:00:00", "T", "January 32");
	bad("2026-11-31T00:00:00", "T", "November 31");
	bad("2026-04-31T00:00:00", "T", "April 31");
	bad("2026-02-30T00:00:00", "T", "February 30");
	bad("2023-02-29T00:00:00", "T", "February 29 of a common year");
	bad("1900-02-29T00:00:00", "T", "February 29 of 1900");
	bad("2100-02-29T00:00:00", "T", "February 29 of 2100");
	bad("2026-11-26T24:00:00", "T", "hour 24");
	bad("2026-11-26T23:60:00", "T", "minute 60");
	bad("2026-11-26T23:59:61", "T", "second 61");
	bad("2026-11-26T99:99:99", "T", "all of the time out of range");
	/* Refused: not after 1970. */
	bad("1970-01-01T00:00:00", "T", "the epoch itself");
	bad("1969-12-31T23:59:59", "T", "the last second of 1969");
	bad("1900-01-01T00:00:00", "T", "1900");
	bad("0000-01-01T00:00:00", "T", "year 0");
	return tap_done();
}
