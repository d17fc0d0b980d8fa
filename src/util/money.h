/*
 * money.h - amounts of money as exact integers: nano-units of a currency
 * (1e-9, Google's Money { units, nanos }), read from and written as plain
 * decimals.  Prices (src/cloud/price) and the `prices:` section of the
 * configuration use them, so sums of prices are exact.
 */
#ifndef PBX_UTIL_MONEY_H
#define PBX_UTIL_MONEY_H

#include <stddef.h>
#include <stdint.h>

#define PBX_NANO      1000000000LL
/* The largest amount read: 1e9 units (a node-hour never costs more). */
#define PBX_MONEY_MAX (PBX_NANO * PBX_NANO)

/* A plain non-negative decimal ("0.0475", "12", "3.") as nano-units.
 * Returns 0, or -1 (*nanos unchanged) for anything else: a sign, an
 * exponent, more than 9 fractional digits that are not zeros, spaces, or
 * more than PBX_MONEY_MAX. */
int pbx_money_parse(const char *s, int64_t *nanos);

/* The largest price pbx takes, an hour of a machine or of one of its
 * parts (a vCPU, a GiB, a GPU), from a catalogue or the configuration:
 * 1e6 units.  With it, a node's price and a cluster's total are sums of
 * products that pbx_money_muladd checks. */
#define PBX_PRICE_MAX (PBX_NANO * 1000000LL)

/* pbx_money_parse, and at most PBX_PRICE_MAX: a price. */
int pbx_price_parse(const char *s, int64_t *nanos);

/* *out = a * n + c, for a, n, c >= 0.  Returns 0, or -1 (*out unchanged)
 * when a factor is negative or the result would pass PBX_MONEY_MAX. */
int pbx_money_muladd(int64_t a, int64_t n, int64_t c, int64_t *out);

/* nanos (>= 0) as a decimal with `digits` (0..9) fractional digits,
 * rounded half up, into out. */
void pbx_money_format(int64_t nanos, int digits, char *out, size_t size);

/* True when `code` is an ISO 4217 currency code shape: three A-Z. */
int pbx_currency_ok(const char *code);

#endif
