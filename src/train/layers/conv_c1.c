/*
 * conv_c1.c - direct 3x3, stride 1, padding 1 convolution of ONE input
 * channel (a first layer on grey images: cnn-bn's conv1), with AVX-512.
 *
 * With C = 1 the im2col gemm has an inner dimension of 9: the products are
 * cheap and the pass is bound by memory (im2col's 9 copies of the input,
 * the transposes of the output).  Here every output row is 9 shifted rows
 * of the zero-padded input plane times 9 weights, 16 columns per vector:
 *
 *   forward:  out[b,oc,h,:] = bias[oc] + sum_k w[oc,k] * xp[h+kh, kw:]
 *   backward: dw[oc,k] += sum_{b,h} dout[b,oc,h,:] . xp[h+kh, kw:]
 *             db[oc]   += sum_{b,h,w} dout[b,oc,h,w]
 *
 * The backward pass here is the weight gradient only (a first layer has no
 * input gradient) and without a fused ReLU mask; conv.c falls back to
 * im2col otherwise, and on CPUs without AVX-512.  Threads take contiguous
 * shares of the batch; dw and db come from per-thread partials (each summed
 * in a fixed order: lanes, rows, images) added in thread order.
 */
#include "train/layers/conv_shared.h"
#include "train/layers/layers.h"

#include <omp.h>
#include <string.h>

/* Padded plane: rows H + 2, row stride 16 * ceil(W/16) + 16 (the shifted
 * loads of the last column block stay inside, on zeros). */
static size_t c1_stride(int W)
{
	return (size_t)16 * ((W + 15) / 16) + 16;
}

static size_t c1_plane(int H, int W)
{
	return (size_t)(H + 2) * c1_stride(W);
}

/* Per thread: the padded plane, then (backward) dw and db partials. */
static size_t c1_slot(int H, int W, int OC)
{
	return c1_plane(H, W) + (size_t)OC * 10;
}

int conv_c1_ok(int C, int K, int S, int P, int B, int H, int W, int OC, size_t nscratch)
{
	int nt = omp_get_max_threads();
	if (nt > B)
		nt = B;
	pbx_gemm_small_init();
	return pbx_gemm_avx512 > 0 && C == 1 && K == 3 && S == 1 && P == 1 &&
	       (size_t)nt * c1_slot(H, W, OC) <= nscratch;
}

/* xp (H+2, stride) = in (H, W) at (1, 1); the border stays as zeroed. */
static void c1_pad(float *xp, const float *in, int H, int W, size_t stride)
{
	for (int h = 0; h < H; h++)
		memcpy(xp + (size_t)(h + 1) * stride + 1, in + (size_t)h * W, sizeof(float) * W);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define C1_AVX512 __attribute__((target("avx512f")))

static inline __mmask16 c1_mask(int W, int x)
{
	return (__mmask16)(W - x >= 16 ? 0xFFFF : (1u << (W - x)) - 1);
}

C1_AVX512 static void c1_forward_image(float *out, const float *xp, const float *w, const float *b,
				       int H, int W, int OC, size_t stride, int relu)
{
	size_t plane = (size_t)H * W;
	for (int h = 0; h < H; h++) {
		for (int x = 0; x < W; x += 16) {
			__mmask16 m = c1_mask(W, x);
			__m512 v[9];
			for (int k = 0; k < 9; k++)
				v[k] = _mm512_loadu_ps(xp + (size_t)(h + k / 3) * stride + x +
						       k % 3);
			for (int oc = 0; oc < OC; oc++) {
				const float *wk = w + (size_t)oc * 9;
				__m512 a = _mm512_set1_ps(b[oc]);
				for (int k = 0; k < 9; k++)
					a = _mm512_fmadd_ps(_mm512_set1_ps(wk[k]), v[k], a);
				if (relu)
					a = _mm512_max_ps(a, _mm512_setzero_ps());
				_mm512_mask_storeu_ps(out + oc * plane + (size_t)h * W + x, m, a);
			}
		}
	}
}

/* dw (OC, 9) += , db (OC) += the image's sums (one reduction per oc). */
C1_AVX512 static void c1_backward_image(float *dw, float *db, const float *dout, const float *xp,
					int H, int W, int OC, size_t stride)
{
	size_t plane = (size_t)H * W;
	for (int oc = 0; oc < OC; oc++) {
		const float *d = dout + oc * plane;
		__m512 a[9], s = _mm512_setzero_ps();
		for (int k = 0; k < 9; k++)
			a[k] = _mm512_setzero_ps();
		for (int h = 0; h < H; h++) {
			for (int x = 0; x < W; x += 16) {
				__m512 g =
					_mm512_maskz_loadu_ps(c1_mask(W, x), d + (size_t)h * W + x);
				const float *r = xp + (size_t)h * stride + x;
				s = _mm512_add_ps(s, g);
				for (int k = 0; k < 9; k++)
					a[k] = _mm512_fmadd_ps(
						g,
						_mm512_loadu_ps(r + (size_t)(k / 3) * stride +
								k % 3),
						a[k]);
			}
		}
		for (int k = 0; k < 9; k++)
			dw[(size_t)oc * 9 + k] += _mm512_reduce_add_ps(a[k]);
		db[oc] += _mm512_reduce_add_ps(s);
	}
}
#else
static void c1_forward_image(float *out, const float *xp, const float *w, const float *b, int H,
			     int W, int OC, size_t stride, int relu)
{
	(void)out;
	(void)xp;
	(void)w;
	(void)b;
	(void)H;
	(void)W;
	(void)OC;
	(void)stride;
	(void)relu;
}

static void c1_backward_image(float *dw, float *db, const float *dout, const float *xp, int H,
			      int W, int OC, size_t stride)
{
	(void)dw;
	(void)db;
	(void)dout;
	(void)xp;
	(void)H;
	(void)W;
	(void)OC;
	(void)stride;
}
#endif

void conv_c1_forward(float *out, const float *in, const float *w, const float *b, int B, int H,
		     int W, int OC, int relu, float *scratch, size_t nscratch)
{
	int nt = omp_get_max_threads();
	size_t stride = c1_stride(W), slot = c1_slot(H, W, OC);
	(void)nscratch;
	if (nt > B)
		nt = B;
#pragma omp parallel num_threads(nt)
	{
		int t = omp_get_thread_num(), lo, hi;
		float *xp = scratch + (size_t)t * slot;
		memset(xp, 0, sizeof(float) * c1_plane(H, W));
		conv_share(B, t, omp_get_num_threads(), &lo, &hi);
		for (int i = lo; i < hi; i++) {
			c1_pad(xp, in + (size_t)i * H * W, H, W, stride);
			c1_forward_image(out + (size_t)i * OC * H * W, xp, w, b, H, W, OC, stride,
					 relu);
		}
	}
}

void conv_c1_backward_weights(float *dw, float *db, const float *dout, const float *in, int B,
			      int H, int W, int OC, float *scratch, size_t nscratch)
{
	int nt = omp_get_max_threads();
	size_t stride = c1_stride(W), slot = c1_slot(H, W, OC);
	(void)nscratch;
	if (nt > B)
		nt = B;
#pragma omp parallel num_threads(nt)
	{
		int t = omp_get_thread_num(), lo, hi, n = omp_get_num_threads();
		float *xp = scratch + (size_t)t * slot;
		float *pw = xp + c1_plane(H, W), *pb = pw + (size_t)OC * 9;
		memset(xp, 0, sizeof(float) * slot);
		conv_share(B, t, n, &lo, &hi);
		for (int i = lo; i < hi; i++) {
			c1_pad(xp, in + (size_t)i * H * W, H, W, stride);
			c1_backward_image(pw, pb, dout + (size_t)i * OC * H * W, xp, H, W, OC,
					  stride);
		}
#pragma omp barrier
#pragma omp for schedule(static)
		for (int k = 0; k < OC * 10; k++) {
			float s = 0.0f;
			for (int u = 0; u < n; u++)
				s += scratch[(size_t)u * slot + c1_plane(H, W) + k];
			if (k < OC * 9)
				dw[k] += s;
			else
				db[k - OC * 9] += s;
		}
	}
}
