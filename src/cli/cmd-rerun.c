/*
 * cmd-rerun.c - `pbx rerun --failed PKG` / `pbx rerun PKG:TASK`: refresh,
 * then resubmit only the tasks that failed or went missing.
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "jobs/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct pbx_cmd pbx_cmd_rerun;

struct rerun_opts {
	int failed;
};

static const struct pbx_option rerun_opts[] = {
	PBX_OPT_FLAG(0, "failed", struct rerun_opts, failed,
		     "resubmit every task that is FAILED, CANCELLED, TIMEOUT, PREEMPTED,\n"
		     "NODE_FAIL, OUT_OF_MEMORY or MISSING (COMPLETED tasks never run again)"),
	PBX_OPT_END,
};

static int cmd_rerun_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_jobs_target t;
	struct rerun_opts o = { 0 };
	const char *ref;
	int failed, first, rc;
	size_t count = 0;
	char *pkg;
	long task;
	if ((rc = pbx_opts_parse(&pbx_cmd_rerun, argc, argv, &o, &first)))
		return rc;
	failed = o.failed;
	if (first == argc)
		return pbx_usage_error(&pbx_cmd_rerun, "expected PKG");
	if (argc - first > 1)
		return pbx_usage_error(&pbx_cmd_rerun, "unexpected argument '%s'", argv[first + 1]);
	ref = argv[first];
	if (pbx_cli_pkg_task(ref, &pkg, &task) < 0)
		return PBX_EXIT_USAGE;
	if (task < 0 && !failed) {
		free(pkg);
		return pbx_usage_error(&pbx_cmd_rerun,
				       "say --failed, or name one task as PKG:TASK");
	}
	rc = pbx_jobs_target(ctx->store, ctx->cfg, pkg, 1, &t, &err);
	free(pkg);
	if (rc == 0)
		rc = pbx_jobs_refresh(ctx->store, &t, &err);
	if (rc == 0)
		rc = pbx_jobs_rerun(ctx->store, &t, task, &count, &err);
	if (rc == 0)
		printf("resubmitted %zu task%s of %s\n", count, count == 1 ? "" : "s",
		       t.pkg.short_id);
	pbx_jobs_target_free(&t);
	return rc < 0 ? pbx_report(&err) : 0;
}

const struct pbx_cmd pbx_cmd_rerun = {
	.name = "rerun",
	.summary = "resubmit the failed or missing tasks of an experiment",
	.usage = "pbx rerun --failed PKG\npbx rerun PKG:TASK",
	.description = "Refreshes the task states first (as 'pbx state' does), then submits the\n"
		       "chosen tasks again with the options the last parrun used (resources\n"
		       "and overrides, throttle, launcher): one round trip to probe the\n"
		       "cluster's limits, one to submit.  --failed takes every task that\n"
		       "ended without completing; PKG:TASK that one task however it ended\n"
		       "(a COMPLETED one runs again too), and is refused while it is still\n"
		       "pending or running.",
	.args = "TASK",
	.options = rerun_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.exec = cmd_rerun_exec,
};
