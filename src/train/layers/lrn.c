/*
 * lrn.c - local response normalisation across channels (Krizhevsky et al.,
 * as in the small AlexNet of Zhang et al.), PyTorch's convention:
 *   scale_c = k + alpha/size * sum_{j in window(c)} x_j^2
 *   out_c   = x_c * scale_c^-beta
 * window(c) = channels [c - size/2, c + (size-1)/2] clipped to [0, C).
 * Backward:
 *   din_c = dout_c * scale_c^-beta
 *           - 2*alpha*beta/size * x_c * sum_{j: c in window(j)} dout_j*out_j/scale_j
 * The scale is kept for backward (one activation-sized buffer).
 */
#include "train/layers/layers.h"

#include <math.h>

void lrn_forward(float *out, float *scale, const float *in, int B, int C, int HW, int size,
		 float alpha, float beta, float k)
{
	int lo = size / 2, hi = (size - 1) / 2;
#pragma omp parallel for schedule(static)
	for (int b = 0; b < B; b++) {
		const float *x = in + (size_t)b * C * HW;
		float *s = scale + (size_t)b * C * HW, *y = out + (size_t)b * C * HW;
		for (int c = 0; c < C; c++) {
			int j0 = c - lo < 0 ? 0 : c - lo;
			int j1 = c + hi >= C ? C - 1 : c + hi;
			float *sc = s + (size_t)c * HW;
			for (int i = 0; i < HW; i++)
				sc[i] = 0.0f;
			for (int j = j0; j <= j1; j++) {
				const float *xj = x + (size_t)j * HW;
				for (int i = 0; i < HW; i++)
					sc[i] += xj[i] * xj[i];
			}
			for (int i = 0; i < HW; i++) {
				sc[i] = k + alpha / (float)size * sc[i];
				y[(size_t)c * HW + i] = x[(size_t)c * HW + i] * powf(sc[i], -beta);
			}
		}
	}
}

void lrn_backward(float *din, const float *dout, const float *in, const float *out,
		  const float *scale, int B, int C, int HW, int size, float alpha, float beta)
{
	int lo = size / 2, hi = (size - 1) / 2;
	float f = 2.0f * alpha * beta / (float)size;
#pragma omp parallel for schedule(static)
	for (int b = 0; b < B; b++) {
		size_t off = (size_t)b * C * HW;
		const float *x = in + off, *y = out + off, *s = scale + off;
		const float *dy = dout + off;
		float *dx = din + off;
		for (int c = 0; c < C; c++) {
			/* j such that c is in window(j): j - lo <= c <= j + hi */
			int j0 = c - hi < 0 ? 0 : c - hi;
			int j1 = c + lo >= C ? C - 1 : c + lo;
			for (int i = 0; i < HW; i++) {
				size_t ci = (size_t)c * HW + i;
				float acc = 0.0f;
				for (int j = j0; j <= j1; j++) {
					size_t ji = (size_t)j * HW + i;
					acc += dy[ji] * y[ji] / s[ji];
				}
				dx[ci] = dy[ci] * powf(s[ci], -beta) - f * x[ci] * acc;
			}
		}
	}
}
