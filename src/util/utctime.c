/*
 * utctime.c - see utctime.h.
 */
#include "util/utctime.h"

#include <string.h>
#include <time.h>

/* The number written by the n digits at s, or -1. */
static int utc_digits(const char *s, int n)
{
	int v = 0;
	for (; n > 0; n--, s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v;
}

int64_t pbx_utc_datetime(const char *s, const char *seps)
{
	static const int mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	struct tm tm = { 0 };
	int y, mo, d, h, mi, sec;
	time_t t;
	if (!s || strnlen(s, 19) < 19 || s[4] != '-' || s[7] != '-' || !s[10] ||
	    !strchr(seps, s[10]) || s[13] != ':' || s[16] != ':')
		return 0;
	y = utc_digits(s, 4);
	mo = utc_digits(s + 5, 2);
	d = utc_digits(s + 8, 2);
	h = utc_digits(s + 11, 2);
	mi = utc_digits(s + 14, 2);
	sec = utc_digits(s + 17, 2);
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h < 0 || h > 23 ||
	    mi < 0 || mi > 59 || sec < 0 || sec > 60 ||
	    (mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))))
		return 0;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	return t > 0 ? (int64_t)t : 0;
}
