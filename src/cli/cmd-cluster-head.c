/*
 * cmd-cluster-head.c - the head's plumbing, internal subcommands pbx runs
 * itself: `pbx cluster power` (SLURM's power saving makes and removes
 * nodes), `record` and `adopt` (a cluster's record handed to the head's
 * own store), `runs` (the head's runs of the nodes that may sleep,
 * read back for the spend; docs/power-saving.md) and `data` (a bucket
 * staged by the head with its own identity; docs/data.md).
 */
#include "cli/cluster_cli.h"
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "jobs/data.h"
#include "objstore/objstore.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- power */

static int cmd_cluster_power_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	int i;
	if (strcmp(argv[2], "resume") != 0 && strcmp(argv[2], "suspend") != 0)
		return pbx_usage_error(&pbx_cmd_cluster_power,
				       "expected resume or suspend, got '%s'", argv[2]);
	if ((i = pbx_cli_cluster_not_users(ctx, argv[1], "power")))
		return i;
	if (pbx_cluster_power(ctx->store, ctx->cfg, argv[1], argv[2], argv + 3, (size_t)(argc - 3),
			      &err) < 0)
		return pbx_report(&err);
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_power = {
	.name = "power",
	.summary = "make or remove power-saving nodes (what SLURM's power saving runs)",
	.usage = "pbx cluster power NAME resume|suspend NODE...",
	.description =
		"A node group with min: below its count has nodes that exist only while\n"
		"jobs need them (docs/power-saving.md; local, gce and aws clusters).\n"
		"SLURM runs this (on a cloud, the head's own pbx, pbx-head, does) through\n"
		"the head's pbx-resume (its ResumeProgram) when jobs wait for\n"
		"such nodes, and pbx-suspend (its SuspendProgram) when they have been idle\n"
		"for slurm.suspend_time: resume makes and bootstraps the named asleep nodes\n"
		"(a failure removes what it made and marks them DOWN in SLURM with the\n"
		"reason, so their jobs are requeued); suspend removes their instances and\n"
		"puts them to sleep.  A name that is not such a node (the head, a node that\n"
		"always runs, no node at all) is a usage error (exit 2): nothing is done.",
	.args = "CLUSTER",
	.flags = PBX_HIDE_USAGE | PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 3,
	.max_args = PBX_ARGS_MANY,
	.exec = cmd_cluster_power_exec,
};

/* --------------------------------------------------------- record, adopt */

static int cmd_cluster_record_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *json = NULL;
	(void)argc;
	if (pbx_cluster_record(ctx->store, ctx->cfg, argv[1], &json, &err) < 0)
		return pbx_report(&err);
	printf("%s\n", json);
	free(json);
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_record = {
	.name = "record",
	.summary = "print a cluster's record, for another pbx to adopt (internal)",
	.usage = "pbx cluster record NAME",
	.description =
		"Prints what this store knows of cluster NAME as one JSON document: its\n"
		"row (name, id, cloud, state, template, slot), every node (asleep ones too:\n"
		"name, role, address, public_address, ssh_port, gpus, instance_id, root,\n"
		"state, zone) and the host keys pinned for them.  'pbx cluster adopt' on\n"
		"another store takes it in: made for pbx on a cluster's head, which runs\n"
		"SLURM's power saving from a store of its own (docs/power-saving.md).  It\n"
		"holds no secret: host keys are public.",
	.args = "CLUSTER",
	.flags = PBX_HIDE_USAGE | PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_record_exec,
};

#define CLUSTER_RECORD_MAX (64u << 20) /* bytes of a record file */

static int cmd_cluster_adopt_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_buf text = PBX_BUF_INIT;
	char *name = NULL;
	(void)argc;
	if (pbx_read_regular(argv[1], CLUSTER_RECORD_MAX, &text, NULL, &err) < 0 ||
	    pbx_cluster_adopt(ctx->store, text.buf ? text.buf : "", text.len, argv[1], &name,
			      &err) < 0) {
		pbx_buf_release(&text);
		return pbx_report(&err);
	}
	pbx_info("adopted cluster %s from %s", name, argv[1]);
	free(name);
	pbx_buf_release(&text);
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_adopt = {
	.name = "adopt",
	.summary = "take in a cluster's record from another pbx (internal)",
	.usage = "pbx cluster adopt FILE",
	.description =
		"Makes the cluster of FILE (what 'pbx cluster record' prints) this store's,\n"
		"for pbx on the cluster's head (docs/power-saving.md): the same name, id,\n"
		"cloud, template and slot, its nodes without their public addresses (this\n"
		"pbx reaches every node at its private address) and their host keys, pinned\n"
		"under those addresses.  Adopting the same cluster (its id) again replaces\n"
		"its nodes and host keys.  FILE is checked whole before anything is written:\n"
		"another version, a missing, unknown or mistyped field, or a value pbx would\n"
		"not write itself (a node name, an address, a path) is refused with the\n"
		"field named, exit 2; a name held here by a cluster of another id is\n"
		"refused, exit 1.  Either way the store is left as it was.",
	.args = "FILE",
	.flags = PBX_HIDE_USAGE | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_adopt_exec,
};

/* ----------------------------------------------------------------- runs */

static int cmd_cluster_runs_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *json = NULL;
	(void)argc;
	if (pbx_head_runs_json(ctx->store, ctx->cfg, argv[1], &json, &err) < 0)
		return pbx_report(&err);
	printf("%s\n", json);
	free(json);
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_runs = {
	.name = "runs",
	.summary = "print the runs of a cluster's nodes that may sleep (internal)",
	.usage = "pbx cluster runs NAME",
	.description = "Prints this store's runs of cluster NAME's nodes that may sleep (power\n"
		       "saving: a group's nodes above its min:) as one JSON document:\n"
		       "{\"version\": 1, \"cluster\": NAME, \"id\": ID, \"runs\": [{\"node\",\n"
		       "\"started\", \"ended\"}, ...]}, oldest first, times in unix seconds,\n"
		       "ended null while the node runs.  On a cloud the head's pbx makes those\n"
		       "nodes and records their runs; 'pbx cluster show' and 'pbx state' on the\n"
		       "user's side run this there and take the runs into their own store, so\n"
		       "the cluster's spend counts them exactly (docs/cost.md).",
	.args = "CLUSTER",
	.flags = PBX_HIDE_USAGE | PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_runs_exec,
};

/* ----------------------------------------------------------------- data */

/* With PBX_DATA_PROGRESS set (by the user's pbx, which shows them):
 * progress lines on stdout, {"progress": {"key", "done", "total",
 * "bytes"}}, at most 4 a second and the last one always. */
static void head_data_progress(void *ctx, const char *key, size_t done, size_t total,
			       uint64_t bytes, uint64_t sending)
{
	struct timespec *last = ctx, now;
	json_t *o;
	char *line;
	(void)sending; /* none: the head links what it downloaded */
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (done < total && last->tv_sec &&
	    (now.tv_sec - last->tv_sec) * 1000 + (now.tv_nsec - last->tv_nsec) / 1000000 < 250)
		return;
	*last = now;
	o = json_pack("{s:{s:s, s:I, s:I, s:I}}", "progress", "key", key, "done", (json_int_t)done,
		      "total", (json_int_t)total, "bytes", (json_int_t)bytes);
	line = json_dumps(o, JSON_COMPACT);
	printf("%s\n", line);
	fflush(stdout);
	free(line);
	json_decref(o);
}

/* Stages sources keys[0..n) on c as an experiment naming them would. */
static int cluster_data_stage(struct pbx_ctx *ctx, struct pbx_cluster *c, char **keys, size_t n)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_exp_data *d = xcalloc(n, sizeof(*d));
	struct pbx_experiment e = { 0 };
	struct timespec last = { 0, 0 };
	const char *want = getenv("PBX_DATA_PROGRESS");
	struct pbx_data_opts o = { .cfg = ctx->cfg,
				   .progress = want && *want ? head_data_progress : NULL,
				   .ctx = &last };
	struct pbx_data_result *res = NULL;
	size_t nres = 0, i;
	int rc;
	for (i = 0; i < n; i++) {
		d[i].from = keys[i];
		d[i].to = "data";
		d[i].is_url = 1;
	}
	e.data = d;
	e.ndata = n;
	rc = pbx_data_stage(c, &e, &o, &res, &nres, &err) < 0 ? pbx_report(&err) : 0;
	for (i = 0; rc == 0 && i < nres; i++) {
		char *json = pbx_data_result_json(&res[i]);
		printf("%s\n", json);
		free(json);
	}
	pbx_data_results_free(res, nres);
	free(d);
	return rc;
}

static int cmd_cluster_data_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster *c = NULL;
	int rc, i;
	for (i = 2; i < argc; i++) { /* every source a bucket URL, before anything is done */
		struct pbx_objstore_url u;
		if (pbx_objstore_url_parse(argv[i], &u, &err) < 0)
			return pbx_usage_error(&pbx_cmd_cluster_data, "%s", err.msg);
		pbx_objstore_url_free(&u);
	}
	if (pbx_cluster_open(ctx->store, ctx->cfg, argv[1], &c, &err) < 0)
		return pbx_report(&err);
	rc = cluster_data_stage(ctx, c, argv + 2, (size_t)(argc - 2));
	pbx_cluster_close(c);
	return rc;
}

const struct pbx_cmd pbx_cmd_cluster_data = {
	.name = "data",
	.summary = "stage buckets on a cluster with this machine's identity (internal)",
	.usage = "pbx cluster data NAME URL...",
	.description =
		"Stages each gs:// or s3:// prefix URL on cluster NAME as an experiment's\n"
		"data: would (docs/data.md), with the credentials this pbx finds, and prints\n"
		"one JSON line a source: {\"id\", \"key\", \"objects\", \"bytes\", \"changed\",\n"
		"\"removed\", \"bytes_moved\", \"downloads\", \"staged_before\", \"seconds\"}.\n"
		"With PBX_DATA_PROGRESS set, lines {\"progress\": {\"key\", \"done\", \"total\",\n"
		"\"bytes\"}} come before them (4 a second at most), for the user's terminal.\n"
		"The user's pbx runs it on a head with its own identity (head.service_account,\n"
		"head.instance_profile), through pbx-head: the head reads its cloud's buckets\n"
		"itself, and no credential of the user's reaches it.",
	.args = "CLUSTER",
	.flags = PBX_HIDE_USAGE | PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 2,
	.max_args = PBX_ARGS_MANY,
	.exec = cmd_cluster_data_exec,
};
