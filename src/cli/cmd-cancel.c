/*
 * cmd-cancel.c - `pbx cancel PKG[:TASK]`: scancel a package's arrays, or
 * one task.
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "jobs/jobs.h"

#include <stdio.h>
#include <stdlib.h>

extern const struct pbx_cmd pbx_cmd_cancel;

static int cmd_cancel_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_jobs_target t;
	char *pkg;
	long task;
	int rc;
	(void)argc; /* one PKG[:TASK]: the dispatcher counted */
	if (pbx_cli_pkg_task(argv[1], &pkg, &task) < 0)
		return PBX_EXIT_USAGE;
	rc = pbx_jobs_target(ctx->store, ctx->cfg, pkg, 1, &t, &err);
	free(pkg);
	if (rc == 0)
		rc = pbx_jobs_cancel(ctx->store, &t, task, &err);
	if (rc == 0)
		rc = pbx_jobs_refresh(ctx->store, &t, &err);
	if (rc == 0 && task >= 0)
		pbx_info("cancelled task %ld of %s", task, t.pkg.short_id);
	else if (rc == 0)
		pbx_info("cancelled every task of %s", t.pkg.short_id);
	pbx_jobs_target_free(&t);
	return rc < 0 ? pbx_report(&err) : 0;
}

const struct pbx_cmd pbx_cmd_cancel = {
	.name = "cancel",
	.summary = "cancel the tasks of an experiment, or one task",
	.usage = "pbx cancel PKG[:TASK]",
	.description = "Cancels every job of the package in SLURM (its arrays and, with an\n"
		       "environment: in the experiment, the environment's build job), or one\n"
		       "task's array element.  The tasks read CANCELLED in 'pbx state'; 'pbx\n"
		       "rerun' submits them again.",
	.args = "TASK",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cancel_exec,
};
