/*
 * resources.c - `resources`: the experiment file's mapping (and the
 * command line's overrides) into the typed sbatch options of
 * src/slurm/sbatch.h, which checks them: sbatch long options passed
 * through to the job array, `throttle` (the %N of --array) and `launcher`.
 * Errors name the file, line and key.
 */
#include "experiment/experiment_internal.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why `key` cannot be used, in why[] (with a "did you mean" for an
 * unknown key); 0 when it can. */
static int res_key_problem(const char *key, char *why, size_t size)
{
	const char *const *k, *hint;
	for (k = pbx_sbatch_known_keys(); *k; k++)
		if (!strcmp(*k, key))
			return 0;
	if (pbx_sbatch_key_reserved(key))
		return snprintf(why, size, "is set by pbx and cannot be given"), -1;
	hint = pbx_did_you_mean(key, pbx_sbatch_known_keys());
	if (hint)
		snprintf(why, size, "not an sbatch option pbx passes on (did you mean '%s'?)",
			 hint);
	else
		snprintf(why, size, "not an sbatch option pbx passes on");
	return -1;
}

/* Validates and stores one resource; 0 or -1 with why[]. */
static int res_set(struct pbx_experiment *e, const char *key, const char *value, char *why,
		   size_t size)
{
	if (res_key_problem(key, why, size) < 0)
		return -1;
	return pbx_sbatch_opts_set(&e->res, key, value, why, size);
}

int pbx_exp_resources(struct pbx_experiment *e, const struct pbx_ynode *res, struct pbx_err *err)
{
	char why[256];
	size_t i;
	if (!res)
		return 0;
	if (pbx_ynode_expect_map(res, err) < 0)
		return -1;
	for (i = 0; i < res->npairs; i++) {
		const struct pbx_ypair *p = &res->pairs[i];
		if (res_key_problem(p->key->value, why, sizeof(why)) < 0)
			return pbx_ynode_error(p->key, err, "%s", why);
		if (pbx_exp_scalar(p->value, err) < 0)
			return -1;
		if (res_set(e, p->key->value, p->value->value, why, sizeof(why)) < 0)
			return pbx_ynode_error(p->value, err, "%s", why);
	}
	return 0;
}

int pbx_experiment_override_resource(struct pbx_experiment *e, const char *key, const char *value,
				     struct pbx_err *err)
{
	char why[256];
	if (res_set(e, key, value, why, sizeof(why)) < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--%s: %s", key, why);
	return 0;
}

char **pbx_experiment_sbatch_args(const struct pbx_experiment *e, size_t *n)
{
	return pbx_sbatch_opts_argv(&e->res, n);
}
