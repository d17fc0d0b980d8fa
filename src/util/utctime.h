/*
 * utctime.h - a UTC date and time as the clouds write them in replies
 * (Compute Engine's RFC 3339 stamps, EC2's "YYYY-MM-DD HH:MM:SS GMT" in a
 * state-transition reason), read strictly into unix seconds.  Used by the
 * providers' list parsers (src/cloud/gce/parse.c, src/cloud/aws/parse.c).
 */
#ifndef PBX_UTIL_UTCTIME_H
#define PBX_UTIL_UTCTIME_H

#include <stdint.h>

/* Unix seconds of the 19 characters "YYYY-MM-DD?HH:MM:SS" at s, ? being one
 * of the characters of `seps` (e.g. "Tt" or " "), as UTC; 0 when they are
 * not such a date and time (a field out of range, February 29 of a common
 * year), or it is not after 1970. */
int64_t pbx_utc_datetime(const char *s, const char *seps);

#endif
