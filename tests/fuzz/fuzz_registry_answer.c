/*
 * fuzz_registry_answer.c - libFuzzer target for the head's answer to
 * `pbx cluster registry-login|logout` (src/jobs/registry.c,
 * pbx_jobs_registry_answer): any bytes give 0 with a string, or -1 with
 * a message and no string; an OK answer's text is within the input.
 */
#include "jobs/jobs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *said = (char *)1;
	int rc = pbx_jobs_registry_answer((const char *)data, size, "c1", &said, &err);
	if (rc == 0 && (!said || strlen(said) > size))
		abort(); /* an OK answer holds its text, no more than was read */
	if (rc < 0 && (said || !err.msg[0]))
		abort(); /* a refusal leaves no text and says why */
	free(rc == 0 ? said : NULL);
	pbx_err_clear(&err);
	return 0;
}
