/*
 * corrupt.c - the randomisation tests of Zhang et al. 2017 ("Understanding
 * deep learning requires rethinking generalization"), applied in place to
 * a loaded data set (see dataset.h, enum pbx_corruption).
 *
 * Every random draw comes from pbx_rng_seed(seed, stream) with a stream
 * built from the corruption kind and the example index, so what happens to
 * example i does not depend on how many examples there are.
 * Legend: N examples, C channels, P = H*W pixel positions, D = C*P.
 */
#include "runtime/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "util/xalloc.h"

static const char *const corruption_names[] = {
	[PBX_CORRUPT_NONE] = "none",
	[PBX_CORRUPT_LABELS] = "labels",
	[PBX_CORRUPT_RANDOM_LABELS] = "random_labels",
	[PBX_CORRUPT_SHUFFLED_PIXELS] = "shuffled_pixels",
	[PBX_CORRUPT_RANDOM_PIXELS] = "random_pixels",
	[PBX_CORRUPT_GAUSSIAN] = "gaussian",
};
#define NCORRUPTIONS    ((int)(sizeof(corruption_names) / sizeof(corruption_names[0])))

/* stream = kind << 56 | example index (or ALL for one-per-data-set draws) */
#define STREAM(kind, i) ((uint64_t)(kind) << 56 | (uint64_t)(i))
#define STREAM_ALL      ((1ULL << 56) - 1)

/* "random-labels" matches "random_labels". */
static int name_eq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (*a != *b && !(*a == '-' && *b == '_'))
			return 0;
	return *a == *b;
}

int pbx_corruption_parse(const char *name, enum pbx_corruption *out)
{
	for (int k = 0; k < NCORRUPTIONS; k++)
		if (name && name_eq(name, corruption_names[k])) {
			*out = (enum pbx_corruption)k;
			return 0;
		}
	return -1;
}

const char *pbx_corruption_name(enum pbx_corruption kind)
{
	return (int)kind >= 0 && (int)kind < NCORRUPTIONS ? corruption_names[kind] : "?";
}

/* ---------------------------------------------------------------------- */

/* Labels: with prob p, y_i <- U{0..K-1}; one stream per example. */
static void corrupt_labels(struct pbx_dataset *ds, float p, uint64_t seed)
{
	if (ds->nclasses <= 0)
		return;
	for (int i = 0; i < ds->n; i++) {
		struct pbx_rng r;
		float u;
		pbx_rng_seed(&r, seed, STREAM(PBX_CORRUPT_LABELS, i));
		u = pbx_rng_uniform(&r);
		if (u < p)
			ds->y[i] = (int32_t)pbx_rng_below(&r, (uint32_t)ds->nclasses);
	}
}

/* perm: (P,), a uniform random permutation of 0..P-1 (Fisher-Yates). */
static void random_perm(int *perm, size_t p, struct pbx_rng *r)
{
	for (size_t j = 0; j < p; j++)
		perm[j] = (int)j;
	for (size_t j = p; j > 1; j--) {
		size_t k = pbx_rng_below(r, (uint32_t)j);
		int t = perm[j - 1];
		perm[j - 1] = perm[k];
		perm[k] = t;
	}
}

/* Moves pixel position perm[j] to j in every channel of one example. */
static void permute_example(float *xi, const int *perm, int c, size_t p, float *tmp)
{
	for (int ch = 0; ch < c; ch++) {
		float *xc = xi + (size_t)ch * p; /* (P,) */
		for (size_t j = 0; j < p; j++)
			tmp[j] = xc[perm[j]];
		memcpy(xc, tmp, p * sizeof(float));
	}
}

/* Shuffled (one permutation for all) or random (one per example) pixels. */
static void corrupt_pixels(struct pbx_dataset *ds, int per_example, uint64_t seed)
{
	size_t p = (size_t)ds->h * ds->w, d = (size_t)ds->c * p;
	int *perm = xmalloc(p * sizeof(int));
	float *tmp = xmalloc(p * sizeof(float));
	struct pbx_rng r;
	if (!per_example) {
		pbx_rng_seed(&r, seed, STREAM(PBX_CORRUPT_SHUFFLED_PIXELS, STREAM_ALL));
		random_perm(perm, p, &r);
	}
	for (int i = 0; i < ds->n; i++) {
		if (per_example) {
			pbx_rng_seed(&r, seed, STREAM(PBX_CORRUPT_RANDOM_PIXELS, i));
			random_perm(perm, p, &r);
		}
		permute_example(ds->x + (size_t)i * d, perm, ds->c, p, tmp);
	}
	free(perm);
	free(tmp);
}

/* Every pixel of channel ch <- N(mean[ch], std[ch]^2). */
static void corrupt_gaussian(struct pbx_dataset *ds, uint64_t seed)
{
	size_t p = (size_t)ds->h * ds->w;
	float *mean = xmalloc((size_t)ds->c * sizeof(float));
	float *std = xmalloc((size_t)ds->c * sizeof(float));
	pbx_dataset_channel_stats(ds, mean, std);
	for (int i = 0; i < ds->n; i++) {
		struct pbx_rng r;
		pbx_rng_seed(&r, seed, STREAM(PBX_CORRUPT_GAUSSIAN, i));
		for (int ch = 0; ch < ds->c; ch++) {
			float *xc = ds->x + ((size_t)i * ds->c + ch) * p;
			for (size_t j = 0; j < p; j++)
				xc[j] = mean[ch] + std[ch] * pbx_rng_normal(&r);
		}
	}
	free(mean);
	free(std);
}

void pbx_dataset_corrupt(struct pbx_dataset *ds, enum pbx_corruption kind, float p, uint64_t seed)
{
	if (ds->n <= 0)
		return;
	p = isnan(p) ? 0 : p < 0 ? 0 : p > 1 ? 1 : p;
	switch (kind) {
	case PBX_CORRUPT_NONE:
		break;
	case PBX_CORRUPT_LABELS:
		corrupt_labels(ds, p, seed);
		break;
	case PBX_CORRUPT_RANDOM_LABELS:
		corrupt_labels(ds, 1.0f, seed);
		break;
	case PBX_CORRUPT_SHUFFLED_PIXELS:
		corrupt_pixels(ds, 0, seed);
		break;
	case PBX_CORRUPT_RANDOM_PIXELS:
		corrupt_pixels(ds, 1, seed);
		break;
	case PBX_CORRUPT_GAUSSIAN:
		corrupt_gaussian(ds, seed);
		break;
	}
}
