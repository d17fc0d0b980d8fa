/*
 * activation.c - element-wise non-linearities: ReLU, leaky ReLU, tanh,
 * sigmoid and GELU (tanh approximation).  Backward uses whichever of the
 * input or output is cheaper: ReLU/tanh/sigmoid use the output (so ReLU can
 * run in place, out == in, and din == dout), leaky ReLU and GELU the input.
 */
#include "train/layers/layers.h"

#include <math.h>

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */

void act_forward(float *out, const float *in, size_t n, enum act_kind kind, float alpha)
{
	long long nn = (long long)n;
	switch (kind) {
	case ACT_RELU:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++)
			out[i] = in[i] > 0.0f ? in[i] : 0.0f;
		break;
	case ACT_LEAKY_RELU:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++)
			out[i] = in[i] > 0.0f ? in[i] : alpha * in[i];
		break;
	case ACT_TANH:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++)
			out[i] = tanhf(in[i]);
		break;
	case ACT_SIGMOID:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++)
			out[i] = 1.0f / (1.0f + expf(-in[i]));
		break;
	case ACT_GELU:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++) {
			float x = in[i];
			float t = tanhf(GELU_C * (x + 0.044715f * x * x * x));
			out[i] = 0.5f * x * (1.0f + t);
		}
		break;
	}
}

void act_backward(float *din, const float *dout, const float *in, const float *out, size_t n,
		  enum act_kind kind, float alpha)
{
	long long nn = (long long)n;
	switch (kind) {
	case ACT_RELU:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++)
			din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
		break;
	case ACT_LEAKY_RELU:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++)
			din[i] = in[i] > 0.0f ? dout[i] : alpha * dout[i];
		break;
	case ACT_TANH:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++)
			din[i] = dout[i] * (1.0f - out[i] * out[i]);
		break;
	case ACT_SIGMOID:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++)
			din[i] = dout[i] * out[i] * (1.0f - out[i]);
		break;
	case ACT_GELU:
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < nn; i++) {
			float x = in[i];
			float u = GELU_C * (x + 0.044715f * x * x * x);
			float t = tanhf(u);
			float du = GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
			din[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
		}
		break;
	}
}
