/*
 * pool2.h - 2x2 stride-2 max pooling over a pair of rows, forward and
 * backward, inline for pool.c and for the fused BN+ReLU+pool passes
 * (batchnorm.c).
 */
#ifndef PBX_TRAIN_POOL2_H
#define PBX_TRAIN_POOL2_H

#include <string.h>

#include "train/layers/simd.h"

/* The affine map + ReLU of a fused BN (relu(a*x + sh)), or the identity
 * when on = 0; applied to the pooling's input as it is loaded. */
struct pool2_bn {
	int on;
	float a, sh;
};

static inline pbx_v4 pool2_bn_load(const float *p, struct pool2_bn bn)
{
	pbx_v4 v = pbx_v4_load(p);
	if (!bn.on)
		return v;
	v = pbx_v4_set1(bn.a) * v + pbx_v4_set1(bn.sh);
	return pbx_v4_and(v, v > pbx_v4_set1(0.0f));
}

static inline float pool2_bn_at(const float *p, struct pool2_bn bn)
{
	float v = bn.on ? bn.a * *p + bn.sh : *p;
	return bn.on && !(v > 0.0f) ? 0.0f : v;
}

/* out (4) = max of four 2x2 windows of rows r0, r1 (8 floats each); the
 * comparisons of maxpool2_backward_4, so the same value wins. */
static inline void maxpool2_forward_4(float *out, const float *r0, const float *r1,
				      struct pool2_bn bn)
{
	pbx_v4 u = pool2_bn_load(r0, bn), v = pool2_bn_load(r0 + 4, bn);
	pbx_v4 a = PBX_V4_SHUFFLE2(u, v, 0, 2, 4, 6), b = PBX_V4_SHUFFLE2(u, v, 1, 3, 5, 7);
	u = pool2_bn_load(r1, bn);
	v = pool2_bn_load(r1 + 4, bn);
	pbx_v4 c = PBX_V4_SHUFFLE2(u, v, 0, 2, 4, 6), d = PBX_V4_SHUFFLE2(u, v, 1, 3, 5, 7);
	pbx_v4 m = pbx_v4_max(pbx_v4_max(pbx_v4_max(a, b), c), d);
	memcpy(out, &m, sizeof(m));
}

/* out (OW) = 2x2 max pooling of rows r0, r1 (2*OW floats each). */
static inline void maxpool2_forward_rows(float *out, const float *r0, const float *r1, int OW,
					 struct pool2_bn bn)
{
	int ow = 0;
	for (; ow + 4 <= OW; ow += 4)
		maxpool2_forward_4(out + ow, r0 + 2 * ow, r1 + 2 * ow, bn);
	if (ow < OW && OW >= 4) { /* the last 4 again: same values */
		ow = OW - 4;
		maxpool2_forward_4(out + ow, r0 + 2 * ow, r1 + 2 * ow, bn);
		ow = OW;
	}
	for (; ow < OW; ow++) {
		float m = pool2_bn_at(r0 + 2 * ow, bn), v;
		v = pool2_bn_at(r0 + 2 * ow + 1, bn);
		m = v > m ? v : m;
		v = pool2_bn_at(r1 + 2 * ow, bn);
		m = v > m ? v : m;
		v = pool2_bn_at(r1 + 2 * ow + 1, bn);
		m = v > m ? v : m;
		out[ow] = m;
	}
}

/* Gradient of four 2x2 windows, rows r0 and r1 (8 floats each), g their 4
 * output gradients: each window's FIRST maximum (forward's choice) gets g,
 * the other three elements 0.  With a fused BN+ReLU, a window whose max is
 * 0 (all clamped) passes no gradient.  Vector selects, no branches: with
 * branches random data mispredicts about once per window. */
static inline void maxpool2_backward_4(float *d0, float *d1, const float *r0, const float *r1,
				       const float *g, struct pool2_bn bn)
{
	pbx_v4 u = pool2_bn_load(r0, bn), v = pool2_bn_load(r0 + 4, bn);
	pbx_v4 a = PBX_V4_SHUFFLE2(u, v, 0, 2, 4, 6), b = PBX_V4_SHUFFLE2(u, v, 1, 3, 5, 7);
	u = pool2_bn_load(r1, bn);
	v = pool2_bn_load(r1 + 4, bn);
	pbx_v4 c = PBX_V4_SHUFFLE2(u, v, 0, 2, 4, 6), d = PBX_V4_SHUFFLE2(u, v, 1, 3, 5, 7);
	pbx_v4 gv = pbx_v4_load(g), m1 = pbx_v4_max(a, b), m2 = pbx_v4_max(m1, c);
	pbx_v4i gt_b = b > a, gt_c = c > m1, gt_d = d > m2;
	pbx_v4i s2 = gt_c & ~gt_d, s1 = gt_b & ~gt_c & ~gt_d;
	pbx_v4i s0 = ~(gt_b | gt_c | gt_d);
	if (bn.on)
		gv = pbx_v4_and(gv, pbx_v4_max(m2, d) > pbx_v4_set1(0.0f));
	pbx_v4 ga = pbx_v4_and(gv, s0), gb = pbx_v4_and(gv, s1);
	pbx_v4 gc = pbx_v4_and(gv, s2), gd = pbx_v4_and(gv, gt_d);
	pbx_v4 o[4] = { PBX_V4_SHUFFLE2(ga, gb, 0, 4, 1, 5), PBX_V4_SHUFFLE2(ga, gb, 2, 6, 3, 7),
			PBX_V4_SHUFFLE2(gc, gd, 0, 4, 1, 5), PBX_V4_SHUFFLE2(gc, gd, 2, 6, 3, 7) };
	memcpy(d0, o, 2 * sizeof(pbx_v4));
	memcpy(d1, o + 2, 2 * sizeof(pbx_v4));
}

/* Two input rows r0, r1 (2*OW floats each) and the OW output gradients g
 * -> d0, d1 (2*OW each), as maxpool2_backward_4; d0, d1 must not overlap
 * r0, r1 (a ragged end redoes the row's last 4 windows). */
static inline void maxpool2_backward_rows(float *d0, float *d1, const float *r0, const float *r1,
					  const float *g, int OW, struct pool2_bn bn)
{
	int ow = 0;
	for (; ow + 4 <= OW; ow += 4)
		maxpool2_backward_4(d0 + 2 * ow, d1 + 2 * ow, r0 + 2 * ow, r1 + 2 * ow, g + ow, bn);
	if (ow < OW && OW >= 4) { /* the last 4 again: same values */
		ow = OW - 4;
		maxpool2_backward_4(d0 + 2 * ow, d1 + 2 * ow, r0 + 2 * ow, r1 + 2 * ow, g + ow, bn);
		ow = OW;
	}
	for (; ow < OW; ow++) {
		float a = pool2_bn_at(r0 + 2 * ow, bn), b = pool2_bn_at(r0 + 2 * ow + 1, bn);
		float c = pool2_bn_at(r1 + 2 * ow, bn), d = pool2_bn_at(r1 + 2 * ow + 1, bn);
		float m1 = b > a ? b : a, m2 = c > m1 ? c : m1;
		int k = d > m2 ? 3 : c > m1 ? 2 : b > a ? 1 : 0;
		float gk = bn.on && !((d > m2 ? d : m2) > 0.0f) ? 0.0f : g[ow];
		d0[2 * ow] = k == 0 ? gk : 0.0f;
		d0[2 * ow + 1] = k == 1 ? gk : 0.0f;
		d1[2 * ow] = k == 2 ? gk : 0.0f;
		d1[2 * ow + 1] = k == 3 ? gk : 0.0f;
	}
}

#endif
