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
 * 2*C floats are kept per layer.  Channels are independent: one thread owns
 * a channel, and the sums are in double in a fixed order (deterministic).
 */
#include "train/layers/layers.h"
#include "train/layers/simd.h"

#include <math.h>
#include <string.h>

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
		a0 += d0; a1 += d1;
		q0 += d0 * d0; q1 += d1 * d1;
	}
	for (; i < n; i++) {
		float d = x[i] - shift;
		ta += d;
		tq += d * d;
	}
	*s += ta + pbx_v4_sum(a0 + a1);
	*ss += tq + pbx_v4_sum(q0 + q1);
}

/* sum(g) and sum(g * (x - mean)) with g = dy, or dy masked by relu_out > 0. */
static void bn_grad_sums(const float *dy, const float *x, const float *ro,
			 int n, float mean, double *sg, double *sgx)
{
	pbx_v4 a0 = { 0 }, a1 = { 0 }, q0 = { 0 }, q1 = { 0 }, mu = pbx_v4_set1(mean);
	float ta = 0.0f, tq = 0.0f;
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		pbx_v4 g0 = pbx_v4_load(dy + i), g1 = pbx_v4_load(dy + i + 4);
		if (ro) {
			g0 = pbx_v4_mask_pos(g0, pbx_v4_load(ro + i));
			g1 = pbx_v4_mask_pos(g1, pbx_v4_load(ro + i + 4));
		}
		a0 += g0; a1 += g1;
		q0 += g0 * (pbx_v4_load(x + i) - mu);
		q1 += g1 * (pbx_v4_load(x + i + 4) - mu);
	}
	for (; i < n; i++) {
		float g = (!ro || ro[i] > 0.0f) ? dy[i] : 0.0f;
		ta += g;
		tq += g * (x[i] - mean);
	}
	*sg += ta + pbx_v4_sum(a0 + a1);
	*sgx += tq + pbx_v4_sum(q0 + q1);
}

void batchnorm_forward(float *out, const float *in, const float *gamma,
		       const float *beta, float *running_mean,
		       float *running_var, float *saved_mean,
		       float *saved_invstd, int B, int C, int HW, float eps,
		       float momentum, int train, int relu)
{
	#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		float mean, invstd;
		if (train) {
			double s = 0.0, ss = 0.0, M = (double)B * HW, m, var;
			float shift = in[(size_t)c * HW];
			for (int b = 0; b < B; b++)
				bn_sums(in + ((size_t)b * C + c) * HW, HW, shift, &s, &ss);
			m = s / M;
			var = ss / M - m * m;
			if (var < 0.0)
				var = 0.0;
			mean = (float)(shift + m);
			invstd = (float)(1.0 / sqrt(var + eps));
			saved_mean[c] = mean;
			saved_invstd[c] = invstd;
			running_mean[c] = (1.0f - momentum) * running_mean[c] +
					  momentum * mean;
			running_var[c] = (1.0f - momentum) * running_var[c] +
					 momentum * (float)(M > 1.0 ? var * M / (M - 1.0) : 0.0);
		} else {
			mean = running_mean[c];
			invstd = 1.0f / sqrtf(running_var[c] + eps);
		}
		float a = gamma[c] * invstd, sh = beta[c] - a * mean;
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
}

void batchnorm_backward(float *din, float *dgamma, float *dbeta,
			const float *dout, const float *in, const float *gamma,
			const float *saved_mean, const float *saved_invstd,
			const float *relu_out, int B, int C, int HW)
{
	#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		float mean = saved_mean[c], invstd = saved_invstd[c];
		double sdy = 0.0, sdyx = 0.0;
		size_t M = (size_t)B * HW;
		for (int b = 0; b < B; b++) {
			size_t off = ((size_t)b * C + c) * HW;
			bn_grad_sums(dout + off, in + off, relu_out ? relu_out + off : NULL,
				     HW, mean, &sdy, &sdyx);
		}
		sdyx *= invstd; /* sum(g * xhat) */
		dgamma[c] += (float)sdyx;
		dbeta[c] += (float)sdy;
		if (!din)
			continue;
		float k = gamma[c] * invstd / (float)M;
		float mdy = (float)sdy, mdyx = (float)sdyx;
		for (int b = 0; b < B; b++) {
			size_t off = ((size_t)b * C + c) * HW;
			const float *x = in + off, *dy = dout + off;
			const float *ro = relu_out ? relu_out + off : NULL;
			float *dx = din + off, fm = (float)M;
			pbx_v4 vk = pbx_v4_set1(k), vm = pbx_v4_set1(fm);
			pbx_v4 vmdy = pbx_v4_set1(mdy), vmdyx = pbx_v4_set1(mdyx);
			pbx_v4 vmean = pbx_v4_set1(mean), vinv = pbx_v4_set1(invstd);
			int i = 0;
			for (; i + 4 <= HW; i += 4) {
				pbx_v4 g = pbx_v4_load(dy + i);
				if (ro)
					g = pbx_v4_mask_pos(g, pbx_v4_load(ro + i));
				pbx_v4 xh = (pbx_v4_load(x + i) - vmean) * vinv;
				pbx_v4 r = vk * (vm * g - vmdy - xh * vmdyx);
				memcpy(dx + i, &r, sizeof(r));
			}
			for (; i < HW; i++) {
				float g = (!ro || ro[i] > 0.0f) ? dy[i] : 0.0f;
				float xh = (x[i] - mean) * invstd;
				dx[i] = k * (fm * g - mdy - xh * mdyx);
			}
		}
	}
}
