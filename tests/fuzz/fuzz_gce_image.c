/*
 * fuzz_gce_image.c - libFuzzer target for the Compute Engine Image parser
 * (gce_image_parse in src/cloud/gce/parse.c): any bytes must parse or fail
 * cleanly; what parses has an RFC 1035 name, a status, an owner label that
 * fits, and sizes that are not negative.
 */
#include "cloud/gce/gce.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	json_t *v = json_loadb((const char *)data, size, 0, NULL);
	struct gce_image img;
	if (gce_image_parse(v, &img, &err) == 0) {
		size_t len = strlen(img.name);
		if (len == 0 || len > 63 || img.name[0] < 'a' || img.name[0] > 'z' ||
		    strspn(img.name, "abcdefghijklmnopqrstuvwxyz0123456789-") != len ||
		    !img.status[0] || strlen(img.owner) >= sizeof(img.owner) || img.disk_gb < 0 ||
		    img.archive_bytes < 0)
			abort();
	} else if (!err.msg[0]) {
		abort();
	}
	json_decref(v);
	return 0;
}
