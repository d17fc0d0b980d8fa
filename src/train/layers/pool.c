/*
 * pool.c - max and average pooling over K x K windows with stride S and
 * padding P.  Max pooling keeps no argmax: backward recomputes it from the
 * input (first maximum wins, the same choice forward made), which costs one
 * cheap pass and saves an activation-sized buffer.  Planes (b, c) are
 * independent, so they are split across threads.
 */
#include "train/layers/layers.h"
#include "train/layers/pool2.h"

#include <float.h>
#include <string.h>

static int pool_out_dim(int n, int k, int s, int p)
{
	return (n + 2 * p - k) / s + 1;
}

/* Window [h0,h1) x [w0,w1) of output (oh, ow), clipped to the input. */
static void pool_window(int oh, int ow, int H, int W, int K, int S, int P, int *h0, int *h1,
			int *w0, int *w1)
{
	*h0 = oh * S - P;
	*w0 = ow * S - P;
	*h1 = *h0 + K < H ? *h0 + K : H;
	*w1 = *w0 + K < W ? *w0 + K : W;
	if (*h0 < 0)
		*h0 = 0;
	if (*w0 < 0)
		*w0 = 0;
}

/* Index within the (H,W) plane of the first maximum of the window. */
static int pool_argmax(const float *x, int oh, int ow, int H, int W, int K, int S, int P)
{
	int h0, h1, w0, w1, best = -1;
	float m = -FLT_MAX;
	pool_window(oh, ow, H, W, K, S, P, &h0, &h1, &w0, &w1);
	for (int h = h0; h < h1; h++)
		for (int w = w0; w < w1; w++)
			if (best < 0 || x[h * W + w] > m) {
				m = x[h * W + w];
				best = h * W + w;
			}
	return best;
}

void maxpool_forward(float *out, const float *in, int B, int C, int H, int W, int K, int S, int P)
{
	int OH = pool_out_dim(H, K, S, P), OW = pool_out_dim(W, K, S, P);
#pragma omp parallel for schedule(static)
	for (int bc = 0; bc < B * C; bc++) {
		const float *x = in + (size_t)bc * H * W;
		float *y = out + (size_t)bc * OH * OW;
		if (K == 2 && S == 2 && P == 0) { /* the common case (pool2.h) */
			for (int oh = 0; oh < OH; oh++)
				maxpool2_forward_rows(y + oh * OW, x + 2 * oh * W,
						      x + (2 * oh + 1) * W, OW,
						      (struct pool2_bn){ 0, 0.0f, 0.0f });
			continue;
		}
		for (int oh = 0; oh < OH; oh++)
			for (int ow = 0; ow < OW; ow++)
				y[oh * OW + ow] = x[pool_argmax(x, oh, ow, H, W, K, S, P)];
	}
}

/* One plane of the 2x2 stride-2 unpadded case: the windows tile the plane,
 * so every covered element is written once and the odd last row/column is
 * zeroed. */
static void maxpool2_backward_plane(float *dx, const float *dy, const float *x, int H, int W)
{
	int OH = H / 2, OW = W / 2;
	if (H & 1)
		memset(dx + (size_t)(H - 1) * W, 0, sizeof(float) * W);
	for (int oh = 0; oh < OH; oh++) {
		const float *r0 = x + 2 * oh * W, *r1 = r0 + W;
		float *d0 = dx + 2 * oh * W, *d1 = d0 + W;
		maxpool2_backward_rows(d0, d1, r0, r1, dy + oh * OW, OW,
				       (struct pool2_bn){ 0, 0.0f, 0.0f });
		if (W & 1) {
			d0[W - 1] = 0.0f;
			d1[W - 1] = 0.0f;
		}
	}
}

void maxpool_backward(float *din, const float *dout, const float *in, int B, int C, int H, int W,
		      int K, int S, int P)
{
	int OH = pool_out_dim(H, K, S, P), OW = pool_out_dim(W, K, S, P);
#pragma omp parallel for schedule(static)
	for (int bc = 0; bc < B * C; bc++) {
		const float *x = in + (size_t)bc * H * W;
		const float *dy = dout + (size_t)bc * OH * OW;
		float *dx = din + (size_t)bc * H * W;
		if (K == 2 && S == 2 && P == 0) {
			maxpool2_backward_plane(dx, dy, x, H, W);
			continue;
		}
		memset(dx, 0, sizeof(float) * H * W);
		for (int oh = 0; oh < OH; oh++)
			for (int ow = 0; ow < OW; ow++)
				dx[pool_argmax(x, oh, ow, H, W, K, S, P)] += dy[oh * OW + ow];
	}
}

void avgpool_forward(float *out, const float *in, int B, int C, int H, int W, int K, int S, int P)
{
	int OH = pool_out_dim(H, K, S, P), OW = pool_out_dim(W, K, S, P);
#pragma omp parallel for schedule(static)
	for (int bc = 0; bc < B * C; bc++) {
		const float *x = in + (size_t)bc * H * W;
		float *y = out + (size_t)bc * OH * OW;
		for (int oh = 0; oh < OH; oh++)
			for (int ow = 0; ow < OW; ow++) {
				int h0, h1, w0, w1;
				float s = 0.0f;
				pool_window(oh, ow, H, W, K, S, P, &h0, &h1, &w0, &w1);
				for (int h = h0; h < h1; h++)
					for (int w = w0; w < w1; w++)
						s += x[h * W + w];
				y[oh * OW + ow] = s / (float)((h1 - h0) * (w1 - w0));
			}
	}
}

void avgpool_backward(float *din, const float *dout, int B, int C, int H, int W, int K, int S,
		      int P)
{
	int OH = pool_out_dim(H, K, S, P), OW = pool_out_dim(W, K, S, P);
#pragma omp parallel for schedule(static)
	for (int bc = 0; bc < B * C; bc++) {
		const float *dy = dout + (size_t)bc * OH * OW;
		float *dx = din + (size_t)bc * H * W;
		memset(dx, 0, sizeof(float) * H * W);
		for (int oh = 0; oh < OH; oh++)
			for (int ow = 0; ow < OW; ow++) {
				int h0, h1, w0, w1;
				pool_window(oh, ow, H, W, K, S, P, &h0, &h1, &w0, &w1);
				float g = dy[oh * OW + ow] / (float)((h1 - h0) * (w1 - w0));
				for (int h = h0; h < h1; h++)
					for (int w = w0; w < w1; w++)
						dx[h * W + w] += g;
			}
	}
}
