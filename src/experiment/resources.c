/*
 * resources.c - `resources`: sbatch long options passed through to the
 * job array, checked against a list of real sbatch options (those that
 * pbx itself sets - array, output, job-name, export, ... - are refused),
 * plus `throttle`, the %N of --array.  Values are one-line strings that do
 * not start with '-', so each stays one "--key=value" argument; a flag
 * option (exclusive, hold, ...) takes true (bare --key) or false (left
 * out).  The same checks serve command-line overrides.
 */
#include "experiment/experiment_priv.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PBX_RES_MAX_VALUE 1024
#define PBX_RES_MAX_THROTTLE 1000000

/* sbatch long options that take a value (SLURM 22.05+), sorted. */
static const char *const pbx_res_options[] = {
	"account", "acctg-freq", "batch", "bb", "bbf", "begin", "cluster-constraint",
	"clusters", "comment", "constraint", "container", "core-spec",
	"cores-per-socket", "cpu-freq", "cpus-per-gpu", "cpus-per-task", "deadline",
	"delay-boot", "dependency", "distribution", "exclude", "extra-node-info",
	"gpu-bind", "gpu-freq", "gpus", "gpus-per-node", "gpus-per-socket",
	"gpus-per-task", "gres", "gres-flags", "hint", "licenses", "mail-type",
	"mail-user", "mcs-label", "mem", "mem-bind", "mem-per-cpu", "mem-per-gpu",
	"mincpus", "network", "nice", "nodelist", "nodes", "ntasks", "ntasks-per-core",
	"ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket", "partition", "power",
	"prefer", "priority", "profile", "propagate", "qos", "reservation", "signal",
	"sockets-per-node", "switches", "thread-spec", "threads-per-core", "time",
	"time-min", "tmp", "tres-per-task", "wckey", NULL,
};

/* sbatch options without a value (exclusive also takes one). */
static const char *const pbx_res_flags[] = {
	"contiguous", "exclusive", "hold", "overcommit", "oversubscribe", "reboot",
	"spread-job", "use-min-nodes", NULL,
};

/* Options pbx sets itself or that would break the task wrapper. */
static const char *const pbx_res_reserved[] = {
	"array", "chdir", "error", "export", "export-file", "get-user-env", "gid",
	"input", "job-name", "kill-on-invalid-dep", "no-requeue", "open-mode",
	"output", "parsable", "requeue", "test-only", "uid", "wait", "wrap", NULL,
};

/* Every accepted key, for "did you mean". */
static const char *const *pbx_res_all(void)
{
	static const char *all[128];
	size_t n = 0, i;
	if (all[0])
		return all;
	for (i = 0; pbx_res_options[i]; i++)
		all[n++] = pbx_res_options[i];
	for (i = 0; pbx_res_flags[i]; i++)
		all[n++] = pbx_res_flags[i];
	all[n++] = "throttle";
	all[n] = NULL;
	return all;
}

static bool pbx_res_in(const char *const *list, const char *key)
{
	size_t i;
	for (i = 0; list[i]; i++)
		if (!strcmp(list[i], key))
			return true;
	return false;
}

/* Why `key` cannot be used, written into why[size]; 0 when it can. */
static int pbx_res_key_problem(const char *key, char *why, size_t size)
{
	const char *hint;
	if (pbx_res_in(pbx_res_options, key) || pbx_res_in(pbx_res_flags, key) ||
	    !strcmp(key, "throttle"))
		return 0;
	if (pbx_res_in(pbx_res_reserved, key)) {
		snprintf(why, size, "is set by pbx and cannot be given");
		return -1;
	}
	hint = pbx_did_you_mean(key, pbx_res_all());
	if (hint)
		snprintf(why, size, "not an sbatch option pbx passes on (did you mean '%s'?)",
			 hint);
	else
		snprintf(why, size, "not an sbatch option pbx passes on");
	return -1;
}

/*
 * Checks `value` for option `key`; *out gets what to store ("" for a bare
 * flag, NULL for a flag turned off).  Returns 0 or -1 with why[] set.
 */
static int pbx_res_value_problem(const char *key, const char *value, const char **out,
				 char *why, size_t size)
{
	size_t i, len = strlen(value);
	bool flag = pbx_res_in(pbx_res_flags, key);
	*out = value;
	if (flag && (!strcmp(value, "true") || !*value))
		return *out = "", 0;
	if (flag && !strcmp(value, "false"))
		return *out = NULL, 0;
	if (flag && strcmp(key, "exclusive"))
		return snprintf(why, size, "is a flag: give true or false"), -1;
	if (!len)
		return snprintf(why, size, "must not be empty"), -1;
	if (len > PBX_RES_MAX_VALUE)
		return snprintf(why, size, "longer than %d bytes", PBX_RES_MAX_VALUE), -1;
	if (value[0] == '-')
		return snprintf(why, size, "must not start with '-'"), -1;
	for (i = 0; i < len; i++)
		if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
			return snprintf(why, size, "must be one line without control "
					"characters"), -1;
	return 0;
}

/* Parses a throttle value; 0 or -1 with why[]. */
static int pbx_res_throttle(const char *value, int *out, char *why, size_t size)
{
	long v = 0;
	size_t i;
	for (i = 0; value[i] >= '0' && value[i] <= '9' && v <= PBX_RES_MAX_THROTTLE; i++)
		v = v * 10 + (value[i] - '0');
	if (!i || value[i] || v < 1 || v > PBX_RES_MAX_THROTTLE)
		return snprintf(why, size, "must be an integer between 1 and %d",
				PBX_RES_MAX_THROTTLE), -1;
	*out = (int)v;
	return 0;
}

/* Stores key=value (replacing an earlier key; NULL value removes it). */
static void pbx_res_store(struct pbx_experiment *e, const char *key, const char *value)
{
	size_t i;
	for (i = 0; i < e->nresources && strcmp(e->resource_keys[i], key); i++)
		;
	if (i < e->nresources) {
		free(e->resource_keys[i]);
		free(e->resource_values[i]);
		memmove(e->resource_keys + i, e->resource_keys + i + 1,
			(e->nresources - i - 1) * sizeof(char *));
		memmove(e->resource_values + i, e->resource_values + i + 1,
			(e->nresources - i - 1) * sizeof(char *));
		e->nresources--;
	}
	if (!value)
		return;
	e->resource_keys = xreallocarray(e->resource_keys, e->nresources + 1, sizeof(char *));
	e->resource_values = xreallocarray(e->resource_values, e->nresources + 1,
					   sizeof(char *));
	e->resource_keys[e->nresources] = xstrdup(key);
	e->resource_values[e->nresources++] = xstrdup(value);
}

/* Validates and stores one resource; 0 or -1 with why[]. */
static int pbx_res_set(struct pbx_experiment *e, const char *key, const char *value,
		       char *why, size_t size)
{
	const char *store;
	if (pbx_res_key_problem(key, why, size) < 0)
		return -1;
	if (!strcmp(key, "throttle"))
		return pbx_res_throttle(value, &e->throttle, why, size);
	if (pbx_res_value_problem(key, value, &store, why, size) < 0)
		return -1;
	pbx_res_store(e, key, store);
	return 0;
}

int pbx_exp_resources(struct pbx_experiment *e, const struct pbx_ynode *res,
		      struct pbx_err *err)
{
	char why[256];
	size_t i;
	if (!res)
		return 0;
	if (pbx_ynode_expect_map(res, err) < 0)
		return -1;
	for (i = 0; i < res->npairs; i++) {
		const struct pbx_ypair *p = &res->pairs[i];
		if (pbx_res_key_problem(p->key->value, why, sizeof(why)) < 0)
			return pbx_ynode_error(p->key, err, "%s", why);
		if (pbx_exp_scalar(p->value, err) < 0)
			return -1;
		if (pbx_res_set(e, p->key->value, p->value->value, why, sizeof(why)) < 0)
			return pbx_ynode_error(p->value, err, "%s", why);
	}
	return 0;
}

int pbx_experiment_override_resource(struct pbx_experiment *e, const char *key,
				     const char *value, struct pbx_err *err)
{
	char why[256];
	if (pbx_res_set(e, key, value, why, sizeof(why)) < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--%s: %s", key, why);
	return 0;
}

char **pbx_experiment_sbatch_args(const struct pbx_experiment *e, size_t *n)
{
	char **args = xcalloc(e->nresources + 1, sizeof(char *));
	size_t i;
	for (i = 0; i < e->nresources; i++)
		args[i] = e->resource_values[i][0]
			? xasprintf("--%s=%s", e->resource_keys[i], e->resource_values[i])
			: xasprintf("--%s", e->resource_keys[i]);
	*n = e->nresources;
	return args;
}
