/*
 * tfr_dump.c - prints a TFRecord data set as pbx-train loads it (runtime/
 * tfrecord.h), for tests/train/tf_interop.py: a line "n c h w nclasses",
 * then per example "label hex" where hex is the image's bytes, HWC, as
 * round(x*255) of the loaded floats.  Usage: tfr_dump PATTERN.
 */
#include <math.h>
#include <stdio.h>

#include "runtime/tfrecord.h"

int main(int argc, char **argv)
{
	struct pbx_dataset ds;
	struct pbx_err err = PBX_ERR_INIT;
	if (argc != 2) {
		fprintf(stderr, "usage: tfr_dump PATTERN\n");
		return 2;
	}
	if (pbx_dataset_load_tfrecord(argv[1], 0, 1, 2, &ds, &err) < 0) {
		fprintf(stderr, "tfr_dump: %s\n", err.msg);
		return 1;
	}
	printf("%d %d %d %d %d\n", ds.n, ds.c, ds.h, ds.w, ds.nclasses);
	size_t hw = (size_t)ds.h * ds.w;
	for (int i = 0; i < ds.n; i++) {
		const float *x = ds.x + (size_t)i * ds.c * hw;
		printf("%d ", ds.y[i]);
		for (size_t p = 0; p < hw; p++)
			for (int c = 0; c < ds.c; c++)
				printf("%02x", (unsigned)lrintf(x[c * hw + p] * 255.0f));
		printf("\n");
	}
	pbx_dataset_free(&ds);
	return fflush(stdout) ? 1 : 0;
}
