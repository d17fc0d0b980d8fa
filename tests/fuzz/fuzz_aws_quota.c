/*
 * fuzz_aws_quota.c - libFuzzer target for the readers of `pbx config check
 * --clouds`' EC2 replies (src/cloud/aws/quota.c, json11.c, parse.c): any
 * bytes, read as a GetServiceQuota reply (jansson), a JSON 1.1 error and a
 * DescribeInstanceTypes reply (libxml2), parse or fail cleanly; a quota
 * read is a finite number of 0 or more, an error text has no control
 * character, and each type has a name and 1 to 100000 vCPUs.
 */
#include "cloud/aws/aws.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *text = (const char *)data;
	char msg[256], **names = NULL, *p;
	int *vcpus = NULL;
	size_t n = 0, i;
	double value = -1;
	if (aws_quota_parse(text, size, "L-DB2E81BA", &value, &err) == 0 &&
	    (!isfinite(value) || value < 0))
		abort();
	aws_json_error(text, size, msg, sizeof(msg));
	for (p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			abort();
	if (aws_vcpus_parse(text, size, &names, &vcpus, &n, &err) == 0)
		for (i = 0; i < n; i++)
			if (!names[i] || !*names[i] || vcpus[i] < 1 || vcpus[i] > 100000)
				abort();
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(vcpus);
	return 0;
}
