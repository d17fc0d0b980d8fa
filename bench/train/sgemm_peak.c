/*
 * sgemm_peak.c - the OpenBLAS sgemm ceiling of this machine, for judging
 * pbx-train's achieved GFLOP/s: times C = A x B for square float matrices
 * with the given thread count and prints the best GFLOP/s as JSON.
 * Built and run by bench/train/vs_pytorch.sh:
 *   cc -O2 sgemm_peak.c $(pkg-config --cflags --libs openblas) -o sgemm_peak
 *   ./sgemm_peak THREADS [N]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	int n = argc > 2 ? atoi(argv[2]) : 2048;
	float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
	float *c = malloc(sizeof(float) * n * n);
	double best = 0.0;
	if (!a || !b || !c)
		return 1;
	for (long i = 0; i < (long)n * n; i++) {
		a[i] = (float)(i % 7) * 0.1f;
		b[i] = (float)(i % 5) * 0.1f;
	}
	openblas_set_num_threads(threads);
	for (int rep = 0; rep < 6; rep++) {
		double t = now();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
			    a, n, b, n, 0.0f, c, n);
		t = now() - t;
		double gf = 2.0 * n * n * n / t * 1e-9;
		if (gf > best)
			best = gf;
	}
	printf("{\"sgemm_n\": %d, \"threads\": %d, \"sgemm_gflops\": %.1f, \"openblas\": \"%s\"}\n",
	       n, threads, best, openblas_get_config());
	free(a);
	free(b);
	free(c);
	return 0;
}
