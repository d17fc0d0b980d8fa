/*
 * model.h - a sequential network: its layer list, and its parameters,
 * gradients, buffers and activations, each in ONE allocation (llm.c's
 * memory map).  Layer i reads layer i-1's output; Flatten and ReLU-after-
 * {conv, linear, batchnorm, pool} run in place (they alias their input), and
 * a ReLU right after a conv or batchnorm is fused into that layer (output
 * pass forward, gradient mask backward).
 *
 * Ownership: pbx_model_new() returns a model the caller frees with
 * pbx_model_free(); the spec array is copied.  The input and label arrays
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
	PBX_L_CONV, PBX_L_MAXPOOL, PBX_L_AVGPOOL, PBX_L_BATCHNORM,
	PBX_L_LINEAR, PBX_L_RELU, PBX_L_LEAKY_RELU, PBX_L_TANH,
	PBX_L_SIGMOID, PBX_L_GELU, PBX_L_DROPOUT, PBX_L_LRN, PBX_L_FLATTEN,
};

/* What a config file says about one layer (unused fields are ignored). */
struct pbx_layer_spec {
	enum pbx_layer_kind kind;
	int out;        /* conv filters, linear features; 0 = number of classes */
	int k, s, p;    /* kernel, stride, padding (conv, pools) */
	int size;       /* LRN window in channels */
	float alpha;    /* leaky-ReLU slope, LRN alpha */
	float beta, bias; /* LRN beta and k */
	float rate;     /* dropout probability */
	float eps, momentum; /* batchnorm */
};

/* A built layer: its spec, its shapes and where its memory lives. */
struct pbx_layer {
	struct pbx_layer_spec spec;
	int c, h, w;          /* input shape of one example */
	int oc, oh, ow;       /* output shape of one example */
	int alias;            /* output is the input (flatten, in-place ReLU) */
	int fused_relu;       /* conv/BN: the next ReLU is done here; it is a no-op */
	int fused_pool;       /* BN+ReLU: forward and backward also do the next 2x2
			       * max-pool's; on the pool: its passes are no-ops */
	size_t w_off, b_off;  /* params: weight (conv/linear, BN gamma), bias (beta) */
	size_t buf_off;       /* buffers: BN running mean (C) then var (C) */
	size_t out_off;       /* acts: output (maxB, oc, oh, ow) */
	size_t aux_off;       /* acts: saved tensor (dropout mask, LRN scale, BN mean+invstd) */
	size_t dout_off;      /* dacts: gradient of the output */
};

struct pbx_model {
	int nlayers;
	struct pbx_layer *layers;  /* nlayers */
	int c, h, w;               /* input shape of one example */
	int nclasses;              /* V */
	int max_batch;             /* activations are sized for this B */
	size_t nparams;
	float *params;             /* all trainable parameters */
	float *grads;              /* same layout as params */
	size_t nbuffers;
	float *buffers;            /* non-trained state: BN running stats */
	size_t nacts;
	float *acts;               /* outputs + saved tensors + probs (maxB,V) */
	size_t ndacts;
	float *dacts;              /* output gradients */
	size_t nscratch;
	float *scratch;            /* im2col space shared by all convs */
	size_t probs_off;          /* acts: softmax output (maxB, V) */
	struct pbx_rng rng;        /* dropout; reseeded per step by the trainer */
	uint64_t arch_hash;        /* FNV-1a of `arch` */
	char *arch;                /* textual architecture (layers and shapes) */
	/* borrowed during a step */
	const float *input;        /* (B, c, h, w) */
	const int32_t *labels;     /* (B) */
	int batch;                 /* B of the current step */
	int train;                 /* 1 = training mode (BN batch stats, dropout) */
};

/* The layer list of a built-in model ("mlp", "lenet", "cnn-bn",
 * "mini-alexnet"); static storage.  Returns -1 for an unknown name. */
int pbx_model_builtin(const char *name, const struct pbx_layer_spec **specs,
		      int *n);
/* Comma-separated list of the built-in names (static string). */
const char *pbx_model_builtin_names(void);
/* Parses a layer type name ("conv", "maxpool", "bn", ...); -1 if unknown. */
int pbx_layer_kind_parse(const char *name, enum pbx_layer_kind *out);
const char *pbx_layer_kind_name(enum pbx_layer_kind kind);
/* Fills a spec with the defaults of its kind. */
void pbx_layer_spec_defaults(struct pbx_layer_spec *s, enum pbx_layer_kind kind);

/* Builds the model for inputs (c,h,w) and V classes, batches up to
 * max_batch, and initialises parameters from `seed` (He normal weights,
 * zero biases, BN gamma 1 beta 0).  NULL with `err` set on a bad spec. */
struct pbx_model *pbx_model_new(const struct pbx_layer_spec *specs, int n,
				int c, int h, int w, int nclasses,
				int max_batch, uint64_t seed,
				struct pbx_err *err);
void pbx_model_free(struct pbx_model *m);

/* Forward pass on x (B,c,h,w) with labels y (B); returns the mean loss and
 * adds correct predictions to *correct (may be NULL).  train selects
 * batch statistics and dropout. */
double pbx_model_forward(struct pbx_model *m, const float *x,
			 const int32_t *y, int B, int train, int64_t *correct);
void pbx_model_zero_grad(struct pbx_model *m);
/* Backward pass of the last forward (which must have had train = 1);
 * accumulates into m->grads. */
void pbx_model_backward(struct pbx_model *m);
/* Forward FLOPs of one example (multiply-add = 2), for GFLOP/s figures. */
double pbx_model_flops(const struct pbx_model *m);

#endif
