/*
 * layers.h - the forward/backward pairs of pbx-train's CPU reference.
 *
 * Every layer is a pair of plain functions, llm.c style.  Legend for the
 * shape comments:
 *   B = batch size, C = input channels, H, W = input height and width,
 *   OC = output channels, OH, OW = output height and width, K = kernel size,
 *   S = stride, P = padding, IN/OUT = features of a linear layer,
 *   N = elements per example (C*H*W), V = number of classes.
 *
 * Conventions:
 *   - Activations are NCHW, float32, contiguous.
 *   - Parameter gradients are ACCUMULATED (+=): the caller zeroes them once
 *     per step, so chunked or accumulated batches just add up.
 *   - Input gradients are WRITTEN (=): in a sequential net each activation
 *     has exactly one consumer.  A NULL `din` skips that work (first layer).
 *   - No function allocates; scratch space is passed in by the caller, who
 *     owns every buffer.
 *   - Loops over independent outputs use OpenMP with static schedules.  The
 *     one cross-thread reduction, conv's weight gradient (per-thread
 *     partials over shares of the batch), adds the partials in thread
 *     order: results are identical run to run for a given thread count
 *     (they may differ in the last bits between thread counts).
 */
#ifndef PBX_TRAIN_LAYERS_H
#define PBX_TRAIN_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/rng.h"

/* ---------------------------------------------------------------- gemm.c */

/* Pins OpenBLAS to one thread (pbx_gemm parallelises over OpenMP
 * instead) and picks the AVX-512 kernels where the CPU has them (see
 * pbx_gemm_small_init). */
void pbx_gemm_init(void);
/* Row-major C (M,N) = alpha * op(A) (M,K) x op(B) (K,N) + beta * C, split
 * across the OpenMP threads; transa/transb select op = transpose.  Each
 * thread's block goes to an AVX-512 kernel (op(B) = B, alpha 1, beta 0 or
 * 1, K <= 512, AVX-512 CPU) or to single-threaded OpenBLAS. */
void pbx_gemm(int transa, int transb, int M, int N, int K, float alpha, const float *A, int lda,
	      const float *B, int ldb, float beta, float *C, int ldc);

/* Single-threaded products for code already running on every thread:
 * C (M,N) = A (M,K) x B (K,N), and C (M,N) += A (M,K) x B (N,K)^T; all
 * row-major.  AVX-512 kernels where the CPU has them, else OpenBLAS.
 * pbx_gemm_small_init() (call outside parallel regions) sets
 * pbx_gemm_avx512 from the CPU unless it is already 0 or 1 (tests set it
 * to compare the two). */
extern int pbx_gemm_avx512;
void pbx_gemm_small_init(void);
void pbx_gemm_small_nn(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
		       float *C, int ldc);
void pbx_gemm_small_nt_acc(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
			   float *C, int ldc);

/* ---------------------------------------------------------------- conv.c */

/* Floats of scratch that conv_forward/conv_backward need for a batch of B
 * (they process the batch in chunks that fit `cap` floats, at least one
 * image per chunk; 0 = default cap).  Enough for either algorithm below. */
size_t conv_scratch_floats(int B, int C, int H, int W, int OC, int K, int S, int P, size_t cap);
/* in (B,C,H,W), w (OC,C,K,K), b (OC) -> out (B,OC,OH,OW), with
 * OH = (H + 2P - K)/S + 1.  `relu` fuses max(0, .) into the bias pass.
 * Winograd (conv_wino.c) where conv_wino_ok(), else im2col + sgemm. */
void conv_forward(float *out, const float *in, const float *w, const float *b, int B, int C, int H,
		  int W, int OC, int K, int S, int P, int relu, float *scratch, size_t nscratch);
/* dout (B,OC,OH,OW) -> dw += (OC,C,K,K), db += (OC), din = (B,C,H,W).
 * With a fused ReLU pass the conv's output as relu_out: dout is then masked
 * IN PLACE where relu_out is 0 (one pass with the bias sums). */
void conv_backward(float *din, float *dw, float *db, float *dout, const float *relu_out,
		   const float *in, const float *w, int B, int C, int H, int W, int OC, int K,
		   int S, int P, float *scratch, size_t nscratch);

/* The two algorithms, callable directly (tests, benchmarks); same
 * contracts as above.  im2col + sgemm, any K, S, P: */
size_t conv_im2col_scratch_floats(int B, int C, int H, int W, int OC, int K, int S, int P,
				  size_t cap);
void conv_im2col_forward(float *out, const float *in, const float *w, const float *b, int B, int C,
			 int H, int W, int OC, int K, int S, int P, int relu, float *scratch,
			 size_t nscratch);
void conv_im2col_backward(float *din, float *dw, float *db, float *dout, const float *relu_out,
			  const float *in, const float *w, int B, int C, int H, int W, int OC,
			  int K, int S, int P, float *scratch, size_t nscratch);

/* ----------------------------------------------------------- conv_wino.c */

/* Whether conv_forward/backward use Winograd F(2x2,3x3): K = 3, S = 1,
 * P = 1 and at least 8 channels in and out. */
int conv_wino_ok(int C, int OC, int K, int S, int P);
/* As conv_scratch_floats for the Winograd pass (K = 3, S = 1, P = 1). */
size_t conv_wino_scratch_floats(int B, int C, int H, int W, int OC, size_t cap);
/* 3x3, stride 1, padding 1: out (B,OC,H,W); other arguments as
 * conv_forward.  Exact in real arithmetic; in floats the error is a few
 * times im2col's (the transforms add and halve). */
void conv_wino_forward(float *out, const float *in, const float *w, const float *b, int B, int C,
		       int H, int W, int OC, int relu, float *scratch, size_t nscratch);
void conv_wino_backward(float *din, float *dw, float *db, float *dout, const float *relu_out,
			const float *in, const float *w, int B, int C, int H, int W, int OC,
			float *scratch, size_t nscratch);

/* ------------------------------------------------------------- conv_c1.c */

/* Whether the direct one-input-channel kernels apply: C = 1, K = 3, S = 1,
 * P = 1, an AVX-512 CPU, and room in nscratch (as sized by
 * conv_scratch_floats) for B images of H x W into OC channels. */
int conv_c1_ok(int C, int K, int S, int P, int B, int H, int W, int OC, size_t nscratch);
/* in (B,1,H,W) -> out (B,OC,H,W); as conv_forward. */
void conv_c1_forward(float *out, const float *in, const float *w, const float *b, int B, int H,
		     int W, int OC, int relu, float *scratch, size_t nscratch);
/* dw (OC,1,3,3) +=, db (OC) += from dout (B,OC,H,W) (not modified); no
 * input gradient, no ReLU mask. */
void conv_c1_backward_weights(float *dw, float *db, const float *dout, const float *in, int B,
			      int H, int W, int OC, float *scratch, size_t nscratch);

/* ---------------------------------------------------------------- pool.c */

/* in (B,C,H,W) -> out (B,C,OH,OW); padding never wins a max and is not
 * counted by the average. */
void maxpool_forward(float *out, const float *in, int B, int C, int H, int W, int K, int S, int P);
/* Recomputes the argmax from `in`; din = (B,C,H,W). */
void maxpool_backward(float *din, const float *dout, const float *in, int B, int C, int H, int W,
		      int K, int S, int P);
void avgpool_forward(float *out, const float *in, int B, int C, int H, int W, int K, int S, int P);
void avgpool_backward(float *din, const float *dout, int B, int C, int H, int W, int K, int S,
		      int P);

/* ----------------------------------------------------------- batchnorm.c */

/* Batch normalisation over (B, HW) for each of C channels; a linear layer's
 * output is (B,C) with HW = 1.  in, out (B,C,HW); gamma, beta (C);
 * running_mean, running_var (C); saved_mean, saved_invstd (C) are written in
 * training mode and read by backward.  train = 0 uses the running stats;
 * train = 2 (replay, for recomputation) uses saved_mean/saved_invstd and
 * updates nothing, giving the training pass's very floats.
 * relu fuses max(0, .) into the output pass. */
void batchnorm_forward(float *out, const float *in, const float *gamma, const float *beta,
		       float *running_mean, float *running_var, float *saved_mean,
		       float *saved_invstd, int B, int C, int HW, float eps, float momentum,
		       int train, int relu);
/* Training-mode backward: dgamma, dbeta += (C); din = (B,C,HW).  relu: the
 * forward pass had a fused ReLU (the gradient is masked where it clamped;
 * the mask is recomputed from in, gamma, beta and the saved stats, so call
 * it before the optimiser changes gamma and beta).  din may alias dout. */
void batchnorm_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
			const float *gamma, const float *beta, const float *saved_mean,
			const float *saved_invstd, int relu, int B, int C, int HW);

/* batchnorm_forward with relu = 1 followed by 2x2 stride-2 max pooling:
 * in (B,C,H,W) -> pool_out (B,C,H/2,W/2); the BN output is not stored. */
void batchnorm_relu_maxpool2_forward(float *pool_out, const float *in, const float *gamma,
				     const float *beta, float *running_mean, float *running_var,
				     float *saved_mean, float *saved_invstd, int B, int C, int H,
				     int W, float eps, float momentum, int train);
/* batchnorm_backward with relu = 1 for BN -> ReLU -> 2x2 stride-2 max
 * pooling, taking the POOL's output gradient dpool (B,C,H/2,W/2): the
 * pooling argmax and the ReLU mask are recomputed from in (the BN output is
 * not read, and the pool's full-size gradient is built in din, per channel,
 * while it is in cache).  in, din (B,C,H,W); din must not be NULL. */
void batchnorm_relu_maxpool2_backward(float *din, float *dgamma, float *dbeta, const float *dpool,
				      const float *in, const float *gamma, const float *beta,
				      const float *saved_mean, const float *saved_invstd, int B,
				      int C, int H, int W);

/* Synchronised batch norm (data parallelism): the statistics are those of
 * the whole batch over all ranks.  r->sum(ctx, v, n) sums n doubles over
 * the ranks in place.  Forward (training mode only) reduces the per-channel
 * sums of x, then of (x - mean)^2 (two passes, in double); backward reduces
 * sum(g) and sum(g*xhat) and uses them for din, while dgamma/dbeta get this
 * rank's share (the trainer averages parameter gradients over ranks, which
 * makes them the whole batch's).  Exceptions to the rule above: these
 * allocate their reduction buffer (C or 2C+1 doubles) and call out. */
struct bn_reducer {
	void (*sum)(void *ctx, double *v, int n);
	void *ctx;
};
void batchnorm_sync_forward(float *out, const float *in, const float *gamma, const float *beta,
			    float *running_mean, float *running_var, float *saved_mean,
			    float *saved_invstd, int B, int C, int HW, float eps, float momentum,
			    int relu, const struct bn_reducer *r);
void batchnorm_sync_backward(float *din, float *dgamma, float *dbeta, const float *dout,
			     const float *in, const float *gamma, const float *beta,
			     const float *saved_mean, const float *saved_invstd, int relu, int B,
			     int C, int HW, const struct bn_reducer *r);

/* -------------------------------------------------------------- linear.c */

/* in (B,IN), w (OUT,IN), b (OUT) -> out (B,OUT). */
void linear_forward(float *out, const float *in, const float *w, const float *b, int B, int IN,
		    int OUT);
/* dout (B,OUT) -> dw += (OUT,IN), db += (OUT), din = (B,IN). */
void linear_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		     const float *w, int B, int IN, int OUT);

/* ---------------------------------------------------------- activation.c */

enum act_kind { ACT_RELU, ACT_LEAKY_RELU, ACT_TANH, ACT_SIGMOID, ACT_GELU };

/* Element-wise; in, out (n).  alpha is the leaky-ReLU slope. */
void act_forward(float *out, const float *in, size_t n, enum act_kind kind, float alpha);
/* din (n) from dout, in and out (each activation uses what it needs). */
void act_backward(float *din, const float *dout, const float *in, const float *out, size_t n,
		  enum act_kind kind, float alpha);

/* ------------------------------------------------------------- dropout.c */

/* Inverted dropout.  in, out, mask (n); mask holds 0 or 1/(1-p) and is
 * drawn from `rng`.  train = 0 (or p = 0) copies; train = 2 (replay, for
 * recomputation) applies the mask already there without drawing. */
void dropout_forward(float *out, float *mask, const float *in, size_t n, float p, int train,
		     struct pbx_rng *rng);
void dropout_backward(float *din, const float *dout, const float *mask, size_t n);

/* ----------------------------------------------------------------- lrn.c */

/* Local response normalisation across channels (PyTorch convention):
 * scale = k + alpha/size * sum_{window of `size` channels} x^2,
 * out = x * scale^-beta.  in, out, scale (B,C,HW). */
void lrn_forward(float *out, float *scale, const float *in, int B, int C, int HW, int size,
		 float alpha, float beta, float k);
void lrn_backward(float *din, const float *dout, const float *in, const float *out,
		  const float *scale, int B, int C, int HW, int size, float alpha, float beta);

/* -------------------------------------------------------- softmax_xent.c */

/* logits (B,V), labels (B) -> probs (B,V); returns the mean cross-entropy
 * and adds the number of correct argmax predictions to *correct. */
double softmax_xent_forward(float *probs, const float *logits, const int32_t *labels, int B, int V,
			    int64_t *correct);
/* dlogits (B,V) = (probs - onehot(labels)) / B. */
void softmax_xent_backward(float *dlogits, const float *probs, const int32_t *labels, int B, int V);

#endif
