/*
 * fuzz_gce_token.c - libFuzzer target for the OAuth token reply parser
 * (src/cloud/gce/creds.c, pbx_gce_token_parse): any bytes must parse or
 * fail cleanly; a parsed token is non-empty, has no line break (it goes
 * into a header) and a positive lifetime, and an error never quotes it.
 */
#include "cloud/gce/auth.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *token = NULL;
	long exp = 0;
	if (pbx_gce_token_parse((const char *)data, size, "fuzz", &token, &exp, &err) == 0) {
		if (!token || !*token || strpbrk(token, "\r\n") || exp < 1)
			abort();
		free(token);
	} else if (token || !err.msg[0]) {
		abort();
	}
	return 0;
}
