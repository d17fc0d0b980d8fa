/*
 * dropout.c - inverted dropout: in training each unit is kept with
 * probability 1-p and scaled by 1/(1-p), so evaluation is the identity.
 * The mask is drawn sequentially from the caller's pbx_rng, which the model
 * seeds from (seed, step): a resumed run draws the same masks.
 */
#include "train/layers/layers.h"

#include <string.h>

void dropout_forward(float *out, float *mask, const float *in, size_t n, float p, int train,
		     struct pbx_rng *rng)
{
	if (!train || p <= 0.0f) {
		if (out != in)
			memcpy(out, in, sizeof(float) * n);
		for (size_t i = 0; i < n; i++)
			mask[i] = 1.0f;
		return;
	}
	float scale = 1.0f / (1.0f - p);
	for (size_t i = 0; train != 2 && i < n; i++)
		mask[i] = pbx_rng_uniform(rng) < p ? 0.0f : scale;
	for (size_t i = 0; i < n; i++)
		out[i] = in[i] * mask[i];
}

void dropout_backward(float *din, const float *dout, const float *mask, size_t n)
{
	for (size_t i = 0; i < n; i++)
		din[i] = dout[i] * mask[i];
}
