/*
 * loader_bench.c - loader throughput, TFRecord shards against IDX files, in
 * one run (bench/train/tfrecord_loader.sh drives it).  For each source:
 * load the training set into memory (records/s of loading, best of
 * `reps`), then one epoch of batches through pbx_loader (the prefetching
 * batch loader, the same code for both sources once loaded).
 * Usage: loader_bench IDX_DIR TFRECORD_PATTERN THREADS REPS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/dataset.h"
#include "runtime/loader.h"
#include "runtime/tfrecord.h"
#include "util/xalloc.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Batches of 128 for one epoch with `threads` loader threads: records/s. */
static double epoch_rate(const struct pbx_dataset *ds, int threads)
{
	struct pbx_augment aug = { 0, 0 };
	struct pbx_loader *l = pbx_loader_new(ds, 128, 1, &aug, 1, 0, 1, threads, 1);
	float *x = xmalloc(sizeof(float) * 128 * (size_t)ds->c * ds->h * ds->w);
	int32_t y[128];
	int64_t n = 0;
	int k;
	double t0 = now();
	while ((k = pbx_loader_next(l, x, y)) > 0)
		n += k;
	double dt = now() - t0;
	pbx_loader_free(l);
	free(x);
	return (double)n / dt;
}

int main(int argc, char **argv)
{
	struct pbx_dataset ds;
	struct pbx_err err = PBX_ERR_INIT;
	if (argc != 5) {
		fprintf(stderr, "usage: loader_bench IDX_DIR TFRECORD_PATTERN THREADS REPS\n");
		return 2;
	}
	int threads = atoi(argv[3]), reps = atoi(argv[4]);
	for (int src = 0; src < 2; src++) {
		double best = 1e30;
		int n = 0;
		for (int r = 0; r < reps; r++) {
			double t0 = now();
			int rc = src == 0 ? pbx_dataset_load_named("fashion-mnist", argv[1], 1, &ds, &err)
					  : pbx_dataset_load_tfrecord(argv[2], 0, 1, threads, &ds, &err);
			double dt = now() - t0;
			if (rc < 0) {
				fprintf(stderr, "loader_bench: %s\n", err.msg);
				return 1;
			}
			n = ds.n;
			if (dt < best)
				best = dt;
			if (r < reps - 1)
				pbx_dataset_free(&ds);
		}
		double er = epoch_rate(&ds, threads);
		printf("%-10s load %6d records in %.3f s = %9.0f records/s (%d thread%s) | one epoch of batches: %9.0f records/s\n",
		       src == 0 ? "idx.gz" : "tfrecord", n, best, n / best,
		       src == 0 ? 1 : threads, src == 0 || threads == 1 ? "" : "s", er);
		pbx_dataset_free(&ds);
	}
	return 0;
}
