/*
 * parrun_internal.h - what `pbx parrun` (cmd-parrun.c) shares with `pbx run`
 * (cmd-run.c): the option table and the whole verb, which `run` calls with
 * single = 1 (the sweep must have exactly one point).
 */
#ifndef PBX_CLI_PARRUN_INTERNAL_H
#define PBX_CLI_PARRUN_INTERNAL_H

#include "cli/cmd.h"

/* Where pbx_parrun_opts puts its options (the sbatch options pass
 * through) */
struct pbx_parrun_values {
	int json, dry_run;
	const char *skip_done; /* --skip-done POOL */
	const char *split;     /* --split K/N */
};

/* What --skip-done and --split hold back (parrun_hold.c): per point, 1 =
 * not submitted now. */
struct pbx_parrun_hold {
	unsigned char *hold; /* e->npoints entries, or NULL: nothing held (owned) */
	size_t pool_done;    /* points the pool holds done */
	size_t other_shares; /* points of the other shares of --split */
};

/* Fills *h from v's --skip-done (pulling the pool first, as `pbx pull`
 * does, a dry run too) and --split.  Returns 0 or the exit code (after
 * saying why).  Release with pbx_parrun_hold_release. */
struct pbx_experiment;
int pbx_parrun_hold(struct pbx_ctx *ctx, const struct pbx_parrun_values *v,
		    const struct pbx_experiment *e, struct pbx_parrun_hold *h);
void pbx_parrun_hold_release(struct pbx_parrun_hold *h);
extern const struct pbx_option pbx_parrun_opts[];

/* Runs `pbx parrun` (single = 0) or `pbx run` (single = 1) with argv as the
 * dispatcher hands it (argv[0] is the verb); cmd names the verb in usage
 * errors.  Returns the exit code. */
int pbx_parrun_common(struct pbx_ctx *ctx, const struct pbx_cmd *cmd, int argc, char **argv,
		      int single);

/* --dry-run (parrun_plan.c): prints what parrun would ship and submit
 * for e on `cluster` (as text, or JSON), sending nothing.  Returns the
 * exit code. */
int pbx_parrun_dry_run(const struct pbx_experiment *e, const char *cluster,
		       const struct pbx_parrun_hold *h, int json);

#endif
