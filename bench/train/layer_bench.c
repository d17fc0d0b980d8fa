/*
 * layer_bench.c - per-kernel times of one cnn-bn training step (batch 128)
 * on pbx-train's layer functions (the BN+ReLU+pool blocks fused, as the
 * model runs them; the unfused pool1/bn1 backward for comparison), then the
 * whole model's forward+backward: for profiling on a shared machine, each
 * runs REPS times and the MINIMUM is reported (noise only adds).
 *
 * build: B=build-perf/src; cc -O2 -fopenmp -Isrc bench/train/layer_bench.c \
 *          $B/train/libpbx_train_core.a $B/runtime/libpbx_runtime.a \
 *          $B/util/libpbx_util.a $(pkg-config --libs openblas yaml-0.1 \
 *          jansson zlib) -lm -o layer_bench
 * run:   OMP_NUM_THREADS=2 ./layer_bench [reps [conv scratch cap, floats]]
 */
#include "train/layers/layers.h"
#include "train/model.h"

#include <omp.h>
#include <xmmintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define B 128

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

static float *buf(size_t n)
{
	float *p = malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
	return p;
}

static int reps = 20;
static double total;

#define TIME(name, call) do { \
	double best = 1e9; \
	for (int r_ = 0; r_ < reps; r_++) { \
		double t0_ = now(); call; double t1_ = now() - t0_; \
		if (t1_ < best) best = t1_; \
	} \
	total += best; \
	printf("%-22s %8.3f ms\n", name, best * 1e3); \
} while (0)

int main(int argc, char **argv)
{
	size_t cap = argc > 2 ? (size_t)atol(argv[2]) : 0;
	if (argc > 1)
		reps = atoi(argv[1]);
	pbx_gemm_init();
	_mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ/DAZ, as pbx-train */
	#pragma omp parallel
	_mm_setcsr(_mm_getcsr() | 0x8040);
	size_t s1 = conv_scratch_floats(B, 1, 28, 28, 32, 3, 1, 1, cap);
	size_t s2 = conv_scratch_floats(B, 32, 14, 14, 64, 3, 1, 1, cap);
	size_t ns = s1 > s2 ? s1 : s2;
	float *scr = buf(ns);
	float *x = buf(B * 784), *w1 = buf(32 * 9), *b1 = buf(32);
	float *c1 = buf(B * 32 * 784), *r1 = buf(B * 32 * 784), *p1 = buf(B * 32 * 196);
	float *w2 = buf(64 * 288), *b2 = buf(64);
	float *c2 = buf(B * 64 * 196), *p2 = buf(B * 64 * 49);
	float *g = buf(64 * 288 + 1000), *bn = buf(1024), *sv = buf(1024);
	float *d1 = buf(B * 32 * 784), *d1b = buf(B * 32 * 784), *dp1 = buf(B * 32 * 196);
	float *d2b = buf(B * 64 * 196), *dp2 = buf(B * 64 * 49);
	float *fw = buf(128 * 3136), *fdw = buf(128 * 3136), *fo = buf(B * 128);

	TIME("conv1 fwd", conv_forward(c1, x, w1, b1, B, 1, 28, 28, 32, 3, 1, 1, 0, scr, ns));
	TIME("bn1+pool1 fwd (fused)", batchnorm_relu_maxpool2_forward(p1, c1, bn, bn + 32, bn + 64, bn + 96, sv, sv + 32, B, 32, 28, 28, 1e-5f, 0.1f, 1));
	TIME("conv2 fwd", conv_forward(c2, p1, w2, b2, B, 32, 14, 14, 64, 3, 1, 1, 0, scr, ns));
	TIME("bn2+pool2 fwd (fused)", batchnorm_relu_maxpool2_forward(p2, c2, bn, bn + 64, bn + 128, bn + 192, sv + 64, sv + 128, B, 64, 14, 14, 1e-5f, 0.1f, 1));
	TIME("fc1 fwd", linear_forward(fo, p2, fw, b1, B, 3136, 128));
	TIME("fc1 bwd", linear_backward(dp2, fdw, g, fo, p2, fw, B, 3136, 128));
	TIME("pool2+bn2 bwd (fused)", batchnorm_relu_maxpool2_backward(d2b, g, g + 64, dp2, c2, bn, bn + 64, sv + 64, sv + 128, B, 64, 14, 14));
	TIME("conv2 bwd", conv_backward(dp1, g, g + 500, d2b, NULL, p1, w2, B, 32, 14, 14, 64, 3, 1, 1, scr, ns));
	TIME("pool1+bn1 bwd (fused)", batchnorm_relu_maxpool2_backward(d1b, g, g + 32, dp1, c1, bn, bn + 32, sv, sv + 32, B, 32, 28, 28));
	TIME("conv1 bwd", conv_backward(NULL, g, g + 500, d1b, NULL, x, w1, B, 1, 28, 28, 32, 3, 1, 1, scr, ns));
	printf("%-22s %8.3f ms  = %.0f images/s (layers only)\n", "total", total * 1e3, B / total);
	/* conv1 and conv2 by im2col, for comparison (not in the total) */
	TIME("(conv1 fwd im2col)", conv_im2col_forward(c1, x, w1, b1, B, 1, 28, 28, 32, 3, 1, 1, 0, scr, ns));
	TIME("(conv1 bwd im2col)", conv_im2col_backward(NULL, g, g + 500, d1b, NULL, x, w1, B, 1, 28, 28, 32, 3, 1, 1, scr, ns));
	TIME("(conv2 fwd im2col)", conv_im2col_forward(c2, p1, w2, b2, B, 32, 14, 14, 64, 3, 1, 1, 0, scr, ns));
	TIME("(conv2 bwd im2col)", conv_im2col_backward(dp1, g, g + 500, d2b, NULL, p1, w2, B, 32, 14, 14, 64, 3, 1, 1, scr, ns));
	/* the unfused pair, for comparison (not in the total) */
	TIME("(pool1 bwd unfused)", maxpool_backward(d1, dp1, r1, B, 32, 28, 28, 2, 2, 0));
	TIME("(bn1 bwd unfused)", batchnorm_backward(d1b, g, g + 32, d1, c1, bn, bn + 32, sv, sv + 32, 1, B, 32, 784));

	const struct pbx_layer_spec *specs;
	struct pbx_err err = PBX_ERR_INIT;
	int n;
	int32_t y[B];
	int64_t correct = 0;
	pbx_model_builtin("cnn-bn", &specs, &n);
	struct pbx_model *m = pbx_model_new(specs, n, 1, 28, 28, 10, B, 1, &err);
	for (int i = 0; i < B; i++)
		y[i] = i % 10;
	total = 0.0;
	TIME("model fwd+bwd", (pbx_model_forward(m, x, y, B, 1, &correct),
			       pbx_model_zero_grad(m), pbx_model_backward(m)));
	printf("%-22s %8.3f ms  = %.0f images/s (model only)\n", "model", total * 1e3, B / total);
	pbx_model_free(m);
	return 0;
}
