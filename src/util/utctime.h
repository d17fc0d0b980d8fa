/*
 * utctime.h - a UTC date and time as the clouds write them in replies
 * (Compute Engine's RFC 3339 stamps and EC2's launchTime, EC2's
 * "YYYY-MM-DD HH:MM:SS GMT" in a state-transition reason), read strictly into unix seconds.  Used by the
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

/* Unix seconds of an RFC 3339 date-time (s may be NULL): YYYY-MM-DDTHH:MM:SS,
 * optional fractional seconds (dropped), then Z or a +HH:MM / -HH:MM
 * offset (applied), as Compute Engine's lastStopTimestamp or EC2's
 * launchTime.  Strict: anything else gives 0 (unknown), never an error. */
int64_t pbx_rfc3339_time(const char *s);

#endif
