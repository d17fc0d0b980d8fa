/*
 * simd.h - four-float vectors (GCC/Clang vector extensions) for the
 * reductions that compilers will not vectorise on their own: a float sum is
 * a chain of dependent adds (about 1 float per cycle) unless it is split
 * into lanes, which changes the rounding, so the compiler may not do it.
 * Here the split is written out: 2 x 4 lanes in a fixed order, so results
 * are identical from run to run and thread count to thread count.  Plain
 * SSE2 on x86-64 (no -march needed); other targets get the generic lowering.
 */
#ifndef PBX_TRAIN_SIMD_H
#define PBX_TRAIN_SIMD_H

#include <stdint.h>
#include <string.h>

typedef float pbx_v4 __attribute__((vector_size(16)));
typedef int32_t pbx_v4i __attribute__((vector_size(16)));

static inline pbx_v4 pbx_v4_load(const float *p)
{
	pbx_v4 v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline pbx_v4 pbx_v4_set1(float x)
{
	pbx_v4 v = { x, x, x, x };
	return v;
}

/* v where m > 0, else 0 (the ReLU-gradient mask). */
static inline pbx_v4 pbx_v4_mask_pos(pbx_v4 v, pbx_v4 m)
{
	pbx_v4i keep = m > pbx_v4_set1(0.0f);
	return (pbx_v4)((pbx_v4i)v & keep);
}

/* v where the mask lane is all ones, else 0. */
static inline pbx_v4 pbx_v4_and(pbx_v4 v, pbx_v4i mask)
{
	return (pbx_v4)((pbx_v4i)v & mask);
}

/* a < b ? b : a, lane by lane (the first of equal values wins). */
static inline pbx_v4 pbx_v4_max(pbx_v4 a, pbx_v4 b)
{
	pbx_v4i gt = b > a;
	return (pbx_v4)(((pbx_v4i)b & gt) | ((pbx_v4i)a & ~gt));
}

/* Lanes of (a, b) picked by four indices in 0..7. */
#if defined(__clang__)
#define PBX_V4_SHUFFLE2(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
#define PBX_V4_SHUFFLE2(a, b, i, j, k, l) __builtin_shuffle(a, b, (pbx_v4i){ i, j, k, l })
#endif

static inline float pbx_v4_sum(pbx_v4 v)
{
	return (v[0] + v[1]) + (v[2] + v[3]);
}

#endif
