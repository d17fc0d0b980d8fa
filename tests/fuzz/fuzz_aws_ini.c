/*
 * fuzz_aws_ini.c - libFuzzer target for the reader of the AWS CLI's INI
 * files (~/.aws/credentials, ~/.aws/config: src/cloud/aws/creds.c): any
 * bytes parse or fail with a message naming the line; keys and values
 * handed out are NUL-terminated and trimmed.
 */
#include "cloud/aws/aws.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(void *ctx, const char *key, const char *value)
{
	size_t kl = strlen(key), vl = strlen(value);
	(void)ctx;
	if ((kl && (key[kl - 1] == ' ' || key[0] == ' ')) ||
	    (vl && (value[vl - 1] == ' ' || value[0] == ' ')))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (aws_ini_read("fuzz", (const char *)data, size, "default", check, NULL, &err) < 0 &&
	    strncmp(err.msg, "fuzz:", 5) != 0)
		abort();
	(void)aws_ini_read("fuzz", (const char *)data, size, "profile dev", check, NULL, &err);
	return 0;
}
