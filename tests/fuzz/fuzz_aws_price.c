/*
 * fuzz_aws_price.c - libFuzzer target for the Price List GetProducts
 * reply parser (pbx_price_aws_parse in src/cloud/price/parse.c), whose
 * PriceList entries are JSON texts inside JSON strings: any bytes parse or
 * fail with a message; what is kept is an on-demand "type:T" item with a
 * non-negative USD price.
 */
#include "cloud/price/price.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_price_item *v = NULL;
	size_t n = 0, i;
	char *next = NULL;
	int rc = pbx_price_aws_parse((const char *)data, size, &v, &n, &next, &err);
	if (rc < 0 && !err.msg[0])
		abort();
	for (i = 0; i < n; i++)
		if (v[i].nanos < 0 || v[i].spot || strcmp(v[i].currency, "USD") ||
		    strncmp(v[i].item, "type:", 5) || strlen(v[i].item) < 6)
			abort();
	pbx_price_items_free(v, n);
	free(next);
	return 0;
}
