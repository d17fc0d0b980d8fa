/*
 * money.c - exact decimal amounts (see money.h).
 */
#include "util/money.h"

#include <stdio.h>
#include <string.h>

int pbx_money_parse(const char *s, int64_t *nanos)
{
	int64_t units = 0, frac = 0, scale = PBX_NANO / 10;
	int digits = 0;
	if (!s || !*s || *s == '.')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++, digits++) {
		if (units > PBX_NANO)
			return -1;
		units = units * 10 + (*s - '0');
	}
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++) {
			if (scale)
				frac += (*s - '0') * scale;
			else if (*s != '0')
				return -1;
			scale /= 10;
		}
	if (*s || !digits || units > PBX_NANO)
		return -1;
	*nanos = units * PBX_NANO + frac;
	return 0;
}

int pbx_price_parse(const char *s, int64_t *nanos)
{
	int64_t v;
	if (pbx_money_parse(s, &v) < 0 || v > PBX_PRICE_MAX)
		return -1;
	*nanos = v;
	return 0;
}

int pbx_money_muladd(int64_t a, int64_t n, int64_t c, int64_t *out)
{
	int64_t p, sum;
	if (a < 0 || n < 0 || c < 0 || __builtin_mul_overflow(a, n, &p) ||
	    __builtin_add_overflow(p, c, &sum) || sum > PBX_MONEY_MAX)
		return -1;
	*out = sum;
	return 0;
}

void pbx_money_format(int64_t nanos, int digits, char *out, size_t size)
{
	int64_t div = PBX_NANO, half;
	int i;
	if (digits < 0)
		digits = 0;
	if (digits > 9)
		digits = 9;
	for (i = 0; i < digits; i++)
		div /= 10;
	half = div / 2;
	if (nanos < 0)
		nanos = 0;
	nanos = (nanos + half) / div; /* in units of 10^-digits */
	for (i = 0, div = 1; i < digits; i++)
		div *= 10;
	if (digits)
		snprintf(out, size, "%lld.%0*lld", (long long)(nanos / div), digits,
			 (long long)(nanos % div));
	else
		snprintf(out, size, "%lld", (long long)nanos);
}

int pbx_currency_ok(const char *code)
{
	return code && strlen(code) == 3 && code[0] >= 'A' && code[0] <= 'Z' && code[1] >= 'A' &&
	       code[1] <= 'Z' && code[2] >= 'A' && code[2] <= 'Z';
}
