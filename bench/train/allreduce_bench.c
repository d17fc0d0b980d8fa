/*
 * allreduce_bench.c - allreduce bus bandwidth of pbx-train's bucketed
 * gradient path (comm.h: buckets from the end of the buffer, each an
 * MPI_Iallreduce, then the wait and the 1/world scaling) against one plain
 * MPI_Allreduce of the same buffer, in the same run, interleaved.
 *
 * busbw = algbw * 2(n-1)/n with algbw = bytes / time (the convention of
 * NCCL's tests: what each link carries in a ring allreduce).  Median of
 * REPS timed runs after 3 warm-ups; every rank times, rank 0 reports the
 * maximum over ranks of each run (a collective ends when its last rank is
 * done).  Also checks that both paths give the same sums (up to the 1/world
 * scale).
 *   mpirun -np N train_allreduce_bench [REPS [BUCKET_KB [SIZE_KB...]]]
 * Built by tests/train/CMakeLists.txt when MPI is found.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/comm.h"
#include "util/xalloc.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void fill(float *v, size_t n, int rank)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)((i * 7 + (size_t)rank * 13) % 101) * 0.01f;
}

/* The slowest rank's time of one run. */
static double slowest(struct pbx_comm *c, double t)
{
	double v[1] = { 0 };
	/* each rank fills its own slot; the sum gathers them */
	double *all = xcalloc((size_t)c->world, sizeof(double));
	struct pbx_err err = PBX_ERR_INIT;
	all[c->rank] = t;
	if (pbx_comm_sum(c, all, c->world, &err) < 0) {
		fprintf(stderr, "allreduce_bench: %s\n", err.msg);
		exit(1);
	}
	for (int i = 0; i < c->world; i++)
		if (all[i] > v[0])
			v[0] = all[i];
	free(all);
	return v[0];
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 20;
	size_t bucket_kb = argc > 2 ? (size_t)atol(argv[2]) : 4096;
	static const size_t dflt[] = { 64, 256, 1024, 4096, 16384 };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_comm_opts o = { bucket_kb << 10, 120.0, 1 };
	struct pbx_comm *c = pbx_comm_open(&o, &err);
	if (!c) {
		fprintf(stderr, "allreduce_bench: %s\n", err.msg);
		return 1;
	}
	int nsizes = argc > 3 ? argc - 3 : (int)(sizeof(dflt) / sizeof(dflt[0]));
	double *tp = xcalloc((size_t)reps, sizeof(double));
	double *tm = xcalloc((size_t)reps, sizeof(double));
	double f = c->world > 1 ? 2.0 * (c->world - 1) / c->world : 1.0;
	if (c->rank == 0)
		printf("# ranks %d, bucket %zu KiB, median of %d\n"
		       "%10s %12s %14s %12s %14s %s\n", c->world, bucket_kb, reps,
		       "size_KiB", "pbx_ms", "pbx_busbw_GBs", "mpi_ms",
		       "mpi_busbw_GBs", "same_sums");
	for (int s = 0; s < nsizes; s++) {
		size_t kb = argc > 3 ? (size_t)atol(argv[3 + s]) : dflt[s];
		size_t n = (kb << 10) / sizeof(float);
		float *a = xmalloc(sizeof(float) * n), *b = xmalloc(sizeof(float) * n);
		for (int r = -3; r < reps; r++) {
			double t0;
			fill(a, n, c->rank);
			t0 = now();
			pbx_comm_grads_begin(c, a, n);
			pbx_comm_grads_ready(c, 0);
			if (pbx_comm_grads_finish(c, &err) < 0)
				break;
			double t1 = slowest(c, now() - t0);
			fill(b, n, c->rank);
			t0 = now();
			if (pbx_comm_allreduce_floats(c, b, n, &err) < 0)
				break;
			double t2 = slowest(c, now() - t0);
			if (r >= 0) {
				tp[r] = t1;
				tm[r] = t2;
			}
		}
		if (c->failed) {
			fprintf(stderr, "allreduce_bench: %s\n", err.msg);
			return 1;
		}
		int same = 1;
		for (size_t i = 0; i < n; i++)
			if (fabsf(a[i] * (float)c->world - b[i]) > 1e-4f * (1.0f + fabsf(b[i])))
				same = 0;
		qsort(tp, (size_t)reps, sizeof(double), cmp_d);
		qsort(tm, (size_t)reps, sizeof(double), cmp_d);
		double mp = tp[reps / 2], mm = tm[reps / 2], bytes = (double)(n * sizeof(float));
		if (c->rank == 0)
			printf("%10zu %12.3f %14.3f %12.3f %14.3f %s\n", kb, 1e3 * mp,
			       f * bytes / mp * 1e-9, 1e3 * mm, f * bytes / mm * 1e-9,
			       same ? "yes" : "NO");
		free(a);
		free(b);
	}
	free(tp);
	free(tm);
	pbx_comm_close(c);
	return 0;
}
