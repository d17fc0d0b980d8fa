/*
 * cmd-forget.c - `pbx forget PKG`: drop a package from the store (`pbx
 * ls`, `state`, `harvest` and `report` no longer list it), keeping its
 * results at home unless asked.  A package whose results are not all home
 * on a cluster that still runs is refused, as `pbx cluster stop` refuses
 * (after a cluster is gone its packages stay listed forever).
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "jobs/jobs.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const struct pbx_cmd pbx_cmd_forget;

struct forget_opts {
	int discard, delete_results;
};

static const struct pbx_option forget_opts[] = {
	PBX_OPT_FLAG(0, "discard-results", struct forget_opts, discard,
		     "forget it even when its results are not all home (tasks not ended,\n"
		     "or ended and not harvested, as last seen)"),
	PBX_OPT_FLAG(0, "delete-results", struct forget_opts, delete_results,
		     "also delete its results at home ($PBX_HOME/results/PKG)"),
	PBX_OPT_END,
};

static int cmd_forget_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_jobs_target t;
	struct forget_opts o = { 0 };
	long live, ended;
	char *results;
	int first, rc;
	if ((rc = pbx_opts_parse(&pbx_cmd_forget, argc, argv, &o, &first)))
		return rc;
	if (pbx_jobs_target(ctx->store, ctx->cfg, argv[first], 0, &t, &err) < 0)
		return pbx_report(&err);
	if (strcmp(t.sub.cluster_state, "deleted") != 0 && !o.discard &&
	    pbx_cli_results_pending(ctx->store, t.sub.cluster_id, t.sub.id, &live, &ended)) {
		pbx_error("package %s (%s) on cluster %s has results that are not home: %ld task%s "
			  "not ended, %ld ended and not harvested (as last seen; 'pbx state %s' "
			  "looks again); 'pbx harvest %s' brings them home, or forget it anyway "
			  "with --discard-results",
			  t.pkg.short_id, t.pkg.name, t.sub.cluster_name, live,
			  live == 1 ? "" : "s", ended, t.pkg.short_id, t.pkg.short_id);
		pbx_jobs_target_free(&t);
		return PBX_EXIT_SECURITY;
	}
	results = xasprintf("%s/results/%s", pbx_home(), t.pkg.short_id);
	rc = pbx_store_package_forget(ctx->store, t.pkg.id, &err);
	if (rc == 0 && o.delete_results && access(results, F_OK) == 0)
		rc = pbx_rm_rf(results, &err);
	if (rc == 0) {
		pbx_info("forgot package %s (%s)", t.pkg.short_id, t.pkg.name);
		if (!o.delete_results && access(results, F_OK) == 0)
			pbx_info("its results stay in %s", results);
		if (strcmp(t.sub.cluster_state, "deleted") != 0)
			pbx_info("its run directory on cluster %s is left as it is",
				 t.sub.cluster_name);
	}
	free(results);
	pbx_jobs_target_free(&t);
	return rc < 0 ? pbx_report(&err) : 0;
}

const struct pbx_cmd pbx_cmd_forget = {
	.name = "forget",
	.summary = "drop an experiment's package from the store (its results stay)",
	.usage = "pbx forget [--discard-results] [--delete-results] PKG",
	.description =
		"Removes package PKG (an id prefix or an experiment name) and all the store\n"
		"keeps of it: its submissions, tasks, metrics and harvested-file records;\n"
		"'pbx ls', 'state', 'harvest' and 'report' no longer list it.  Its results\n"
		"at home ($PBX_HOME/results/PKG) stay unless --delete-results, and its run\n"
		"directory on the cluster is not touched.  A package on a cluster that\n"
		"still runs, with tasks not ended or not harvested (as last seen), is\n"
		"refused (exit 4), as 'pbx cluster stop' refuses, unless --discard-results.",
	.args = "PKG",
	.options = forget_opts,
	.examples = "pbx forget sweep-demo\n"
		    "pbx forget --delete-results 3f2a9c0d1e2b",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_forget_exec,
};
