/*
 * batchnorm.c - batch normalisation (Ioffe & Szegedy) in training and
 * evaluation modes, for conv outputs (B,C,HW) and linear outputs (B,C,1).
 *
 * Training:  mean, var over the B*HW values of each channel (biased var for
 * normalising, unbiased for the running estimate), xhat = (x-mean)*invstd,
 * out = gamma*xhat + beta, running = (1-momentum)*running + momentum*batch.
 * Backward (per channel, M = B*HW):
 *   dgamma += sum(dy*xhat),  dbeta += sum(dy)
 *   dx = gamma*invstd/M * (M*dy - sum(dy) - xhat*sum(dy*xhat))
 * xhat is recomputed from the input and the saved (mean, invstd), so only
 * 2*C floats are kept per layer; so is a fused ReLU's mask (a*x + sh > 0,
 * the very expression forward clamped), which saves reading the output: the
 * first block's backward is memory-bound.  Channels are independent: one
 * thread owns a channel, and the sums are in double in a fixed order
 * (deterministic).
 */
#include "train/layers/layers.h"
#include "train/layers/pool2.h"
#include "train/layers/simd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

#define BN_REPLAY 2 /* train argument: PBX_FWD_REPLAY (model.h) */

/* Prefetches n floats (a (b, c) plane): a channel's planes lie a whole
 * example apart, so each starts cold; fetching the next one while this one
 * is summed hides the latency. */
static void bn_prefetch(const float *p, size_t n)
{
	for (size_t i = 0; i < n; i += 16)
		__builtin_prefetch(p + i);
}

/* Sum and sum of squares of (x - shift) over n floats, in 2 x 4 lanes
 * (simd.h); the shift (the channel's first value) keeps E[d^2] - E[d]^2
 * from cancelling. */
static void bn_sums(const float *x, int n, float shift, double *s, double *ss)
{
	pbx_v4 a0 = { 0 }, a1 = { 0 }, q0 = { 0 }, q1 = { 0 }, sh = pbx_v4_set1(shift);
	float ta = 0.0f, tq = 0.0f;
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		pbx_v4 d0 = pbx_v4_load(x + i) - sh, d1 = pbx_v4_load(x + i + 4) - sh;
		a0 += d0;
		a1 += d1;
		q0 += d0 * d0;
		q1 += d1 * d1;
	}
	for (; i < n; i++) {
		float d = x[i] - shift;
		ta += d;
		tq += d * d;
	}
	*s += ta + pbx_v4_sum(a0 + a1);
	*ss += tq + pbx_v4_sum(q0 + q1);
}

/* out = a*x + sh per channel: the affine map forward applies and backward
 * recomputes for the ReLU mask (the same float operations, same values). */
static void bn_affine(float gamma, float beta, float mean, float invstd, float *a, float *sh)
{
	*a = gamma * invstd;
	*sh = beta - *a * mean;
}

/* dy, zeroed where a fused ReLU clamped (a*x + sh <= 0) if relu. */
static inline pbx_v4 bn_grad4(const float *dy, const float *x, int relu, pbx_v4 a, pbx_v4 sh)
{
	pbx_v4 g = pbx_v4_load(dy);
	return relu ? pbx_v4_mask_pos(g, a * pbx_v4_load(x) + sh) : g;
}

/* sum(g) and sum(g * (x - mean)) over n floats, g as bn_grad4. */
static void bn_grad_sums(const float *dy, const float *x, int relu, int n, float mean, float a,
			 float sh, double *sg, double *sgx)
{
	pbx_v4 a0 = { 0 }, a1 = { 0 }, q0 = { 0 }, q1 = { 0 }, mu = pbx_v4_set1(mean);
	pbx_v4 va = pbx_v4_set1(a), vsh = pbx_v4_set1(sh);
	float ta = 0.0f, tq = 0.0f;
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		pbx_v4 g0 = bn_grad4(dy + i, x + i, relu, va, vsh);
		pbx_v4 g1 = bn_grad4(dy + i + 4, x + i + 4, relu, va, vsh);
		a0 += g0;
		a1 += g1;
		q0 += g0 * (pbx_v4_load(x + i) - mu);
		q1 += g1 * (pbx_v4_load(x + i + 4) - mu);
	}
	for (; i < n; i++) {
		float g = (!relu || a * x[i] + sh > 0.0f) ? dy[i] : 0.0f;
		ta += g;
		tq += g * (x[i] - mean);
	}
	*sg += ta + pbx_v4_sum(a0 + a1);
	*sgx += tq + pbx_v4_sum(q0 + q1);
}

/* dx = k * (M*g - sdy - xhat*sdyx) over n floats of one (b, c) plane. */
static void bn_grad_apply(float *dx, const float *dy, const float *x, int relu, int n, float mean,
			  float invstd, float a, float sh, float k, float M, float sdy, float sdyx)
{
	pbx_v4 vk = pbx_v4_set1(k), vm = pbx_v4_set1(M);
	pbx_v4 vsdy = pbx_v4_set1(sdy), vsdyx = pbx_v4_set1(sdyx);
	pbx_v4 vmean = pbx_v4_set1(mean), vinv = pbx_v4_set1(invstd);
	pbx_v4 va = pbx_v4_set1(a), vsh = pbx_v4_set1(sh);
	int i = 0;
	for (; i + 4 <= n; i += 4) {
		pbx_v4 g = bn_grad4(dy + i, x + i, relu, va, vsh);
		pbx_v4 xh = (pbx_v4_load(x + i) - vmean) * vinv;
		pbx_v4 r = vk * (vm * g - vsdy - xh * vsdyx);
		memcpy(dx + i, &r, sizeof(r));
	}
	for (; i < n; i++) {
		float g = (!relu || a * x[i] + sh > 0.0f) ? dy[i] : 0.0f;
		float xh = (x[i] - mean) * invstd;
		dx[i] = k * (M * g - sdy - xh * sdyx);
	}
}

/* Channel c's mean and invstd: from the batch in training mode (saved for
 * backward, running stats updated), else from the running stats. */
static void bn_stats(const float *in, int B, int C, int HW, int c, float eps, float momentum,
		     int train, float *running_mean, float *running_var, float *saved_mean,
		     float *saved_invstd, float *mean, float *invstd)
{
	if (!train) {
		*mean = running_mean[c];
		*invstd = 1.0f / sqrtf(running_var[c] + eps);
		return;
	}
	if (train == BN_REPLAY) { /* recomputation: the forward's own stats */
		*mean = saved_mean[c];
		*invstd = saved_invstd[c];
		return;
	}
	double s = 0.0, ss = 0.0, M = (double)B * HW, m, var;
	float shift = in[(size_t)c * HW];
	for (int b = 0; b < B; b++) {
		if (b + 1 < B)
			bn_prefetch(in + ((size_t)(b + 1) * C + c) * HW, HW);
		bn_sums(in + ((size_t)b * C + c) * HW, HW, shift, &s, &ss);
	}
	m = s / M;
	var = ss / M - m * m;
	if (var < 0.0)
		var = 0.0;
	*mean = (float)(shift + m);
	*invstd = (float)(1.0 / sqrt(var + eps));
	saved_mean[c] = *mean;
	saved_invstd[c] = *invstd;
	running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * *mean;
	running_var[c] = (1.0f - momentum) * running_var[c] +
			 momentum * (float)(M > 1.0 ? var * M / (M - 1.0) : 0.0);
}

/* out = a*x + sh (ReLU'd if relu) over channel c of the batch. */
static void bn_output(float *out, const float *in, int B, int C, int HW, int c, float a, float sh,
		      int relu)
{
	for (int b = 0; b < B; b++) {
		const float *x = in + ((size_t)b * C + c) * HW;
		float *y = out + ((size_t)b * C + c) * HW;
		if (relu) {
#pragma omp simd
			for (int i = 0; i < HW; i++) {
				float v = a * x[i] + sh;
				y[i] = v > 0.0f ? v : 0.0f;
			}
		} else {
			for (int i = 0; i < HW; i++)
				y[i] = a * x[i] + sh;
		}
	}
}

void batchnorm_forward(float *out, const float *in, const float *gamma, const float *beta,
		       float *running_mean, float *running_var, float *saved_mean,
		       float *saved_invstd, int B, int C, int HW, float eps, float momentum,
		       int train, int relu)
{
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		float mean, invstd, a, sh;
		bn_stats(in, B, C, HW, c, eps, momentum, train, running_mean, running_var,
			 saved_mean, saved_invstd, &mean, &invstd);
		bn_affine(gamma[c], beta[c], mean, invstd, &a, &sh);
		bn_output(out, in, B, C, HW, c, a, sh, relu);
	}
}

/* batchnorm_forward (relu) followed by 2x2 stride-2 max pooling, writing
 * only the pooled output: the full-size BN output is never stored. */
void batchnorm_relu_maxpool2_forward(float *pool_out, const float *in, const float *gamma,
				     const float *beta, float *running_mean, float *running_var,
				     float *saved_mean, float *saved_invstd, int B, int C, int H,
				     int W, float eps, float momentum, int train)
{
	int HW = H * W, OH = H / 2, OW = W / 2;
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		float mean, invstd;
		struct pool2_bn bn = { 1, 0.0f, 0.0f };
		bn_stats(in, B, C, HW, c, eps, momentum, train, running_mean, running_var,
			 saved_mean, saved_invstd, &mean, &invstd);
		bn_affine(gamma[c], beta[c], mean, invstd, &bn.a, &bn.sh);
		for (int b = 0; b < B; b++) {
			const float *x = in + ((size_t)b * C + c) * HW;
			float *y = pool_out + ((size_t)b * C + c) * OH * OW;
			for (int oh = 0; oh < OH; oh++)
				maxpool2_forward_rows(y + (size_t)oh * OW, x + (size_t)2 * oh * W,
						      x + (size_t)(2 * oh + 1) * W, OW, bn);
		}
	}
}

void batchnorm_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
			const float *gamma, const float *beta, const float *saved_mean,
			const float *saved_invstd, int relu, int B, int C, int HW)
{
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		float mean = saved_mean[c], invstd = saved_invstd[c], a, sh;
		double sdy = 0.0, sdyx = 0.0;
		size_t M = (size_t)B * HW;
		bn_affine(gamma[c], beta[c], mean, invstd, &a, &sh);
		for (int b = 0; b < B; b++) {
			size_t off = ((size_t)b * C + c) * HW;
			bn_grad_sums(dout + off, in + off, relu, HW, mean, a, sh, &sdy, &sdyx);
		}
		sdyx *= invstd; /* sum(g * xhat) */
		dgamma[c] += (float)sdyx;
		dbeta[c] += (float)sdy;
		if (!din)
			continue;
		float k = gamma[c] * invstd / (float)M;
		for (int b = 0; b < B; b++) {
			size_t off = ((size_t)b * C + c) * HW;
			bn_grad_apply(din + off, dout + off, in + off, relu, HW, mean, invstd, a,
				      sh, k, (float)M, (float)sdy, (float)sdyx);
		}
	}
}

/* ------------------------------------------- fused with 2x2 max pooling */

/* g (H,W) = gradient at the BN output of one (b, c) plane x (H,W) from the
 * pool gradient gp (H/2,W/2): relu(a*x + sh) as forward computed it, the
 * pooling's first maximum and the ReLU mask (pool2.h); 0 where no window
 * covers (odd last row or column). */
static void bn_pool_plane(float *g, const float *x, const float *gp, int H, int W, float a,
			  float sh)
{
	struct pool2_bn bn = { 1, a, sh };
	for (int h = 0; h + 1 < H; h += 2) {
		float *gr = g + (size_t)h * W;
		const float *r0 = x + (size_t)h * W;
		maxpool2_backward_rows(gr, gr + W, r0, r0 + W, gp + (size_t)(h / 2) * (W / 2),
				       W / 2, bn);
		if (W & 1)
			gr[W - 1] = gr[2 * W - 1] = 0.0f;
	}
	if (H & 1)
		memset(g + (size_t)(H - 1) * W, 0, sizeof(float) * W);
}

/* Per channel (one thread): the BN-output gradient of each plane goes into
 * din (pass 1, with the sums), and pass 2 turns it into dx in place; a
 * channel's planes (B*H*W floats of x and din) stay in L2 between passes. */
void batchnorm_relu_maxpool2_backward(float *din, float *dgamma, float *dbeta, const float *dpool,
				      const float *in, const float *gamma, const float *beta,
				      const float *saved_mean, const float *saved_invstd, int B,
				      int C, int H, int W)
{
	int HW = H * W;
	size_t PHW = (size_t)(H / 2) * (W / 2);
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		float mean = saved_mean[c], invstd = saved_invstd[c], a, sh;
		double sdy = 0.0, sdyx = 0.0;
		size_t M = (size_t)B * HW;
		bn_affine(gamma[c], beta[c], mean, invstd, &a, &sh);
		for (int b = 0; b < B; b++) {
			size_t off = ((size_t)b * C + c) * HW;
			if (b + 1 < B) {
				bn_prefetch(in + off + (size_t)C * HW, HW);
				bn_prefetch(dpool + ((size_t)(b + 1) * C + c) * PHW, PHW);
			}
			bn_pool_plane(din + off, in + off, dpool + ((size_t)b * C + c) * PHW, H, W,
				      a, sh);
			bn_grad_sums(din + off, in + off, 0, HW, mean, a, sh, &sdy, &sdyx);
		}
		sdyx *= invstd; /* sum(g * xhat) */
		dgamma[c] += (float)sdyx;
		dbeta[c] += (float)sdy;
		float k = gamma[c] * invstd / (float)M;
		for (int b = 0; b < B; b++) {
			size_t off = ((size_t)b * C + c) * HW;
			bn_grad_apply(din + off, din + off, in + off, 0, HW, mean, invstd, a, sh, k,
				      (float)M, (float)sdy, (float)sdyx);
		}
	}
}

/* -------------------------------------------- synchronised over ranks */

/* Sums over this rank's (B, HW) values of channel c: of x - ref (ss = 0),
 * or of (x - ref)^2 (ss = 1), in double, in a fixed order. */
static double bn_local_sum(const float *in, int B, int C, int HW, int c, double ref, int ss)
{
	double t = 0.0;
	for (int b = 0; b < B; b++) {
		const float *x = in + ((size_t)b * C + c) * HW;
		for (int i = 0; i < HW; i++) {
			double d = (double)x[i] - ref;
			t += ss ? d * d : d;
		}
	}
	return t;
}

void batchnorm_sync_forward(float *out, const float *in, const float *gamma, const float *beta,
			    float *running_mean, float *running_var, float *saved_mean,
			    float *saved_invstd, int B, int C, int HW, float eps, float momentum,
			    int relu, const struct bn_reducer *r)
{
	double *v = xmalloc(sizeof(double) * ((size_t)C + 1));
/* pass 1: global mean (and the global count M) */
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++)
		v[c] = bn_local_sum(in, B, C, HW, c, 0.0, 0);
	v[C] = (double)B * HW;
	r->sum(r->ctx, v, C + 1);
	double M = v[C];
	for (int c = 0; c < C; c++)
		saved_mean[c] = (float)(v[c] / M);
/* pass 2: global (biased) variance around that mean */
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++)
		v[c] = bn_local_sum(in, B, C, HW, c, (double)saved_mean[c], 1);
	r->sum(r->ctx, v, C);
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		double var = v[c] / M;
		float a, sh;
		saved_invstd[c] = (float)(1.0 / sqrt(var + eps));
		running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * saved_mean[c];
		running_var[c] = (1.0f - momentum) * running_var[c] +
				 momentum * (float)(M > 1.0 ? var * M / (M - 1.0) : 0.0);
		bn_affine(gamma[c], beta[c], saved_mean[c], saved_invstd[c], &a, &sh);
		bn_output(out, in, B, C, HW, c, a, sh, relu);
	}
	free(v);
}

void batchnorm_sync_backward(float *din, float *dgamma, float *dbeta, const float *dout,
			     const float *in, const float *gamma, const float *beta,
			     const float *saved_mean, const float *saved_invstd, int relu, int B,
			     int C, int HW, const struct bn_reducer *r)
{
	double *v = xmalloc(sizeof(double) * (2 * (size_t)C + 1));
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		float a, sh;
		double sdy = 0.0, sdyx = 0.0;
		bn_affine(gamma[c], beta[c], saved_mean[c], saved_invstd[c], &a, &sh);
		for (int b = 0; b < B; b++) {
			size_t off = ((size_t)b * C + c) * HW;
			bn_grad_sums(dout + off, in + off, relu, HW, saved_mean[c], a, sh, &sdy,
				     &sdyx);
		}
		sdyx *= saved_invstd[c];
		/* this rank's share: the data-parallel average of the
		 * parameter gradients makes it the whole batch's */
		dgamma[c] += (float)sdyx;
		dbeta[c] += (float)sdy;
		v[2 * c] = sdy;
		v[2 * c + 1] = sdyx;
	}
	v[2 * C] = (double)B * HW;
	r->sum(r->ctx, v, 2 * C + 1);
	if (din) {
		float M = (float)v[2 * C];
#pragma omp parallel for schedule(static)
		for (int c = 0; c < C; c++) {
			float mean = saved_mean[c], invstd = saved_invstd[c], a, sh;
			float k = gamma[c] * invstd / M;
			bn_affine(gamma[c], beta[c], mean, invstd, &a, &sh);
			for (int b = 0; b < B; b++) {
				size_t off = ((size_t)b * C + c) * HW;
				bn_grad_apply(din + off, dout + off, in + off, relu, HW, mean,
					      invstd, a, sh, k, M, (float)v[2 * c],
					      (float)v[2 * c + 1]);
			}
		}
	}
	free(v);
}
