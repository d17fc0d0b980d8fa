/*
 * model.c - builds a sequential network from a layer list, lays out its
 * memory, and runs forward and backward by walking the layers.
 *
 * Memory map (llm.c style): one block each for params, grads, buffers,
 * acts and dacts; a pbx_layer records offsets into them.  Activation
 * offsets are computed for max_batch examples, so a smaller final batch
 * simply uses a prefix of each slot.
 */
#include "train/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/layers/layers.h"
#include "util/buf.h"
#include "util/xalloc.h"

/* ------------------------------------------------------------ built-ins */

#define CONV(o, k_, p_) { .kind = PBX_L_CONV, .out = (o), .k = (k_), .s = 1, .p = (p_) }
#define POOL(kind_, k_, s_, p_) { .kind = (kind_), .k = (k_), .s = (s_), .p = (p_) }
#define LIN(o) { .kind = PBX_L_LINEAR, .out = (o) }
#define BN { .kind = PBX_L_BATCHNORM, .eps = 1e-5f, .momentum = 0.1f }
#define RELU { .kind = PBX_L_RELU }
#define FLAT { .kind = PBX_L_FLATTEN }
#define DROP(r) { .kind = PBX_L_DROPOUT, .rate = (r) }
#define LRN9 { .kind = PBX_L_LRN, .size = 9, .alpha = 0.001f, .beta = 0.75f, .bias = 1.0f }

static const struct pbx_layer_spec model_mlp[] = {
	FLAT, LIN(256), RELU, LIN(128), RELU, LIN(0),
};
static const struct pbx_layer_spec model_lenet[] = {
	CONV(6, 5, 2), RELU, POOL(PBX_L_MAXPOOL, 2, 2, 0),
	CONV(16, 5, 0), RELU, POOL(PBX_L_MAXPOOL, 2, 2, 0),
	FLAT, LIN(120), RELU, LIN(84), RELU, LIN(0),
};
static const struct pbx_layer_spec model_cnn_bn[] = {
	CONV(32, 3, 1), BN, RELU, POOL(PBX_L_MAXPOOL, 2, 2, 0),
	CONV(64, 3, 1), BN, RELU, POOL(PBX_L_MAXPOOL, 2, 2, 0),
	FLAT, LIN(128), RELU, DROP(0.25f), LIN(0),
};
/* Zhang et al. 2017, "small AlexNet": (conv5x5 -> max-pool 3x3 -> LRN) x 2,
 * FC 384, FC 192, output; pooling 3x3 stride 2 "SAME" as in their code. */
static const struct pbx_layer_spec model_mini_alexnet[] = {
	CONV(64, 5, 2), RELU, POOL(PBX_L_MAXPOOL, 3, 2, 1), LRN9,
	CONV(64, 5, 2), RELU, POOL(PBX_L_MAXPOOL, 3, 2, 1), LRN9,
	FLAT, LIN(384), RELU, LIN(192), RELU, LIN(0),
};

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const struct {
	const char *name;
	const struct pbx_layer_spec *specs;
	int n;
} model_builtins[] = {
	{ "mlp", model_mlp, NELEM(model_mlp) },
	{ "lenet", model_lenet, NELEM(model_lenet) },
	{ "cnn-bn", model_cnn_bn, NELEM(model_cnn_bn) },
	{ "mini-alexnet", model_mini_alexnet, NELEM(model_mini_alexnet) },
};

int pbx_model_builtin(const char *name, const struct pbx_layer_spec **specs,
		      int *n)
{
	for (int i = 0; i < NELEM(model_builtins); i++)
		if (strcmp(name, model_builtins[i].name) == 0) {
			*specs = model_builtins[i].specs;
			*n = model_builtins[i].n;
			return 0;
		}
	return -1;
}

const char *pbx_model_builtin_names(void)
{
	return "mlp, lenet, cnn-bn, mini-alexnet";
}

static const char *const model_kind_names[] = {
	[PBX_L_CONV] = "conv", [PBX_L_MAXPOOL] = "maxpool",
	[PBX_L_AVGPOOL] = "avgpool", [PBX_L_BATCHNORM] = "batchnorm",
	[PBX_L_LINEAR] = "linear", [PBX_L_RELU] = "relu",
	[PBX_L_LEAKY_RELU] = "leaky_relu", [PBX_L_TANH] = "tanh",
	[PBX_L_SIGMOID] = "sigmoid", [PBX_L_GELU] = "gelu",
	[PBX_L_DROPOUT] = "dropout", [PBX_L_LRN] = "lrn",
	[PBX_L_FLATTEN] = "flatten",
};

int pbx_layer_kind_parse(const char *name, enum pbx_layer_kind *out)
{
	static const struct { const char *alias; enum pbx_layer_kind kind; } extra[] = {
		{ "conv2d", PBX_L_CONV }, { "bn", PBX_L_BATCHNORM },
		{ "fc", PBX_L_LINEAR }, { "dense", PBX_L_LINEAR },
		{ "leakyrelu", PBX_L_LEAKY_RELU }, { "max_pool", PBX_L_MAXPOOL },
		{ "avg_pool", PBX_L_AVGPOOL },
	};
	for (int i = 0; i < NELEM(model_kind_names); i++)
		if (strcmp(name, model_kind_names[i]) == 0) {
			*out = (enum pbx_layer_kind)i;
			return 0;
		}
	for (int i = 0; i < NELEM(extra); i++)
		if (strcmp(name, extra[i].alias) == 0) {
			*out = extra[i].kind;
			return 0;
		}
	return -1;
}

const char *pbx_layer_kind_name(enum pbx_layer_kind kind)
{
	return model_kind_names[kind];
}

void pbx_layer_spec_defaults(struct pbx_layer_spec *s, enum pbx_layer_kind kind)
{
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	switch (kind) {
	case PBX_L_CONV: s->k = 3; s->s = 1; s->p = 0; break;
	case PBX_L_MAXPOOL: case PBX_L_AVGPOOL: s->k = 2; s->s = 0; break;
	case PBX_L_BATCHNORM: s->eps = 1e-5f; s->momentum = 0.1f; break;
	case PBX_L_LEAKY_RELU: s->alpha = 0.01f; break;
	case PBX_L_DROPOUT: s->rate = 0.5f; break;
	case PBX_L_LRN: s->size = 5; s->alpha = 1e-4f; s->beta = 0.75f; s->bias = 1.0f; break;
	default: break;
	}
}

/* ------------------------------------------------------------- building */

static enum act_kind model_act(enum pbx_layer_kind k)
{
	switch (k) {
	case PBX_L_LEAKY_RELU: return ACT_LEAKY_RELU;
	case PBX_L_TANH: return ACT_TANH;
	case PBX_L_SIGMOID: return ACT_SIGMOID;
	case PBX_L_GELU: return ACT_GELU;
	default: return ACT_RELU;
	}
}

/* Layers whose backward needs only their input, so their output may be
 * overwritten by an in-place ReLU. */
static int model_output_free(enum pbx_layer_kind k)
{
	return k == PBX_L_CONV || k == PBX_L_LINEAR || k == PBX_L_BATCHNORM ||
	       k == PBX_L_MAXPOOL || k == PBX_L_AVGPOOL;
}

static uint64_t model_fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* BN (fused ReLU) -> ReLU -> max-pool 2x2 stride 2 unpadded, ending at
 * layer i: the BN's forward and backward do the pool's too (layers.h), and
 * the BN output is never stored.  Not for a BN
 * first layer: the fused backward builds its gradient in din. */
static void model_fuse_pool(struct pbx_model *m, int i)
{
	struct pbx_layer *P = &m->layers[i], *N;
	if (i < 3 || P->spec.kind != PBX_L_MAXPOOL || P->spec.k != 2 ||
	    P->spec.s != 2 || P->spec.p != 0)
		return;
	N = &m->layers[i - 2];
	if (N->spec.kind != PBX_L_BATCHNORM || !N->fused_relu ||
	    m->layers[i - 1].spec.kind != PBX_L_RELU)
		return;
	N->fused_pool = 1;
	P->fused_pool = 1;
}

struct pbx_model *pbx_model_new(const struct pbx_layer_spec *specs, int n,
				int c, int h, int w, int nclasses,
				int max_batch, uint64_t seed,
				struct pbx_err *err)
{
	struct pbx_model *m = xcalloc(1, sizeof(*m));
	struct pbx_buf arch = PBX_BUF_INIT;
	size_t np = 0, nb = 0, na = 0, nd = 0, scratch = 0;
	int C = c, H = h, W = w;

	m->nlayers = n;
	m->layers = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*m->layers));
	m->c = c; m->h = h; m->w = w;
	m->nclasses = nclasses;
	m->max_batch = max_batch;
	pbx_buf_addf(&arch, "input %dx%dx%d classes %d\n", c, h, w, nclasses);
	if (n < 1) {
		pbx_err_setc(err, 2, "model has no layers");
		goto fail;
	}
	for (int i = 0; i < n; i++) {
		struct pbx_layer *L = &m->layers[i];
		struct pbx_layer_spec *s = &L->spec;
		size_t per;
		*s = specs[i];
		L->c = C; L->h = H; L->w = W;
		L->oc = C; L->oh = H; L->ow = W;
		switch (s->kind) {
		case PBX_L_CONV:
			if (s->out <= 0 || s->k <= 0 || s->s <= 0 || s->p < 0 ||
			    H + 2 * s->p < s->k || W + 2 * s->p < s->k) {
				pbx_err_setc(err, 2, "layer %d (conv): bad filters/kernel/stride/pad for input %dx%dx%d",
					     i + 1, C, H, W);
				goto fail;
			}
			L->oc = s->out;
			L->oh = (H + 2 * s->p - s->k) / s->s + 1;
			L->ow = (W + 2 * s->p - s->k) / s->s + 1;
			L->w_off = np; np += (size_t)s->out * C * s->k * s->k;
			L->b_off = np; np += (size_t)s->out;
			per = conv_scratch_floats(max_batch, C, H, W, s->out,
						  s->k, s->s, s->p, 0);
			if (per > scratch)
				scratch = per;
			break;
		case PBX_L_MAXPOOL:
		case PBX_L_AVGPOOL:
			if (s->s <= 0)
				s->s = s->k;
			if (s->k <= 0 || s->p < 0 || 2 * s->p > s->k ||
			    H + 2 * s->p < s->k || W + 2 * s->p < s->k) {
				pbx_err_setc(err, 2, "layer %d (%s): bad size/stride/pad for input %dx%dx%d",
					     i + 1, pbx_layer_kind_name(s->kind), C, H, W);
				goto fail;
			}
			L->oh = (H + 2 * s->p - s->k) / s->s + 1;
			L->ow = (W + 2 * s->p - s->k) / s->s + 1;
			break;
		case PBX_L_BATCHNORM:
			L->w_off = np; np += (size_t)C;
			L->b_off = np; np += (size_t)C;
			L->buf_off = nb; nb += 2 * (size_t)C;
			L->aux_off = na; na += 2 * (size_t)C;
			break;
		case PBX_L_LINEAR:
			if (s->out == 0)
				s->out = nclasses;
			if (s->out < 0) {
				pbx_err_setc(err, 2, "layer %d (linear): bad number of outputs", i + 1);
				goto fail;
			}
			L->oc = s->out; L->oh = 1; L->ow = 1;
			L->w_off = np; np += (size_t)s->out * C * H * W;
			L->b_off = np; np += (size_t)s->out;
			break;
		case PBX_L_FLATTEN:
			L->oc = C * H * W; L->oh = 1; L->ow = 1;
			L->alias = 1;
			break;
		case PBX_L_DROPOUT:
			if (s->rate < 0.0f || s->rate >= 1.0f) {
				pbx_err_setc(err, 2, "layer %d (dropout): rate must be in [0, 1)", i + 1);
				goto fail;
			}
			L->aux_off = na; na += (size_t)max_batch * C * H * W;
			break;
		case PBX_L_LRN:
			if (s->size <= 0) {
				pbx_err_setc(err, 2, "layer %d (lrn): size must be positive", i + 1);
				goto fail;
			}
			L->aux_off = na; na += (size_t)max_batch * C * H * W;
			break;
		default: /* activations */
			if (s->kind == PBX_L_RELU && i > 0 &&
			    model_output_free(m->layers[i - 1].spec.kind)) {
				L->alias = 1;
				if (m->layers[i - 1].spec.kind == PBX_L_CONV ||
				    m->layers[i - 1].spec.kind == PBX_L_BATCHNORM)
					m->layers[i - 1].fused_relu = 1;
			}
			break;
		}
		if (!L->alias) {
			per = (size_t)max_batch * L->oc * L->oh * L->ow;
			L->out_off = na; na += per;
			L->dout_off = nd; nd += per;
		}
		model_fuse_pool(m, i);
		C = L->oc; H = L->oh; W = L->ow;
		pbx_buf_addf(&arch, "%s out=%d k=%d s=%d p=%d size=%d a=%g b=%g k=%g rate=%g -> %dx%dx%d\n",
			     pbx_layer_kind_name(s->kind), s->out, s->k, s->s,
			     s->p, s->size, (double)s->alpha, (double)s->beta,
			     (double)s->bias, (double)s->rate, C, H, W);
	}
	if (C * H * W != nclasses) {
		pbx_err_setc(err, 2, "model output has %d values per example but the data set has %d classes",
			     C * H * W, nclasses);
		goto fail;
	}
	m->probs_off = na; na += (size_t)max_batch * nclasses;
	pbx_buf_addf(&arch, "params %zu\n", np);

	m->nparams = np; m->nbuffers = nb; m->nacts = na; m->ndacts = nd;
	m->nscratch = scratch;
	m->params = xcalloc(np ? np : 1, sizeof(float));
	m->grads = xcalloc(np ? np : 1, sizeof(float));
	m->buffers = xcalloc(nb ? nb : 1, sizeof(float));
	m->acts = xcalloc(na ? na : 1, sizeof(float));
	m->dacts = xcalloc(nd ? nd : 1, sizeof(float));
	m->scratch = xcalloc(scratch ? scratch : 1, sizeof(float));
	m->arch = pbx_buf_detach(&arch, NULL);
	m->arch_hash = model_fnv1a(m->arch, strlen(m->arch));

	/* initialisation: He normal for weights, zero biases, BN (1, 0) */
	struct pbx_rng r;
	pbx_rng_seed(&r, seed, 0x696e6974 /* "init" */);
	for (int i = 0; i < n; i++) {
		struct pbx_layer *L = &m->layers[i];
		size_t fan_in, nw;
		if (L->spec.kind == PBX_L_CONV || L->spec.kind == PBX_L_LINEAR) {
			fan_in = (size_t)L->c * (L->spec.kind == PBX_L_CONV
				 ? (size_t)L->spec.k * L->spec.k : (size_t)L->h * L->w);
			nw = (size_t)L->spec.out * fan_in;
			float sd = sqrtf(2.0f / (float)fan_in);
			for (size_t j = 0; j < nw; j++)
				m->params[L->w_off + j] = sd * pbx_rng_normal(&r);
		} else if (L->spec.kind == PBX_L_BATCHNORM) {
			for (int j = 0; j < L->c; j++) {
				m->params[L->w_off + j] = 1.0f;
				m->buffers[L->buf_off + L->c + j] = 1.0f;
			}
		}
	}
	return m;
fail:
	pbx_buf_release(&arch);
	pbx_model_free(m);
	return NULL;
}

void pbx_model_free(struct pbx_model *m)
{
	if (!m)
		return;
	free(m->layers);
	free(m->params);
	free(m->grads);
	free(m->buffers);
	free(m->acts);
	free(m->dacts);
	free(m->scratch);
	free(m->arch);
	free(m);
}

/* ------------------------------------------------------------ the passes */

static float *model_out(struct pbx_model *m, int i);

/* Input of layer i: the batch for i = 0, else layer i-1's output. */
static float *model_in(struct pbx_model *m, int i)
{
	return i == 0 ? (float *)m->input : model_out(m, i - 1);
}

static float *model_out(struct pbx_model *m, int i)
{
	return m->layers[i].alias ? model_in(m, i) : m->acts + m->layers[i].out_off;
}

static float *model_dout(struct pbx_model *m, int i);

/* Gradient of layer i's input; NULL for the network input (not needed). */
static float *model_din(struct pbx_model *m, int i)
{
	return i == 0 ? NULL : model_dout(m, i - 1);
}

static float *model_dout(struct pbx_model *m, int i)
{
	return m->layers[i].alias ? model_din(m, i) : m->dacts + m->layers[i].dout_off;
}

double pbx_model_forward(struct pbx_model *m, const float *x,
			 const int32_t *y, int B, int train, int64_t *correct)
{
	m->input = x;
	m->labels = y;
	m->batch = B;
	m->train = train;
	for (int i = 0; i < m->nlayers; i++) {
		struct pbx_layer *L = &m->layers[i];
		const struct pbx_layer_spec *s = &L->spec;
		float *in = model_in(m, i), *out = model_out(m, i);
		float *p = m->params, *aux = m->acts + L->aux_off;
		size_t n = (size_t)B * L->c * L->h * L->w;
		switch (s->kind) {
		case PBX_L_CONV:
			conv_forward(out, in, p + L->w_off, p + L->b_off, B, L->c,
				     L->h, L->w, L->oc, s->k, s->s, s->p,
				     L->fused_relu, m->scratch, m->nscratch);
			break;
		case PBX_L_MAXPOOL:
			if (!L->fused_pool) /* else done by the BN */
				maxpool_forward(out, in, B, L->c, L->h, L->w,
						s->k, s->s, s->p);
			break;
		case PBX_L_AVGPOOL:
			avgpool_forward(out, in, B, L->c, L->h, L->w, s->k, s->s, s->p);
			break;
		case PBX_L_BATCHNORM:
			if (L->fused_pool) {
				batchnorm_relu_maxpool2_forward(model_out(m, i + 2),
					in, p + L->w_off, p + L->b_off,
					m->buffers + L->buf_off,
					m->buffers + L->buf_off + L->c, aux,
					aux + L->c, B, L->c, L->h, L->w, s->eps,
					s->momentum, train);
				break;
			}
			batchnorm_forward(out, in, p + L->w_off, p + L->b_off,
					  m->buffers + L->buf_off,
					  m->buffers + L->buf_off + L->c, aux,
					  aux + L->c, B, L->c, L->h * L->w,
					  s->eps, s->momentum, train, L->fused_relu);
			break;
		case PBX_L_LINEAR:
			linear_forward(out, in, p + L->w_off, p + L->b_off, B,
				       L->c * L->h * L->w, L->oc);
			break;
		case PBX_L_DROPOUT:
			dropout_forward(out, aux, in, n, s->rate, train, &m->rng);
			break;
		case PBX_L_LRN:
			lrn_forward(out, aux, in, B, L->c, L->h * L->w, s->size,
				    s->alpha, s->beta, s->bias);
			break;
		case PBX_L_FLATTEN:
			break;
		default:
			if (i > 0 && m->layers[i - 1].fused_relu)
				break; /* done by the conv / BN */
			act_forward(out, in, n, model_act(s->kind), s->alpha);
			break;
		}
	}
	return softmax_xent_forward(m->acts + m->probs_off,
				    model_out(m, m->nlayers - 1), y, B,
				    m->nclasses, correct);
}

void pbx_model_zero_grad(struct pbx_model *m)
{
	memset(m->grads, 0, sizeof(float) * m->nparams);
}

void pbx_model_backward(struct pbx_model *m)
{
	int B = m->batch;
	softmax_xent_backward(model_dout(m, m->nlayers - 1),
			      m->acts + m->probs_off, m->labels, B,
			      m->nclasses);
	for (int i = m->nlayers - 1; i >= 0; i--) {
		struct pbx_layer *L = &m->layers[i];
		const struct pbx_layer_spec *s = &L->spec;
		float *in = model_in(m, i), *out = model_out(m, i);
		float *din = model_din(m, i), *dout = model_dout(m, i);
		float *p = m->params, *g = m->grads, *aux = m->acts + L->aux_off;
		size_t n = (size_t)B * L->c * L->h * L->w;
		switch (s->kind) {
		case PBX_L_CONV:
			conv_backward(din, g + L->w_off, g + L->b_off, dout,
				      L->fused_relu ? out : NULL, in, p + L->w_off,
				      B, L->c, L->h, L->w, L->oc, s->k, s->s, s->p,
				      m->scratch, m->nscratch);
			break;
		case PBX_L_MAXPOOL:
			if (din && !L->fused_pool)
				maxpool_backward(din, dout, in, B, L->c, L->h,
						 L->w, s->k, s->s, s->p);
			break;
		case PBX_L_AVGPOOL:
			if (din)
				avgpool_backward(din, dout, B, L->c, L->h, L->w,
						 s->k, s->s, s->p);
			break;
		case PBX_L_BATCHNORM:
			if (L->fused_pool) {
				batchnorm_relu_maxpool2_backward(din, g + L->w_off,
					g + L->b_off, model_dout(m, i + 2), in,
					p + L->w_off, p + L->b_off, aux, aux + L->c,
					B, L->c, L->h, L->w);
				break;
			}
			batchnorm_backward(din, g + L->w_off, g + L->b_off, dout,
					   in, p + L->w_off, p + L->b_off, aux,
					   aux + L->c, L->fused_relu, B, L->c,
					   L->h * L->w);
			break;
		case PBX_L_LINEAR:
			linear_backward(din, g + L->w_off, g + L->b_off, dout, in,
					p + L->w_off, B, L->c * L->h * L->w, L->oc);
			break;
		case PBX_L_DROPOUT:
			if (din)
				dropout_backward(din, dout, aux, n);
			break;
		case PBX_L_LRN:
			if (din)
				lrn_backward(din, dout, in, out, aux, B, L->c,
					     L->h * L->w, s->size, s->alpha,
					     s->beta);
			break;
		case PBX_L_FLATTEN:
			break;
		default:
			if (i > 0 && m->layers[i - 1].fused_relu)
				break; /* masked inside the conv / BN backward */
			/* in-place ReLU: din == dout, out == in */
			if (din)
				act_backward(din, dout, in, out, n,
					     model_act(s->kind), s->alpha);
			break;
		}
	}
}

double pbx_model_flops(const struct pbx_model *m)
{
	double f = 0.0;
	for (int i = 0; i < m->nlayers; i++) {
		const struct pbx_layer *L = &m->layers[i];
		if (L->spec.kind == PBX_L_CONV)
			f += 2.0 * L->oc * L->oh * L->ow * L->c * L->spec.k * L->spec.k;
		else if (L->spec.kind == PBX_L_LINEAR)
			f += 2.0 * L->oc * L->c * L->h * L->w;
	}
	return f;
}
