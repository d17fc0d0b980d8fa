/*
 * test_layers.c - every layer's backward against central finite differences
 * of its forward, on small shapes.  The scalar under test is
 * L = sum(out .* R) for a fixed random R (so dout = R), accumulated in
 * double; float rounding limits the match, hence the relative tolerance.
 * Inputs are spread so that no perturbation crosses a kink (ReLU at 0,
 * max-pool ties).  Also checks a whole model's parameter gradients, which
 * exercises the in-place and fused ReLU wiring.  TAP output
 * (tests/common/tap.h); exits non-zero on any failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "runtime/rng.h"
#include "train/layers/layers.h"
#include "train/model.h"

static struct pbx_rng rng;

/* A layer under test: fwd() recomputes `out` from the current inputs. */
struct gc {
	void (*fwd)(struct gc *g);
	float *out;     /* (nout) */
	const float *R; /* (nout) */
	size_t nout;
	void *p[12]; /* layer-specific pointers */
	int i[12];   /* layer-specific ints */
	float f[4];
};

static double gc_loss(struct gc *g)
{
	double s = 0.0;
	g->fwd(g);
	for (size_t k = 0; k < g->nout; k++)
		s += (double)g->out[k] * g->R[k];
	return s;
}

static float *rnd(size_t n, float lo, float hi)
{
	float *a = malloc(sizeof(float) * (n ? n : 1));
	for (size_t k = 0; k < n; k++)
		a[k] = lo + (hi - lo) * pbx_rng_uniform(&rng);
	return a;
}

/* Values away from 0 (|x| in [0.1, 1]) so ReLU-like kinks are not crossed. */
static float *rnd_nz(size_t n)
{
	float *a = rnd(n, 0.1f, 1.0f);
	for (size_t k = 0; k < n; k++)
		if (pbx_rng_uniform(&rng) < 0.5f)
			a[k] = -a[k];
	return a;
}

/* Distinct values spaced 0.05 apart in random order (no max-pool ties). */
static float *rnd_distinct(size_t n)
{
	float *a = malloc(sizeof(float) * n);
	for (size_t k = 0; k < n; k++)
		a[k] = 0.05f * (float)k - 0.025f * (float)n;
	for (size_t k = n - 1; k > 0; k--) {
		size_t j = pbx_rng_below(&rng, (uint32_t)(k + 1));
		float t = a[k];
		a[k] = a[j];
		a[j] = t;
	}
	return a;
}

/* Compares analytic[k] with (L(v+eps) - L(v-eps)) / 2eps for every k (or a
 * sample of 150 for big tensors). */
static void check(const char *name, struct gc *g, float *v, size_t n, const float *analytic,
		  double eps)
{
	double worst = 0.0;
	size_t nbad = 0, count = n < 150 ? n : 150;
	for (size_t t = 0; t < count; t++) {
		size_t k = n < 150 ? t : pbx_rng_below(&rng, (uint32_t)n);
		float old = v[k];
		v[k] = old + (float)eps;
		double lp = gc_loss(g);
		v[k] = old - (float)eps;
		double lm = gc_loss(g);
		v[k] = old;
		double num = (lp - lm) / (2.0 * eps), a = analytic[k];
		double err = fabs(num - a) / (1e-2 + fabs(num) + fabs(a));
		if (err > worst)
			worst = err;
		if (err > 1e-2) {
			if (nbad++ < 3)
				tap_diag("%s[%zu]: analytic %.6g numeric %.6g", name, k, a, num);
		}
	}
	gc_loss(g); /* leave outputs consistent */
	CHECKF(nbad == 0, "%s (%zu checked, worst rel err %.2e)", name, count, worst);
}

/* ---------------------------------------------------------------- conv */

static void conv_fwd(struct gc *g)
{
	conv_forward(g->out, g->p[0], g->p[1], g->p[2], g->i[0], g->i[1], g->i[2], g->i[3], g->i[4],
		     g->i[5], g->i[6], g->i[7], 0, g->p[3], (size_t)g->i[8]);
}

static void test_conv(int B, int C, int H, int W, int OC, int K, int S, int P, size_t cap,
		      const char *tag)
{
	int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
	size_t nin = (size_t)B * C * H * W, nw = (size_t)OC * C * K * K;
	size_t nout = (size_t)B * OC * OH * OW;
	size_t ns = conv_scratch_floats(B, C, H, W, OC, K, S, P, cap);
	float *in = rnd(nin, -1, 1), *w = rnd(nw, -1, 1), *b = rnd(OC, -1, 1);
	float *out = calloc(nout, 4), *R = rnd(nout, -1, 1);
	float *scr = calloc(ns, 4), *din = calloc(nin, 4), *dw = calloc(nw, 4);
	float *db = calloc(OC, 4);
	struct gc g = {
		conv_fwd, out, R, nout, { in, w, b, scr }, { B, C, H, W, OC, K, S, P, (int)ns },
		{ 0 }
	};
	char name[96];
	conv_fwd(&g);
	float *Rc = malloc(sizeof(float) * nout); /* conv_backward may mask dout */
	memcpy(Rc, R, sizeof(float) * nout);
	conv_backward(din, dw, db, Rc, NULL, in, w, B, C, H, W, OC, K, S, P, scr, ns);
	free(Rc);
	snprintf(name, sizeof(name), "conv %s din", tag);
	check(name, &g, in, nin, din, 1e-2);
	snprintf(name, sizeof(name), "conv %s dw", tag);
	check(name, &g, w, nw, dw, 1e-2);
	snprintf(name, sizeof(name), "conv %s db", tag);
	check(name, &g, b, OC, db, 1e-2);
	free(in);
	free(w);
	free(b);
	free(out);
	free(R);
	free(scr);
	free(din);
	free(dw);
	free(db);
}

/* Winograd F(2x2,3x3): gradients against finite differences, and forward
 * and backward (with a ReLU mask) against im2col, which computes the same
 * sums in another order: they must agree to a few float ulps of the
 * magnitudes involved. */
static void wino_fwd(struct gc *g)
{
	conv_wino_forward(g->out, g->p[0], g->p[1], g->p[2], g->i[0], g->i[1], g->i[2], g->i[3],
			  g->i[4], 0, g->p[3], (size_t)g->i[8]);
}

/* max |a - b| / max(1, max |b|) */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
	double d = 0.0, m = 1.0;
	for (size_t k = 0; k < n; k++) {
		if (fabs(a[k] - b[k]) > d)
			d = fabs(a[k] - b[k]);
		if (fabs(b[k]) > m)
			m = fabs(b[k]);
	}
	return d / m;
}

static void test_conv_wino(int B, int C, int H, int W, int OC, size_t cap, const char *tag)
{
	size_t nin = (size_t)B * C * H * W, nw = (size_t)OC * C * 9;
	size_t nout = (size_t)B * OC * H * W;
	size_t ns = conv_scratch_floats(B, C, H, W, OC, 3, 1, 1, cap);
	float *in = rnd(nin, -1, 1), *w = rnd(nw, -1, 1), *b = rnd(OC, -1, 1);
	float *out = calloc(nout, 4), *R = rnd(nout, -1, 1);
	float *scr = calloc(ns, 4), *din = calloc(nin, 4), *dw = calloc(nw, 4);
	float *db = calloc(OC, 4), *ref = calloc(nout, 4), *rdin = calloc(nin, 4);
	float *rdw = calloc(nw, 4), *rdb = calloc(OC, 4);
	float *Rc = malloc(sizeof(float) * nout), *Rr = malloc(sizeof(float) * nout);
	struct gc g = {
		wino_fwd, out, R, nout, { in, w, b, scr }, { B, C, H, W, OC, 3, 1, 1, (int)ns },
		{ 0 }
	};
	char name[128];
	double d[4];
	int ok;

	CHECKF(conv_wino_ok(C, OC, 3, 1, 1), "conv winograd %s: picked", tag);
	wino_fwd(&g);
	memcpy(Rc, R, sizeof(float) * nout);
	conv_wino_backward(din, dw, db, Rc, NULL, in, w, B, C, H, W, OC, scr, ns);
	/* the conv is linear in in and w: a wide step has no truncation
	 * error and less of the float rounding of L */
	snprintf(name, sizeof(name), "conv winograd %s din", tag);
	check(name, &g, in, nin, din, 1e-1);
	snprintf(name, sizeof(name), "conv winograd %s dw", tag);
	check(name, &g, w, nw, dw, 1e-1);
	snprintf(name, sizeof(name), "conv winograd %s db", tag);
	check(name, &g, b, OC, db, 1e-2);

	/* forward with the fused ReLU, and backward through its mask */
	conv_wino_forward(out, in, w, b, B, C, H, W, OC, 1, scr, ns);
	conv_im2col_forward(ref, in, w, b, B, C, H, W, OC, 3, 1, 1, 1, scr, ns);
	d[0] = max_rel_diff(out, ref, nout);
	memset(din, 0, sizeof(float) * nin);
	memset(dw, 0, sizeof(float) * nw);
	memset(db, 0, sizeof(float) * OC);
	memcpy(Rc, R, sizeof(float) * nout);
	memcpy(Rr, R, sizeof(float) * nout);
	conv_wino_backward(din, dw, db, Rc, ref, in, w, B, C, H, W, OC, scr, ns);
	conv_im2col_backward(rdin, rdw, rdb, Rr, ref, in, w, B, C, H, W, OC, 3, 1, 1, scr, ns);
	d[1] = max_rel_diff(din, rdin, nin);
	d[2] = max_rel_diff(dw, rdw, nw);
	d[3] = max_rel_diff(db, rdb, OC);
	ok = d[0] < 1e-5 && d[1] < 1e-5 && d[2] < 1e-5 && d[3] < 1e-5;
	CHECKF(ok,
	       "conv winograd %s vs im2col, relu (max rel diff out %.1e din %.1e dw %.1e db %.1e)",
	       tag, d[0], d[1], d[2], d[3]);
	free(in);
	free(w);
	free(b);
	free(out);
	free(R);
	free(scr);
	free(din);
	free(dw);
	free(db);
	free(ref);
	free(rdin);
	free(rdw);
	free(rdb);
	free(Rc);
	free(Rr);
}

/* The direct one-channel conv (AVX-512 CPUs): dw, db against finite
 * differences, and forward (with ReLU) and weight gradients against
 * im2col. */
static void c1_fwd(struct gc *g)
{
	conv_c1_forward(g->out, g->p[0], g->p[1], g->p[2], g->i[0], g->i[1], g->i[2], g->i[3], 0,
			g->p[3], (size_t)g->i[4]);
}

static void test_conv_c1(int B, int H, int W, int OC)
{
	size_t nin = (size_t)B * H * W, nw = (size_t)OC * 9;
	size_t nout = (size_t)B * OC * H * W;
	size_t ns = conv_scratch_floats(B, 1, H, W, OC, 3, 1, 1, 0);
	float *in = rnd(nin, -1, 1), *w = rnd(nw, -1, 1), *b = rnd(OC, -1, 1);
	float *out = calloc(nout, 4), *ref = calloc(nout, 4), *R = rnd(nout, -1, 1);
	float *scr = calloc(ns, 4), *dw = calloc(nw, 4), *db = calloc(OC, 4);
	float *rdw = calloc(nw, 4), *rdb = calloc(OC, 4);
	struct gc g = { c1_fwd, out, R, nout, { in, w, b, scr }, { B, H, W, OC, (int)ns }, { 0 } };
	char name[96];
	double d[3];
	int ok;

	if (!conv_c1_ok(1, 3, 1, 1, B, H, W, OC, ns)) {
		tap_skip("conv c1 %dx%d: no AVX-512 on this CPU", H, W);
		goto out;
	}
	c1_fwd(&g);
	conv_c1_backward_weights(dw, db, R, in, B, H, W, OC, scr, ns);
	snprintf(name, sizeof(name), "conv c1 %dx%d -> %d dw", H, W, OC);
	check(name, &g, w, nw, dw, 1e-2);
	snprintf(name, sizeof(name), "conv c1 %dx%d -> %d db", H, W, OC);
	check(name, &g, b, OC, db, 1e-2);

	conv_c1_forward(out, in, w, b, B, H, W, OC, 1, scr, ns);
	conv_im2col_forward(ref, in, w, b, B, 1, H, W, OC, 3, 1, 1, 1, scr, ns);
	d[0] = max_rel_diff(out, ref, nout);
	conv_im2col_backward(NULL, rdw, rdb, R, NULL, in, w, B, 1, H, W, OC, 3, 1, 1, scr, ns);
	d[1] = max_rel_diff(dw, rdw, nw);
	d[2] = max_rel_diff(db, rdb, OC);
	ok = d[0] < 1e-5 && d[1] < 1e-5 && d[2] < 1e-5;
	CHECKF(ok, "conv c1 %dx%d -> %d vs im2col, relu (max rel diff out %.1e dw %.1e db %.1e)", H,
	       W, OC, d[0], d[1], d[2]);
out:
	free(in);
	free(w);
	free(b);
	free(out);
	free(ref);
	free(R);
	free(scr);
	free(dw);
	free(db);
	free(rdw);
	free(rdb);
}

/* ---------------------------------------------------------------- pool */

static void pool_fwd(struct gc *g)
{
	if (g->i[7])
		maxpool_forward(g->out, g->p[0], g->i[0], g->i[1], g->i[2], g->i[3], g->i[4],
				g->i[5], g->i[6]);
	else
		avgpool_forward(g->out, g->p[0], g->i[0], g->i[1], g->i[2], g->i[3], g->i[4],
				g->i[5], g->i[6]);
}

static void test_pool(int max, int B, int C, int H, int W, int K, int S, int P)
{
	int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
	size_t nin = (size_t)B * C * H * W, nout = (size_t)B * C * OH * OW;
	float *in = max ? rnd_distinct(nin) : rnd(nin, -1, 1);
	float *out = calloc(nout, 4), *R = rnd(nout, -1, 1), *din = calloc(nin, 4);
	struct gc g = { pool_fwd, out, R, nout, { in }, { B, C, H, W, K, S, P, max }, { 0 } };
	char name[64];
	pool_fwd(&g);
	if (max)
		maxpool_backward(din, R, in, B, C, H, W, K, S, P);
	else
		avgpool_backward(din, R, B, C, H, W, K, S, P);
	snprintf(name, sizeof(name), "%s k%d s%d p%d din", max ? "maxpool" : "avgpool", K, S, P);
	check(name, &g, in, nin, din, 1e-2);
	free(in);
	free(out);
	free(R);
	free(din);
}

/* ----------------------------------------------------------- batchnorm */

static void bn_fwd(struct gc *g)
{
	int C = g->i[1];
	float *run = g->p[3], *saved = g->p[4];
	batchnorm_forward(g->out, g->p[0], g->p[1], g->p[2], run, run + C, saved, saved + C,
			  g->i[0], C, g->i[2], 1e-5f, 0.1f, 1, g->i[3]);
}

static void test_batchnorm(int B, int C, int HW, int relu)
{
	size_t n = (size_t)B * C * HW;
	float *in = rnd(n, -2, 2), *gamma = rnd(C, 0.5f, 1.5f), *beta = rnd(C, -1, 1);
	float run[64] = { 0 }, saved[64];
	float *out = calloc(n, 4), *R = rnd(n, -1, 1), *din = calloc(n, 4);
	float *dg = calloc(C, 4), *dbt = calloc(C, 4);
	struct gc g = { bn_fwd, out, R, n, { in, gamma, beta, run, saved }, { B, C, HW, relu },
			{ 0 } };
	bn_fwd(&g);
	if (relu) {
		/* fused ReLU == ReLU backward, then plain BN backward */
		float *Rm = calloc(n, 4), *din2 = calloc(n, 4);
		float *dg2 = calloc(C, 4), *db2 = calloc(C, 4);
		double worst = 0.0;
		for (size_t k = 0; k < n; k++)
			Rm[k] = out[k] > 0.0f ? R[k] : 0.0f;
		batchnorm_backward(din, dg, dbt, R, in, gamma, beta, saved, saved + C, 1, B, C, HW);
		batchnorm_backward(din2, dg2, db2, Rm, in, gamma, beta, saved, saved + C, 0, B, C,
				   HW);
		for (size_t k = 0; k < n; k++)
			worst = fmax(worst, fabs(din[k] - din2[k]));
		for (int k = 0; k < C; k++)
			worst = fmax(worst, fmax(fabs(dg[k] - dg2[k]), fabs(dbt[k] - db2[k])));
		CHECKF(worst < 1e-5,
		       "batchnorm+relu fused backward equals the unfused pair (max diff %.1e)",
		       worst);
		free(Rm);
		free(din2);
		free(dg2);
		free(db2);
	} else {
		batchnorm_backward(din, dg, dbt, R, in, gamma, beta, saved, saved + C, 0, B, C, HW);
		check("batchnorm din", &g, in, n, din, 1e-2);
		check("batchnorm dgamma", &g, gamma, C, dg, 1e-3);
		check("batchnorm dbeta", &g, beta, C, dbt, 1e-3);
	}
	/* evaluation mode uses the running statistics */
	for (int c = 0; c < C; c++) {
		run[c] = 0.5f;
		run[C + c] = 4.0f;
	}
	batchnorm_forward(out, in, gamma, beta, run, run + C, saved, saved + C, B, C, HW, 0.0f,
			  0.1f, 0, 0);
	float want = gamma[0] * (in[0] - 0.5f) / 2.0f + beta[0];
	CHECKF(fabsf(out[0] - want) < 1e-5f, "batchnorm eval uses running stats");
	free(in);
	free(gamma);
	free(beta);
	free(out);
	free(R);
	free(din);
	free(dg);
	free(dbt);
}

/* Fused BN+ReLU+2x2 max-pool backward == the pool backward, then BN+ReLU's
 * (odd H, W leave elements outside every window; W > 64 spans blocks).
 * Some gammas are negative, and ties at 0 after the ReLU are frequent. */
static void test_bn_pool(int B, int C, int H, int W)
{
	size_t n = (size_t)B * C * H * W, np = (size_t)B * C * (H / 2) * (W / 2);
	float *in = rnd(n, -2, 2), *gamma = rnd(C, -1.5f, 1.5f), *beta = rnd(C, -1, 1);
	float run[64] = { 0 }, saved[64];
	float *out = calloc(n, 4), *gp = rnd(np, -1, 1), *dy = calloc(n, 4);
	float *din = calloc(n, 4), *din2 = calloc(n, 4);
	float dg[16] = { 0 }, db[16] = { 0 }, dg2[16] = { 0 }, db2[16] = { 0 };
	double worst = 0.0;
	batchnorm_forward(out, in, gamma, beta, run, run + C, saved, saved + C, B, C, H * W, 1e-5f,
			  0.1f, 1, 1);
	maxpool_backward(dy, gp, out, B, C, H, W, 2, 2, 0);
	batchnorm_backward(din, dg, db, dy, in, gamma, beta, saved, saved + C, 1, B, C, H * W);
	batchnorm_relu_maxpool2_backward(din2, dg2, db2, gp, in, gamma, beta, saved, saved + C, B,
					 C, H, W);
	for (size_t k = 0; k < n; k++)
		worst = fmax(worst, fabs(din[k] - din2[k]));
	for (int k = 0; k < C; k++)
		worst = fmax(worst, fmax(fabs(dg[k] - dg2[k]), fabs(db[k] - db2[k])));
	CHECKF(worst < 1e-4,
	       "batchnorm+relu+maxpool2 fused backward %dx%d equals the unfused layers (max diff %.1e)",
	       H, W, worst);
	free(in);
	free(gamma);
	free(beta);
	free(out);
	free(gp);
	free(dy);
	free(din);
	free(din2);
}

/* -------------------------------------------------------------- linear */

static void linear_fwd(struct gc *g)
{
	linear_forward(g->out, g->p[0], g->p[1], g->p[2], g->i[0], g->i[1], g->i[2]);
}

static void test_linear(int B, int IN, int OUT)
{
	size_t nin = (size_t)B * IN, nw = (size_t)OUT * IN, nout = (size_t)B * OUT;
	float *in = rnd(nin, -1, 1), *w = rnd(nw, -1, 1), *b = rnd(OUT, -1, 1);
	float *out = calloc(nout, 4), *R = rnd(nout, -1, 1), *din = calloc(nin, 4);
	float *dw = calloc(nw, 4), *db = calloc(OUT, 4);
	struct gc g = { linear_fwd, out, R, nout, { in, w, b }, { B, IN, OUT }, { 0 } };
	linear_fwd(&g);
	linear_backward(din, dw, db, R, in, w, B, IN, OUT);
	check("linear din", &g, in, nin, din, 1e-2);
	check("linear dw", &g, w, nw, dw, 1e-2);
	check("linear db", &g, b, OUT, db, 1e-2);
	free(in);
	free(w);
	free(b);
	free(out);
	free(R);
	free(din);
	free(dw);
	free(db);
}

/* A linear layer big enough for pbx_gemm's split and for K blocking (IN >
 * 512): the AVX-512 products against OpenBLAS's. */
static void test_linear_kernels(int B, int IN, int OUT)
{
	size_t nin = (size_t)B * IN, nw = (size_t)OUT * IN, nout = (size_t)B * OUT;
	float *in = rnd(nin, -1, 1), *w = rnd(nw, -1, 1), *b = rnd(OUT, -1, 1);
	float *R = rnd(nout, -1, 1), *dw0 = rnd(nw, -1, 1);
	float *o[2], *din[2], *dw[2], *db[2];
	double d[3];
	int ok;
	pbx_gemm_small_init();
	if (!pbx_gemm_avx512) {
		tap_skip("linear avx512 vs openblas: no AVX-512 on this CPU");
		goto out;
	}
	for (int k = 0; k < 2; k++) {
		pbx_gemm_avx512 = k;
		o[k] = calloc(nout, 4);
		din[k] = calloc(nin, 4);
		dw[k] = malloc(sizeof(float) * nw);
		db[k] = calloc(OUT, 4);
		memcpy(dw[k], dw0, sizeof(float) * nw); /* += onto values */
		linear_forward(o[k], in, w, b, B, IN, OUT);
		linear_backward(din[k], dw[k], db[k], R, in, w, B, IN, OUT);
	}
	d[0] = max_rel_diff(o[1], o[0], nout);
	d[1] = max_rel_diff(din[1], din[0], nin);
	d[2] = max_rel_diff(dw[1], dw[0], nw);
	ok = d[0] < 1e-5 && d[1] < 1e-5 && d[2] < 1e-5;
	CHECKF(ok, "linear %dx%d->%d avx512 vs openblas (max rel diff out %.1e din %.1e dw %.1e)",
	       B, IN, OUT, d[0], d[1], d[2]);
	for (int k = 0; k < 2; k++) {
		free(o[k]);
		free(din[k]);
		free(dw[k]);
		free(db[k]);
	}
out:
	free(in);
	free(w);
	free(b);
	free(R);
	free(dw0);
}

/* --------------------------------------------------------- activations */

static void act_fwd(struct gc *g)
{
	act_forward(g->out, g->p[0], g->nout, (enum act_kind)g->i[0], g->f[0]);
}

static void test_act(enum act_kind kind, const char *name)
{
	size_t n = 60;
	float *in = rnd_nz(n), *out = calloc(n, 4), *R = rnd(n, -1, 1);
	float *din = calloc(n, 4);
	struct gc g = { act_fwd, out, R, n, { in }, { (int)kind }, { 0.1f } };
	act_fwd(&g);
	act_backward(din, R, in, out, n, kind, 0.1f);
	check(name, &g, in, n, din, 1e-3);
	free(in);
	free(out);
	free(R);
	free(din);
}

/* ------------------------------------------------------------- dropout */

static void dropout_fwd(struct gc *g)
{
	struct pbx_rng r;
	pbx_rng_seed(&r, 42, 7); /* the same mask every call */
	dropout_forward(g->out, g->p[1], g->p[0], g->nout, 0.3f, 1, &r);
}

static void test_dropout(void)
{
	size_t n = 200;
	float *in = rnd(n, -1, 1), *out = calloc(n, 4), *R = rnd(n, -1, 1);
	float *mask = calloc(n, 4), *din = calloc(n, 4);
	struct gc g = { dropout_fwd, out, R, n, { in, mask }, { 0 }, { 0 } };
	int zeros = 0;
	dropout_fwd(&g);
	dropout_backward(din, R, mask, n);
	check("dropout din", &g, in, n, din, 1e-2);
	for (size_t k = 0; k < n; k++)
		zeros += mask[k] == 0.0f;
	CHECKF(zeros > 30 && zeros < 90, "dropout drops about 30%% (%d of 200)", zeros);
	free(in);
	free(out);
	free(R);
	free(mask);
	free(din);
}

/* ----------------------------------------------------------------- lrn */

static void lrn_fwd(struct gc *g)
{
	lrn_forward(g->out, g->p[1], g->p[0], g->i[0], g->i[1], g->i[2], g->i[3], g->f[0], g->f[1],
		    g->f[2]);
}

static void test_lrn(int B, int C, int HW, int size)
{
	size_t n = (size_t)B * C * HW;
	float *in = rnd(n, -2, 2), *out = calloc(n, 4), *R = rnd(n, -1, 1);
	float *scale = calloc(n, 4), *din = calloc(n, 4);
	struct gc g = {
		lrn_fwd, out, R, n, { in, scale }, { B, C, HW, size }, { 0.5f, 0.75f, 1.0f }
	};
	char name[48];
	lrn_fwd(&g);
	lrn_backward(din, R, in, out, scale, B, C, HW, size, 0.5f, 0.75f);
	snprintf(name, sizeof(name), "lrn size %d din", size);
	check(name, &g, in, n, din, 1e-2);
	free(in);
	free(out);
	free(R);
	free(scale);
	free(din);
}

/* -------------------------------------------------------- softmax xent */

static float xent_loss_buf[1];

static void xent_fwd(struct gc *g)
{
	xent_loss_buf[0] =
		(float)softmax_xent_forward(g->p[1], g->p[0], g->p[2], g->i[0], g->i[1], NULL);
}

static void test_xent(void)
{
	int B = 4, V = 5;
	int32_t y[4] = { 0, 3, 4, 1 };
	float *z = rnd((size_t)B * V, -2, 2), *probs = calloc((size_t)B * V, 4);
	float *dz = calloc((size_t)B * V, 4), one = 1.0f;
	struct gc g = { xent_fwd, xent_loss_buf, &one, 1, { z, probs, y }, { B, V }, { 0 } };
	xent_fwd(&g);
	softmax_xent_backward(dz, probs, y, B, V);
	check("softmax_xent dlogits", &g, z, (size_t)B * V, dz, 1e-3);
	free(z);
	free(probs);
	free(dz);
}

/* -------------------------------------------------------- whole model */

static struct pbx_model *gm;
static float *gm_x;
static int32_t gm_y[3] = { 1, 0, 2 };
static float gm_loss[1];

static void model_fwd(struct gc *g)
{
	(void)g;
	pbx_rng_seed(&gm->rng, 5, 5);
	gm_loss[0] = (float)pbx_model_forward(gm, gm_x, gm_y, 3, 1, NULL);
}

static void test_model(void)
{
	struct pbx_layer_spec s[16];
	struct pbx_err err = PBX_ERR_INIT;
	int n = 0;
	float one = 1.0f;
	pbx_layer_spec_defaults(&s[n], PBX_L_CONV);
	s[n].out = 4;
	s[n].p = 1;
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_RELU);
	n++; /* fused */
	pbx_layer_spec_defaults(&s[n], PBX_L_MAXPOOL);
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_LRN);
	s[n].size = 3;
	s[n].alpha = 0.3f;
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_CONV);
	s[n].out = 5;
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_BATCHNORM);
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_RELU);
	n++; /* fused */
	pbx_layer_spec_defaults(&s[n], PBX_L_AVGPOOL);
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_FLATTEN);
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_LINEAR);
	s[n].out = 6;
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_RELU);
	n++; /* in place */
	pbx_layer_spec_defaults(&s[n], PBX_L_DROPOUT);
	s[n].rate = 0.2f;
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_LINEAR);
	s[n].out = 6;
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_TANH);
	n++;
	pbx_layer_spec_defaults(&s[n], PBX_L_LINEAR);
	n++;
	gm = pbx_model_new(s, n, 2, 8, 8, 3, 3, 11, &err);
	if (!CHECKF(gm, "model build")) {
		tap_diag("%s", err.msg);
		return;
	}
	gm_x = rnd(3 * 2 * 8 * 8, -1, 1);
	struct gc g = { model_fwd, gm_loss, &one, 1, { 0 }, { 0 }, { 0 } };
	model_fwd(&g);
	pbx_model_zero_grad(gm);
	pbx_model_backward(gm);
	float *an = malloc(sizeof(float) * gm->nparams);
	memcpy(an, gm->grads, sizeof(float) * gm->nparams);
	check("model params (conv+relu, lrn, bn+relu, linear+relu, dropout, tanh)", &g, gm->params,
	      gm->nparams, an, 1e-3);
	free(an);
	free(gm_x);
	pbx_model_free(gm);
}

/* The built-in cnn-bn fuses BN+ReLU+max-pool (model_fuse_pool): its
 * gradients equal those of the unfused passes. */
static void test_model_fused_pool(void)
{
	const struct pbx_layer_spec *specs;
	struct pbx_err err = PBX_ERR_INIT;
	int n, B = 3, fused = 0;
	pbx_model_builtin("cnn-bn", &specs, &n);
	struct pbx_model *m = pbx_model_new(specs, n, 1, 28, 28, 10, B, 5, &err);
	float *x = rnd((size_t)B * 784, -1, 1), *g1;
	int32_t y[3] = { 1, 7, 3 };
	int64_t correct = 0;
	double worst = 0.0, norm = 0.0;
	if (!CHECKF(m, "cnn-bn build")) {
		tap_diag("%s", err.msg);
		return;
	}
	g1 = malloc(sizeof(float) * m->nparams);
	pbx_rng_seed(&m->rng, 7, 0); /* the same dropout mask both times */
	pbx_model_forward(m, x, y, B, 1, &correct);
	pbx_model_zero_grad(m);
	pbx_model_backward(m);
	memcpy(g1, m->grads, sizeof(float) * m->nparams);
	for (int i = 0; i < m->nlayers; i++) {
		fused += m->layers[i].fused_pool;
		m->layers[i].fused_pool = 0;
	}
	pbx_rng_seed(&m->rng, 7, 0);
	pbx_model_forward(m, x, y, B, 1, &correct);
	pbx_model_zero_grad(m);
	pbx_model_backward(m);
	for (size_t k = 0; k < m->nparams; k++) {
		worst = fmax(worst, fabs(g1[k] - m->grads[k]));
		norm += fabs(g1[k]);
	}
	CHECKF(fused == 4 && worst < 1e-5 && norm > 1e-3,
	       "cnn-bn: %d fused BN+ReLU+maxpool layers, gradients (sum |g| %.2f) equal the unfused passes' (max diff %.1e)",
	       fused, norm, worst);
	free(g1);
	free(x);
	pbx_model_free(m);
}

int main(void)
{
	pbx_rng_seed(&rng, 1234, 0);
	pbx_gemm_init(); /* as pbx-train: AVX-512 products where the CPU has them */
	test_conv(2, 3, 6, 5, 4, 3, 1, 1, 0, "3x3 s1 p1 (one chunk)");
	test_conv(3, 2, 7, 7, 3, 3, 2, 0, 1, "3x3 s2 p0 (chunk = 1 image)");
	test_conv(3, 2, 6, 6, 3, 5, 1, 2, 2 * (2 * 50 + 3) * 36, "5x5 s1 p2 (chunks of 2)");
	test_pool(1, 2, 3, 4, 4, 2, 2, 0);
	test_pool(1, 2, 2, 7, 7, 3, 2, 1);
	test_pool(0, 2, 2, 6, 6, 2, 2, 0);
	test_pool(0, 2, 2, 7, 7, 3, 2, 1);
	test_batchnorm(4, 3, 5, 0);
	test_batchnorm(6, 4, 1, 0);
	test_batchnorm(4, 3, 9, 1);
	test_bn_pool(3, 4, 8, 8);
	test_bn_pool(2, 3, 7, 9);
	test_bn_pool(2, 2, 5, 131);
	test_linear(3, 7, 4);
	test_act(ACT_RELU, "relu din");
	test_act(ACT_LEAKY_RELU, "leaky_relu din");
	test_act(ACT_TANH, "tanh din");
	test_act(ACT_SIGMOID, "sigmoid din");
	test_act(ACT_GELU, "gelu din");
	test_dropout();
	test_lrn(2, 7, 3, 5);
	test_lrn(1, 4, 2, 2);
	test_xent();
	test_model();
	test_model_fused_pool();
	/* last: the tests above keep their random draws */
	/* Winograd with OpenBLAS's products, then with the AVX-512 kernels
	 * where the CPU has them (edges: 9 and 10 channels, odd tile counts) */
	pbx_gemm_avx512 = 0;
	for (int pass = 0; pass < 2; pass++) {
		const char *isa = pbx_gemm_avx512 ? "avx512" : "openblas";
		char t1[64], t2[64], t3[64];
		snprintf(t1, sizeof(t1), "8->8 6x5 (one chunk, %s)", isa);
		snprintf(t2, sizeof(t2), "9->10 7x7 (chunk = 1 image, %s)", isa);
		snprintf(t3, sizeof(t3), "16->8 4x9 (chunks of 2, %s)", isa);
		test_conv_wino(2, 8, 6, 5, 8, 0, t1);
		test_conv_wino(3, 9, 7, 7, 10, 1, t2);
		test_conv_wino(5, 16, 4, 9, 8, 2 * 16 * 10 * 24, t3);
		pbx_gemm_avx512 = -1;
		pbx_gemm_small_init();
		if (!pbx_gemm_avx512) {
			tap_skip("conv winograd avx512: no AVX-512 on this CPU");
			break;
		}
	}
	/* im2col with OpenBLAS's products too (above: AVX-512 ones where the
	 * CPU has them) */
	pbx_gemm_avx512 = 0;
	test_conv(2, 3, 6, 5, 4, 3, 1, 1, 0, "3x3 s1 p1 (one chunk, openblas)");
	test_conv(3, 2, 6, 6, 3, 5, 1, 2, 2 * (2 * 50 + 3) * 36,
		  "5x5 s1 p2 (chunks of 2, openblas)");
	test_linear(3, 7, 4);
	pbx_gemm_avx512 = -1;
	test_linear_kernels(64, 700, 40);
	test_linear_kernels(130, 37, 70);
	pbx_gemm_avx512 = -1;
	pbx_gemm_small_init();
	test_conv_c1(3, 5, 7, 4);
	test_conv_c1(2, 9, 20, 3);
	test_conv_c1(2, 28, 28, 5);
	return tap_done();
}
