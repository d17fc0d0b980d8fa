/*
 * kernels.h - pbx-train's own device kernels (kernels.cu), for the work no
 * NVIDIA library call does: element-wise activations and products, bias
 * broadcasts, batch norm's replay pass, softmax cross-entropy, the
 * gradient norm and the optimiser updates.  Each launcher queues its
 * kernel on `s` and returns at once; shapes as in layers/layers.h (NCHW,
 * float32).  Every reduction has a fixed shape (fixed grid, tree in shared
 * memory, no atomics), so results are the same run to run.
 */
#ifndef PBX_TRAIN_CUDA_KERNELS_H
#define PBX_TRAIN_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* enum act_kind of layers.h: relu, leaky relu, tanh, sigmoid, gelu (tanh
 * approximation), with the CPU's formulas. */
void cuk_act_forward(float *out, const float *in, size_t n, int kind, float alpha, cudaStream_t s);
void cuk_act_backward(float *din, const float *dout, const float *in, const float *out, size_t n,
		      int kind, float alpha, cudaStream_t s);
/* out = a * b element-wise (dropout forward and backward). */
void cuk_mul(float *out, const float *a, const float *b, size_t n, cudaStream_t s);
/* out (B,C,HW) += bias (C). */
void cuk_bias_add(float *out, const float *bias, int B, int C, int HW, cudaStream_t s);
/* Batch norm with given statistics: out = (in - mean) * invstd * gamma +
 * beta, per channel of (B,C,HW) (the replay pass of recomputation). */
void cuk_bn_apply(float *out, const float *in, const float *gamma, const float *beta,
		  const float *mean, const float *invstd, int B, int C, int HW, cudaStream_t s);
/* probs (B,V) = softmax(logits); res[0] = sum of the B cross-entropies
 * (double), res[1] = correct argmax predictions (as a double). */
void cuk_softmax_xent(float *probs, double *res, const float *logits, const int32_t *labels, int B,
		      int V, cudaStream_t s);
/* dlogits (B,V) = (probs - onehot(labels)) / B. */
void cuk_softmax_xent_backward(float *dlogits, const float *probs, const int32_t *labels, int B,
			       int V, cudaStream_t s);
/* Global L2 norm of g (n) into *norm (double, device); then, when
 * max_norm > 0 and the norm exceeds it, g *= max_norm / (norm + 1e-6).
 * partial: CUK_NORM_BLOCKS doubles of device scratch. */
#define CUK_NORM_BLOCKS 256
void cuk_clip(float *g, size_t n, double max_norm, double *partial, double *norm, cudaStream_t s);
/* The optimiser updates of optim.c, element for element. */
void cuk_sgd(float *p, const float *g, float *v, size_t n, float lr, float mu, int nesterov,
	     float wd, cudaStream_t s);
void cuk_adam(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
	      float eps, float c1, float c2, float wd, int decoupled, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
