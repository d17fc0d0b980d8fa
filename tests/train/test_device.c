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

static int fails;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fails++; \
		printf("not ok %s:%d: ", __FILE__, __LINE__); \
		printf(__VA_ARGS__); \
		printf("\n"); \
	} \
} while (0)

/* ------------------------------------------------ the fake device backend */

struct fake {
	float *p, *g, *b, *ostate; /* "device" params, grads, buffers, optimiser */
	size_t nostate;
	float *x;
	int32_t *y;
	int calls_set_batch, calls_zero, calls_step, pushes;
};

static struct fake *fk(struct pbx_model *m) { return m->dev; }

static float *fake_alloc(size_t n) { return xcalloc(n ? n : 1, sizeof(float)); }
static void fake_release(float *p) { free(p); }

static void fake_attach(struct pbx_model *m)
{
	struct fake *f = xcalloc(1, sizeof(*f));
	m->dev = f;
	f->p = fake_alloc(m->nparams);
	f->g = fake_alloc(m->nparams);
	f->b = fake_alloc(m->nbuffers);
	f->x = fake_alloc((size_t)m->max_batch * m->c * m->h * m->w);
	f->y = xcalloc((size_t)m->max_batch, sizeof(int32_t));
}

static void fake_detach(struct pbx_model *m)
{
	struct fake *f = fk(m);
	free(f->p); free(f->g); free(f->b); free(f->ostate); free(f->x); free(f->y);
	free(f);
	m->dev = NULL;
}

/* Runs a CPU op with the model's blocks pointed at the device copies. */
static void fake_swap(struct pbx_model *m)
{
	struct fake *f = fk(m);
	float *t;
	t = m->params; m->params = f->p; f->p = t;
	t = m->grads; m->grads = f->g; f->g = t;
	t = m->buffers; m->buffers = f->b; f->b = t;
}

static void fake_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	fake_swap(m);
	pbx_backend_cpu.ops[m->layers[i].spec.kind].forward(m, i, mode);
	fake_swap(m);
}

static void fake_bwd(struct pbx_model *m, int i)
{
	fake_swap(m);
	pbx_backend_cpu.ops[m->layers[i].spec.kind].backward(m, i);
	fake_swap(m);
}

static double fake_loss_fwd(struct pbx_model *m, int64_t *correct)
{
	return pbx_backend_cpu.loss_forward(m, correct);
}

static void fake_loss_bwd(struct pbx_model *m)
{
	pbx_backend_cpu.loss_backward(m);
}

static void fake_set_batch(struct pbx_model *m, const float *x,
			   const int32_t *y, int B)
{
	struct fake *f = fk(m);
	memcpy(f->x, x, sizeof(float) * (size_t)B * m->c * m->h * m->w);
	memcpy(f->y, y, sizeof(int32_t) * (size_t)B);
	m->input = f->x;
	m->labels = f->y;
	f->calls_set_batch++;
}

static void fake_zero_grad(struct pbx_model *m)
{
	memset(fk(m)->g, 0, sizeof(float) * m->nparams);
	fk(m)->calls_zero++;
}

static double fake_clip(struct pbx_model *m, double max_norm)
{
	return pbx_clip_grad_norm(fk(m)->g, m->nparams, max_norm);
}

static void fake_step(struct pbx_model *m, struct pbx_optim *o, double lr)
{
	struct fake *f = fk(m);
	if (f->nostate != o->nstate) {
		free(f->ostate);
		f->ostate = fake_alloc(o->nstate);
		f->nostate = o->nstate;
	}
	float *host = o->state;
	o->state = f->ostate;
	pbx_optim_step(o, f->p, f->g, lr);
	o->state = host;
	f->calls_step++;
}

static void fake_pull(struct pbx_model *m, struct pbx_optim *o)
{
	struct fake *f = fk(m);
	memcpy(m->params, f->p, sizeof(float) * m->nparams);
	memcpy(m->grads, f->g, sizeof(float) * m->nparams);
	memcpy(m->buffers, f->b, sizeof(float) * m->nbuffers);
	if (o && f->ostate)
		memcpy(o->state, f->ostate, sizeof(float) * o->nstate);
}

static void fake_push(struct pbx_model *m, const struct pbx_optim *o)
{
	struct fake *f = fk(m);
	memcpy(f->p, m->params, sizeof(float) * m->nparams);
	memcpy(f->b, m->buffers, sizeof(float) * m->nbuffers);
	if (o) {
		if (f->nostate != o->nstate) {
			free(f->ostate);
			f->ostate = fake_alloc(o->nstate);
			f->nostate = o->nstate;
		}
		memcpy(f->ostate, o->state, sizeof(float) * o->nstate);
	}
	f->pushes++;
}

static struct pbx_layer_ops fake_ops[PBX_L_COUNT];

static struct pbx_backend fake_backend = {
	.name = "fake",
	.alloc = fake_alloc,
	.release = fake_release,
	.ops = fake_ops,
	.loss_forward = fake_loss_fwd,
	.loss_backward = fake_loss_bwd,
	.attach = fake_attach,
	.detach = fake_detach,
	.set_batch = fake_set_batch,
	.zero_grad = fake_zero_grad,
	.clip = fake_clip,
	.step = fake_step,
	.pull = fake_pull,
	.push = fake_push,
};

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
#define B 8

static struct pbx_model *build(const struct pbx_backend *be)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_model_opts o = { .max_batch = B };
	struct pbx_model *m = pbx_model_plan(specs, NSPECS, 1, 6, 6, 5, &o, &err);
	if (!m) {
		printf("not ok: plan: %s\n", err.msg);
		exit(1);
	}
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
static double step(struct pbx_model *m, struct pbx_optim *o, const float *x,
		   const int32_t *y, int k)
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
	for (int k = 0; k < PBX_L_COUNT; k++)
		fake_ops[k] = (struct pbx_layer_ops){ fake_fwd, fake_bwd };
	float x[B * 36];
	int32_t y[B];
	for (int i = 0; i < B * 36; i++)
		x[i] = (float)sin(0.37 * i);
	for (int b = 0; b < B; b++)
		y[b] = b % 5;

	struct pbx_model *a = build(&pbx_backend_cpu), *d = build(&fake_backend);
	struct pbx_optim oa, od;
	optim(&oa, a->nparams);
	optim(&od, d->nparams);
	struct fake *f = fk(d);
	CHECK(f->pushes == 1 && memcmp(f->p, d->params, sizeof(float) * d->nparams) == 0,
	      "init did not push the parameters to the device (%d pushes)", f->pushes);

	float *before = xmalloc(sizeof(float) * d->nparams);
	memcpy(before, d->params, sizeof(float) * d->nparams);
	for (int k = 0; k < 3; k++) {
		double la = step(a, &oa, x, y, k), ld = step(d, &od, x, y, k);
		CHECK(la == ld, "step %d: loss %.9g on the cpu, %.9g on the device", k, la, ld);
	}
	CHECK(f->calls_set_batch == 3 && f->calls_zero == 3 && f->calls_step == 3,
	      "device hooks not used: set_batch %d, zero_grad %d, step %d",
	      f->calls_set_batch, f->calls_zero, f->calls_step);
	CHECK(memcmp(before, d->params, sizeof(float) * d->nparams) == 0,
	      "host mirror changed without a pull");
	CHECK(memcmp(a->params, d->params, sizeof(float) * d->nparams) != 0,
	      "host mirror equals the trained parameters before a pull");

	pbx_device_pull(d, &od);
	CHECK(memcmp(a->params, d->params, sizeof(float) * d->nparams) == 0,
	      "parameters after pull differ from the cpu's");
	CHECK(memcmp(a->buffers, d->buffers, sizeof(float) * d->nbuffers) == 0,
	      "BN running statistics after pull differ from the cpu's");
	CHECK(memcmp(oa.state, od.state, sizeof(float) * od.nstate) == 0,
	      "optimiser state after pull differs from the cpu's");
	CHECK(pbx_device_grads(d) == d->grads,
	      "a backend that is not CUDA reduces the model's own grads");

	/* a host edit (a checkpoint loaded into the mirrors) reaches the
	 * device with a push, and both train on from it alike */
	for (size_t i = 0; i < d->nparams; i++)
		a->params[i] = d->params[i] = 0.5f * d->params[i];
	pbx_device_push(d, &od);
	double la = step(a, &oa, x, y, 9), ld = step(d, &od, x, y, 9);
	pbx_device_pull(d, &od);
	CHECK(la == ld && memcmp(a->params, d->params, sizeof(float) * d->nparams) == 0,
	      "after a push: loss %.9g vs %.9g, parameters %s", la, ld,
	      memcmp(a->params, d->params, sizeof(float) * d->nparams) ? "differ" : "equal");

	/* the device name is checked where the key is read */
	CHECK(pbx_device_valid("cpu") && pbx_device_valid("cuda") &&
	      pbx_device_valid("auto") && !pbx_device_valid("gpu"),
	      "pbx_device_valid");

	free(before);
	pbx_optim_free(&oa);
	pbx_optim_free(&od);
	pbx_model_free(a);
	pbx_model_free(d);
	if (!fails)
		printf("ok device seams: 4 steps on a host-memory device == cpu, mirrors only change on pull\n");
	return fails ? 1 : 0;
}
