/*
 * size.c - parsing sizes as users write them (see size.h).
 */
#include "util/size.h"

#include <ctype.h>
#include <stddef.h>
#include <strings.h>

#define SIZE_MAX_BYTES (UINT64_C(1) << 62)

/* The multiplier of unit u ("", "B", "KB", "KiB" ...), or 0. */
static uint64_t size_unit(const char *u)
{
	static const struct {
		const char *name;
		uint64_t mul;
	} units[] = {
		{ "", 1 },
		{ "B", 1 },
		{ "KB", UINT64_C(1000) },
		{ "MB", UINT64_C(1000000) },
		{ "GB", UINT64_C(1000000000) },
		{ "TB", UINT64_C(1000000000000) },
		{ "KiB", UINT64_C(1) << 10 },
		{ "MiB", UINT64_C(1) << 20 },
		{ "GiB", UINT64_C(1) << 30 },
		{ "TiB", UINT64_C(1) << 40 },
	};
	size_t i;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcasecmp(u, units[i].name))
			return units[i].mul;
	return 0;
}

int pbx_size_parse(const char *s, uint64_t *bytes)
{
	uint64_t whole = 0, frac = 0, scale = 1, mul;
	const char *p = s;
	if (!p || !isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		whole = whole * 10 + (uint64_t)(*p - '0');
		if (whole > SIZE_MAX_BYTES)
			return -1;
	}
	if (*p == '.') {
		if (!isdigit((unsigned char)*++p))
			return -1;
		for (; isdigit((unsigned char)*p); p++) {
			if (scale == 1000)
				return -1; /* more than 3 digits */
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
		}
	}
	if (*p == ' ')
		p++;
	mul = size_unit(p);
	if (!mul || (*p == '\0' && p > s && p[-1] == ' '))
		return -1;
	if (whole > SIZE_MAX_BYTES / mul || whole * mul + frac * mul / scale > SIZE_MAX_BYTES)
		return -1;
	*bytes = whole * mul + frac * mul / scale;
	return 0;
}
