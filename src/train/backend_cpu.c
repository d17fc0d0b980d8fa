/*
 * backend_cpu.c - the CPU reference backend: memory from the C heap and one
 * forward/backward pair per layer kind, each a thin adapter from the model's
 * memory map (model.h) to the plain kernels of the layers/ files.  The table
 * replaces per-kind switches in the model's walk; a CUDA backend provides
 * the same table over device memory.
 */
#include "train/model.h"

#include <stdlib.h>

#include "train/layers/layers.h"
#include "util/xalloc.h"

static float *cpu_alloc(size_t n)
{
	return xcalloc(n ? n : 1, sizeof(float));
}

static void cpu_release(float *p)
{
	free(p);
}

/* What every adapter needs about layer i. */
struct cpu_ctx {
	struct pbx_layer *L;
	const struct pbx_layer_spec *s;
	float *in, *out, *aux, *p, *g;
	size_t n; /* input floats of the batch */
	int B;
};

static struct cpu_ctx cpu_ctx(struct pbx_model *m, int i)
{
	struct pbx_layer *L = &m->layers[i];
	struct cpu_ctx c = {
		L,
		&L->spec,
		pbx_model_in(m, i),
		pbx_model_out(m, i),
		m->acts + L->aux_off,
		m->params,
		m->grads,
		(size_t)m->batch * L->c * L->h * L->w,
		m->batch,
	};
	return c;
}

static enum act_kind cpu_act(enum pbx_layer_kind k)
{
	switch (k) {
	case PBX_L_LEAKY_RELU:
		return ACT_LEAKY_RELU;
	case PBX_L_TANH:
		return ACT_TANH;
	case PBX_L_SIGMOID:
		return ACT_SIGMOID;
	case PBX_L_GELU:
		return ACT_GELU;
	default:
		return ACT_RELU;
	}
}

/* ---------------------------------------------------------------- conv */

static void conv_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	(void)mode;
	conv_forward(c.out, c.in, c.p + c.L->w_off, c.p + c.L->b_off, c.B, c.L->c, c.L->h, c.L->w,
		     c.L->oc, c.s->k, c.s->s, c.s->p, c.L->fused_relu, m->scratch, m->nscratch);
}

static void conv_bwd(struct pbx_model *m, int i)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	conv_backward(pbx_model_din(m, i), c.g + c.L->w_off, c.g + c.L->b_off, pbx_model_dout(m, i),
		      c.L->fused_relu ? c.out : NULL, c.in, c.p + c.L->w_off, c.B, c.L->c, c.L->h,
		      c.L->w, c.L->oc, c.s->k, c.s->s, c.s->p, m->scratch, m->nscratch);
}

/* ------------------------------------------------------------- pooling */

static void maxpool_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	(void)mode;
	if (!c.L->fused_pool) /* else done by the BN */
		maxpool_forward(c.out, c.in, c.B, c.L->c, c.L->h, c.L->w, c.s->k, c.s->s, c.s->p);
}

static void maxpool_bwd(struct pbx_model *m, int i)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	float *din = pbx_model_din(m, i);
	if (din && !c.L->fused_pool)
		maxpool_backward(din, pbx_model_dout(m, i), c.in, c.B, c.L->c, c.L->h, c.L->w,
				 c.s->k, c.s->s, c.s->p);
}

static void avgpool_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	(void)mode;
	avgpool_forward(c.out, c.in, c.B, c.L->c, c.L->h, c.L->w, c.s->k, c.s->s, c.s->p);
}

static void avgpool_bwd(struct pbx_model *m, int i)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	float *din = pbx_model_din(m, i);
	if (din)
		avgpool_backward(din, pbx_model_dout(m, i), c.B, c.L->c, c.L->h, c.L->w, c.s->k,
				 c.s->s, c.s->p);
}

/* ----------------------------------------------------------- batchnorm */

/* The hooks' reduction as batchnorm.c wants it. */
static void bn_reduce(void *ctx, double *v, int n)
{
	struct pbx_model *m = ctx;
	m->hooks.reduce_sum(m->hooks.ctx, v, n);
}

static void bn_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	float *rm = m->buffers + c.L->buf_off, *rv = rm + c.L->c;
	if (c.L->fused_pool) {
		batchnorm_relu_maxpool2_forward(pbx_model_out(m, i + 2), c.in, c.p + c.L->w_off,
						c.p + c.L->b_off, rm, rv, c.aux, c.aux + c.L->c,
						c.B, c.L->c, c.L->h, c.L->w, c.s->eps,
						c.s->momentum, (int)mode);
		return;
	}
	if (m->sync_bn && m->hooks.reduce_sum && mode == PBX_FWD_TRAIN) {
		struct bn_reducer r = { bn_reduce, m };
		batchnorm_sync_forward(c.out, c.in, c.p + c.L->w_off, c.p + c.L->b_off, rm, rv,
				       c.aux, c.aux + c.L->c, c.B, c.L->c, c.L->h * c.L->w,
				       c.s->eps, c.s->momentum, c.L->fused_relu, &r);
		return;
	}
	batchnorm_forward(c.out, c.in, c.p + c.L->w_off, c.p + c.L->b_off, rm, rv, c.aux,
			  c.aux + c.L->c, c.B, c.L->c, c.L->h * c.L->w, c.s->eps, c.s->momentum,
			  (int)mode, c.L->fused_relu);
}

static void bn_bwd(struct pbx_model *m, int i)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	float *din = pbx_model_din(m, i);
	if (c.L->fused_pool) {
		batchnorm_relu_maxpool2_backward(din, c.g + c.L->w_off, c.g + c.L->b_off,
						 pbx_model_dout(m, i + 2), c.in, c.p + c.L->w_off,
						 c.p + c.L->b_off, c.aux, c.aux + c.L->c, c.B,
						 c.L->c, c.L->h, c.L->w);
		return;
	}
	if (m->sync_bn && m->hooks.reduce_sum) {
		struct bn_reducer r = { bn_reduce, m };
		batchnorm_sync_backward(din, c.g + c.L->w_off, c.g + c.L->b_off,
					pbx_model_dout(m, i), c.in, c.p + c.L->w_off,
					c.p + c.L->b_off, c.aux, c.aux + c.L->c, c.L->fused_relu,
					c.B, c.L->c, c.L->h * c.L->w, &r);
		return;
	}
	batchnorm_backward(din, c.g + c.L->w_off, c.g + c.L->b_off, pbx_model_dout(m, i), c.in,
			   c.p + c.L->w_off, c.p + c.L->b_off, c.aux, c.aux + c.L->c,
			   c.L->fused_relu, c.B, c.L->c, c.L->h * c.L->w);
}

/* -------------------------------------------------------------- linear */

static void linear_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	(void)mode;
	linear_forward(c.out, c.in, c.p + c.L->w_off, c.p + c.L->b_off, c.B,
		       c.L->c * c.L->h * c.L->w, c.L->oc);
}

static void linear_bwd(struct pbx_model *m, int i)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	linear_backward(pbx_model_din(m, i), c.g + c.L->w_off, c.g + c.L->b_off,
			pbx_model_dout(m, i), c.in, c.p + c.L->w_off, c.B, c.L->c * c.L->h * c.L->w,
			c.L->oc);
}

/* ------------------------------------------------- dropout, LRN, flatten */

static void dropout_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	dropout_forward(c.out, c.aux, c.in, c.n, c.s->rate, (int)mode, &m->rng);
}

static void dropout_bwd(struct pbx_model *m, int i)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	float *din = pbx_model_din(m, i);
	if (din)
		dropout_backward(din, pbx_model_dout(m, i), c.aux, c.n);
}

static void lrn_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	(void)mode;
	lrn_forward(c.out, c.aux, c.in, c.B, c.L->c, c.L->h * c.L->w, c.s->size, c.s->alpha,
		    c.s->beta, c.s->bias);
}

static void lrn_bwd(struct pbx_model *m, int i)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	float *din = pbx_model_din(m, i);
	if (din)
		lrn_backward(din, pbx_model_dout(m, i), c.in, c.out, c.aux, c.B, c.L->c,
			     c.L->h * c.L->w, c.s->size, c.s->alpha, c.s->beta);
}

static void nop_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	(void)m;
	(void)i;
	(void)mode;
}

static void nop_bwd(struct pbx_model *m, int i)
{
	(void)m;
	(void)i;
}

/* --------------------------------------------------------- activations */

static void act_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	(void)mode;
	if (i > 0 && m->layers[i - 1].fused_relu)
		return; /* done by the conv / BN */
	act_forward(c.out, c.in, c.n, cpu_act(c.s->kind), c.s->alpha);
}

static void act_bwd(struct pbx_model *m, int i)
{
	struct cpu_ctx c = cpu_ctx(m, i);
	float *din = pbx_model_din(m, i);
	if (i > 0 && m->layers[i - 1].fused_relu)
		return; /* masked inside the conv / BN backward */
	/* in-place ReLU: din == dout, out == in */
	if (din)
		act_backward(din, pbx_model_dout(m, i), c.in, c.out, c.n, cpu_act(c.s->kind),
			     c.s->alpha);
}

/* ---------------------------------------------------------------- loss */

static double cpu_loss_forward(struct pbx_model *m, int64_t *correct)
{
	return softmax_xent_forward(m->acts + m->probs_off, pbx_model_out(m, m->nlayers - 1),
				    m->labels, m->batch, m->nclasses, correct);
}

static void cpu_loss_backward(struct pbx_model *m)
{
	softmax_xent_backward(pbx_model_dout(m, m->nlayers - 1), m->acts + m->probs_off, m->labels,
			      m->batch, m->nclasses);
}

static const struct pbx_layer_ops cpu_ops[PBX_L_COUNT] = {
	[PBX_L_CONV] = { conv_fwd, conv_bwd },
	[PBX_L_MAXPOOL] = { maxpool_fwd, maxpool_bwd },
	[PBX_L_AVGPOOL] = { avgpool_fwd, avgpool_bwd },
	[PBX_L_BATCHNORM] = { bn_fwd, bn_bwd },
	[PBX_L_LINEAR] = { linear_fwd, linear_bwd },
	[PBX_L_RELU] = { act_fwd, act_bwd },
	[PBX_L_LEAKY_RELU] = { act_fwd, act_bwd },
	[PBX_L_TANH] = { act_fwd, act_bwd },
	[PBX_L_SIGMOID] = { act_fwd, act_bwd },
	[PBX_L_GELU] = { act_fwd, act_bwd },
	[PBX_L_DROPOUT] = { dropout_fwd, dropout_bwd },
	[PBX_L_LRN] = { lrn_fwd, lrn_bwd },
	[PBX_L_FLATTEN] = { nop_fwd, nop_bwd },
};

const struct pbx_backend pbx_backend_cpu = {
	.name = "cpu",
	.alloc = cpu_alloc,
	.release = cpu_release,
	.ops = cpu_ops,
	.loss_forward = cpu_loss_forward,
	.loss_backward = cpu_loss_backward,
};
