/*
 * test_recompute.c - activation recomputation gives the same gradients,
 * bit for bit, as keeping every activation, and uses less memory.
 *
 * A 24-layer net with every construct the memory map special-cases: a
 * fused BN+ReLU+2x2-pool group (its BN writes the pool's output), conv and
 * BN with fused ReLUs, in-place ReLUs after a linear layer and a pool,
 * flatten (an alias), LRN (a saved scale), dropout (a saved mask that the
 * replay must reuse, not redraw) and BN running statistics (which the replay
 * must not update a second time).  For several segment counts: one training
 * forward + backward from the same parameters; gradients, loss, probs,
 * running stats and the dropout RNG state must equal the reference's
 * exactly, and an evaluation forward too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "runtime/rng.h"
#include "train/layers/layers.h"
#include "train/model.h"

#define L_(k, ...)                       \
	{                                \
		.kind = (k), __VA_ARGS__ \
	}

static const struct pbx_layer_spec deep[] = {
	L_(PBX_L_CONV, .out = 8, .k = 3, .s = 1, .p = 1),
	L_(PBX_L_BATCHNORM, .eps = 1e-5f, .momentum = 0.1f),
	L_(PBX_L_RELU),
	L_(PBX_L_MAXPOOL, .k = 2, .s = 2),
	L_(PBX_L_CONV, .out = 8, .k = 3, .s = 1, .p = 1),
	L_(PBX_L_RELU),
	L_(PBX_L_CONV, .out = 8, .k = 3, .s = 1, .p = 1),
	L_(PBX_L_BATCHNORM, .eps = 1e-5f, .momentum = 0.1f),
	L_(PBX_L_RELU),
	L_(PBX_L_LRN, .size = 3, .alpha = 1e-3f, .beta = 0.75f, .bias = 1.0f),
	L_(PBX_L_DROPOUT, .rate = 0.2f), /* in a segment that is replayed */
	L_(PBX_L_CONV, .out = 16, .k = 3, .s = 1, .p = 1),
	L_(PBX_L_LEAKY_RELU, .alpha = 0.1f),
	L_(PBX_L_AVGPOOL, .k = 2, .s = 2),
	L_(PBX_L_CONV, .out = 16, .k = 3, .s = 1, .p = 1),
	L_(PBX_L_BATCHNORM, .eps = 1e-5f, .momentum = 0.1f),
	L_(PBX_L_RELU),
	L_(PBX_L_MAXPOOL, .k = 2, .s = 2),
	L_(PBX_L_RELU),
	L_(PBX_L_FLATTEN),
	L_(PBX_L_LINEAR, .out = 64),
	L_(PBX_L_RELU),
	L_(PBX_L_DROPOUT, .rate = 0.3f),
	L_(PBX_L_LINEAR, .out = 32),
	L_(PBX_L_TANH),
	L_(PBX_L_LINEAR, .out = 0),
};
#define NDEEP ((int)(sizeof(deep) / sizeof(deep[0])))
#define B     6

static struct pbx_model *build(int recompute)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_model_opts o = { .max_batch = B, .recompute = recompute };
	struct pbx_model *m = pbx_model_plan(deep, NDEEP, 1, 28, 28, 10, &o, &err);
	if (!m)
		tap_diag("plan: %s", err.msg);
	REQUIREF(m, "plan with recompute %d", recompute);
	pbx_model_alloc(m, &pbx_backend_cpu);
	pbx_model_init_params(m, 5);
	return m;
}

/* One training step's forward and backward (no optimiser). */
static double step(struct pbx_model *m, const float *x, const int32_t *y)
{
	pbx_rng_seed(&m->rng, 77, 3);
	double loss = pbx_model_forward(m, x, y, B, 1, NULL);
	pbx_model_zero_grad(m);
	pbx_model_backward(m);
	return loss;
}

static int same(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, sizeof(float) * n) == 0;
}

int main(void)
{
	float x[B * 28 * 28];
	int32_t y[B];
	struct pbx_rng r;
	pbx_gemm_init();
	pbx_rng_seed(&r, 1, 2);
	for (int i = 0; i < B * 28 * 28; i++)
		x[i] = pbx_rng_normal(&r);
	for (int i = 0; i < B; i++)
		y[i] = i % 10;

	CHECKF(NDEEP >= 20, "the model has %d layers", NDEEP);
	struct pbx_model *ref = build(0);
	double lref = step(ref, x, y);
	size_t mem_ref = ref->nacts + ref->ndacts;
	float probs[B * 10]; /* the evaluations below overwrite ref's */
	memcpy(probs, ref->acts + ref->probs_off, sizeof(probs));
	CHECKF(ref->nsegs == 1, "recompute 0: one segment");
	const int segs[] = { -1, 2, 3, 7, NDEEP };
	for (size_t k = 0; k < sizeof(segs) / sizeof(segs[0]); k++) {
		struct pbx_model *m = build(segs[k]);
		double l = step(m, x, y);
		size_t mem = m->nacts + m->ndacts;
		CHECKF(m->nsegs > 1,
		       "recompute %d: %d segments, activation memory %zu -> %zu floats (%.0f%%)",
		       segs[k], m->nsegs, mem_ref, mem, 100.0 * (double)mem / (double)mem_ref);
		CHECKF(mem < mem_ref, "recompute %d: less activation memory", segs[k]);
		CHECKF(l == lref, "recompute %d: same loss (%.9g, %.9g)", segs[k], l, lref);
		CHECKF(same(m->grads, ref->grads, ref->nparams),
		       "recompute %d: gradients bit-identical (%zu)", segs[k], ref->nparams);
		CHECKF(same(m->buffers, ref->buffers, ref->nbuffers),
		       "recompute %d: BN running stats updated once, identically", segs[k]);
		CHECKF(same(m->acts + m->probs_off, probs, B * 10),
		       "recompute %d: same probabilities", segs[k]);
		CHECKF(memcmp(&m->rng, &ref->rng, sizeof(m->rng)) == 0,
		       "recompute %d: dropout drew once", segs[k]);
		/* evaluation through the shared region */
		double e1 = pbx_model_forward(m, x, y, B, 0, NULL);
		double e0 = pbx_model_forward(ref, x, y, B, 0, NULL);
		CHECKF(e1 == e0, "recompute %d: same evaluation loss", segs[k]);
		pbx_model_free(m);
	}
	pbx_model_free(ref);
	return tap_done();
}
