/*
 * fuzz_tfrecord.c - libFuzzer target for the TFRecord reader and the
 * tf.train.Example decoder (src/runtime/tfrecord.c): any bytes, read as a
 * shard, must give records or an error naming the stream and an offset,
 * never a crash; every decoded image must have h*w*c pixels in range.
 */
#include "runtime/tfrecord.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decodes one record; checks what a loader relies on. */
static void fuzz_example(const unsigned char *d, size_t len)
{
	struct pbx_example ex;
	struct pbx_err err = PBX_ERR_INIT;
	unsigned sum = 0;
	if (pbx_example_decode(d, len, &ex, &err) < 0) {
		if (!err.msg[0])
			abort();
		return;
	}
	if (ex.h < 1 || ex.h > 4096 || ex.w < 1 || ex.w > 4096 || ex.c < 1 || ex.c > 16 ||
	    ex.label < 0 || ex.label > 65535 || !ex.pixels)
		abort();
	for (size_t i = 0; i < (size_t)ex.h * ex.w * ex.c; i++)
		sum += ex.pixels[i]; /* ASan: every pixel is readable */
	(void)sum;
	pbx_example_release(&ex);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	const unsigned char *d;
	size_t len;
	int rc;
	/* the bytes as one record's payload, then as a shard */
	fuzz_example(data, size);
	FILE *f = fmemopen(size ? (void *)data : (void *)"", size ? size : 1, "rb");
	if (!f)
		return 0;
	struct pbx_tfrecord_reader *r = pbx_tfrecord_reader_new(f, "shard");
	while ((rc = pbx_tfrecord_next(r, &d, &len, &err)) == 1)
		fuzz_example(d, len);
	if (rc < 0 && strncmp(err.msg, "shard: offset ", 14) != 0)
		abort();
	pbx_tfrecord_reader_free(r);
	fclose(f);
	return 0;
}
