/*
 * conv_shared.h - pieces the three convolution kernels share (conv.c:
 * im2col + gemm, conv_wino.c: Winograd, conv_c1.c: one input channel):
 * how a batch is split over the OpenMP threads, bias (+ReLU) on the way out,
 * and the bias gradient, so
 * every kernel splits the same way and sums db in the same lane order
 * (the same floats, whichever kernel a layer uses).
 */
#ifndef PBX_TRAIN_LAYERS_CONV_SHARED_H
#define PBX_TRAIN_LAYERS_CONV_SHARED_H

#include <stddef.h>

/* Images [lo, hi) of thread t of nt, for a batch of B. */
static inline void conv_share(int B, int t, int nt, int *lo, int *hi)
{
	*lo = (int)((long long)B * t / nt);
	*hi = (int)((long long)B * (t + 1) / nt);
}

/* dst[0, n) = src + bias, then max(0, .) if relu: a conv output row (dst
 * may be src). */
static inline void conv_bias_relu(float *dst, const float *src, size_t n, float bias, int relu)
{
	if (relu) {
		for (size_t p = 0; p < n; p++) {
			float v = src[p] + bias;
			dst[p] = v > 0.0f ? v : 0.0f;
		}
	} else {
		for (size_t p = 0; p < n; p++)
			dst[p] = src[p] + bias;
	}
}

/* dout *= (relu_out > 0) if relu_out; db (OC) += sum over b, p of dout.
 * Call inside a parallel region: the channels are shared out (omp for).
 * Defined in conv.c. */
void conv_bias_grad(float *db, float *dout, const float *relu_out, int B, int OC, size_t plane);

#endif
