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

static inline float pbx_v4_sum(pbx_v4 v)
{
	return (v[0] + v[1]) + (v[2] + v[3]);
}

#endif
