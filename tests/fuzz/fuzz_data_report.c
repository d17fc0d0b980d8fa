/*
 * fuzz_data_report.c - libFuzzer target for the one-line JSON report a
 * head's pbx gives after staging a data source itself (src/jobs/data.c,
 * pbx_data_result_parse, read by the user's pbx from `pbx cluster data`):
 * any bytes parse or fail cleanly with a message naming the source; a
 * parsed report is the expected source's (id) and leaves the key alone.
 */
#include "jobs/data.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_data_result r;
	struct pbx_err err = PBX_ERR_INIT;
	char key[] = "gs://bucket/prefix/";
	memset(&r, 0, sizeof(r));
	memcpy(r.id, "0123456789abcdef", 17);
	r.key = key;
	r.staged_before = -7;
	if (pbx_data_result_parse((const char *)data, size, &r, &err) < 0) {
		if (!strstr(err.msg, "gs://bucket/prefix/") || r.staged_before != -7)
			abort(); /* the message names the source; nothing was taken */
	} else if (r.key != key || strcmp(r.id, "0123456789abcdef") != 0) {
		abort();
	}
	pbx_err_clear(&err);
	return 0;
}
