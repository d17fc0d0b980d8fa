/*
 * fuzz_objstore_list.c - libFuzzer target for the object stores' list
 * parsers (src/objstore: S3 ListObjectsV2 XML with libxml2, GCS
 * objects.list JSON with jansson), the S3 error-code reader and the
 * multipart upload's replies (InitiateMultipartUploadResult,
 * CompleteMultipartUploadResult or an <Error>), a resumable session's
 * Range and a ranged read's Content-Range: any bytes must parse or fail
 * cleanly; what parses has a non-empty name on every object, a page token only when the parse succeeded, a
 * CRC32C never from an S3 listing, a non-empty UploadId or Code, and a
 * Content-Range whose first byte is not past its last or the total.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "objstore/objstore_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int rc, struct pbx_object *v, size_t n, char *next, int s3)
{
	size_t i;
	if (rc < 0 && next)
		abort();
	if (next && !*next)
		abort();
	for (i = 0; i < n; i++)
		if (!v[i].name || !*v[i].name || (s3 && v[i].has_crc32c))
			abort();
	pbx_objects_free(v, n);
	free(next);
}

static void check_multipart(const char *text, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *id = NULL, code[64] = "", *z;
	uint32_t crc;
	uint64_t held, first, last, total;
	int has, rc;
	rc = objstore_s3_upload_id_parse(text, size, &id, &err);
	if ((rc == 0) != (id && *id))
		abort();
	free(id);
	rc = objstore_s3_complete_parse(text, size, &crc, &has, code, sizeof(code));
	if (rc == 1 && !code[0])
		abort();
	z = malloc(size + 1); /* a header value: NUL-terminated */
	if (!z)
		return;
	memcpy(z, text, size);
	z[size] = '\0';
	if (objstore_gcs_range_parse(z, &held) == 0 && held == 0)
		abort();
	if (objstore_content_range_parse(z, &first, &last, &total) == 0 &&
	    (first > last || (total != UINT64_MAX && last >= total)))
		abort();
	free(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct pbx_object *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *next = NULL, code[64];
	size_t n = 0;
	int rc = objstore_s3_list_parse(text, size, &v, &n, &next, &err);
	check(rc, v, n, next, 1);
	v = NULL;
	n = 0;
	next = NULL;
	rc = objstore_gcs_list_parse(text, size, &v, &n, &next, &err);
	check(rc, v, n, next, 0);
	if (objstore_s3_error_code(text, size, code, sizeof(code)) == 0 && !code[0])
		abort();
	check_multipart(text, size);
	return 0;
}
