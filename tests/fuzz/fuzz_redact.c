/*
 * fuzz_redact.c - libFuzzer target for the request log's redaction
 * (src/http/redact.c): any reply body and any URL must come out without
 * crashing, within the length cap, and without the value of an
 * access_token member or query parameter.
 */
#include "http/http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A secret value left in `s` after "NAME=" / "\"NAME\":\"": abort. */
static void check_no_value(const char *s, const char *mark, const char *redacted)
{
	const char *p = s;
	while ((p = strstr(p, mark)) != NULL) {
		p += strlen(mark);
		if (*p && *p != '&' && *p != '"' && strncmp(p, redacted, strlen(redacted)) != 0)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *out;
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	out = pbx_http_redact_json(text, size, 200);
	if (strlen(out) > 200 && out[0] != '(')
		abort();
	if (out[0] == '{' || out[0] == '[')
		check_no_value(out, "\"access_token\":\"", "REDACTED");
	free(out);
	out = pbx_http_redact_url(text);
	if (!strchr(text, '#'))
		check_no_value(out, "?access_token=", "REDACTED");
	free(out);
	free(text);
	return 0;
}
