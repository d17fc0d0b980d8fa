/*
 * cmd-rerun.c - `pbx rerun --failed PKG` / `pbx rerun PKG:TASK`: refresh,
 * then resubmit only the tasks that failed or went missing.
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "experiment/package.h"
#include "jobs/jobs.h"

#include "util/xalloc.h"
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The package's data: sources staged again (as the package's experiment
 * file says; a local directory relative to where that file was), so a
 * rerun reads the data as it is now.  Returns 0 or the exit code. */
static int rerun_data(struct pbx_ctx *ctx, struct pbx_jobs_target *t)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_experiment *e = NULL;
	const char *text = t->pkg.experiment_text;
	char *copy, *dir;
	int rc;
	if (!text || !strstr(text, "data"))
		return 0;
	copy = xstrdup(t->pkg.experiment_path ? t->pkg.experiment_path : ".");
	dir = realpath(dirname(copy), NULL);
	rc = pbx_experiment_parse(t->pkg.experiment_path ? t->pkg.experiment_path
							 : "experiment.yaml",
				  text, strlen(text), dir ? dir : ".", &e, &err);
	free(dir);
	free(copy);
	if (rc < 0)
		return pbx_report(&err);
	rc = pbx_cli_data_stage(ctx, t->cluster, e, 0);
	pbx_experiment_free(e);
	return rc;
}

/* A rerun runs the package as it was made.  When the experiment's files
 * have changed since (the user fixed the code, then reran), say so: the
 * fix goes out with a new package, made by parrun.  Quiet when the
 * experiment file is gone or cannot be read now. */
static void rerun_warn_changed(const struct pbx_jobs_target *t)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_experiment *e = NULL;
	struct pbx_package *p = NULL;
	if (!t->pkg.experiment_path || access(t->pkg.experiment_path, R_OK) != 0 ||
	    pbx_experiment_load(t->pkg.experiment_path, &e, &err) < 0)
		return;
	if (pbx_package_build(e, &p, &err) == 0 && strcmp(p->id, t->pkg.id) != 0)
		pbx_warning("%s or the files next to it changed since package %s was made: the "
			    "rerun runs %s as it was; 'pbx parrun %s %s' makes a new package with "
			    "your changes",
			    t->pkg.experiment_path, t->pkg.short_id, t->pkg.short_id,
			    t->pkg.experiment_path, t->sub.cluster_name);
	pbx_package_free(p);
	pbx_experiment_free(e);
}

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
	int drc;
	if ((rc = pbx_opts_parse(&pbx_cmd_rerun, argc, argv, &o, &first)))
		return rc;
	failed = o.failed;
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
	if (rc == 0 && (drc = rerun_data(ctx, &t)) != 0) {
		pbx_jobs_target_free(&t);
		return drc;
	}
	if (rc == 0)
		rc = pbx_jobs_rerun(ctx->store, &t, task, &count, &err);
	if (rc == 0) {
		printf("resubmitted %zu task%s of %s\n", count, count == 1 ? "" : "s",
		       t.pkg.short_id);
		rerun_warn_changed(&t);
	}
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
		       "pending or running.  A rerun runs the package as it was made: when\n"
		       "the experiment's files have changed since, it says so (the changes go\n"
		       "out with 'pbx parrun', which makes a new package).",
	.args = "TASK",
	.options = rerun_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_rerun_exec,
};
