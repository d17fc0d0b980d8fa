/*
 * fuzz_gce_price.c - libFuzzer target for the Cloud Billing Catalog SKU
 * page parser (pbx_price_gce_parse in src/cloud/price/parse.c): any bytes
 * parse or fail with a message; what is kept has a known item kind, a
 * non-negative price in the currency asked, and a page token is a string.
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
	int rc = pbx_price_gce_parse((const char *)data, size, "us-central1", "USD", &v, &n, &next,
				     &err);
	if (rc < 0 && !err.msg[0])
		abort();
	for (i = 0; i < n; i++)
		if (v[i].nanos < 0 || strcmp(v[i].currency, "USD") ||
		    (strncmp(v[i].item, "core:", 5) && strncmp(v[i].item, "ram:", 4) &&
		     strncmp(v[i].item, "gpu:", 4)) ||
		    (v[i].spot != 0 && v[i].spot != 1))
			abort();
	if (rc < 0 && next)
		abort();
	pbx_price_items_free(v, n);
	free(next);
	return 0;
}
