/*
 * fuzz_gce_creds.c - libFuzzer target for the Google credentials file
 * parser (src/cloud/gce/creds.c, pbx_gce_creds_parse): any bytes must
 * parse or fail cleanly with a message naming the file; a parsed file has
 * the fields its type requires, and its token_uri (where secrets go) is one
 * pbx_http_url_allowed accepts.
 */
#include "cloud/gce/auth.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_gce_creds c;
	char why[256];
	if (pbx_gce_creds_parse("fuzz.json", (const char *)data, size, &c, &err) == 0) {
		if (c.token_uri && !pbx_http_url_allowed(c.token_uri, why, sizeof(why)))
			abort();
		if (!strcmp(c.type, "service_account")) {
			if (!c.client_email || !c.private_key || !c.token_uri)
				abort();
		} else if (!strcmp(c.type, "authorized_user")) {
			if (!c.client_id || !c.client_secret || !c.refresh_token)
				abort();
		} else {
			abort();
		}
		pbx_gce_creds_free(&c);
	} else if (strncmp(err.msg, "fuzz.json", 9) != 0) {
		abort();
	}
	return 0;
}
