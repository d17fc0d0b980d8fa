/*
 * utctime.c - see utctime.h.
 */
#include "util/utctime.h"

#include <ctype.h>
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

/* Unix seconds of an RFC 3339 date-time, as Compute Engine writes
 * lastStopTimestamp and EC2 launchTime: YYYY-MM-DDTHH:MM:SS, optional fractional seconds
 * (dropped), then Z or a +HH:MM / -HH:MM offset (applied), e.g.
 * 2026-11-26T05:43:21.123-08:00.  Strict: anything else, a field out of
 * range, or a time not after 1970 gives 0 (unknown), never an error. */
int64_t pbx_rfc3339_time(const char *s)
{
	int64_t t = pbx_utc_datetime(s, "Tt");
	int offset = 0;
	if (!t)
		return 0;
	s += 19;
	if (*s == '.') {
		if (!isdigit((unsigned char)s[1]))
			return 0;
		s += 1 + strspn(s + 1, "0123456789");
	}
	if ((*s == 'Z' || *s == 'z') && !s[1]) {
		/* UTC */
	} else if ((*s == '+' || *s == '-') && strlen(s) == 6 && s[3] == ':' &&
		   strspn(s + 1, "0123456789") == 2 && strspn(s + 4, "0123456789") == 2) {
		int oh = (s[1] - '0') * 10 + (s[2] - '0'), om = (s[4] - '0') * 10 + (s[5] - '0');
		if (oh > 23 || om > 59)
			return 0;
		offset = (*s == '-' ? -1 : 1) * (oh * 3600 + om * 60);
	} else {
		return 0;
	}
	t -= offset; /* local time = UTC + offset */
	return t > 0 ? t : 0;
}
