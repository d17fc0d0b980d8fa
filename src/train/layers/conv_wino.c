/*
 * conv_wino.c - 3x3, stride 1, padding 1 convolution by Winograd's minimal
 * filtering F(2x2, 3x3) (Lavin & Gray 2015), forward and both gradients.
 *
 * Every 2x2 block of outputs ("tile") comes from a 4x4 block of the padded
 * input.  With the 4x4 transforms
 *
 *   V = B^T d B   (input tile d, 4x4)     U = G g G^T   (filter g, 3x3)
 *   Y = A^T M A   (2x2 output),           M = sum over c of U (.) V
 *
 * the sum over input channels becomes, for each of the 16 positions xi of
 * the 4x4 transform, one matrix product over (channels x tiles):
 *
 *   M[xi] (OC, T) = U[xi] (OC, C) x V[xi] (C, T)         16 sgemms
 *
 * 16 * OC * C multiplies per tile instead of 36 * OC * C for the 4 outputs
 * of direct convolution: 2.25x fewer flops; the transforms are adds.
 *
 * Backward data is the same convolution of dout with the filter flipped in
 * both spatial axes and with OC and C exchanged (padding 3 - 1 - 1 = 1).
 * Backward filter follows from M being linear in U:
 *
 *   dU[xi] (OC, C) = sum over tiles of (A dY A^T)[xi] (OC, T) x V[xi]^T
 *   dW = G^T dU G
 *
 * Work is split like conv.c: each thread takes a contiguous share of the
 * batch in chunks of nb images (transforms, 16 single-threaded products
 * by pbx_gemm_small_*: AVX-512 where the CPU has it, else OpenBLAS, then
 * the output transform, all while the chunk is in L2); dU comes from
 * per-thread partials added in thread order, then transformed once.  Every
 * float depends only on the thread count (chunking follows from it) and
 * the CPU's instruction set, never on timing.
 *
 * The transforms run on 4 tiles at once (4-float vectors, plain SSE2 on
 * x86-64): a tile row's even and odd columns are split out by shuffles.
 *
 * Tile layout in scratch: X[xi][ch][t], t = image * TY*TX + ty * TX + tx
 * (rows of a chunk's T tiles padded to 16 floats, 64-byte aligned),
 * TY = ceil(H/2), TX = ceil(W/2); odd sizes pad the last tile with zeros
 * and drop its outside outputs.
 */
#include "train/layers/conv_shared.h"
#include "train/layers/layers.h"
#include "train/layers/simd.h"

#include <omp.h>
#include <stdint.h>
#include <string.h>

/* Floats of scratch per thread for the chunk (as conv.c). */
#define WINO_DEFAULT_CAP ((size_t)1 << 19)

struct wino_geom {
	int TY, TX;   /* tiles per column, per row */
	int G;        /* groups of 4 tiles per row: ceil(TX/4) */
	int EW;       /* padded planes' row stride: 8*G + 2 floats */
	int PH;       /* padded planes' rows: 2*TY + 2 */
	size_t tiles; /* per image: TY*TX */
	size_t fixed; /* per-thread floats besides dU and the chunk */
};

static struct wino_geom wino_geom(int H, int W)
{
	struct wino_geom g;
	g.TY = (H + 1) / 2;
	g.TX = (W + 1) / 2;
	g.G = (g.TX + 3) / 4;
	g.EW = 8 * g.G + 2;
	g.PH = 2 * g.TY + 2;
	g.tiles = (size_t)g.TY * g.TX;
	/* two padded planes and the output plane (2TY, 8G) */
	g.fixed = 2 * (size_t)g.PH * g.EW + (size_t)2 * g.TY * 8 * g.G;
	return g;
}

/* A thread's plane buffers (in its slot, after dU).  A plane is copied
 * whole before it is transformed: the vector loads then read stores long
 * retired (loads straddling fresh narrower stores stall on store
 * forwarding). */
struct wino_tmp {
	float *pin;   /* (PH, EW): input plane at (1, 1), zero border */
	float *pgr;   /* (PH, EW): gradient plane at (0, 0), zeros after */
	float *plane; /* (2TY, 8G): one output plane before bias/crop */
};

/* Lays out the buffers at p and zeroes them: only rows and columns
 * [1, H] x [1, W] of pin and [0, H) x [0, W) of pgr are ever written, so
 * the borders stay 0 for the whole pass. */
static struct wino_tmp wino_tmp(float *p, const struct wino_geom *g)
{
	struct wino_tmp t;
	size_t pp = (size_t)g->PH * g->EW;
	memset(p, 0, sizeof(float) * g->fixed);
	t.pin = p;
	t.pgr = p + pp;
	t.plane = p + 2 * pp;
	return t;
}

static inline void wino_store4(float *p, pbx_v4 v)
{
	memcpy(p, &v, sizeof(v));
}

/* dst (rows at stride EW) = src (H, W). */
static void wino_copy_plane(float *restrict dst, const float *restrict src, int H, int W, int EW)
{
	for (int h = 0; h < H; h++) {
		float *d = dst + (size_t)h * EW;
		const float *sr = src + (size_t)h * W;
		int x = 0;
		for (; x + 4 <= W; x += 4)
			wino_store4(d + x, pbx_v4_load(sr + x));
		for (; x < W; x++)
			d[x] = sr[x];
	}
}

/* Floats after a chunk: the output transform's 4-tile loads may run 3
 * past its last plane. */
#define WINO_SLACK 8

/* Chunk floats per image: tiles of C and of OC channels, 16 each. */
static size_t wino_per_image(const struct wino_geom *g, int C, int OC)
{
	return 16 * g->tiles * ((size_t)C + OC);
}

/* A chunk's rows of T tiles lie L = T rounded up to 16 floats apart, from
 * a 64-byte boundary: the products' 16-float loads then never straddle
 * two cache lines.  The padding costs each chunk at most 16 floats per
 * row, plus 16 for the alignment. */
static size_t wino_ld(size_t T)
{
	return (T + 15) / 16 * 16;
}

/* Floats from one xi's (ch, L) block to the next: 16 more than ch*L, so
 * that the 16 blocks a transform writes at once do not all start at the
 * same offset modulo 4 KiB (with ch*L a multiple of 1024 floats they
 * would, and compete for the same L1 sets). */
static size_t wino_xs(int ch, size_t L)
{
	return (size_t)ch * L + 16;
}

static size_t wino_chunk_extra(int C, int OC)
{
	return 16 * ((size_t)C + OC) * 16 + 2 * 16 * 16 + 16;
}

static float *wino_align(float *p)
{
	return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

int conv_wino_ok(int C, int OC, int K, int S, int P)
{
	/* the 16 gemms have C or OC as their inner dimension; below 8 the
	 * transforms outweigh the saving (conv1 of cnn-bn has C = 1) */
	return K == 3 && S == 1 && P == 1 && C >= 8 && OC >= 8;
}

/* Scratch: shared U (16*OC*C), then nt slots of (dU partial (16*OC*C),
 * planes, chunk). */
struct wino_split {
	int nt, nb;
	size_t slot, usz, fixed;
};

static struct wino_split wino_split(int B, int C, int OC, const struct wino_geom *g,
				    size_t nscratch)
{
	struct wino_split sp;
	size_t per = wino_per_image(g, C, OC);
	sp.usz = 16 * (size_t)OC * C;
	sp.fixed = g->fixed;
	sp.nt = omp_get_max_threads();
	if (sp.nt > B)
		sp.nt = B;
	while (sp.nt > 1 && (nscratch - sp.usz) / sp.nt <
				    sp.usz + sp.fixed + WINO_SLACK + wino_chunk_extra(C, OC) + per)
		sp.nt--;
	sp.slot = (nscratch - sp.usz) / sp.nt;
	sp.nb = (int)((sp.slot - sp.usz - sp.fixed - WINO_SLACK - wino_chunk_extra(C, OC)) / per);
	if (sp.nb > B)
		sp.nb = B;
	return sp;
}

size_t conv_wino_scratch_floats(int B, int C, int H, int W, int OC, size_t cap)
{
	struct wino_geom g = wino_geom(H, W);
	int nt = omp_get_max_threads();
	size_t per = wino_per_image(&g, C, OC), nb;
	size_t share = ((size_t)B + nt - 1) / nt, usz = 16 * (size_t)OC * C;
	if (cap == 0)
		cap = WINO_DEFAULT_CAP;
	nb = cap / per;
	if (nb < 1)
		nb = 1;
	if (nb > share)
		nb = share;
	return usz + (size_t)nt * (usz + g.fixed + WINO_SLACK + wino_chunk_extra(C, OC) + nb * per);
}

/* ----------------------------------------------------------- transforms */

/* u[16] = G g G^T for one 3x3 filter g (row-major), G = [1 0 0; .5 .5 .5;
 * .5 -.5 .5; 0 0 1]; flip = 1 uses g rotated by 180 degrees. */
static void wino_filter_tile(float *u, const float *g9, int flip)
{
	float g[9], t[4][3];
	for (int k = 0; k < 9; k++)
		g[k] = g9[flip ? 8 - k : k];
	for (int j = 0; j < 3; j++) { /* t = G g (4x3) */
		float a = g[j], b = g[3 + j], c = g[6 + j];
		t[0][j] = a;
		t[1][j] = 0.5f * (a + b + c);
		t[2][j] = 0.5f * (a - b + c);
		t[3][j] = c;
	}
	for (int i = 0; i < 4; i++) { /* u = t G^T (4x4) */
		float a = t[i][0], b = t[i][1], c = t[i][2];
		u[4 * i + 0] = a;
		u[4 * i + 1] = 0.5f * (a + b + c);
		u[4 * i + 2] = 0.5f * (a - b + c);
		u[4 * i + 3] = c;
	}
}

/* U[xi][o][i] (16, CO, CI) for o < CO, i < CI; forward (flip = 0): CO = OC,
 * CI = C, filter w[o][i]; backward data (flip = 1): CO = C, CI = OC, filter
 * w[i][o] rotated.  Inside a parallel region (omp for, then a barrier). */
static void wino_filters(float *U, const float *w, int CO, int CI, int flip)
{
	size_t xs = (size_t)CO * CI;
#pragma omp for schedule(static)
	for (int o = 0; o < CO; o++) {
		for (int i = 0; i < CI; i++) {
			const float *g =
				flip ? w + ((size_t)i * CO + o) * 9 : w + ((size_t)o * CI + i) * 9;
			float u[16];
			wino_filter_tile(u, g, flip);
			for (int xi = 0; xi < 16; xi++)
				U[xi * xs + (size_t)o * CI + i] = u[xi];
		}
	}
}

/* Stores lanes [0, n) of v (n <= 4). */
static inline void wino_store_n(float *p, pbx_v4 v, int n)
{
	for (int l = 0; l < n; l++)
		p[l] = v[l];
}

/* Stores 4 tiles' values at v (tx0 = 4*grp of row ty).  Lanes past the
 * row end land on the next row's first tiles, which are written after
 * them; only the plane's last row stores a partial group. */
static inline void wino_store_tiles(float *v, pbx_v4 x, int grp, int ty, const struct wino_geom *g)
{
	int n = g->TX - 4 * grp;
	if (n >= 4 || ty < g->TY - 1)
		wino_store4(v, x);
	else
		wino_store_n(v, x, n);
}

/* V = B^T d B for every tile of one plane src (H, W), padding 1, B^T =
 * [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]: v[xi * xs + ty * TX + tx].
 * 4 tiles at once: the rows are combined as vectors over 8 + 2 columns,
 * whose even and odd columns shuffles then split out. */
static void wino_input_plane(float *restrict v, size_t xs, const float *restrict src, int H, int W,
			     const struct wino_tmp *tp, const struct wino_geom *g)
{
	int EW = g->EW, TX = g->TX;
	wino_copy_plane(tp->pin + EW + 1, src, H, W, EW);
	for (int ty = 0; ty < g->TY; ty++) {
		const float *r = tp->pin + (size_t)2 * ty * EW;
		float *o = v + (size_t)ty * TX;
		for (int grp = 0; grp < g->G; grp++) {
			/* columns 8grp + [0, 8) as (a, b), + 2 as (a2, b2) */
			pbx_v4 a[4], b[4], a2[4], b2[4];
			for (int k = 0; k < 4; k++) {
				const float *d = r + (size_t)k * EW + 8 * grp;
				a[k] = pbx_v4_load(d);
				b[k] = pbx_v4_load(d + 4);
				a2[k] = pbx_v4_load(d + 2);
				b2[k] = pbx_v4_load(d + 6);
			}
			for (int i = 0; i < 4; i++) {
				pbx_v4 ea, eb, ea2, eb2;
				switch (i) { /* row i of B^T */
				case 0:
					ea = a[0] - a[2];
					eb = b[0] - b[2];
					ea2 = a2[0] - a2[2];
					eb2 = b2[0] - b2[2];
					break;
				case 1:
					ea = a[1] + a[2];
					eb = b[1] + b[2];
					ea2 = a2[1] + a2[2];
					eb2 = b2[1] + b2[2];
					break;
				case 2:
					ea = a[2] - a[1];
					eb = b[2] - b[1];
					ea2 = a2[2] - a2[1];
					eb2 = b2[2] - b2[1];
					break;
				default:
					ea = a[1] - a[3];
					eb = b[1] - b[3];
					ea2 = a2[1] - a2[3];
					eb2 = b2[1] - b2[3];
					break;
				}
				pbx_v4 d0 = PBX_V4_SHUFFLE2(ea, eb, 0, 2, 4, 6);
				pbx_v4 d1 = PBX_V4_SHUFFLE2(ea, eb, 1, 3, 5, 7);
				pbx_v4 d2 = PBX_V4_SHUFFLE2(ea2, eb2, 0, 2, 4, 6);
				pbx_v4 d3 = PBX_V4_SHUFFLE2(ea2, eb2, 1, 3, 5, 7);
				float *q = o + (size_t)(4 * i) * xs + 4 * grp;
				wino_store_tiles(q, d0 - d2, grp, ty, g);
				wino_store_tiles(q + xs, d1 + d2, grp, ty, g);
				wino_store_tiles(q + 2 * xs, d2 - d1, grp, ty, g);
				wino_store_tiles(q + 3 * xs, d1 - d3, grp, ty, g);
			}
		}
	}
}

/* Y = A^T M A for every tile of one output plane, A^T = [1 1 1 0;
 * 0 1 -1 -1], from m[xi * xs + ty * TX + tx] (4 tiles at a time; the
 * loads of a row's last group may run past the plane) into plane (2TY,
 * 8G), the 2x2 results interleaved by shuffles. */
static void wino_output_plane(float *restrict plane, const float *restrict m, size_t xs,
			      const struct wino_geom *g)
{
	int TX = g->TX, OW8 = 8 * g->G;
	for (int ty = 0; ty < g->TY; ty++) {
		float *y0 = plane + (size_t)2 * ty * OW8, *y1 = y0 + OW8;
		for (int grp = 0; grp < g->G; grp++) {
			const float *mt = m + (size_t)ty * TX + 4 * grp;
			pbx_v4 s0[4], s1[4];
			for (int j = 0; j < 4; j++) {
				pbx_v4 a = pbx_v4_load(mt + (size_t)j * xs);
				pbx_v4 b = pbx_v4_load(mt + (size_t)(4 + j) * xs);
				pbx_v4 c = pbx_v4_load(mt + (size_t)(8 + j) * xs);
				pbx_v4 d = pbx_v4_load(mt + (size_t)(12 + j) * xs);
				s0[j] = a + b + c;
				s1[j] = b - c - d;
			}
			pbx_v4 y00 = s0[0] + s0[1] + s0[2];
			pbx_v4 y01 = s0[1] - s0[2] - s0[3];
			pbx_v4 y10 = s1[0] + s1[1] + s1[2];
			pbx_v4 y11 = s1[1] - s1[2] - s1[3];
			wino_store4(y0 + 8 * grp, PBX_V4_SHUFFLE2(y00, y01, 0, 4, 1, 5));
			wino_store4(y0 + 8 * grp + 4, PBX_V4_SHUFFLE2(y00, y01, 2, 6, 3, 7));
			wino_store4(y1 + 8 * grp, PBX_V4_SHUFFLE2(y10, y11, 0, 4, 1, 5));
			wino_store4(y1 + 8 * grp + 4, PBX_V4_SHUFFLE2(y10, y11, 2, 6, 3, 7));
		}
	}
}

/* dst (H, W) = plane's top-left (H, W) (row stride ow) + bias, ReLU if
 * relu. */
static void wino_store(float *restrict dst, const float *restrict plane, int H, int W, int ow,
		       float bias, int relu)
{
	for (int h = 0; h < H; h++)
		conv_bias_relu(dst + (size_t)h * W, plane + (size_t)h * ow, (size_t)W, bias, relu);
}

/* Z = A dY A^T for every 2x2 tile of one gradient plane dy (H, W) (zeros
 * outside), A = [1 0; 1 1; 1 -1; 0 -1]: z[xi * xs + ty * TX + tx], 4
 * tiles at a time. */
static void wino_grad_plane(float *restrict z, size_t xs, const float *restrict dy, int H, int W,
			    const struct wino_tmp *tp, const struct wino_geom *g)
{
	int TX = g->TX, EW = g->EW;
	wino_copy_plane(tp->pgr, dy, H, W, EW);
	for (int ty = 0; ty < g->TY; ty++) {
		const float *ra = tp->pgr + (size_t)2 * ty * EW, *rb = ra + EW;
		float *zt = z + (size_t)ty * TX;
		for (int grp = 0; grp < g->G; grp++) {
			pbx_v4 a0 = pbx_v4_load(ra + 8 * grp), a1 = pbx_v4_load(ra + 8 * grp + 4);
			pbx_v4 b0 = pbx_v4_load(rb + 8 * grp), b1 = pbx_v4_load(rb + 8 * grp + 4);
			pbx_v4 y00 = PBX_V4_SHUFFLE2(a0, a1, 0, 2, 4, 6);
			pbx_v4 y01 = PBX_V4_SHUFFLE2(a0, a1, 1, 3, 5, 7);
			pbx_v4 y10 = PBX_V4_SHUFFLE2(b0, b1, 0, 2, 4, 6);
			pbx_v4 y11 = PBX_V4_SHUFFLE2(b0, b1, 1, 3, 5, 7);
			pbx_v4 q[4][2] = { { y00, y01 },
					   { y00 + y10, y01 + y11 },
					   { y00 - y10, y01 - y11 },
					   { -y10, -y11 } };
			for (int i = 0; i < 4; i++) {
				float *o = zt + (size_t)(4 * i) * xs + 4 * grp;
				wino_store_tiles(o, q[i][0], grp, ty, g);
				wino_store_tiles(o + xs, q[i][0] + q[i][1], grp, ty, g);
				wino_store_tiles(o + 2 * xs, q[i][0] - q[i][1], grp, ty, g);
				wino_store_tiles(o + 3 * xs, -q[i][1], grp, ty, g);
			}
		}
	}
}

/* dw (3x3) += G^T du G for one 4x4 du (row-major). */
static void wino_filter_grad(float *dw, const float *du)
{
	float t[3][4];
	for (int j = 0; j < 4; j++) { /* t = G^T du (3x4) */
		float a = du[j], b = du[4 + j], c = du[8 + j], d = du[12 + j];
		t[0][j] = a + 0.5f * (b + c);
		t[1][j] = 0.5f * (b - c);
		t[2][j] = 0.5f * (b + c) + d;
	}
	for (int i = 0; i < 3; i++) { /* t G (3x3) */
		float a = t[i][0], b = t[i][1], c = t[i][2], d = t[i][3];
		dw[3 * i + 0] += a + 0.5f * (b + c);
		dw[3 * i + 1] += 0.5f * (b - c);
		dw[3 * i + 2] += 0.5f * (b + c) + d;
	}
}

/* ------------------------------------------------------------- the passes */

/* out (n, CO, H, W) = conv of in (n, CI, H, W) with transformed filters U
 * (16, CO, CI), + bias (NULL = none), ReLU if relu: one chunk of one thread.
 * vi (16, CI, L) and m (16, CO, L), L = wino_ld(n*tiles), blocks
 * wino_xs() apart, are chunk scratch. */
static void wino_conv_chunk(float *out, const float *in, const float *U, const float *bias, int n,
			    int CI, int CO, int H, int W, int relu, float *vi, float *m,
			    const struct wino_tmp *tp, const struct wino_geom *g)
{
	size_t T = (size_t)n * g->tiles, L = wino_ld(T), plane = (size_t)H * W;
	size_t xi_in = wino_xs(CI, L), xo = wino_xs(CO, L);
	for (int b = 0; b < n; b++)
		for (int c = 0; c < CI; c++)
			wino_input_plane(vi + (size_t)c * L + b * g->tiles, xi_in,
					 in + ((size_t)b * CI + c) * plane, H, W, tp, g);
	for (int xi = 0; xi < 16; xi++)
		pbx_gemm_small_nn(CO, (int)T, CI, U + (size_t)xi * CO * CI, CI, vi + xi * xi_in,
				  (int)L, m + xi * xo, (int)L);
	for (int b = 0; b < n; b++) {
		for (int o = 0; o < CO; o++) {
			wino_output_plane(tp->plane, m + (size_t)o * L + b * g->tiles, xo, g);
			wino_store(out + ((size_t)b * CO + o) * plane, tp->plane, H, W, 8 * g->G,
				   bias ? bias[o] : 0.0f, relu);
		}
	}
}

void conv_wino_forward(float *out, const float *in, const float *w, const float *b, int B, int C,
		       int H, int W, int OC, int relu, float *scratch, size_t nscratch)
{
	struct wino_geom g = wino_geom(H, W);
	struct wino_split sp = wino_split(B, C, OC, &g, nscratch);
	float *U = scratch;
	pbx_gemm_small_init();
#pragma omp parallel num_threads(sp.nt)
	{
		int t = omp_get_thread_num(), lo, hi;
		float *slot = scratch + sp.usz + (size_t)t * sp.slot;
		struct wino_tmp tp = wino_tmp(slot + sp.usz, &g);
		float *chunk = wino_align(slot + sp.usz + sp.fixed);
		wino_filters(U, w, OC, C, 0);
		conv_share(B, t, omp_get_num_threads(), &lo, &hi);
		for (int b0 = lo; b0 < hi; b0 += sp.nb) {
			int n = hi - b0 < sp.nb ? hi - b0 : sp.nb;
			float *vi = chunk;
			float *m = chunk + 16 * wino_xs(C, wino_ld((size_t)n * g.tiles));
			wino_conv_chunk(out + (size_t)b0 * OC * H * W, in + (size_t)b0 * C * H * W,
					U, b, n, C, OC, H, W, relu, vi, m, &tp, &g);
		}
	}
}

void conv_wino_backward(float *din, float *dw, float *db, float *dout, const float *relu_out,
			const float *in, const float *w, int B, int C, int H, int W, int OC,
			float *scratch, size_t nscratch)
{
	struct wino_geom g = wino_geom(H, W);
	struct wino_split sp = wino_split(B, C, OC, &g, nscratch);
	size_t plane = (size_t)H * W;
	float *Uf = scratch; /* flipped filters (16, C, OC) for din */
	pbx_gemm_small_init();

#pragma omp parallel num_threads(sp.nt)
	{
		int t = omp_get_thread_num(), nt = omp_get_num_threads(), lo, hi;
		float *du = scratch + sp.usz + (size_t)t * sp.slot;
		struct wino_tmp tp = wino_tmp(du + sp.usz, &g);
		float *chunk = wino_align(du + sp.usz + sp.fixed);
		conv_bias_grad(db, dout, relu_out, B, OC, plane);
		if (din)
			wino_filters(Uf, w, C, OC, 1);
		memset(du, 0, sizeof(float) * sp.usz);
		conv_share(B, t, nt, &lo, &hi);
		for (int b0 = lo; b0 < hi; b0 += sp.nb) {
			int n = hi - b0 < sp.nb ? hi - b0 : sp.nb;
			size_t T = (size_t)n * g.tiles, L = wino_ld(T);
			size_t xc = wino_xs(C, L), xo = wino_xs(OC, L);
			float *vi = chunk, *z = chunk + 16 * xc;
			const float *x = in + (size_t)b0 * C * plane;
			const float *dy = dout + (size_t)b0 * OC * plane;
			for (int b = 0; b < n; b++) {
				for (int c = 0; c < C; c++)
					wino_input_plane(vi + (size_t)c * L + b * g.tiles, xc,
							 x + ((size_t)b * C + c) * plane, H, W, &tp,
							 &g);
				for (int o = 0; o < OC; o++)
					wino_grad_plane(z + (size_t)o * L + b * g.tiles, xo,
							dy + ((size_t)b * OC + o) * plane, H, W,
							&tp, &g);
			}
			/* dU[xi] (OC, C) += Z[xi] (OC, T) x V[xi]^T */
			for (int xi = 0; xi < 16; xi++)
				pbx_gemm_small_nt_acc(OC, C, (int)T, z + xi * xo, (int)L,
						      vi + xi * xc, (int)L,
						      du + (size_t)xi * OC * C, C);
			if (!din)
				continue;
			/* din = conv of dout with the flipped filters: the
			 * chunk's two halves swap roles (OC in, C out) */
			wino_conv_chunk(din + (size_t)b0 * C * plane, dy, Uf, NULL, n, OC, C, H, W,
					0, z, vi, &tp, &g);
		}
#pragma omp barrier
/* dw += G^T (dU_0 + dU_1 + ...) G, partials in thread order */
#pragma omp for schedule(static)
		for (int k = 0; k < OC * C; k++) {
			float s[16];
			for (int xi = 0; xi < 16; xi++) {
				const float *p = scratch + sp.usz + (size_t)xi * OC * C + k;
				float a = 0.0f;
				for (int u = 0; u < nt; u++)
					a += p[(size_t)u * sp.slot];
				s[xi] = a;
			}
			wino_filter_grad(dw + (size_t)k * 9, s);
		}
	}
}
