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
#include <strings.h>

/* What users write for an sbatch option under another name (other
 * schedulers' words, or the option's long form), pairs of wrong, right. */
static const char *const res_aliases[] = {
	"memory",        "mem",       "ram",           "mem",           "walltime",
	"time",          "timeout",   "time",          "time_limit",    "time",
	"queue",         "partition", "cpus",          "cpus-per-task", "ncpus",
	"cpus-per-task", "threads",   "cpus-per-task", "tasks",         "ntasks",
	"gpu",           "gres",      "project",       "account",       NULL,
};

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
	hint = NULL;
	for (k = res_aliases; !hint && *k; k += 2)
		if (!strcasecmp(*k, key))
			hint = k[1];
	if (!hint)
		hint = pbx_did_you_mean(key, pbx_sbatch_known_keys());
	if (hint)
		snprintf(why, size, "not an sbatch option pbx passes on (did you mean '%s'?)",
			 hint);
	else
		snprintf(why, size, "not an sbatch option pbx passes on");
	return -1;
}

/* Whether `s` is a SLURM time (sbatch --time): MINUTES, MINUTES:SECONDS,
 * HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES,
 * DAYS-HOURS:MINUTES:SECONDS, or UNLIMITED / INFINITE. */
static int res_time_ok(const char *s)
{
	size_t groups = 0, digits;
	int days = 0;
	if (!strcasecmp(s, "UNLIMITED") || !strcasecmp(s, "INFINITE"))
		return 1;
	for (;;) {
		for (digits = 0; s[digits] >= '0' && s[digits] <= '9'; digits++)
			;
		if (!digits || digits > 9)
			return 0;
		s += digits;
		if (*s == '-' && !days && !groups) {
			days = 1;
			s++;
			continue;
		}
		groups++;
		if (!*s)
			break;
		if (*s++ != ':' || groups == 3)
			return 0;
	}
	return groups <= 3;
}

/* Whether s has no control character (else sbatch.c says what is wrong,
 * and it is not echoed here). */
static int res_printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

/* Validates and stores one resource; 0 or -1 with why[]. */
static int res_set(struct pbx_experiment *e, const char *key, const char *value, char *why,
		   size_t size)
{
	if (res_key_problem(key, why, size) < 0)
		return -1;
	if ((!strcmp(key, "time") || !strcmp(key, "time-min")) && res_printable(value) &&
	    !res_time_ok(value))
		return snprintf(why, size,
				"'%.40s' is not a SLURM time: want MINUTES, HH:MM:SS, "
				"DAYS-HH[:MM[:SS]] or UNLIMITED (e.g. 90, 01:30:00, 2-00)",
				value),
		       -1;
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
