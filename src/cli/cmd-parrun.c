/*
 * cmd-parrun.c - `pbx parrun EXPERIMENT CLUSTER [SBATCH OPTIONS]`: push the
 * package once and submit its sweep as job arrays.  `pbx run`
 * (cmd-run.c) is the same for an experiment of one point and shares
 * pbx_parrun_common (parrun_internal.h).
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cli/jobs_cli.h"
#include "cli/parrun_internal.h"
#include "jobs/jobs.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Applies "--key=value", "--key value" and "--flag" arguments as resource
 * overrides.  Returns 0 or an exit code. */
static int parrun_overrides(struct pbx_experiment *e, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	int i;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *eq;
		char *key, *value;
		int rc;
		if (strncmp(a, "--", 2) != 0 || !a[2]) {
			pbx_error("'%s': expected an sbatch option such as --gres=gpu:1", a);
			return PBX_EXIT_USAGE;
		}
		eq = strchr(a, '=');
		if (eq) {
			key = xstrndup(a + 2, (size_t)(eq - a - 2));
			value = xstrdup(eq + 1);
		} else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
			key = xstrdup(a + 2);
			value = xstrdup(argv[++i]);
		} else {
			key = xstrdup(a + 2);
			value = xstrdup("");
		}
		rc = pbx_experiment_override_resource(e, key, value, &err);
		free(key);
		free(value);
		if (rc < 0)
			return pbx_report(&err);
	}
	return 0;
}

static void parrun_print(const struct pbx_parrun_result *r, const struct pbx_experiment *e,
			 const char *cluster, const struct pbx_parrun_hold *h, int json)
{
	size_t i;
	if (json) {
		json_t *o = json_object(), *jobs = json_array();
		for (i = 0; i < r->arrays; i++)
			json_array_append_new(jobs, json_string(r->job_ids[i]));
		json_object_set_new(o, "package", json_string(r->short_id));
		json_object_set_new(o, "id", json_string(r->id));
		json_object_set_new(o, "name", json_string(e->name));
		json_object_set_new(o, "cluster", json_string(cluster));
		json_object_set_new(o, "tasks", json_integer((json_int_t)r->ntasks));
		json_object_set_new(o, "submitted", json_integer((json_int_t)r->submitted));
		json_object_set_new(o, "already_submitted", json_integer((json_int_t)r->skipped));
		json_object_set_new(o, "held", json_integer((json_int_t)r->held));
		json_object_set_new(o, "pool_done", json_integer((json_int_t)h->pool_done));
		json_object_set_new(o, "other_shares", json_integer((json_int_t)h->other_shares));
		json_object_set_new(o, "arrays", jobs);
		json_object_set_new(o, "pushed", json_boolean(r->pushed));
		json_object_set_new(o, "round_trips", json_integer(r->round_trips));
		pbx_print_json(o);
		return;
	}
	printf("package %s (%s) on %s: %zu tasks, %zu submitted now in %zu array%s, "
	       "%zu submitted before%s\n",
	       r->short_id, e->name, cluster, r->ntasks, r->submitted, r->arrays,
	       r->arrays == 1 ? "" : "s", r->skipped,
	       r->pushed ? "; package pushed" : "; package already on the cluster");
	if (r->held)
		printf("%zu task%s held back (%zu done in the pool, %zu of other shares): left NEW; "
		       "a parrun without --skip-done/--split submits them\n",
		       r->held, r->held == 1 ? "" : "s", h->pool_done, h->other_shares);
}

/* A dry run's cluster need not run, but a name nothing knows is worth a
 * word (a typo, or a cluster to start first). */
static void parrun_check_name(struct pbx_ctx *ctx, const char *name)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster_row row = { 0 };
	if (pbx_store_cluster_get(ctx->store, name, &row, &err) == 0) {
		pbx_cluster_row_free(&row);
		return;
	}
	if (pbx_config_template(ctx->cfg, name))
		pbx_warning("cluster %s is not running: 'pbx cluster start %s' before the real "
			    "parrun",
			    name, name);
	else
		pbx_warning("%s: no cluster and no template of that name (pbx cluster list)", name);
}

/* --dry-run's data: sources: listed, and compared with the cluster's
 * copies when the cluster is up (read only). */
static int parrun_dry_data(struct pbx_ctx *ctx, const struct pbx_experiment *e, const char *cluster)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster *c = NULL;
	int rc;
	if (!e->ndata)
		return 0;
	if (pbx_cluster_open(ctx->store, ctx->cfg, cluster, &c, &err) < 0)
		c = NULL;
	rc = pbx_cli_data_stage(ctx, c, e, 1);
	pbx_cluster_close(c);
	return rc;
}

int pbx_parrun_common(struct pbx_ctx *ctx, const struct pbx_cmd *cmd, int argc, char **argv,
		      int single)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_experiment *e = NULL;
	struct pbx_cluster *c = NULL;
	struct pbx_parrun_result r;
	struct pbx_parrun_values v = { 0 };
	struct pbx_parrun_hold h = { 0 };
	int json, i, k, rc;
	char **rest = xcalloc((size_t)argc + 1, sizeof(char *));
	/* -j, -n, --skip-done, --split; the rest passes through */
	if ((rc = pbx_opts_split(cmd, argc, argv, &v, rest, &k))) {
		free(rest);
		return rc;
	}
	json = v.json;            /* k >= 2: the dispatcher counted (min_args) */
	for (i = 2; i < k; i++) { /* the rest: sbatch options, as parrun_overrides reads them */
		if (strncmp(rest[i], "--", 2) != 0 || !rest[i][2]) {
			rc = pbx_usage_error(cmd,
					     "'%s': expected an sbatch option such as "
					     "--gres=gpu:1",
					     rest[i]);
			free(rest);
			return rc;
		}
		if (!strchr(rest[i], '=') && i + 1 < k && strncmp(rest[i + 1], "--", 2) != 0)
			i++; /* --key value */
	}
	if (pbx_experiment_load(rest[0], &e, &err) < 0) {
		free(rest);
		return pbx_report(&err);
	}
	rc = parrun_overrides(e, k - 2, rest + 2);
	if (rc == 0 && single && e->npoints != 1) {
		pbx_error("%s: 'pbx run' runs one point, but the sweep has %zu (use 'pbx parrun')",
			  e->path, e->npoints);
		rc = PBX_EXIT_USAGE;
	}
	if (rc == 0)
		rc = pbx_parrun_hold(ctx, &v, e, &h);
	if (rc == 0 && v.dry_run) {
		parrun_check_name(ctx, rest[1]);
		rc = pbx_parrun_dry_run(e, rest[1], &h, json);
		if (rc == 0 && !json)
			rc = parrun_dry_data(ctx, e, rest[1]);
		pbx_parrun_hold_release(&h);
		pbx_experiment_free(e);
		free(rest);
		return rc;
	}
	/* a cluster not found: pbx_cluster_open says how to start a template's */
	if (rc == 0 && pbx_cluster_open(ctx->store, ctx->cfg, rest[1], &c, &err) < 0)
		rc = pbx_report(&err);
	/* the data first: nothing is recorded or submitted when it fails */
	if (rc == 0)
		rc = pbx_cli_data_stage(ctx, c, e, 0);
	if (rc == 0) {
		if (pbx_jobs_parrun(ctx->store, c, e, h.hold, &r, &err) < 0)
			rc = pbx_report(&err);
		else
			parrun_print(&r, e, rest[1], &h, json);
		if (r.warning)
			pbx_warning("%s", r.warning);
		pbx_parrun_result_free(&r);
	}
	pbx_cluster_close(c);
	pbx_parrun_hold_release(&h);
	pbx_experiment_free(e);
	free(rest);
	return rc;
}

/* These are taken wherever they stand (pbx_opts_split); the sbatch options
 * pass through to parrun_overrides (no table can name them all) */
const struct pbx_option pbx_parrun_opts[] = {
	PBX_OPT_FLAG(
		'j', "json", struct pbx_parrun_values, json,
		"print {\"package\", \"id\", \"name\", \"cluster\", \"tasks\", \"submitted\",\n"
		"\"already_submitted\", \"held\", \"pool_done\", \"other_shares\", \"arrays\",\n"
		"\"pushed\", \"round_trips\"}; with\n"
		"--dry-run {\"dry_run\", \"name\", \"cluster\", \"package\": {\"id\", \"files\",\n"
		"\"bytes\", \"largest\"}, \"tasks\", \"commands\", \"sbatch\", \"environment\", \"notify\"}"),
	PBX_OPT_FLAG('n', "dry-run", struct pbx_parrun_values, dry_run,
		     "send nothing: print the files that would ship (count, size, the\n"
		     "largest), the first tasks' commands, the sbatch options and the\n"
		     "environment"),
	PBX_OPT_STRING(0, "skip-done", "POOL", struct pbx_parrun_values, skip_done,
		       "pull POOL (gs:// or s3://, as 'pbx pull') and submit only the points\n"
		       "it does not hold done: a COMPLETED task of an experiment of this name\n"
		       "with the same parameters, whoever published it"),
	PBX_OPT_STRING(0, "split", "K/N", struct pbx_parrun_values, split,
		       "submit only share K of N of the points (point i is share (i mod N)+1):\n"
		       "N people each take one share of a sweep with no coordination"),
	PBX_OPT_DOC("KEY=VALUE",
		    "any sbatch long option (gres, time, mem, cpus-per-task, nodes,\n"
		    "ntasks-per-node, partition, constraint ...), throttle or launcher\n"
		    "(none, srun, mpi, auto), overriding the experiment's resources"),
	PBX_OPT_END,
};

static int cmd_parrun_exec(struct pbx_ctx *ctx, int argc, char **argv);

const struct pbx_cmd pbx_cmd_parrun = {
	.name = "parrun",
	.summary = "push an experiment and submit its parameter sweep as SLURM job arrays",
	.usage = "pbx parrun [-j] [-n] EXPERIMENT CLUSTER [--skip-done POOL] [--split K/N]\n"
		 "           [--SBATCH-OPTION=VALUE ...]",
	.description = "Expands the sweep of EXPERIMENT (a YAML file, see pbx-experiment(5)),\n"
		       "packages the code next to it (content-addressed: an identical package is\n"
		       "pushed once per cluster) and submits one array task per sweep point, in\n"
		       "arrays sized from the cluster's MaxArraySize and MaxJobCount, with\n"
		       "--requeue.  Where SLURM's accounting database sets your job submit\n"
		       "limit (MaxSubmitJobs: each array task counts), it submits only what the\n"
		       "limit lets in and leaves the rest NEW, saying so.\n"
		       "Running it again submits only what was not submitted yet.\n"
		       "A task that exits 75 (checkpointed) is requeued and runs again.\n"
		       "Two SSH round trips, whatever the number of tasks (a few more when\n"
		       "sbatch refuses an array for a job count limit pbx could not read: it\n"
		       "tries smaller arrays, then leaves the rest NEW, quoting sbatch).",
	.args = "FILE CLUSTER",
	.options = pbx_parrun_opts,
	.examples =
		"pbx parrun templates/experiments/sweep-demo/experiment.yaml local --gres=gpu:1\n"
		"pbx parrun --dry-run templates/experiments/sweep-demo/experiment.yaml gce\n"
		"pbx parrun train.conf gce --time=01:00:00 --json\n"
		"pbx parrun hw3.yaml gce --skip-done gs://stats285-f26/hw3 --split 2/5",
	.flags = PBX_ARGS_SPLIT | PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 2,
	.max_args = PBX_ARGS_MANY,
	.exec = cmd_parrun_exec,
};

static int cmd_parrun_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	return pbx_parrun_common(ctx, &pbx_cmd_parrun, argc, argv, 0);
}
