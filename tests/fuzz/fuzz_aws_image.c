/*
 * fuzz_aws_image.c - libFuzzer target for the EC2 image list parser
 * (aws_images_parse in src/cloud/aws/parse.c, libxml2): any bytes must
 * parse or fail cleanly; what parses has an ami- id, a name and a state
 * without control characters, an owner tag (maybe ""), and only snap-
 * snapshot ids.
 */
#include "cloud/aws/aws.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int clean(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct aws_image *v = NULL;
	size_t n = 0, i, k;
	if (aws_images_parse((const char *)data, size, &v, &n, &err) == 0) {
		for (i = 0; i < n; i++) {
			if (!v[i].id || strncmp(v[i].id, "ami-", 4) != 0 || strlen(v[i].id) < 5 ||
			    !v[i].name || !clean(v[i].name) || !v[i].state || !*v[i].state ||
			    !clean(v[i].state) || !v[i].owner || !clean(v[i].owner) ||
			    (v[i].reason && !clean(v[i].reason)))
				abort();
			for (k = 0; k < v[i].nsnapshots; k++)
				if (strncmp(v[i].snapshots[k], "snap-", 5) != 0 ||
				    strlen(v[i].snapshots[k]) < 6)
					abort();
		}
	} else if (!err.msg[0] || n != 0) {
		abort();
	}
	aws_images_free(v, n);
	return 0;
}
