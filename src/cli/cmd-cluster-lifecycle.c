/*
 * cmd-cluster-lifecycle.c - `pbx cluster start|stop|resize`: a cluster
 * made, repaired, resized and deleted (src/cluster does the work).  Thin:
 * parses, calls src/cluster, prints.  Progress is a per-node display on
 * stderr (live on a terminal, plain lines otherwise, nothing with -q); a
 * dry run prints the cloud API requests it would send.
 */
#include "cli/cluster_cli.h"
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "jobs/jobs.h"
#include "util/duration.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int pbx_cli_cluster_not_users(const struct pbx_ctx *ctx, const char *name, const char *verb)
{
	const struct pbx_cluster_template *t = pbx_config_template(ctx->cfg, name);
	char *login;
	if (!t || strcmp(t->cloud, "ssh") != 0)
		return 0;
	login = pbx_template_login(t);
	pbx_error("cluster %s is not pbx's to %s: it is an existing cluster (cloud ssh) that "
		  "pbx uses as it is, through %s; parrun, state, log, cancel, rerun and "
		  "harvest work on it",
		  name, verb, login);
	free(login);
	return PBX_EXIT_USAGE;
}

/* ------------------------------------------------------------- progress */

/* The display of a start, resize or stop.  A start's title ("starting" or
 * "checking" cluster NAME) is made when its display starts: was_up is
 * known by then. */
struct cluster_progress {
	struct pbx_progress *p;
	const char *title;
	const char *name;  /* a start's cluster, with was_up */
	const int *was_up; /* NULL: `title` as it is */
	char *own_title;   /* owned: the start's title */
};

static void cluster_progress_nodes(void *ctx, size_t n, const char *const *names)
{
	struct cluster_progress *cp = ctx;
	pbx_progress_free(cp->p); /* a resize has two phases: a display each */
	if (cp->was_up) {
		free(cp->own_title);
		cp->own_title =
			xasprintf("%s cluster %s", *cp->was_up ? "checking" : "starting", cp->name);
		cp->title = cp->own_title;
	}
	cp->p = pbx_progress_new(cp->title, n, names);
}

static void cluster_progress_stage(void *ctx, size_t i, const char *stage)
{
	struct cluster_progress *cp = ctx;
	pbx_progress_set(cp->p, i, stage);
}

/* ------------------------------------------------------------- dry run */

/* One request a dry run would send: "METHOD URL" and the body on a line
 * of its own, or with --json one object {"method", "url", "body"} a line
 * (body parsed back into JSON when it is JSON). */
static void cluster_print_request(void *ctx, const char *method, const char *url, const char *body)
{
	int as_json = *(const int *)ctx;
	if (as_json) {
		json_t *b = body ? json_loads(body, 0, NULL) : json_null();
		json_t *o = json_pack("{s:s, s:s, s:o}", "method", method, "url", url, "body",
				      b ? b : json_string(body));
		char *line = json_dumps(o, JSON_COMPACT);
		printf("%s\n", line);
		free(line);
		json_decref(o);
	} else {
		printf("%s %s\n", method, url);
		if (body)
			printf("  %s\n", body);
	}
}

/* Says (on stderr, so a dry run's --json output stays one request a line)
 * which blocks reach port 22 of a cluster built from template record
 * `json` (freed here; NULL: nothing to say). */
static void cluster_print_exposure(char *json)
{
	char *line = json ? pbx_template_ssh_exposure(json) : NULL;
	if (line)
		pbx_info("%s", line);
	free(line);
	free(json);
}

/* ---------------------------------------------------------------- start */

struct start_opts {
	const char *tmpl, *autostop;
	int dry_run, json;
};

static const struct pbx_option cluster_start_opts[] = {
	PBX_OPT_STRING('t', "template", "TEMPLATE", struct start_opts, tmpl,
		       "build from TEMPLATE instead of the template named NAME"),
	PBX_OPT_FLAG('n', "dry-run", struct start_opts, dry_run,
		     "send nothing: a summary (where, instances by kind, image, disks,\n"
		     "network, what the image lacks) on stderr, then the cloud API\n"
		     "requests creation would send"),
	PBX_OPT_FLAG('j', "json", struct start_opts, json,
		     "with --dry-run: one JSON object {method, url, body} per line"),
	PBX_OPT_STRING(0, "autostop", "DURATION", struct start_opts, autostop,
		       "power the cluster off after DURATION idle (no SLURM job, no SSH "
		       "session), disks kept; 30m, 2h, off; recorded with the cluster "
		       "(default: the template's autostop)"),
	PBX_OPT_END,
};

/* `start --dry-run`: the requests, then who may reach the nodes. */
static int cluster_start_dry(struct pbx_ctx *ctx, const struct pbx_cluster_target *tg, int as_json)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_cluster_start_dry(ctx->store, ctx->cfg, tg, cluster_print_request, &as_json, &err) <
	    0)
		return pbx_report(&err);
	cluster_print_exposure(pbx_cluster_dry_template_json(tg));
	return 0;
}

static int cmd_cluster_start_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct start_opts so = { 0 };
	struct cluster_progress cp = { 0 };
	struct pbx_cluster_events ev = { cluster_progress_nodes, cluster_progress_stage, &cp };
	struct pbx_cluster_target tg;
	struct pbx_err err = PBX_ERR_INIT;
	struct timespec t0, t1;
	double secs;
	long autostop = -1;
	int rc, was_up = 0, first;
	if ((rc = pbx_opts_parse(&pbx_cmd_cluster_start, argc, argv, &so, &first)))
		return rc;
	if (so.autostop && pbx_autostop_parse(so.autostop, 10, PBX_AUTOSTOP_MAX_S, &autostop) < 0)
		return pbx_usage_error(&pbx_cmd_cluster_start,
				       "--autostop: '%s' is not a duration "
				       "from 10s to 30d (90s, 30m, 2h, 1h30m; a bare number is "
				       "minutes) or off",
				       so.autostop);
	if (so.json && !so.dry_run)
		return pbx_usage_error(&pbx_cmd_cluster_start, "--json goes with --dry-run");
	if ((rc = pbx_cli_cluster_not_users(ctx, so.tmpl ? so.tmpl : argv[first], "start")))
		return rc;
	if (pbx_cluster_target_resolve(ctx->store, ctx->cfg, argv[first], so.tmpl, &tg, &err) < 0)
		return pbx_report(&err);
	pbx_cli_cluster_price_note(ctx, &tg);
	if (so.dry_run) {
		if (tg.t)
			pbx_cli_cluster_plan(ctx->cfg, tg.t, argv[first]);
		rc = cluster_start_dry(ctx, &tg, so.json);
		pbx_cluster_target_release(&tg);
		return rc;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cp.was_up = &was_up; /* known when the display starts (ev.nodes) */
	cp.name = argv[first];
	rc = pbx_cluster_start(ctx->store, ctx->cfg, &tg, (int)autostop, &was_up, &ev, &err);
	pbx_cluster_target_release(&tg);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pbx_progress_free(cp.p);
	free(cp.own_title);
	if (rc < 0)
		return pbx_report(&err);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (was_up)
		pbx_info("cluster %s is already up: every compute node was idle, every node "
			 "checked (%.1f s)",
			 argv[first], secs);
	else
		pbx_info("cluster %s is up (%.1f s)", argv[first], secs);
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_start = {
	.name = "start",
	.summary = "create a cluster, or repair whatever of it is down",
	.usage = "pbx cluster start [-t TEMPLATE] [--autostop DURATION] [-n [-j]] NAME",
	.description =
		"Creates the nodes of template NAME (or TEMPLATE), connects over SSH,\n"
		"runs the bootstrap on all nodes at once (munge with a fresh key, slurmctld\n"
		"on the head, slurmd with GPU GRES on each compute node) and returns when\n"
		"sinfo shows every node idle.  On an existing cluster it brings back only\n"
		"what is down, and says so when the cluster was already up.  A node whose\n"
		"host key changed is refused (exit 4) and the cluster's state left as is.\n"
		"A cluster that stopped itself (autostop) is powered on again, its disks\n"
		"as they were, and its queued jobs run.  First it shows the cluster's\n"
		"price an hour by node group (as `pbx cluster price`; on stderr, not with\n"
		"-q); a price that cannot be had is a warning.",
	.args = "CLUSTER|TEMPLATE",
	.options = cluster_start_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_start_exec,
};

/* ----------------------------------------------------------------- stop */

/* What carries the name of a cluster this store does not know (a stop
 * without --id): one table row each. */
static void cluster_stop_found(void *ctx, const char *cloud, const struct pbx_instance *x)
{
	static const char *const hdr[] = { "CLOUD", "RESOURCE", "ZONE", "STATE", "CLUSTER ID" };
	struct pbx_table **t = ctx;
	const char *cells[5] = { cloud, x->id, x->zone && *x->zone ? x->zone : "-",
				 x->state ? x->state : "-", x->cluster ? x->cluster : "(none)" };
	if (!*t)
		*t = pbx_table_new(5, hdr);
	pbx_table_add(*t, cells);
}

/* Before stopping a cluster an older pbx made: how its resources are found. */
static void cluster_stop_legacy_note(const struct pbx_cluster_target *tg)
{
	if (tg->known && pbx_cluster_uid_legacy(tg->row.uid))
		pbx_warning(
			"cluster %s was made by a pbx without cluster ids: its cloud resources are "
			"found by its name and its old id %s (the store number the older pbx put "
			"on them), which another pbx home's cluster of this name may share; its "
			"Compute Engine firewall rules by name alone",
			tg->name, tg->row.uid);
}

struct stop_opts {
	const char *id, *self;
	int dry_run, json, discard;
};

static const struct pbx_option cluster_stop_opts[] = {
	PBX_OPT_STRING(0, "id", "ID", struct stop_opts, id,
		       "for a cluster this store does not know: delete exactly what carries\n"
		       "cluster id ID and the name (the ids are listed by a stop without it)"),
	PBX_OPT_STRING(0, "self", "INSTANCE", struct stop_opts, self,
		       "with --id: the instance this pbx runs on, deleted last (what a head\n"
		       "runs to delete its own cluster: autostop_action: delete)"),
	PBX_OPT_FLAG('n', "dry-run", struct stop_opts, dry_run,
		     "send nothing: print the cloud API requests stopping would send"),
	PBX_OPT_FLAG('j', "json", struct stop_opts, json,
		     "with --dry-run: one JSON object {method, url, body} per line"),
	PBX_OPT_FLAG(0, "discard-results", struct stop_opts, discard,
		     "stop even when tasks' results are not home (they are lost)"),
	PBX_OPT_END,
};

/* 0 when stopping cluster `name` loses no result; else -1 with a refusal
 * (exit 4) that lists the packages whose results are not home and says
 * how to bring them home, or to discard them. */
static int cluster_stop_guard(struct pbx_ctx *ctx, const char *name, const char *state,
			      struct pbx_err *err)
{
	struct pbx_unharvested *u;
	struct pbx_buf b = PBX_BUF_INIT;
	size_t n, i;
	long ended = 0;
	int rc;
	if (pbx_jobs_unharvested(ctx->store, ctx->cfg, name, &u, &n, err) < 0)
		return -1;
	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		pbx_buf_addf(&b, "\n  %s  %s: ", u[i].short_id, u[i].name);
		if (u[i].ended)
			pbx_buf_addf(&b, "%ld ended, not harvested%s", u[i].ended,
				     u[i].live ? "; " : "");
		if (u[i].live)
			pbx_buf_addf(&b, "%ld not ended", u[i].live);
		ended += u[i].ended;
	}
	rc = pbx_err_setc(
		err, PBX_EXIT_SECURITY,
		"cluster %s holds results that are not home, which stopping it "
		"deletes:%s\n%s'pbx cluster stop --discard-results %s' stops it anyway",
		name, b.buf,
		strcmp(state, "up") && strcmp(state, "degraded")
			? "'pbx cluster start' it, then 'pbx harvest', to bring them home; "
		: ended ? "'pbx harvest' brings the ended tasks' results home ('pbx cancel "
			  "PKG' ends the others); "
			: "wait for them ('pbx state -w'), then 'pbx harvest'; ",
		name);
	pbx_buf_release(&b);
	pbx_unharvested_free(u, n);
	return rc;
}

static int cmd_cluster_stop_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct cluster_progress cp = { 0 };
	struct pbx_cluster_events ev = { cluster_progress_nodes, cluster_progress_stage, &cp };
	struct stop_opts so = { 0 };
	struct pbx_table *found = NULL; /* made on the first row */
	struct pbx_stop_opts o = { NULL, cluster_stop_found, &found };
	struct pbx_cluster_target tg;
	struct pbx_err err = PBX_ERR_INIT;
	char *title;
	int rc, dry, as_json, first;
	if ((rc = pbx_opts_parse(&pbx_cmd_cluster_stop, argc, argv, &so, &first)))
		return rc;
	dry = so.dry_run;
	as_json = so.json;
	o.uid = so.id;
	o.self = so.self;
	if ((rc = pbx_cli_cluster_not_users(ctx, argv[first], "stop")))
		return rc;
	if (o.self && (!o.uid || dry || !*o.self))
		return pbx_usage_error(&pbx_cmd_cluster_stop,
				       "--self INSTANCE goes with --id, not with --dry-run");
	if (as_json && !dry)
		return pbx_usage_error(&pbx_cmd_cluster_stop, "--json goes with --dry-run");
	if (o.uid && !pbx_cluster_uid_valid(o.uid))
		return pbx_usage_error(&pbx_cmd_cluster_stop,
				       "--id takes a cluster id: 32 lowercase hex "
				       "digits (an older pbx's: a decimal number)");
	argv += first - 1;
	if (dry) {
		rc = pbx_cluster_stop_dry(ctx->store, ctx->cfg, argv[1], o.uid,
					  cluster_print_request, &as_json, &err);
		return rc < 0 ? pbx_report(&err) : 0;
	}
	if (pbx_cluster_target_resolve(ctx->store, ctx->cfg, argv[1], NULL, &tg, &err) < 0)
		return pbx_report(&err);
	if (tg.known && !o.uid && !so.discard &&
	    cluster_stop_guard(ctx, argv[1], tg.row.state, &err) < 0) {
		pbx_cluster_target_release(&tg);
		return pbx_report(&err);
	}
	cluster_stop_legacy_note(&tg);
	title = xasprintf("stopping cluster %s", argv[1]);
	cp.title = title;
	rc = pbx_cluster_stop(ctx->store, ctx->cfg, &tg, &o, &ev, &err);
	pbx_cluster_target_release(&tg);
	pbx_progress_free(cp.p);
	free(title);
	if (found) /* what a stop of a name this store does not know found */
		pbx_table_print(found);
	if (rc < 0)
		return pbx_report(&err);
	pbx_info("cluster %s stopped: every process, port and file it made is gone", argv[1]);
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_stop = {
	.name = "stop",
	.summary = "delete a cluster and everything it created",
	.usage = "pbx cluster stop [--discard-results] [--id ID [--self INSTANCE]] [-n [-j]] NAME",
	.description =
		"Removes every process, port, file and cloud resource of the cluster\n"
		"(found by its name and id labels or its directory, not only from the\n"
		"store) and marks it deleted in the store.\n"
		"\n"
		"A cluster whose tasks' results are not home is not stopped: pbx lists\n"
		"the packages (tasks that ended and were not harvested since, and tasks\n"
		"that have not ended, refreshed first) and exits 4; 'pbx harvest' brings\n"
		"them home, --discard-results stops it anyway.\n"
		"\n"
		"Every cluster has an id (see 'pbx cluster show'), carried by all its\n"
		"cloud resources: another pbx home may have a cluster of the same name in\n"
		"the same project.  So a stop of a name this store does not know deletes\n"
		"nothing: it lists what carries the name, with each resource's cluster id,\n"
		"and exits 3; 'pbx cluster stop --id ID NAME' then deletes exactly what\n"
		"carries that id.  A cluster made by a pbx without ids has a decimal id;\n"
		"its resources are found by name and that number (docs/configuration.md, Cluster ids).",
	.args = "CLUSTER",
	.options = cluster_stop_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_stop_exec,
};

/* --------------------------------------------------------------- resize */

/* "+N" or "-N" (N >= 1, at most 6 digits): the change; 0 when arg is not one. */
static int cluster_resize_delta(const char *arg)
{
	size_t digits = strspn(arg + 1, "0123456789");
	if ((arg[0] != '+' && arg[0] != '-') || digits == 0 || digits > 6 || arg[1 + digits])
		return 0;
	return (arg[0] == '-' ? -1 : 1) * atoi(arg + 1);
}

/* Takes the +N|-N argument out of argv before getopt sees "-N" as an
 * option; returns argc without it. */
static int cluster_resize_take_delta(int argc, char **argv, int *delta)
{
	int i, k = 1;
	*delta = 0;
	for (i = 1; i < argc; i++) {
		int d = i > 1 && !*delta ? cluster_resize_delta(argv[i]) : 0;
		if (d)
			*delta = d;
		else
			argv[k++] = argv[i];
	}
	argv[k] = NULL;
	return k;
}

struct resize_opts {
	const char *group, *timeout;
	int force, dry_run, json;
};

static const struct pbx_option cluster_resize_opts[] = {
	PBX_OPT_STRING('g', "group", "GROUP", struct resize_opts, group,
		       "the node group to resize (needed when there are several)"),
	PBX_OPT_FLAG('f', "force", struct resize_opts, force,
		     "removing: mark the nodes down now; SLURM requeues their jobs"),
	PBX_OPT_STRING(0, "timeout", "SECONDS", struct resize_opts, timeout,
		       "removing: how long to wait for running jobs (default 3600)"),
	PBX_OPT_FLAG('n', "dry-run", struct resize_opts, dry_run,
		     "send nothing: print the cloud API requests resizing would send"),
	PBX_OPT_FLAG('j', "json", struct resize_opts, json,
		     "with --dry-run: one JSON object {method, url, body} per line"),
	PBX_OPT_END,
};

static int cmd_cluster_resize_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct resize_opts ro = { 0 };
	struct cluster_progress cp = { 0 };
	struct pbx_cluster_events ev = { cluster_progress_nodes, cluster_progress_stage, &cp };
	struct pbx_resize_opts o = { 0 };
	struct pbx_err err = PBX_ERR_INIT;
	char *title, *end;
	int rc, as_json, first;
	argc = cluster_resize_take_delta(argc, argv, &o.delta);
	if ((rc = pbx_opts_parse(&pbx_cmd_cluster_resize, argc, argv, &ro, &first)))
		return rc;
	o.group = ro.group;
	o.force = ro.force;
	o.dry_run = ro.dry_run;
	as_json = ro.json;
	if (ro.timeout) {
		long t = strtol(ro.timeout, &end, 10);
		if (*end || t < 1 || t > 7 * 86400)
			return pbx_usage_error(&pbx_cmd_cluster_resize,
					       "--timeout takes seconds, 1 to 604800");
		o.drain_timeout_s = (int)t;
	}
	if (!o.delta) /* NAME and a second word: the dispatcher counted */
		return pbx_usage_error(&pbx_cmd_cluster_resize, "expected NAME and +N or -N");
	if ((rc = pbx_cli_cluster_not_users(ctx, argv[first], "resize")))
		return rc;
	if (as_json && !o.dry_run)
		return pbx_usage_error(&pbx_cmd_cluster_resize, "--json goes with --dry-run");
	if (o.dry_run) {
		o.print = cluster_print_request;
		o.print_ctx = &as_json;
	}
	title = xasprintf("resizing cluster %s", argv[first]);
	cp.title = title;
	rc = pbx_cluster_resize(ctx->store, ctx->cfg, argv[first], &o, o.dry_run ? NULL : &ev,
				&err);
	pbx_progress_free(cp.p);
	free(title);
	if (rc < 0)
		return pbx_report(&err);
	if (!o.dry_run)
		pbx_info("cluster %s resized: %s%d node%s, every compute node idle", argv[first],
			 o.delta > 0 ? "+" : "", o.delta, o.delta == 1 || o.delta == -1 ? "" : "s");
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_resize = {
	.name = "resize",
	.summary = "add nodes to a running cluster, or remove some",
	.usage = "pbx cluster resize [-g GROUP] [-f] [--timeout SECONDS] [-n [-j]] NAME +N|-N",
	.description = "+N creates N more nodes in the group, bootstraps them and adds them to\n"
		       "SLURM.  -N drains the group's last N nodes (waits until their jobs end,\n"
		       "or with --force marks them down so SLURM requeues their jobs), deletes\n"
		       "them and removes them from SLURM.  slurm.conf is rewritten on every node;\n"
		       "running jobs go on.  The new size is recorded with the cluster: a later\n"
		       "'pbx cluster start' keeps it.  An interrupted resize is finished by\n"
		       "running it again (removing) or 'pbx cluster start NAME' (adding).",
	.args = "CLUSTER",
	.options = cluster_resize_opts,
	.flags = PBX_ARGS_SIGNED | PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 2,
	.max_args = 2,
	.exec = cmd_cluster_resize_exec,
};
