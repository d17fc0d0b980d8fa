/*
 * config.h - pbx-train's settings: defaults, a YAML file (a top-level
 * mapping, or the `train:` section of a pbx experiment file), and
 * `--set key=value` overrides, applied in that order.
 *
 * Errors name the file, the line and the key, e.g.
 *   "exp.yaml:12: key 'lr': expected a number, got 'fast'"
 * and carry code 2 (PBX_EXIT_USAGE).
 *
 * Ownership: the strings and the layer array inside a config belong to it;
 * pbx_train_config_free() releases them (not the struct itself).
 */
#ifndef PBX_TRAIN_CONFIG_H
#define PBX_TRAIN_CONFIG_H

#include <stdint.h>

#include "train/model.h"
#include "train/optim.h"
#include "util/err.h"

struct pbx_train_config {
	char *model;                   /* built-in name; NULL when `layers` is used */
	struct pbx_layer_spec *layers; /* nlayers, from a YAML layer list */
	int nlayers;
	char *dataset;  /* fashion-mnist, mnist, cifar10, synthetic */
	char *data_dir; /* NULL = the runtime's default */
	int epochs;
	int batch_size;
	char *optimizer; /* sgd, adam, adamw */
	double lr, momentum, weight_decay;
	int nesterov;
	double beta1, beta2, adam_eps;
	char *schedule; /* constant, step, cosine */
	double warmup_epochs, step_epochs, gamma, min_lr;
	double clip_norm; /* 0 = off */
	uint64_t seed;
	int threads;        /* compute threads (OpenBLAS + OpenMP) */
	char *device;       /* cpu, cuda, auto (device.h) */
	int loader_threads; /* augmentation threads */
	int deterministic;
	char *corruption; /* none, labels, random_labels, ... */
	double corruption_prob;
	int subset;               /* train examples kept, 0 = all */
	int test_subset;          /* test examples kept, 0 = all */
	int synthetic_n;          /* examples of the synthetic train set */
	int crop_pad;             /* augment.crop_pad */
	int hflip;                /* augment.hflip */
	int64_t checkpoint_every; /* steps, 0 = only at the end and on signals */
	char *checkpoint_dir;     /* NULL = output_dir */
	char *output_dir;
	char *resume;           /* NULL, or a checkpoint path ("auto" = latest) */
	int eval_every;         /* epochs between evaluations */
	int log_every;          /* steps between metrics.jsonl lines */
	int64_t max_steps;      /* stop (with a checkpoint) after this many, 0 = off */
	int64_t signal_at_step; /* testing: raise SIGTERM at this step, 0 = off */
	int sync_bn;            /* batch norm statistics over all ranks */
	int recompute;          /* activation recomputation: 0 off, -1 sqrt(n)
				 * segments, k > 0 segments */
	int bucket_kb;          /* gradient allreduce bucket (KiB) */
	double comm_timeout;    /* seconds a collective may wait */
	/* dataset: tfrecord (runtime/tfrecord.h) */
	char *train_files; /* glob pattern of the training shards */
	char *test_files;  /* glob pattern of the test shards */
	/* mode: downpour (train/downpour.h) */
	char *mode;         /* allreduce (synchronous), downpour */
	int ps_ranks;       /* parameter servers: ranks 0..ps_ranks-1 */
	int n_push;         /* steps between a worker's gradient pushes */
	int n_fetch;        /* steps between a worker's parameter fetches */
	char *ps_optimizer; /* the servers' update: sgd, adagrad */
	double ps_timeout;  /* seconds without a server's answer: job ends */
};

/* Sets every field to its default. */
void pbx_train_config_defaults(struct pbx_train_config *c);
void pbx_train_config_free(struct pbx_train_config *c);
/* The most bytes of a configuration file: an experiment file's limit, since
 * pbx-train also reads experiment files (their train: section). */
#define PBX_TRAIN_CONFIG_MAX_FILE (16 << 20)
/* Reads a YAML file (a regular file of at most PBX_TRAIN_CONFIG_MAX_FILE
 * bytes) into c (on top of what is there). */
int pbx_train_config_load(struct pbx_train_config *c, const char *path, struct pbx_err *err);
/* Applies one "key=value" override. */
int pbx_train_config_set(struct pbx_train_config *c, const char *assignment, struct pbx_err *err);
/* Cross-field checks (positive sizes, known names, ...). */
int pbx_train_config_check(const struct pbx_train_config *c, struct pbx_err *err);
/* The effective configuration as a JSON object (caller frees). */
char *pbx_train_config_json(const struct pbx_train_config *c);

#endif
