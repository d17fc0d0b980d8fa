/*
 * model.c - builds a sequential network from a layer list, lays out its
 * memory, and runs forward and backward by walking the layers.
 *
 * Memory map (llm.c style): one block each for params, grads, buffers,
 * acts and dacts; a pbx_layer records offsets into them.  Activation
 * offsets are computed for max_batch examples, so a smaller final batch
 * simply uses a prefix of each slot.  acts: saved tensors, kept outputs,
 * probs, then the recomputation region (segments' non-kept outputs, each
 * segment from the region's start); dacts: kept gradients, then the region.
 * The layers' code is the backend's (backend_cpu.c, cuda/backend_cuda.c);
 * a device backend keeps params, grads and buffers here as host mirrors.
 */
#include "train/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/layers/layers.h"
#include "util/buf.h"
#include "util/xalloc.h"

/* ------------------------------------------------------------ built-ins */

#define CONV(o, k_, p_)                                                      \
	{                                                                    \
		.kind = PBX_L_CONV, .out = (o), .k = (k_), .s = 1, .p = (p_) \
	}
#define POOL(kind_, k_, s_, p_)                                  \
	{                                                        \
		.kind = (kind_), .k = (k_), .s = (s_), .p = (p_) \
	}
#define LIN(o)                                   \
	{                                        \
		.kind = PBX_L_LINEAR, .out = (o) \
	}
#define BN                                                              \
	{                                                               \
		.kind = PBX_L_BATCHNORM, .eps = 1e-5f, .momentum = 0.1f \
	}
#define RELU                       \
	{                          \
		.kind = PBX_L_RELU \
	}
#define FLAT                          \
	{                             \
		.kind = PBX_L_FLATTEN \
	}
#define DROP(r)                                    \
	{                                          \
		.kind = PBX_L_DROPOUT, .rate = (r) \
	}
#define LRN9                                                                               \
	{                                                                                  \
		.kind = PBX_L_LRN, .size = 9, .alpha = 0.001f, .beta = 0.75f, .bias = 1.0f \
	}

static const struct pbx_layer_spec model_mlp[] = {
	FLAT, LIN(256), RELU, LIN(128), RELU, LIN(0),
};
static const struct pbx_layer_spec model_lenet[] = {
	CONV(6, 5, 2),  RELU,     POOL(PBX_L_MAXPOOL, 2, 2, 0),
	CONV(16, 5, 0), RELU,     POOL(PBX_L_MAXPOOL, 2, 2, 0),
	FLAT,           LIN(120), RELU,
	LIN(84),        RELU,     LIN(0),
};
static const struct pbx_layer_spec model_cnn_bn[] = {
	CONV(32, 3, 1), BN,       RELU, POOL(PBX_L_MAXPOOL, 2, 2, 0),
	CONV(64, 3, 1), BN,       RELU, POOL(PBX_L_MAXPOOL, 2, 2, 0),
	FLAT,           LIN(128), RELU, DROP(0.25f),
	LIN(0),
};
/* Zhang et al. 2017, "small AlexNet": (conv5x5 -> max-pool 3x3 -> LRN) x 2,
 * FC 384, FC 192, output; pooling 3x3 stride 2 "SAME" as in their code. */
static const struct pbx_layer_spec model_mini_alexnet[] = {
	CONV(64, 5, 2),
	RELU,
	POOL(PBX_L_MAXPOOL, 3, 2, 1),
	LRN9,
	CONV(64, 5, 2),
	RELU,
	POOL(PBX_L_MAXPOOL, 3, 2, 1),
	LRN9,
	FLAT,
	LIN(384),
	RELU,
	LIN(192),
	RELU,
	LIN(0),
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

int pbx_model_builtin(const char *name, const struct pbx_layer_spec **specs, int *n)
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
	[PBX_L_CONV] = "conv",
	[PBX_L_MAXPOOL] = "maxpool",
	[PBX_L_AVGPOOL] = "avgpool",
	[PBX_L_BATCHNORM] = "batchnorm",
	[PBX_L_LINEAR] = "linear",
	[PBX_L_RELU] = "relu",
	[PBX_L_LEAKY_RELU] = "leaky_relu",
	[PBX_L_TANH] = "tanh",
	[PBX_L_SIGMOID] = "sigmoid",
	[PBX_L_GELU] = "gelu",
	[PBX_L_DROPOUT] = "dropout",
	[PBX_L_LRN] = "lrn",
	[PBX_L_FLATTEN] = "flatten",
};

int pbx_layer_kind_parse(const char *name, enum pbx_layer_kind *out)
{
	static const struct {
		const char *alias;
		enum pbx_layer_kind kind;
	} extra[] = {
		{ "conv2d", PBX_L_CONV },
		{ "bn", PBX_L_BATCHNORM },
		{ "fc", PBX_L_LINEAR },
		{ "dense", PBX_L_LINEAR },
		{ "leakyrelu", PBX_L_LEAKY_RELU },
		{ "max_pool", PBX_L_MAXPOOL },
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
	case PBX_L_CONV:
		s->k = 3;
		s->s = 1;
		s->p = 0;
		break;
	case PBX_L_MAXPOOL:
	case PBX_L_AVGPOOL:
		s->k = 2;
		s->s = 0;
		break;
	case PBX_L_BATCHNORM:
		s->eps = 1e-5f;
		s->momentum = 0.1f;
		break;
	case PBX_L_LEAKY_RELU:
		s->alpha = 0.01f;
		break;
	case PBX_L_DROPOUT:
		s->rate = 0.5f;
		break;
	case PBX_L_LRN:
		s->size = 5;
		s->alpha = 1e-4f;
		s->beta = 0.75f;
		s->bias = 1.0f;
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------------- building */

/* Layers whose backward needs only their input, so their output may be
 * overwritten by an in-place ReLU. */
static int model_output_free(enum pbx_layer_kind k)
{
	return k == PBX_L_CONV || k == PBX_L_LINEAR || k == PBX_L_BATCHNORM || k == PBX_L_MAXPOOL ||
	       k == PBX_L_AVGPOOL;
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
	if (i < 3 || P->spec.kind != PBX_L_MAXPOOL || P->spec.k != 2 || P->spec.s != 2 ||
	    P->spec.p != 0)
		return;
	N = &m->layers[i - 2];
	if (N->spec.kind != PBX_L_BATCHNORM || !N->fused_relu ||
	    m->layers[i - 1].spec.kind != PBX_L_RELU)
		return;
	N->fused_pool = 1;
	P->fused_pool = 1;
}

/* Shapes, parameter/buffer/aux offsets and per-layer output sizes; the
 * output slots are placed afterwards (model_place_outputs). */
static int model_shapes(struct pbx_model *m, const struct pbx_layer_spec *specs,
			struct pbx_buf *arch, size_t *np, size_t *nb, size_t *na, size_t *scratch,
			struct pbx_err *err)
{
	int n = m->nlayers, C = m->c, H = m->h, W = m->w, B = m->max_batch;
	for (int i = 0; i < n; i++) {
		struct pbx_layer *L = &m->layers[i];
		struct pbx_layer_spec *s = &L->spec;
		size_t per;
		*s = specs[i];
		L->c = C;
		L->h = H;
		L->w = W;
		L->oc = C;
		L->oh = H;
		L->ow = W;
		switch (s->kind) {
		case PBX_L_CONV:
			if (s->out <= 0 || s->k <= 0 || s->s <= 0 || s->p < 0 ||
			    H + 2 * s->p < s->k || W + 2 * s->p < s->k)
				return pbx_err_setc(
					err, 2,
					"layer %d (conv): bad filters/kernel/stride/pad for input %dx%dx%d",
					i + 1, C, H, W);
			L->oc = s->out;
			L->oh = (H + 2 * s->p - s->k) / s->s + 1;
			L->ow = (W + 2 * s->p - s->k) / s->s + 1;
			L->w_off = *np;
			*np += (size_t)s->out * C * s->k * s->k;
			L->b_off = *np;
			*np += (size_t)s->out;
			per = conv_scratch_floats(B, C, H, W, s->out, s->k, s->s, s->p, 0);
			if (per > *scratch)
				*scratch = per;
			break;
		case PBX_L_MAXPOOL:
		case PBX_L_AVGPOOL:
			if (s->s <= 0)
				s->s = s->k;
			if (s->k <= 0 || s->p < 0 || 2 * s->p > s->k || H + 2 * s->p < s->k ||
			    W + 2 * s->p < s->k)
				return pbx_err_setc(
					err, 2,
					"layer %d (%s): bad size/stride/pad for input %dx%dx%d",
					i + 1, pbx_layer_kind_name(s->kind), C, H, W);
			L->oh = (H + 2 * s->p - s->k) / s->s + 1;
			L->ow = (W + 2 * s->p - s->k) / s->s + 1;
			break;
		case PBX_L_BATCHNORM:
			L->w_off = *np;
			*np += (size_t)C;
			L->b_off = *np;
			*np += (size_t)C;
			L->buf_off = *nb;
			*nb += 2 * (size_t)C;
			L->aux_off = *na;
			*na += 2 * (size_t)C;
			break;
		case PBX_L_LINEAR:
			if (s->out == 0)
				s->out = m->nclasses;
			if (s->out < 0)
				return pbx_err_setc(
					err, 2, "layer %d (linear): bad number of outputs", i + 1);
			L->oc = s->out;
			L->oh = 1;
			L->ow = 1;
			L->w_off = *np;
			*np += (size_t)s->out * C * H * W;
			L->b_off = *np;
			*np += (size_t)s->out;
			break;
		case PBX_L_FLATTEN:
			L->oc = C * H * W;
			L->oh = 1;
			L->ow = 1;
			L->alias = 1;
			break;
		case PBX_L_DROPOUT:
			if (s->rate < 0.0f || s->rate >= 1.0f)
				return pbx_err_setc(err, 2,
						    "layer %d (dropout): rate must be in [0, 1)",
						    i + 1);
			L->aux_off = *na;
			*na += (size_t)B * C * H * W;
			break;
		case PBX_L_LRN:
			if (s->size <= 0)
				return pbx_err_setc(err, 2, "layer %d (lrn): size must be positive",
						    i + 1);
			L->aux_off = *na;
			*na += (size_t)B * C * H * W;
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
		if (!L->alias)
			L->out_floats = (size_t)B * L->oc * L->oh * L->ow;
		if (!m->sync_bn) /* sync BN reduces its statistics in its own pass */
			model_fuse_pool(m, i);
		C = L->oc;
		H = L->oh;
		W = L->ow;
		pbx_buf_addf(
			arch,
			"%s out=%d k=%d s=%d p=%d size=%d a=%g b=%g k=%g rate=%g -> %dx%dx%d\n",
			pbx_layer_kind_name(s->kind), s->out, s->k, s->s, s->p, s->size,
			(double)s->alpha, (double)s->beta, (double)s->bias, (double)s->rate, C, H,
			W);
	}
	if (C * H * W != m->nclasses)
		return pbx_err_setc(
			err, 2,
			"model output has %d values per example but the data set has %d classes",
			C * H * W, m->nclasses);
	return 0;
}

/* The layer whose memory holds layer i's output (-1: the network input). */
static int model_owner(const struct pbx_model *m, int i)
{
	while (i >= 0 && m->layers[i].alias)
		i--;
	return i;
}

/* Whether a segment may end at layer i: not inside a fused BN+ReLU+pool
 * group, whose BN writes the pool's output. */
static int model_cut_ok(const struct pbx_model *m, int i)
{
	if (i + 1 >= m->nlayers)
		return 1;
	if (m->layers[i].spec.kind == PBX_L_BATCHNORM && m->layers[i].fused_pool)
		return 0;
	return !(i > 0 && m->layers[i - 1].spec.kind == PBX_L_BATCHNORM &&
		 m->layers[i - 1].fused_pool);
}

/* Cuts the layers into segments (recompute > 0: that many, as even as the
 * allowed cuts permit; -1: about sqrt(n) each) and marks kept outputs: the
 * memory of every segment's last output. */
static void model_segments(struct pbx_model *m, int recompute)
{
	int n = m->nlayers, want = 1, k = 0;
	if (recompute < 0)
		want = (int)lround(sqrt((double)n));
	else if (recompute > 0)
		want = recompute;
	if (want < 1)
		want = 1;
	if (want > n)
		want = n;
	m->seg_first = xcalloc((size_t)n + 1, sizeof(int));
	m->seg_first[0] = 0;
	for (int i = 0; i < n; i++) {
		m->layers[i].seg = k;
		/* end segment k after layer i once it holds its share */
		if (i + 1 < n && k + 1 < want && (i + 1) * want >= (k + 1) * n &&
		    model_cut_ok(m, i))
			m->seg_first[++k] = i + 1;
	}
	m->nsegs = k + 1;
	m->seg_first[m->nsegs] = n;
	for (int s = 0; s < m->nsegs; s++) {
		int o = model_owner(m, m->seg_first[s + 1] - 1);
		if (o >= 0)
			m->layers[o].keep = 1;
	}
	if (m->nsegs == 1) /* no recomputation: everything is kept */
		for (int i = 0; i < n; i++)
			m->layers[i].keep = 1;
}

/* Output and output-gradient slots: kept ones one after the other, the
 * others from the start of their segment's region (shared by segments). */
static void model_place_outputs(struct pbx_model *m, size_t *na, size_t *nd)
{
	size_t ra = 0, rd = 0;
	for (int i = 0; i < m->nlayers; i++) {
		struct pbx_layer *L = &m->layers[i];
		if (!L->alias && L->keep) {
			L->out_off = *na;
			*na += L->out_floats;
			L->dout_off = *nd;
			*nd += L->out_floats;
		}
	}
	m->probs_off = *na;
	*na += (size_t)m->max_batch * m->nclasses;
	for (int s = 0; s < m->nsegs; s++) {
		size_t a = 0;
		for (int i = m->seg_first[s]; i < m->seg_first[s + 1]; i++) {
			struct pbx_layer *L = &m->layers[i];
			if (L->alias || L->keep)
				continue;
			L->out_off = *na + a;
			L->dout_off = *nd + a;
			a += L->out_floats;
		}
		if (a > ra)
			ra = a;
	}
	rd = ra;
	m->region_acts = ra;
	m->region_dacts = rd;
	*na += ra;
	*nd += rd;
}

struct pbx_model *pbx_model_plan(const struct pbx_layer_spec *specs, int n, int c, int h, int w,
				 int nclasses, const struct pbx_model_opts *opts,
				 struct pbx_err *err)
{
	struct pbx_model *m = xcalloc(1, sizeof(*m));
	struct pbx_buf arch = PBX_BUF_INIT;
	size_t np = 0, nb = 0, na = 0, nd = 0, scratch = 0;

	m->nlayers = n;
	m->layers = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*m->layers));
	m->c = c;
	m->h = h;
	m->w = w;
	m->nclasses = nclasses;
	m->max_batch = opts->max_batch;
	m->sync_bn = opts->sync_bn;
	m->nsegs = 1;
	pbx_buf_addf(&arch, "input %dx%dx%d classes %d\n", c, h, w, nclasses);
	if (n < 1) {
		pbx_err_setc(err, 2, "model has no layers");
		goto fail;
	}
	if (model_shapes(m, specs, &arch, &np, &nb, &na, &scratch, err) < 0)
		goto fail;
	model_segments(m, opts->recompute);
	model_place_outputs(m, &na, &nd);
	pbx_buf_addf(&arch, "params %zu\n", np);
	m->nparams = np;
	m->nbuffers = nb;
	m->nacts = na;
	m->ndacts = nd;
	m->nscratch = scratch;
	m->arch = pbx_buf_detach(&arch, NULL);
	m->arch_hash = model_fnv1a(m->arch, strlen(m->arch));
	return m;
fail:
	pbx_buf_release(&arch);
	pbx_model_free(m);
	return NULL;
}

void pbx_model_alloc(struct pbx_model *m, const struct pbx_backend *be)
{
	/* a device backend: params, grads, buffers on the host as mirrors */
	const struct pbx_backend *host = be->attach ? &pbx_backend_cpu : be;
	m->be = be;
	m->params = host->alloc(m->nparams);
	m->grads = host->alloc(m->nparams);
	m->buffers = host->alloc(m->nbuffers);
	m->acts = be->alloc(m->nacts);
	m->dacts = be->alloc(m->ndacts);
	m->scratch = be->alloc(m->nscratch);
	if (be->attach)
		be->attach(m);
}

void pbx_model_init_params(struct pbx_model *m, uint64_t seed)
{
	struct pbx_rng r;
	pbx_rng_seed(&r, seed, 0x696e6974 /* "init" */);
	for (int i = 0; i < m->nlayers; i++) {
		struct pbx_layer *L = &m->layers[i];
		size_t fan_in, nw;
		if (L->spec.kind == PBX_L_CONV || L->spec.kind == PBX_L_LINEAR) {
			fan_in = (size_t)L->c * (L->spec.kind == PBX_L_CONV
							 ? (size_t)L->spec.k * L->spec.k
							 : (size_t)L->h * L->w);
			nw = (size_t)L->spec.out * fan_in;
			float sd = sqrtf(2.0f / (float)fan_in);
			for (size_t j = 0; j < nw; j++)
				m->params[L->w_off + j] = sd * pbx_rng_normal(&r);
			memset(m->params + L->b_off, 0, sizeof(float) * (size_t)L->spec.out);
		} else if (L->spec.kind == PBX_L_BATCHNORM) {
			for (int j = 0; j < L->c; j++) {
				m->params[L->w_off + j] = 1.0f;
				m->params[L->b_off + j] = 0.0f;
				m->buffers[L->buf_off + j] = 0.0f;
				m->buffers[L->buf_off + L->c + j] = 1.0f;
			}
		}
	}
	if (m->be && m->be->push) /* a device backend: copy them over */
		m->be->push(m, NULL);
}

struct pbx_model *pbx_model_new(const struct pbx_layer_spec *specs, int n, int c, int h, int w,
				int nclasses, int max_batch, uint64_t seed, struct pbx_err *err)
{
	struct pbx_model_opts o = { .max_batch = max_batch };
	struct pbx_model *m = pbx_model_plan(specs, n, c, h, w, nclasses, &o, err);
	if (!m)
		return NULL;
	pbx_model_alloc(m, &pbx_backend_cpu);
	pbx_model_init_params(m, seed);
	return m;
}

void pbx_model_free(struct pbx_model *m)
{
	if (!m)
		return;
	if (m->be) {
		const struct pbx_backend *host = m->be->attach ? &pbx_backend_cpu : m->be;
		if (m->be->detach)
			m->be->detach(m);
		host->release(m->params);
		host->release(m->grads);
		host->release(m->buffers);
		m->be->release(m->acts);
		m->be->release(m->dacts);
		m->be->release(m->scratch);
	}
	free(m->layers);
	free(m->seg_first);
	free(m->arch);
	free(m);
}

/* ------------------------------------------------------------ the passes */

float *pbx_model_in(struct pbx_model *m, int i)
{
	return i == 0 ? (float *)m->input : pbx_model_out(m, i - 1);
}

float *pbx_model_out(struct pbx_model *m, int i)
{
	return m->layers[i].alias ? pbx_model_in(m, i) : m->acts + m->layers[i].out_off;
}

float *pbx_model_din(struct pbx_model *m, int i)
{
	return i == 0 ? NULL : pbx_model_dout(m, i - 1);
}

float *pbx_model_dout(struct pbx_model *m, int i)
{
	return m->layers[i].alias ? pbx_model_din(m, i) : m->dacts + m->layers[i].dout_off;
}

double pbx_model_forward(struct pbx_model *m, const float *x, const int32_t *y, int B, int train,
			 int64_t *correct)
{
	const struct pbx_layer_ops *ops = m->be->ops;
	m->input = x;
	m->labels = y;
	m->batch = B;
	m->train = train;
	if (m->be->set_batch)
		m->be->set_batch(m, x, y, B);
	for (int i = 0; i < m->nlayers; i++)
		ops[m->layers[i].spec.kind].forward(m, i, train ? PBX_FWD_TRAIN : PBX_FWD_EVAL);
	return m->be->loss_forward(m, correct);
}

void pbx_model_zero_grad(struct pbx_model *m)
{
	if (m->be->zero_grad) {
		m->be->zero_grad(m);
		return;
	}
	memset(m->grads, 0, sizeof(float) * m->nparams);
}

/* Runs segment s forward again from its kept input, skipping layers whose
 * memory is kept (their contents are still the forward's). */
static void model_replay(struct pbx_model *m, int s)
{
	const struct pbx_layer_ops *ops = m->be->ops;
	for (int i = m->seg_first[s]; i < m->seg_first[s + 1]; i++) {
		int o = model_owner(m, i);
		if (o >= 0 && m->layers[o].keep)
			continue;
		ops[m->layers[i].spec.kind].forward(m, i, PBX_FWD_REPLAY);
	}
}

void pbx_model_backward(struct pbx_model *m)
{
	const struct pbx_layer_ops *ops = m->be->ops;
	m->be->loss_backward(m);
	for (int s = m->nsegs - 1; s >= 0; s--) {
		if (s < m->nsegs - 1) /* the last segment's region is intact */
			model_replay(m, s);
		for (int i = m->seg_first[s + 1] - 1; i >= m->seg_first[s]; i--) {
			const struct pbx_layer *L = &m->layers[i];
			ops[L->spec.kind].backward(m, i);
			if (m->hooks.grads_ready &&
			    (L->spec.kind == PBX_L_CONV || L->spec.kind == PBX_L_LINEAR ||
			     L->spec.kind == PBX_L_BATCHNORM))
				m->hooks.grads_ready(m->hooks.ctx, L->w_off);
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
