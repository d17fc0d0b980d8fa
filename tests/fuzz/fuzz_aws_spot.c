/*
 * fuzz_aws_spot.c - libFuzzer target for the DescribeSpotPriceHistory
 * reply parser (pbx_price_spot_parse in src/cloud/price/parse.c, over
 * src/cloud/aws's libxml2 helpers): any bytes parse or fail with a
 * message; a price found is not negative.
 */
#include "cloud/price/price.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	int64_t max = 0;
	int found = 0;
	char *next = NULL;
	int rc = pbx_price_spot_parse((const char *)data, size, "g4dn.xlarge", &max, &found, &next,
				      &err);
	if ((rc < 0 && !err.msg[0]) || (found && max < 0) || (rc < 0 && next))
		abort();
	free(next);
	return 0;
}
