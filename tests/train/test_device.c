/*
 * test_device.c - the host side of a device backend, checked without a
 * GPU: a "device" backend whose memory is just other host memory (every
 * op runs the CPU kernel on the device copies) goes through exactly the
 * seams the CUDA backend uses (model.h's attach, set_batch, zero_grad,
 * clip, step, pull, push; device.c's dispatch).  Three SGD steps of a
 * model with every kind of state (conv, BN with running statistics,
 * dropout, linear) on it must equal the CPU backend's bit for bit once
 * pulled, the host mirrors must NOT change before a pull (the trainer
 * relies on pulling before checkpoints and hashes), and a push must carry
 * host edits (a resumed checkpoint) to the device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/device.h"
#include "train/model.h"
#include "train/optim.h"
#include "util/xalloc.h"

#include "common/tap.h"
#include "fake_device.h"

/* ------------------------------------------------------------ the test */

static const struct pbx_layer_spec specs[] = {
	{ .kind = PBX_L_CONV, .out = 4, .k = 3, .s = 1, .p = 1 },
	{ .kind = PBX_L_BATCHNORM, .eps = 1e-5f, .momentum = 0.1f },
	{ .kind = PBX_L_RELU },
	{ .kind = PBX_L_MAXPOOL, .k = 2, .s = 2 },
	{ .kind = PBX_L_FLATTEN },
	{ .kind = PBX_L_LINEAR, .out = 16 },
	{ .kind = PBX_L_DROPOUT, .rate = 0.3f },
	{ .kind = PBX_L_LINEAR, .out = 0 },
};
#define NSPECS ((int)(sizeof(specs) / sizeof(specs[0])))
#define B      8

static struct pbx_model *build(const struct pbx_backend *be)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_model_opts o = { .max_batch = B };
	struct pbx_model *m = pbx_model_plan(specs, NSPECS, 1, 6, 6, 5, &o, &err);
	if (!m)
		tap_diag("plan: %s", err.msg);
	REQUIREF(m, "plan on the %s backend", be->name);
	pbx_model_alloc(m, be);
	pbx_model_init_params(m, 42);
	return m;
}

static void optim(struct pbx_optim *o, size_t n)
{
	memset(o, 0, sizeof(*o));
	o->kind = PBX_OPT_SGD;
	o->momentum = 0.9f;
	o->nesterov = 1;
	o->weight_decay = 5e-4f;
	pbx_optim_init(o, n);
}

/* One training step through the device seams, as train.c takes it. */
static double step(struct pbx_model *m, struct pbx_optim *o, const float *x, const int32_t *y,
		   int k)
{
	pbx_rng_seed(&m->rng, 7, (uint64_t)k);
	double loss = pbx_model_forward(m, x, y, B, 1, NULL);
	pbx_model_zero_grad(m);
	pbx_model_backward(m);
	pbx_device_clip(m, 1.0);
	pbx_device_step(m, o, 0.05);
	return loss;
}

int main(void)
{
	float x[B * 36];
	int32_t y[B];
	for (int i = 0; i < B * 36; i++)
		x[i] = (float)sin(0.37 * i);
	for (int b = 0; b < B; b++)
		y[b] = b % 5;

	struct pbx_model *a = build(&pbx_backend_cpu), *d = build(&pbx_fake_backend);
	struct pbx_optim oa, od;
	optim(&oa, a->nparams);
	optim(&od, d->nparams);
	struct pbx_fake *f = pbx_fake_state(d);
	CHECKF(f->pushes == 1 && memcmp(f->p, d->params, sizeof(float) * d->nparams) == 0,
	       "init pushes the parameters to the device (%d pushes)", f->pushes);

	float *before = xmalloc(sizeof(float) * d->nparams);
	memcpy(before, d->params, sizeof(float) * d->nparams);
	for (int k = 0; k < 3; k++) {
		double la = step(a, &oa, x, y, k), ld = step(d, &od, x, y, k);
		CHECKF(la == ld, "step %d: loss %.9g on the cpu, %.9g on the device", k, la, ld);
	}
	CHECKF(f->calls_set_batch == 3 && f->calls_zero == 3 && f->calls_step == 3,
	       "device hooks used: set_batch %d, zero_grad %d, step %d", f->calls_set_batch,
	       f->calls_zero, f->calls_step);
	CHECKF(memcmp(before, d->params, sizeof(float) * d->nparams) == 0,
	       "host mirror unchanged without a pull");
	CHECKF(memcmp(a->params, d->params, sizeof(float) * d->nparams) != 0,
	       "host mirror differs from the trained parameters before a pull");

	pbx_device_pull(d, &od);
	CHECKF(memcmp(a->params, d->params, sizeof(float) * d->nparams) == 0,
	       "parameters after pull equal the cpu's");
	CHECKF(memcmp(a->buffers, d->buffers, sizeof(float) * d->nbuffers) == 0,
	       "BN running statistics after pull equal the cpu's");
	CHECKF(memcmp(oa.state, od.state, sizeof(float) * od.nstate) == 0,
	       "optimiser state after pull equals the cpu's");
	CHECKF(pbx_device_grads(d) == d->grads,
	       "a backend that is not CUDA reduces the model's own grads");

	/* a host edit (a checkpoint loaded into the mirrors) reaches the
	 * device with a push, and both train on from it alike */
	for (size_t i = 0; i < d->nparams; i++)
		a->params[i] = d->params[i] = 0.5f * d->params[i];
	pbx_device_push(d, &od);
	double la = step(a, &oa, x, y, 9), ld = step(d, &od, x, y, 9);
	pbx_device_pull(d, &od);
	CHECKF(la == ld && memcmp(a->params, d->params, sizeof(float) * d->nparams) == 0,
	       "after a push: loss %.9g vs %.9g, parameters %s", la, ld,
	       memcmp(a->params, d->params, sizeof(float) * d->nparams) ? "differ" : "equal");

	/* the device name is checked where the key is read */
	CHECKF(pbx_device_valid("cpu") && pbx_device_valid("cuda") && pbx_device_valid("auto") &&
		       !pbx_device_valid("gpu"),
	       "pbx_device_valid");

	free(before);
	pbx_optim_free(&oa);
	pbx_optim_free(&od);
	pbx_model_free(a);
	pbx_model_free(d);
	return tap_done();
}
