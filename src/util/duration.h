/*
 * duration.h - durations as users write them ("90s", "30m", "1h30m",
 * "2d", a bare number of minutes, "off"), for template keys and options
 * such as autostop (docs/autostop.md).
 */
#ifndef PBX_UTIL_DURATION_H
#define PBX_UTIL_DURATION_H

/* Reads `s` into *seconds: "off" (or "0") is 0; otherwise one or more
 * NUMBER UNIT parts (units d, h, m, s; each at most once, in that order)
 * or a bare NUMBER, which is minutes.  Returns 0, or -1 when `s` is not
 * such a duration or exceeds `max` seconds (*seconds then unchanged). */
int pbx_duration_parse(const char *s, long max, long *seconds);

/* An autostop setting: "off" (0), or a duration of at least `min`
 * seconds and at most `max`.  A duration of zero ("0", "0s") is refused
 * like one below `min`: only "off" turns it off.  Returns 0 or -1. */
int pbx_autostop_parse(const char *s, long min, long max, long *seconds);

/* `seconds` written back as the shortest form pbx_duration_parse reads
 * ("off", "90s", "1h30m") into out (at least 32 bytes). */
void pbx_duration_format(long seconds, char *out, unsigned long size);

#endif
