/*
 * size.h - sizes as users write them in the configuration ("20GB",
 * "500 MiB", "1.5TB", "0"), for keys such as data_cache_max
 * (docs/data.md, "The download cache").
 */
#ifndef PBX_UTIL_SIZE_H
#define PBX_UTIL_SIZE_H

#include <stdint.h>

/* Reads `s` into *bytes: a number (digits, an optional fraction of at
 * most 3 digits) and an optional unit: B (or none), KB MB GB TB (powers
 * of 1000) or KiB MiB GiB TiB (powers of 1024), case-insensitive, one
 * space allowed before it.  Returns 0, or -1 when `s` is not such a size
 * or it exceeds 2^62 bytes (*bytes then unchanged). */
int pbx_size_parse(const char *s, uint64_t *bytes);

#endif
