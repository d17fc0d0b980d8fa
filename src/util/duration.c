/*
 * duration.c - parsing and printing durations (see duration.h).
 */
#include "util/duration.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char duration_units[] = "dhms";
static const long duration_secs[] = { 86400, 3600, 60, 1 };

/* Reads the NUMBER UNIT parts of s; -1 on anything else. */
static int duration_parts(const char *s, long max, long *total)
{
	int last = -1;
	*total = 0;
	while (*s) {
		long n = 0;
		const char *u;
		if (!isdigit((unsigned char)*s))
			return -1;
		for (; isdigit((unsigned char)*s); s++) {
			n = n * 10 + (*s - '0');
			if (n > max)
				return -1;
		}
		if (!*s) {
			if (last >= 0)
				return -1;      /* "1h30": a unit is missing */
			u = duration_units + 2; /* bare: minutes */
		} else if (!(u = strchr(duration_units, *s++)) || u - duration_units <= last) {
			return -1;
		}
		last = (int)(u - duration_units);
		if (n > (max - *total) / duration_secs[last])
			return -1;
		*total += n * duration_secs[last];
	}
	return last < 0 ? -1 : 0;
}

int pbx_duration_parse(const char *s, long max, long *seconds)
{
	long total;
	if (!s)
		return -1;
	if (!strcmp(s, "off")) {
		*seconds = 0;
		return 0;
	}
	if (duration_parts(s, max, &total) < 0 || total > max)
		return -1;
	*seconds = total;
	return 0;
}

void pbx_duration_format(long seconds, char *out, unsigned long size)
{
	size_t i, len = 0;
	if (seconds <= 0) {
		snprintf(out, size, "off");
		return;
	}
	out[0] = '\0';
	for (i = 0; i < 4 && seconds > 0 && len < size; i++) {
		long n = seconds / duration_secs[i];
		if (!n)
			continue;
		len += (size_t)snprintf(out + len, size - len, "%ld%c", n, duration_units[i]);
		seconds -= n * duration_secs[i];
	}
}

int pbx_autostop_parse(const char *s, long min, long max, long *seconds)
{
	long v;
	if (s && !strcmp(s, "off")) {
		*seconds = 0;
		return 0;
	}
	if (pbx_duration_parse(s, max, &v) < 0 || v < min)
		return -1;
	*seconds = v;
	return 0;
}
