/*
 * experiment_internal.h - what the files of src/experiment share and nothing
 * else sees: the private part of an experiment (its string pool and the
 * one block of params behind all points) and the parsers of each section.
 */
#ifndef PBX_EXPERIMENT_INTERNAL_H
#define PBX_EXPERIMENT_INTERNAL_H

#include <stdbool.h>

#include "config/yamltree.h"
#include "experiment/experiment.h"

/* A pbx_experiment as allocated: the public part first, so a pointer to
 * one is a pointer to the other. */
struct pbx_exp_priv {
	struct pbx_experiment pub;
	char **pool; /* strings shared by points (names, values) */
	size_t npool, pool_alloc;
	struct pbx_param *block; /* npoints * nparams params behind all points */
};

/* Copies `len` bytes into the experiment's pool; the copy lives as long as
 * the experiment. */
char *pbx_exp_pool_add(struct pbx_exp_priv *x, const char *s, size_t len);

/* A parameter value: a scalar without NUL bytes, at most
 * PBX_EXPERIMENT_MAX_VALUE bytes.  Returns 0 or -1 with err naming `n`. */
int pbx_exp_scalar(const struct pbx_ynode *n, struct pbx_err *err);
/* True for [a-z_][a-z0-9_]{0,31}. */
bool pbx_exp_param_name_ok(const char *s, size_t len);

/* sweep.c: expands `sweep` (may be NULL) into x->pub.points. */
int pbx_exp_sweep(struct pbx_exp_priv *x, const struct pbx_ynode *sweep, struct pbx_err *err);
/* random.c: checks the keys of `random` and returns its params mapping
 * (non-empty); then draws the samples: *vals gets nrows * nparams pool
 * strings, row-major (caller frees the array only). */
int pbx_exp_random_params(const struct pbx_ynode *random, const struct pbx_ynode **params,
			  struct pbx_err *err);
int pbx_exp_random_sample(struct pbx_exp_priv *x, const struct pbx_ynode *random,
			  const struct pbx_ynode *params, size_t *nrows, char ***vals,
			  struct pbx_err *err);
/* resources.c: reads the `resources` mapping (may be NULL). */
int pbx_exp_resources(struct pbx_experiment *e, const struct pbx_ynode *res, struct pbx_err *err);
/* environment.c: reads the `environment` mapping (may be NULL) into
 * e->env; pbx_exp_environment_free releases what it holds. */
int pbx_exp_environment(struct pbx_experiment *e, const struct pbx_ynode *env, struct pbx_err *err);
void pbx_exp_environment_free(struct pbx_exp_environment *env);
/* notify: (notify.c): sets e->notify; n may be NULL (no key). */
int pbx_exp_notify(struct pbx_experiment *e, const struct pbx_ynode *n, struct pbx_err *err);
/* data.c: reads the `data` sequence (may be NULL) into e->data;
 * pbx_exp_data_free releases it. */
int pbx_exp_data(struct pbx_experiment *e, const struct pbx_ynode *seq, struct pbx_err *err);
void pbx_exp_data_free(struct pbx_experiment *e);
/* command.c: refuses a {name} in the command naming no parameter. */
int pbx_exp_check_command(const struct pbx_experiment *e, const struct pbx_ynode *cmd,
			  struct pbx_err *err);
/* command.c: refuses a point whose task command (substituted) is longer
 * than PBX_EXPERIMENT_MAX_COMMAND bytes, naming `n` (command or train). */
int pbx_exp_check_command_size(const struct pbx_experiment *e, const struct pbx_ynode *n,
			       struct pbx_err *err);
/* command.c: the `train` mapping as JSON text; caller frees. */
char *pbx_exp_train_json(const struct pbx_ynode *train);

#endif
