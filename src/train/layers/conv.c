/*
 * conv.c - 2-D convolution as im2col + OpenBLAS sgemm, OpenMP over the
 * batch.
 *
 * Each thread takes a contiguous share of the batch and works through it
 * in chunks of nb images that fit its slot of the scratch buffer, with no
 * barrier between the steps of a chunk (one parallel region per pass: on a
 * shared machine every fork/join is a wake-up that may wait for a core).
 * A chunk is ONE single-threaded gemm with N = nb*OH*OW columns:
 *
 *   col  (C*K*K, nb*OH*OW)     im2col of the chunk
 *   Y    (OC,    nb*OH*OW)  =  W (OC, C*K*K) x col
 *   out  (nb, OC, OH*OW)       Y transposed per image, + bias (+ ReLU)
 *
 * Backward recomputes col instead of keeping it (cheap next to the gemms):
 *   dW_t  = sum over the thread's chunks of dY (OC, N) x col^T (N, CKK)
 *   dcol  = W^T (CKK, OC) x dY (OC, N)          then col2im writes din
 *   dw   += dW_0 + dW_1 + ...  (thread order: deterministic for a given
 *           thread count)
 * With nb = 1 the gemm reads/writes NCHW directly and the transpose is
 * skipped.
 */
#include "train/layers/conv_shared.h"
#include "train/layers/layers.h"
#include "train/layers/simd.h"

#include <omp.h>
#include <string.h>

/* Floats of scratch per thread for the chunk (2 MiB, measured best). */
#define CONV_DEFAULT_CAP ((size_t)1 << 19)

static int conv_out_dim(int n, int k, int s, int p)
{
	return (n + 2 * p - k) / s + 1;
}

/* Scratch floats one image needs: col + Y/dY + dcol. */
static size_t conv_per_image(int C, int OH, int OW, int OC, int K)
{
	size_t ckk = (size_t)C * K * K, p = (size_t)OH * OW;
	return (2 * ckk + (size_t)OC) * p;
}

/* Scratch layout: nt slots of (dW partial (OC*CKK), chunk (nb images)). */
size_t conv_im2col_scratch_floats(int B, int C, int H, int W, int OC, int K, int S, int P,
				  size_t cap)
{
	int OH = conv_out_dim(H, K, S, P), OW = conv_out_dim(W, K, S, P);
	int nt = omp_get_max_threads();
	size_t per = conv_per_image(C, OH, OW, OC, K), nb;
	size_t share = ((size_t)B + nt - 1) / nt;
	if (cap == 0)
		cap = CONV_DEFAULT_CAP;
	nb = cap / per;
	if (nb < 1)
		nb = 1;
	if (nb > share)
		nb = share;
	return (size_t)nt * ((size_t)OC * C * K * K + nb * per);
}

/* How a pass splits: threads (at most omp_get_max_threads(), fewer if the
 * scratch has no room for them) and images per chunk. */
struct conv_split {
	int nt, nb;
	size_t slot, wsz; /* floats per thread slot; of which dW partial */
};

static struct conv_split conv_split(int B, int C, int OH, int OW, int OC, int K, size_t nscratch)
{
	struct conv_split sp;
	size_t per = conv_per_image(C, OH, OW, OC, K);
	sp.wsz = (size_t)OC * C * K * K;
	sp.nt = omp_get_max_threads();
	if (sp.nt > B)
		sp.nt = B;
	while (sp.nt > 1 && nscratch / sp.nt < sp.wsz + per)
		sp.nt--;
	sp.slot = nscratch / sp.nt;
	sp.nb = (int)((sp.slot - sp.wsz) / per);
	if (sp.nb > B)
		sp.nb = B;
	return sp;
}

/* First valid ow and one past the last for kernel column kw:
 * 0 <= ow*S - P + kw < W. */
static void conv_ow_range(int kw, int W, int OW, int S, int P, int *lo, int *hi)
{
	int a = P - kw, l, h;
	l = a <= 0 ? 0 : (a + S - 1) / S;
	h = (W - 1 + P - kw) < 0 ? 0 : (W - 1 + P - kw) / S + 1;
	if (h > OW)
		h = OW;
	if (l > h)
		l = h;
	*lo = l;
	*hi = h;
}

/* in (nb,C,H,W) -> col (C*K*K, nb*OH*OW). */
static void im2col(float *col, const float *in, int nb, int C, int H, int W, int K, int S, int P,
		   int OH, int OW)
{
	int ckk = C * K * K;
	size_t N = (size_t)nb * OH * OW;
	for (int r = 0; r < ckk; r++) {
		int c = r / (K * K), kh = (r / K) % K, kw = r % K, lo, hi;
		conv_ow_range(kw, W, OW, S, P, &lo, &hi);
		for (int b = 0; b < nb; b++) {
			const float *src = in + ((size_t)b * C + c) * H * W;
			float *dst = col + (size_t)r * N + (size_t)b * OH * OW;
			for (int oh = 0; oh < OH; oh++, dst += OW) {
				int ih = oh * S - P + kh;
				if (ih < 0 || ih >= H) {
					memset(dst, 0, sizeof(float) * OW);
					continue;
				}
				const float *row = src + (size_t)ih * W - P + kw;
				for (int ow = 0; ow < lo; ow++)
					dst[ow] = 0.0f;
				if (S == 1) {
					if (hi > lo)
						memcpy(dst + lo, row + lo,
						       sizeof(float) * (hi - lo));
				} else {
					for (int ow = lo; ow < hi; ow++)
						dst[ow] = row[ow * S];
				}
				for (int ow = hi; ow < OW; ow++)
					dst[ow] = 0.0f;
			}
		}
	}
}

/* dst (n) += src (n); the rows of col and din never overlap. */
static void conv_add_row(float *restrict dst, const float *restrict src, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] += src[i];
}

/* col (C*K*K, nb*OH*OW) -> din (nb,C,H,W), which it overwrites. */
static void col2im(float *din, const float *col, int nb, int C, int H, int W, int K, int S, int P,
		   int OH, int OW)
{
	size_t N = (size_t)nb * OH * OW;
	for (int c = 0; c < C; c++) {
		for (int b = 0; b < nb; b++)
			memset(din + ((size_t)b * C + c) * H * W, 0, sizeof(float) * H * W);
		for (int kh = 0; kh < K; kh++) {
			for (int kw = 0; kw < K; kw++) {
				int r = (c * K + kh) * K + kw, lo, hi;
				conv_ow_range(kw, W, OW, S, P, &lo, &hi);
				for (int b = 0; b < nb; b++) {
					float *dst = din + ((size_t)b * C + c) * H * W;
					const float *src =
						col + (size_t)r * N + (size_t)b * OH * OW;
					for (int oh = 0; oh < OH; oh++, src += OW) {
						int ih = oh * S - P + kh;
						if (ih < 0 || ih >= H)
							continue;
						float *row = dst + (size_t)ih * W - P + kw;
						if (S == 1)
							conv_add_row(row + lo, src + lo, hi - lo);
						else
							for (int ow = lo; ow < hi; ow++)
								row[ow * S] += src[ow];
					}
				}
			}
		}
	}
}

/* Y (OC, n*plane) -> out (n, OC, plane), + bias, ReLU if relu (in place
 * when n = 1 and y == out). */
static void conv_bias_out(float *out, const float *y, const float *b, int n, int OC, size_t plane,
			  int relu)
{
	size_t N = (size_t)n * plane;
	for (int i = 0; i < n * OC; i++) {
		int bi = i / OC, oc = i % OC;
		conv_bias_relu(out + (size_t)i * plane, y + (size_t)oc * N + (size_t)bi * plane,
			       plane, b[oc], relu);
	}
}

void conv_im2col_forward(float *out, const float *in, const float *w, const float *b, int B, int C,
			 int H, int W, int OC, int K, int S, int P, int relu, float *scratch,
			 size_t nscratch)
{
	int OH = conv_out_dim(H, K, S, P), OW = conv_out_dim(W, K, S, P);
	int ckk = C * K * K;
	size_t plane = (size_t)OH * OW;
	struct conv_split sp = conv_split(B, C, OH, OW, OC, K, nscratch);
#pragma omp parallel num_threads(sp.nt)
	{
		int t = omp_get_thread_num(), lo, hi;
		float *col = scratch + (size_t)t * sp.slot + sp.wsz;
		conv_share(B, t, omp_get_num_threads(), &lo, &hi);
		for (int b0 = lo; b0 < hi; b0 += sp.nb) {
			int n = hi - b0 < sp.nb ? hi - b0 : sp.nb;
			size_t N = (size_t)n * plane;
			float *y = col + (size_t)ckk * N;
			float *o = out + (size_t)b0 * OC * plane;
			im2col(col, in + (size_t)b0 * C * H * W, n, C, H, W, K, S, P, OH, OW);
			if (n == 1)
				y = o;
			pbx_gemm(0, 0, OC, (int)N, ckk, 1.0f, w, ckk, col, (int)N, 0.0f, y, (int)N);
			conv_bias_out(o, y, b, n, OC, plane, relu);
		}
	}
}

/* See conv_shared.h. */
void conv_bias_grad(float *db, float *dout, const float *relu_out, int B, int OC, size_t plane)
{
#pragma omp for schedule(static)
	for (int oc = 0; oc < OC; oc++) {
		float s = 0.0f;
		for (int bi = 0; bi < B; bi++) {
			size_t off = ((size_t)bi * OC + oc) * plane;
			float *d = dout + off;
			if (relu_out) {
				const float *ro = relu_out + off;
#pragma omp simd
				for (size_t p = 0; p < plane; p++)
					d[p] *= (float)(ro[p] > 0.0f);
			}
			pbx_v4 v0 = { 0 }, v1 = { 0 };
			size_t p = 0;
			for (; p + 8 <= plane; p += 8) {
				v0 += pbx_v4_load(d + p);
				v1 += pbx_v4_load(d + p + 4);
			}
			for (; p < plane; p++)
				s += d[p];
			s += pbx_v4_sum(v0 + v1);
		}
		db[oc] += s;
	}
}

/* dw (n) += partial[0] + partial[1] + ... (nt partials, stride slot).
 * Inside a parallel region (omp for). */
static void conv_reduce_dw(float *dw, const float *partial, int nt, size_t slot, size_t n)
{
#pragma omp for schedule(static)
	for (size_t i = 0; i < n; i++) {
		float s = dw[i];
		for (int t = 0; t < nt; t++)
			s += partial[(size_t)t * slot + i];
		dw[i] = s;
	}
}

void conv_im2col_backward(float *din, float *dw, float *db, float *dout, const float *relu_out,
			  const float *in, const float *w, int B, int C, int H, int W, int OC,
			  int K, int S, int P, float *scratch, size_t nscratch)
{
	int OH = conv_out_dim(H, K, S, P), OW = conv_out_dim(W, K, S, P);
	int ckk = C * K * K;
	size_t plane = (size_t)OH * OW;
	struct conv_split sp = conv_split(B, C, OH, OW, OC, K, nscratch);

/* one region: db and the ReLU mask (all of dout, then a barrier),
	 * each thread's images, a barrier, the sum of the dW partials */
#pragma omp parallel num_threads(sp.nt)
	{
		int t = omp_get_thread_num(), lo, hi;
		float *dwt = scratch + (size_t)t * sp.slot, *col = dwt + sp.wsz;
		int nt = omp_get_num_threads();
		conv_bias_grad(db, dout, relu_out, B, OC, plane);
		conv_share(B, t, nt, &lo, &hi);
		memset(dwt, 0, sizeof(float) * sp.wsz);
		for (int b0 = lo; b0 < hi; b0 += sp.nb) {
			int n = hi - b0 < sp.nb ? hi - b0 : sp.nb;
			size_t N = (size_t)n * plane;
			float *dy = col + (size_t)ckk * N;
			float *dcol = dy + (size_t)OC * N;
			const float *d = dout + (size_t)b0 * OC * plane;
			const float *dyc = dy;
			im2col(col, in + (size_t)b0 * C * H * W, n, C, H, W, K, S, P, OH, OW);
			if (n == 1) {
				dyc = d;
			} else {
				/* dout (n, OC, plane) -> dY (OC, n*plane) */
				for (int i = 0; i < n * OC; i++) {
					int bi = i / OC, oc = i % OC;
					memcpy(dy + (size_t)oc * N + (size_t)bi * plane,
					       d + (size_t)i * plane, sizeof(float) * plane);
				}
			}
			pbx_gemm(0, 1, OC, ckk, (int)N, 1.0f, dyc, (int)N, col, (int)N, 1.0f, dwt,
				 ckk);
			if (!din)
				continue;
			pbx_gemm(1, 0, ckk, (int)N, OC, 1.0f, w, ckk, dyc, (int)N, 0.0f, dcol,
				 (int)N);
			col2im(din + (size_t)b0 * C * H * W, dcol, n, C, H, W, K, S, P, OH, OW);
		}
#pragma omp barrier
		conv_reduce_dw(dw, scratch, nt, sp.slot, sp.wsz);
	}
}

/* ------------------------------------------------------------- dispatch */

size_t conv_scratch_floats(int B, int C, int H, int W, int OC, int K, int S, int P, size_t cap)
{
	size_t n = conv_im2col_scratch_floats(B, C, H, W, OC, K, S, P, cap);
	if (conv_wino_ok(C, OC, K, S, P)) {
		size_t nw = conv_wino_scratch_floats(B, C, H, W, OC, cap);
		if (nw > n)
			n = nw;
	}
	return n;
}

void conv_forward(float *out, const float *in, const float *w, const float *b, int B, int C, int H,
		  int W, int OC, int K, int S, int P, int relu, float *scratch, size_t nscratch)
{
	if (conv_wino_ok(C, OC, K, S, P))
		conv_wino_forward(out, in, w, b, B, C, H, W, OC, relu, scratch, nscratch);
	else if (conv_c1_ok(C, K, S, P, B, H, W, OC, nscratch))
		conv_c1_forward(out, in, w, b, B, H, W, OC, relu, scratch, nscratch);
	else
		conv_im2col_forward(out, in, w, b, B, C, H, W, OC, K, S, P, relu, scratch,
				    nscratch);
}

void conv_backward(float *din, float *dw, float *db, float *dout, const float *relu_out,
		   const float *in, const float *w, int B, int C, int H, int W, int OC, int K,
		   int S, int P, float *scratch, size_t nscratch)
{
	if (conv_wino_ok(C, OC, K, S, P))
		conv_wino_backward(din, dw, db, dout, relu_out, in, w, B, C, H, W, OC, scratch,
				   nscratch);
	else if (!din && !relu_out && conv_c1_ok(C, K, S, P, B, H, W, OC, nscratch))
		conv_c1_backward_weights(dw, db, dout, in, B, H, W, OC, scratch, nscratch);
	else
		conv_im2col_backward(din, dw, db, dout, relu_out, in, w, B, C, H, W, OC, K, S, P,
				     scratch, nscratch);
}
