/*
 * cmd-run.c - `pbx run EXPERIMENT CLUSTER [SBATCH OPTIONS]`: `pbx parrun`
 * (cmd-parrun.c) for an experiment whose sweep has exactly one point.
 */
#include "cli/cmd.h"
#include "cli/parrun_internal.h"

static int cmd_run_exec(struct pbx_ctx *ctx, int argc, char **argv);

const struct pbx_cmd pbx_cmd_run = {
	.name = "run",
	.summary = "parrun for an experiment with a single point",
	.usage = "pbx run [-j] EXPERIMENT CLUSTER [--SBATCH-OPTION=VALUE ...]",
	.description = "Like 'pbx parrun', for an experiment whose sweep has exactly one point.",
	.args = "FILE CLUSTER",
	.options = pbx_parrun_opts,
	.flags = PBX_ARGS_SPLIT | PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 2,
	.max_args = PBX_ARGS_MANY,
	.exec = cmd_run_exec,
};

static int cmd_run_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	return pbx_parrun_common(ctx, &pbx_cmd_run, argc, argv, 1);
}
