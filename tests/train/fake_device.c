/*
 * fake_device.c - the host-memory "device" backend of fake_device.h: each
 * op swaps the model's params/grads/buffers for the device copies, runs
 * the CPU backend's op and swaps back.
 */
#include "fake_device.h"

#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static struct pbx_fake *fk(struct pbx_model *m)
{
	return m->dev;
}

struct pbx_fake *pbx_fake_state(struct pbx_model *m)
{
	return fk(m);
}

static float *fake_alloc(size_t n)
{
	return xcalloc(n ? n : 1, sizeof(float));
}
static void fake_release(float *p)
{
	free(p);
}

static void fake_attach(struct pbx_model *m)
{
	struct pbx_fake *f = xcalloc(1, sizeof(*f));
	m->dev = f;
	f->p = fake_alloc(m->nparams);
	f->g = fake_alloc(m->nparams);
	f->b = fake_alloc(m->nbuffers);
	f->x = fake_alloc((size_t)m->max_batch * m->c * m->h * m->w);
	f->y = xcalloc((size_t)m->max_batch, sizeof(int32_t));
}

static void fake_detach(struct pbx_model *m)
{
	struct pbx_fake *f = fk(m);
	free(f->p);
	free(f->g);
	free(f->b);
	free(f->ostate);
	free(f->x);
	free(f->y);
	free(f);
	m->dev = NULL;
}

/* Runs a CPU op with the model's blocks pointed at the device copies. */
static void fake_swap(struct pbx_model *m)
{
	struct pbx_fake *f = fk(m);
	float *t;
	t = m->params;
	m->params = f->p;
	f->p = t;
	t = m->grads;
	m->grads = f->g;
	f->g = t;
	t = m->buffers;
	m->buffers = f->b;
	f->b = t;
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

static void fake_set_batch(struct pbx_model *m, const float *x, const int32_t *y, int B)
{
	struct pbx_fake *f = fk(m);
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
	struct pbx_fake *f = fk(m);
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
	struct pbx_fake *f = fk(m);
	memcpy(m->params, f->p, sizeof(float) * m->nparams);
	memcpy(m->grads, f->g, sizeof(float) * m->nparams);
	memcpy(m->buffers, f->b, sizeof(float) * m->nbuffers);
	if (o && f->ostate)
		memcpy(o->state, f->ostate, sizeof(float) * o->nstate);
}

static void fake_push(struct pbx_model *m, const struct pbx_optim *o)
{
	struct pbx_fake *f = fk(m);
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

static const struct pbx_layer_ops fake_ops[PBX_L_COUNT] = {
	[PBX_L_CONV] = { fake_fwd, fake_bwd },       [PBX_L_MAXPOOL] = { fake_fwd, fake_bwd },
	[PBX_L_AVGPOOL] = { fake_fwd, fake_bwd },    [PBX_L_BATCHNORM] = { fake_fwd, fake_bwd },
	[PBX_L_LINEAR] = { fake_fwd, fake_bwd },     [PBX_L_RELU] = { fake_fwd, fake_bwd },
	[PBX_L_LEAKY_RELU] = { fake_fwd, fake_bwd }, [PBX_L_TANH] = { fake_fwd, fake_bwd },
	[PBX_L_SIGMOID] = { fake_fwd, fake_bwd },    [PBX_L_GELU] = { fake_fwd, fake_bwd },
	[PBX_L_DROPOUT] = { fake_fwd, fake_bwd },    [PBX_L_LRN] = { fake_fwd, fake_bwd },
	[PBX_L_FLATTEN] = { fake_fwd, fake_bwd },
};

const struct pbx_backend pbx_fake_backend = {
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
