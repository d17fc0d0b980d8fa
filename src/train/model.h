/*
 * model.h - a sequential network: its layer list, and its parameters,
 * gradients, buffers and activations, each in ONE allocation (llm.c's
 * memory map).  Layer i reads layer i-1's output; Flatten and ReLU-after-
 * {conv, linear, batchnorm, pool} run in place (they alias their input), and
 * a ReLU right after a conv or batchnorm is fused into that layer (output
 * pass forward, gradient mask backward).
 *
 * Building is two steps, sizing (pbx_model_plan: shapes, offsets, counts)
 * and allocation on a backend (pbx_model_alloc), so that a backend with
 * its own memory (a GPU) gets the sizes first.  The passes walk the layers
 * through the backend's ops table (struct pbx_backend), one entry per kind.
 *
 * Activation recomputation (opts.recompute): the layers are cut into
 * segments; only each segment's last output (and its gradient) is kept,
 * the others live in one region shared by all segments, and backward runs
 * a segment forward again before its backward.  Saved tensors (BN stats,
 * dropout masks, LRN scales) are always kept, so the replay reproduces the
 * forward's floats and the gradients are bit-identical.
 *
 * Ownership: pbx_model_new() / pbx_model_plan() return a model the caller
 * frees with pbx_model_free(); the spec array is copied.  The input and label arrays
 * passed to pbx_model_forward() are borrowed and must stay valid until
 * pbx_model_backward() returns.
 */
#ifndef PBX_TRAIN_MODEL_H
#define PBX_TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/rng.h"
#include "util/err.h"

enum pbx_layer_kind {
	PBX_L_CONV,
	PBX_L_MAXPOOL,
	PBX_L_AVGPOOL,
	PBX_L_BATCHNORM,
	PBX_L_LINEAR,
	PBX_L_RELU,
	PBX_L_LEAKY_RELU,
	PBX_L_TANH,
	PBX_L_SIGMOID,
	PBX_L_GELU,
	PBX_L_DROPOUT,
	PBX_L_LRN,
	PBX_L_FLATTEN,
	PBX_L_COUNT
};

/* What a config file says about one layer (unused fields are ignored). */
struct pbx_layer_spec {
	enum pbx_layer_kind kind;
	int out;             /* conv filters, linear features; 0 = number of classes */
	int k, s, p;         /* kernel, stride, padding (conv, pools) */
	int size;            /* LRN window in channels */
	float alpha;         /* leaky-ReLU slope, LRN alpha */
	float beta, bias;    /* LRN beta and k */
	float rate;          /* dropout probability */
	float eps, momentum; /* batchnorm */
};

/* A built layer: its spec, its shapes and where its memory lives. */
struct pbx_layer {
	struct pbx_layer_spec spec;
	int c, h, w;         /* input shape of one example */
	int oc, oh, ow;      /* output shape of one example */
	int alias;           /* output is the input (flatten, in-place ReLU) */
	int fused_relu;      /* conv/BN: the next ReLU is done here; it is a no-op */
	int fused_pool;      /* BN+ReLU: forward and backward also do the next 2x2
			       * max-pool's; on the pool: its passes are no-ops */
	int seg;             /* recomputation segment (0 when off) */
	int keep;            /* output (and its gradient) outside the shared
			       * segment region: kept from forward to backward */
	size_t w_off, b_off; /* params: weight (conv/linear, BN gamma), bias (beta) */
	size_t buf_off;      /* buffers: BN running mean (C) then var (C) */
	size_t out_off;      /* acts: output (maxB, oc, oh, ow) */
	size_t aux_off;      /* acts: saved tensor (dropout mask, LRN scale, BN mean+invstd) */
	size_t dout_off;     /* dacts: gradient of the output */
	size_t out_floats;   /* maxB * oc * oh * ow (0 for an alias) */
};

/* Forward modes a layer op is called with. */
enum pbx_fwd_mode {
	PBX_FWD_EVAL = 0,   /* running BN stats, no dropout */
	PBX_FWD_TRAIN = 1,  /* batch stats (running stats updated), dropout drawn */
	PBX_FWD_REPLAY = 2, /* recomputation in backward: the very floats of the
			      * TRAIN pass (saved BN stats, saved dropout mask),
			      * nothing updated */
};

struct pbx_model;
struct pbx_optim;

/* A layer kind's passes on one backend.  forward computes layer i's output
 * from its input (pbx_model_in/out and the model's blocks); backward
 * accumulates its parameter gradients and writes its input gradient. */
struct pbx_layer_ops {
	void (*forward)(struct pbx_model *m, int i, enum pbx_fwd_mode mode);
	void (*backward)(struct pbx_model *m, int i);
};

/* Where a model's tensors live and which code runs its layers: the CPU
 * reference (backend_cpu.c) or CUDA (cuda/backend_cuda.c).  alloc returns zeroed
 * memory for n floats (never NULL: it aborts on exhaustion), release frees
 * it.  ops is indexed by enum pbx_layer_kind (PBX_L_COUNT entries). */
struct pbx_backend {
	const char *name;
	float *(*alloc)(size_t n);
	void (*release)(float *p);
	const struct pbx_layer_ops *ops;
	/* loss: probs (B,V) and mean loss from the logits; backward writes
	 * dlogits */
	double (*loss_forward)(struct pbx_model *m, int64_t *correct);
	void (*loss_backward)(struct pbx_model *m);
	/* A backend with its own memory (a GPU; all NULL on the CPU).  Its
	 * model keeps params, grads and buffers on the host as mirrors
	 * (checkpoints, hashes and broadcasts read those) and its own copies
	 * in m->dev; acts, dacts and scratch come from alloc.
	 *   attach/detach: create / free m->dev (after allocation, at free)
	 *   set_batch: copies the step's x (B,c,h,w) and y (B) to the device
	 *     and points m->input / m->labels at the copies
	 *   zero_grad, clip (returns the norm before clipping), step: the
	 *     optimiser's work on the device copies
	 *   pull: device -> host mirrors of params, buffers, grads and the
	 *     optimiser's state (o may be NULL); push: host -> device */
	void (*attach)(struct pbx_model *m);
	void (*detach)(struct pbx_model *m);
	void (*set_batch)(struct pbx_model *m, const float *x, const int32_t *y, int B);
	void (*zero_grad)(struct pbx_model *m);
	double (*clip)(struct pbx_model *m, double max_norm);
	void (*step)(struct pbx_model *m, struct pbx_optim *o, double lr);
	void (*pull)(struct pbx_model *m, struct pbx_optim *o);
	void (*push)(struct pbx_model *m, const struct pbx_optim *o);
};

extern const struct pbx_backend pbx_backend_cpu;

/* What the layers ask of the world outside one process.  All optional
 * (NULL = one process).
 *   grads_ready(ctx, lo): called during backward once grads[lo, nparams)
 *     are final (the flat gradient buffer is filled back to front), so a
 *     data-parallel reduction of that tail can start while backward goes on.
 *   reduce_sum(ctx, v, n): sums n doubles over all ranks in place
 *     (synchronised batch norm); when it fails it leaves v as it is and
 *     the owner of ctx reports the failure after the step. */
struct pbx_model_hooks {
	void *ctx;
	void (*grads_ready)(void *ctx, size_t lo);
	void (*reduce_sum)(void *ctx, double *v, int n);
};

/* Sizing options. */
struct pbx_model_opts {
	int max_batch; /* activations are sized for this B */
	int recompute; /* segments of activation recomputation: 0 = off
			       * (every activation kept), -1 = about sqrt(n)
			       * layers per segment, k > 0 = k segments */
	int sync_bn;   /* batch norm statistics reduced over ranks via
			       * hooks.reduce_sum (disables the BN+pool fusion) */
};

struct pbx_model {
	int nlayers;
	struct pbx_layer *layers; /* nlayers */
	int c, h, w;              /* input shape of one example */
	int nclasses;             /* V */
	int max_batch;            /* activations are sized for this B */
	int sync_bn;
	int nsegs;                    /* recomputation segments (1 = off) */
	int *seg_first;               /* nsegs + 1: segment k is layers
				    * [seg_first[k], seg_first[k+1]) */
	const struct pbx_backend *be; /* NULL until pbx_model_alloc */
	void *dev;                    /* a device backend's own state (be->attach) */
	struct pbx_model_hooks hooks;
	size_t nparams;
	float *params; /* all trainable parameters */
	float *grads;  /* same layout as params */
	size_t nbuffers;
	float *buffers; /* non-trained state: BN running stats */
	size_t nacts;
	float *acts; /* saved tensors + kept outputs + probs (maxB,V)
				    * + the segment region */
	size_t ndacts;
	float *dacts; /* output gradients (kept, then the region) */
	size_t nscratch;
	float *scratch;      /* im2col space shared by all convs */
	size_t probs_off;    /* acts: softmax output (maxB, V) */
	size_t region_acts;  /* floats of the segment region in acts ... */
	size_t region_dacts; /* ... and in dacts (0 when recompute is off) */
	struct pbx_rng rng;  /* dropout; reseeded per step by the trainer */
	uint64_t arch_hash;  /* FNV-1a of `arch` */
	char *arch;          /* textual architecture (layers and shapes) */
	/* borrowed during a step */
	const float *input;    /* (B, c, h, w) */
	const int32_t *labels; /* (B) */
	int batch;             /* B of the current step */
	int train;             /* 1 = training mode (BN batch stats, dropout) */
};

/* The layer list of a built-in model ("mlp", "lenet", "cnn-bn",
 * "mini-alexnet"); static storage.  Returns -1 for an unknown name. */
int pbx_model_builtin(const char *name, const struct pbx_layer_spec **specs, int *n);
/* Comma-separated list of the built-in names (static string). */
const char *pbx_model_builtin_names(void);
/* Parses a layer type name ("conv", "maxpool", "bn", ...); -1 if unknown. */
int pbx_layer_kind_parse(const char *name, enum pbx_layer_kind *out);
const char *pbx_layer_kind_name(enum pbx_layer_kind kind);
/* Fills a spec with the defaults of its kind. */
void pbx_layer_spec_defaults(struct pbx_layer_spec *s, enum pbx_layer_kind kind);

/* Sizing: builds the layer list and memory map for inputs (c,h,w) and V
 * classes, without allocating any tensor (params, acts, ... stay NULL and
 * the counts say how many floats each needs).  NULL with `err` set on a
 * bad spec.  The architecture hash does not depend on opts. */
struct pbx_model *pbx_model_plan(const struct pbx_layer_spec *specs, int n, int c, int h, int w,
				 int nclasses, const struct pbx_model_opts *opts,
				 struct pbx_err *err);
/* Allocation: the planned blocks on backend `be` (zeroed). */
void pbx_model_alloc(struct pbx_model *m, const struct pbx_backend *be);
/* Initialises parameters from `seed` (He normal weights, zero biases, BN
 * gamma 1 beta 0) and the BN running stats (mean 0, var 1). */
void pbx_model_init_params(struct pbx_model *m, uint64_t seed);
/* plan + alloc on the CPU + init, without recomputation or sync BN. */
struct pbx_model *pbx_model_new(const struct pbx_layer_spec *specs, int n, int c, int h, int w,
				int nclasses, int max_batch, uint64_t seed, struct pbx_err *err);
void pbx_model_free(struct pbx_model *m);

/* Layer i's input (the batch for i = 0), output, output gradient and
 * input gradient (NULL for i = 0: the network input needs none); aliases
 * (flatten, in-place ReLU) resolve to the layer they share memory with. */
float *pbx_model_in(struct pbx_model *m, int i);
float *pbx_model_out(struct pbx_model *m, int i);
float *pbx_model_dout(struct pbx_model *m, int i);
float *pbx_model_din(struct pbx_model *m, int i);

/* Forward pass on x (B,c,h,w) with labels y (B); returns the mean loss and
 * adds correct predictions to *correct (may be NULL).  train selects
 * batch statistics and dropout. */
double pbx_model_forward(struct pbx_model *m, const float *x, const int32_t *y, int B, int train,
			 int64_t *correct);
void pbx_model_zero_grad(struct pbx_model *m);
/* Backward pass of the last forward (which must have had train = 1);
 * accumulates into m->grads, calling hooks.grads_ready as the tail of the
 * gradient buffer becomes final.  With recomputation, each segment but the
 * last is first run forward again (PBX_FWD_REPLAY) from its kept input. */
void pbx_model_backward(struct pbx_model *m);
/* Forward FLOPs of one example (multiply-add = 2), for GFLOP/s figures. */
double pbx_model_flops(const struct pbx_model *m);

#endif
