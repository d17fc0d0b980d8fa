/*
 * rng.h - the deterministic random number generator of pbx-train
 * (xoshiro256** seeded through splitmix64).
 *
 * The whole state is the plain struct, so checkpoints save and restore it
 * by copying.  Independent streams come from (seed, stream) pairs: e.g.
 * stream = epoch * 2^20 + example index gives augmentation noise that does
 * not depend on thread scheduling.
 */
#ifndef PBX_RUNTIME_RNG_H
#define PBX_RUNTIME_RNG_H

#include <stdint.h>

struct pbx_rng {
	uint64_t s[4];
};

void pbx_rng_seed(struct pbx_rng *r, uint64_t seed, uint64_t stream);
uint64_t pbx_rng_u64(struct pbx_rng *r);
/* Uniform in [0, 1). */
float pbx_rng_uniform(struct pbx_rng *r);
/* Standard normal (Box-Muller; uses two uniforms per call). */
float pbx_rng_normal(struct pbx_rng *r);
/* Uniform integer in [0, n), unbiased; n > 0. */
uint32_t pbx_rng_below(struct pbx_rng *r, uint32_t n);

#endif
