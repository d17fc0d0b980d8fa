/*
 * dataset.c - in-memory operations on data sets: synthetic data, subsets,
 * per-channel statistics and normalisation, freeing (see dataset.h).
 * Loading from files is in dataset_load.c, corruptions in corrupt.c.
 *
 * Legend: N = examples, C = channels, H, W = image height and width,
 * P = H*W pixels per channel, D = C*H*W floats per example, K = classes.
 */
#include "runtime/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "util/xalloc.h"

/* rng streams (the high bits keep them apart from the per-example ones) */
#define SYNTH_MEAN_STREAM    (1ULL << 62) /* | class */
#define SYNTH_EXAMPLE_STREAM (1ULL << 61) /* | example index */
#define SYNTH_NOISE          0.5f

void pbx_dataset_free(struct pbx_dataset *ds)
{
	if (!ds)
		return;
	free(ds->x);
	free(ds->y);
	free(ds->name);
	memset(ds, 0, sizeof(*ds));
}

/* ---------------------------------------------------------------------- */
/* synthetic */

/* means: (K, D), each class's mean image, pixels U[0,1). */
static float *synthetic_means(int nclasses, size_t d, uint64_t seed)
{
	float *means = xmalloc((size_t)nclasses * d * sizeof(float));
	for (int k = 0; k < nclasses; k++) {
		struct pbx_rng r;
		pbx_rng_seed(&r, seed, SYNTH_MEAN_STREAM | (uint64_t)k);
		for (size_t j = 0; j < d; j++)
			means[(size_t)k * d + j] = pbx_rng_uniform(&r);
	}
	return means;
}

void pbx_dataset_synthetic_at(struct pbx_dataset *out, int64_t first, int n, int c, int h, int w,
			      int nclasses, uint64_t seed)
{
	size_t d = (size_t)c * (size_t)h * (size_t)w;
	float *means;
	memset(out, 0, sizeof(*out));
	out->name = xstrdup("synthetic");
	if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || nclasses <= 0 || first < 0)
		return;
	out->n = n, out->c = c, out->h = h, out->w = w, out->nclasses = nclasses;
	out->x = xmalloc((size_t)n * d * sizeof(float));
	out->y = xmalloc((size_t)n * sizeof(int32_t));
	means = synthetic_means(nclasses, d, seed);
	for (int i = 0; i < n; i++) {
		struct pbx_rng r;
		float *xi = out->x + (size_t)i * d;
		const float *m;
		pbx_rng_seed(&r, seed, SYNTH_EXAMPLE_STREAM | (uint64_t)(first + i));
		out->y[i] = (int32_t)pbx_rng_below(&r, (uint32_t)nclasses);
		m = means + (size_t)out->y[i] * d;
		for (size_t j = 0; j < d; j++)
			xi[j] = m[j] + SYNTH_NOISE * pbx_rng_normal(&r);
	}
	free(means);
}

void pbx_dataset_synthetic(struct pbx_dataset *out, int n, int c, int h, int w, int nclasses,
			   uint64_t seed)
{
	pbx_dataset_synthetic_at(out, 0, n, c, h, w, nclasses, seed);
}

void pbx_dataset_subset(struct pbx_dataset *ds, int n)
{
	size_t d = (size_t)ds->c * ds->h * ds->w;
	if (n < 0 || n >= ds->n)
		return;
	ds->n = n;
	if (n == 0)
		return; /* keep the (unused) arrays; pbx_dataset_free frees them */
	ds->x = xrealloc(ds->x, (size_t)n * d * sizeof(float));
	ds->y = xrealloc(ds->y, (size_t)n * sizeof(int32_t));
}

/* ---------------------------------------------------------------------- */
/* statistics and normalisation */

void pbx_dataset_channel_stats(const struct pbx_dataset *ds, float *mean, float *std)
{
	size_t p = (size_t)ds->h * ds->w;
	for (int ch = 0; ch < ds->c; ch++) {
		double sum = 0, sumsq = 0, cnt = (double)ds->n * (double)p, var;
		for (int i = 0; i < ds->n; i++) {
			const float *xc = ds->x + ((size_t)i * ds->c + ch) * p; /* (P,) */
			for (size_t j = 0; j < p; j++) {
				sum += xc[j];
				sumsq += (double)xc[j] * xc[j];
			}
		}
		if (cnt == 0) {
			mean[ch] = 0, std[ch] = 1;
			continue;
		}
		var = sumsq / cnt - (sum / cnt) * (sum / cnt);
		mean[ch] = (float)(sum / cnt);
		std[ch] = (float)sqrt(var > 0 ? var : 0);
	}
}

void pbx_dataset_normalize(struct pbx_dataset *ds, const float *mean, const float *std)
{
	size_t p = (size_t)ds->h * ds->w;
	float *own_mean = NULL, *own_std = NULL;
	if (ds->c <= 0)
		return;
	if (!mean || !std) {
		own_mean = xmalloc((size_t)ds->c * sizeof(float));
		own_std = xmalloc((size_t)ds->c * sizeof(float));
		pbx_dataset_channel_stats(ds, own_mean, own_std);
		mean = mean ? mean : own_mean;
		std = std ? std : own_std;
	}
	for (int i = 0; i < ds->n; i++)
		for (int ch = 0; ch < ds->c; ch++) {
			float *xc = ds->x + ((size_t)i * ds->c + ch) * p;
			float mu = mean[ch], inv = std[ch] > 0 ? 1.0f / std[ch] : 1.0f;
			for (size_t j = 0; j < p; j++)
				xc[j] = (xc[j] - mu) * inv;
		}
	free(own_mean);
	free(own_std);
}
