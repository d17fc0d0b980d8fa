/*
 * cmd-cluster.c - `pbx cluster start|list|show|ssh|exec|resize|stop|forget-host`,
 * and the internal power|record|adopt.
 *
 * Thin: parses, calls src/cluster, prints.  Progress of start/stop is a
 * per-node display on stderr (live on a terminal, plain lines otherwise,
 * nothing with -q).
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "jobs/jobs.h"
#include "slurm/sacctmgr.h"
#include "slurm/squeue.h"
#include "util/quote.h"
#include "util/visible.h"
#include "util/duration.h"
#include "util/fs.h"
#include "util/money.h"
#include "util/xalloc.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- progress */

/* 0, or a usage error (exit 2) when cluster `name` is one pbx uses as it
 * is (cloud ssh: docs/ssh-clusters.md), which `verb` does not act on. */
static int cluster_not_users(const struct pbx_ctx *ctx, const char *name, const char *verb)
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

/* ---------------------------------------------------------------- price */

/* What the prices leave out (docs/cost.md). */
static const char *const price_excluded[] = { "disks", "network egress", "external IP addresses",
					      "Cloud NAT / NAT gateways", NULL };

/* A line of the price text: to stdout, or as information on stderr. */
static void price_emit(int to_stdout, const char *line)
{
	if (to_stdout)
		printf("%s\n", line);
	else
		pbx_info("%s", line);
}

static void price_amount(int64_t nanos, char out[32])
{
	if (nanos < 0)
		snprintf(out, 32, "?");
	else
		pbx_money_format(nanos, 4, out, 32);
}

/* The quote as text: a line per node kind, the total, what is left out. */
static void price_text_lines(const char *name, const struct pbx_price_quote *q, int to_stdout)
{
	char line[512], each[32], sum[32], date[64] = "from prices: only";
	size_t i;
	if (q->fetched) {
		time_t t = (time_t)q->fetched;
		strftime(date, sizeof(date), "catalogue of %Y-%m-%d %H:%M UTC", gmtime(&t));
	}
	snprintf(line, sizeof(line), "price of cluster %s an hour (%s %s, %s; %s%s):", name,
		 q->cloud, q->region, q->currency, date, q->stale ? ", stale" : "");
	price_emit(to_stdout, line);
	for (i = 0; i < q->n; i++) {
		const struct pbx_price_line *l = &q->lines[i];
		price_amount(l->each, each);
		price_amount(l->each < 0 ? -1 : l->each * l->count, sum);
		snprintf(line, sizeof(line), "  %-12s %-18s %s %3d x %9s = %9s%s%s", l->group,
			 l->machine_type, l->spot ? "spot" : "    ", l->count, each, sum,
			 l->each < 0 ? "  unknown: " : "", l->each < 0 && l->why ? l->why : "");
		price_emit(to_stdout, line);
	}
	price_amount(q->total, sum);
	snprintf(line, sizeof(line), "  %-55s%9s %s/h", "total", sum, q->currency);
	price_emit(to_stdout, line);
	snprintf(line, sizeof(line), "  not included: %s, %s, %s, %s", price_excluded[0],
		 price_excluded[1], price_excluded[2], price_excluded[3]);
	price_emit(to_stdout, line);
	if (q->warning)
		pbx_warning("%s", q->warning);
}

static void price_print_text(const char *name, const struct pbx_price_quote *q, int to_stdout)
{
	char line[300];
	if (!strcmp(q->cloud, "local")) {
		snprintf(line, sizeof(line),
			 "cluster %s runs as processes on this machine: no cloud "
			 "price",
			 name);
		price_emit(to_stdout, line);
		return;
	}
	price_text_lines(name, q, to_stdout);
}

static json_t *price_money(int64_t nanos)
{
	return nanos < 0 ? json_null() : json_real((double)nanos / 1e9);
}

static json_t *price_json(const char *name, const struct pbx_price_quote *q)
{
	json_t *o = json_object(), *lines = json_array(), *ex = json_array();
	size_t i;
	json_object_set_new(o, "cluster", json_string(name));
	json_object_set_new(o, "cloud", json_string(q->cloud));
	json_object_set_new(o, "region", json_string(q->region));
	json_object_set_new(o, "currency", json_string(q->currency));
	json_object_set_new(o, "fetched", q->fetched ? json_integer(q->fetched) : json_null());
	json_object_set_new(o, "stale", json_boolean(q->stale));
	for (i = 0; i < q->n; i++) {
		const struct pbx_price_line *l = &q->lines[i];
		json_t *g = json_pack("{s:s, s:s, s:i, s:b, s:o, s:o}", "group", l->group,
				      "machine_type", l->machine_type, "count", l->count, "spot",
				      l->spot, "each", price_money(l->each), "hourly",
				      price_money(l->each < 0 ? -1 : l->each * l->count));
		json_object_set_new(g, l->each < 0 ? "unknown" : "source",
				    json_string(l->why ? l->why : ""));
		json_array_append_new(lines, g);
	}
	json_object_set_new(o, "groups", lines);
	json_object_set_new(o, "hourly", price_money(q->total));
	for (i = 0; price_excluded[i]; i++)
		json_array_append_new(ex, json_string(price_excluded[i]));
	json_object_set_new(o, "not_included", ex);
	json_object_set_new(o, "warning", q->warning ? json_string(q->warning) : json_null());
	return o;
}

/* The budget of the template cluster tg is (or would be) built from, 0
 * when none, and what the cluster has spent so far (*spent, 0 for a new
 * one). */
static int64_t price_budget(struct pbx_ctx *ctx, const struct pbx_cluster_target *tg,
			    int64_t *spent)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_spend sp;
	*spent = 0;
	if (tg->known && pbx_cluster_spend_of(ctx->store, tg->row.id, time(NULL), &sp, &err) == 0)
		*spent = sp.spent;
	return tg->t ? tg->t->budget : 0;
}

/* "  budget 250.00 USD: 12.0000 spent, about 21.7 h of this cluster left" */
static void price_budget_text(struct pbx_ctx *ctx, const struct pbx_cluster_target *tg,
			      const struct pbx_price_quote *q, int to_stdout)
{
	char line[256], budget[32], spent_text[32], hours[48] = "";
	int64_t spent, b = price_budget(ctx, tg, &spent);
	if (b <= 0 || !strcmp(q->cloud, "local"))
		return;
	pbx_money_format(b, 2, budget, sizeof(budget));
	pbx_money_format(spent, 4, spent_text, sizeof(spent_text));
	if (q->total > 0)
		snprintf(hours, sizeof(hours), ", about %.1f h of this cluster left",
			 spent >= b ? 0.0 : (double)(b - spent) / (double)q->total);
	snprintf(line, sizeof(line), "  budget %s %s: %s spent%s", budget, q->currency, spent_text,
		 hours);
	price_emit(to_stdout, line);
}

/* Before a start: the price an hour on stderr (quiet with -q); a price
 * that cannot be had is a warning, never a reason not to start. */
static void cluster_price_note(struct pbx_ctx *ctx, const struct pbx_cluster_target *tg)
{
	struct pbx_price_quote q;
	struct pbx_err err = PBX_ERR_INIT;
	if (ctx->quiet)
		return;
	if (pbx_cluster_price(ctx->store, ctx->cfg, tg, 0, &q, &err) < 0) {
		if (err.code != PBX_EXIT_NOTFOUND) /* no template: start says so */
			pbx_warning("no price for cluster %s: %s", tg->name, err.msg);
	} else if (strcmp(q.cloud, "local")) {
		price_print_text(tg->name, &q, 0);
		price_budget_text(ctx, tg, &q, 0);
	}
	pbx_price_quote_free(&q);
}

static const struct pbx_cmd cmd_cluster_price;

struct price_opts {
	const char *tmpl;
	int json, offline;
};

static const struct pbx_option cluster_price_opts[] = {
	PBX_OPT_STRING('t', "template", "TEMPLATE", struct price_opts, tmpl,
		       "price TEMPLATE instead of the template named NAME"),
	PBX_OPT_FLAG('j', "json", struct price_opts, json,
		     "one JSON object: cloud, region, currency, fetched, stale, groups "
		     "[{group, machine_type, count, spot, each, hourly}], hourly, not_included,\n"
		     "budget (the template's, or null) and spent (by the cluster so far)"),
	PBX_OPT_FLAG('o', "offline", struct price_opts, offline,
		     "use the cached prices only, however old; fetch nothing"),
	PBX_OPT_END,
};

static int cmd_cluster_price_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct price_opts po = { 0 };
	struct pbx_price_quote q;
	struct pbx_cluster_target tg;
	struct pbx_err err = PBX_ERR_INIT;
	int rc, first;
	if ((rc = pbx_opts_parse(&cmd_cluster_price, argc, argv, &po, &first)))
		return rc;
	if (first != argc - 1)
		return pbx_usage_error(&cmd_cluster_price, "expected one cluster name");
	if (pbx_cluster_target_resolve(ctx->store, ctx->cfg, argv[first], po.tmpl, &tg, &err) < 0)
		return pbx_report(&err);
	if (pbx_cluster_price(ctx->store, ctx->cfg, &tg, po.offline, &q, &err) < 0) {
		pbx_price_quote_free(&q);
		pbx_cluster_target_release(&tg);
		return pbx_report(&err);
	}
	if (po.json) {
		json_t *o = price_json(argv[first], &q);
		int64_t spent, budget = price_budget(ctx, &tg, &spent);
		char *text;
		json_object_set_new(o, "budget", budget > 0 ? price_money(budget) : json_null());
		json_object_set_new(o, "spent", price_money(spent));
		text = json_dumps(o,
				  JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
		printf("%s\n", text ? text : "null");
		free(text);
		json_decref(o);
		if (q.warning)
			pbx_warning("%s", q.warning);
	} else {
		price_print_text(argv[first], &q, 1);
		price_budget_text(ctx, &tg, &q, 1);
	}
	pbx_price_quote_free(&q);
	pbx_cluster_target_release(&tg);
	return 0;
}

static const struct pbx_cmd cmd_cluster_price = {
	.name = "price",
	.summary = "show what a cluster costs an hour, by node group",
	.usage = "pbx cluster price [-t TEMPLATE] [-j] [-o] NAME",
	.description = "Prices cluster NAME as `start` would build it: the head and each node\n"
		       "group, on-demand or spot as the template says, from the cloud's own\n"
		       "price catalogue (Compute Engine: the Cloud Billing Catalog API; EC2: the\n"
		       "Price List Query API), cached in the store and fetched again when older\n"
		       "than prices.max_age (7 days); `prices:` in the configuration overrides\n"
		       "any entry.  Disks, network egress, external addresses and NAT are not\n"
		       "included.  `start` and `start --dry-run` show the same before anything\n"
		       "is made.  See docs/cost.md.",
	.args = "CLUSTER|TEMPLATE",
	.options = cluster_price_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.exec = cmd_cluster_price_exec,
};

/* ---------------------------------------------------------------- start */

static const struct pbx_cmd cmd_cluster_start;

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
	if ((rc = pbx_opts_parse(&cmd_cluster_start, argc, argv, &so, &first)))
		return rc;
	if (so.autostop && pbx_autostop_parse(so.autostop, 10, PBX_AUTOSTOP_MAX_S, &autostop) < 0)
		return pbx_usage_error(&cmd_cluster_start,
				       "--autostop: '%s' is not a duration "
				       "from 10s to 30d (90s, 30m, 2h, 1h30m; a bare number is "
				       "minutes) or off",
				       so.autostop);
	if (first != argc - 1)
		return pbx_usage_error(&cmd_cluster_start, "expected one cluster name");
	if (so.json && !so.dry_run)
		return pbx_usage_error(&cmd_cluster_start, "--json goes with --dry-run");
	if ((rc = cluster_not_users(ctx, so.tmpl ? so.tmpl : argv[first], "start")))
		return rc;
	if (pbx_cluster_target_resolve(ctx->store, ctx->cfg, argv[first], so.tmpl, &tg, &err) < 0)
		return pbx_report(&err);
	cluster_price_note(ctx, &tg);
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

static const struct pbx_cmd cmd_cluster_start = {
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
	.exec = cmd_cluster_start_exec,
};

/* ----------------------------------------------------------------- stop */

static const struct pbx_cmd cmd_cluster_stop;

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
	if ((rc = pbx_opts_parse(&cmd_cluster_stop, argc, argv, &so, &first)))
		return rc;
	dry = so.dry_run;
	as_json = so.json;
	o.uid = so.id;
	o.self = so.self;
	if (first != argc - 1)
		return pbx_usage_error(&cmd_cluster_stop, "expected one cluster name");
	if ((rc = cluster_not_users(ctx, argv[first], "stop")))
		return rc;
	if (o.self && (!o.uid || dry || !*o.self))
		return pbx_usage_error(&cmd_cluster_stop,
				       "--self INSTANCE goes with --id, not with --dry-run");
	if (as_json && !dry)
		return pbx_usage_error(&cmd_cluster_stop, "--json goes with --dry-run");
	if (o.uid && !pbx_cluster_uid_valid(o.uid))
		return pbx_usage_error(&cmd_cluster_stop,
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

static const struct pbx_cmd cmd_cluster_stop = {
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
	.exec = cmd_cluster_stop_exec,
};

/* --------------------------------------------------------------- resize */

static const struct pbx_cmd cmd_cluster_resize;

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
	if ((rc = pbx_opts_parse(&cmd_cluster_resize, argc, argv, &ro, &first)))
		return rc;
	o.group = ro.group;
	o.force = ro.force;
	o.dry_run = ro.dry_run;
	as_json = ro.json;
	if (ro.timeout) {
		long t = strtol(ro.timeout, &end, 10);
		if (*end || t < 1 || t > 7 * 86400)
			return pbx_usage_error(&cmd_cluster_resize,
					       "--timeout takes seconds, 1 to 604800");
		o.drain_timeout_s = (int)t;
	}
	if (first != argc - 1 || !o.delta)
		return pbx_usage_error(&cmd_cluster_resize, "expected NAME and +N or -N");
	if ((rc = cluster_not_users(ctx, argv[first], "resize")))
		return rc;
	if (as_json && !o.dry_run)
		return pbx_usage_error(&cmd_cluster_resize, "--json goes with --dry-run");
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

static const struct pbx_cmd cmd_cluster_resize = {
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
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.exec = cmd_cluster_resize_exec,
};

/* ----------------------------------------------------------------- list */

static const struct pbx_cmd cmd_cluster_list;

static json_t *cluster_row_json(const struct pbx_cluster_row *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(r->name));
	json_object_set_new(o, "id", json_string(r->uid));
	json_object_set_new(o, "cloud", json_string(r->cloud));
	json_object_set_new(o, "state", json_string(r->state));
	json_object_set_new(o, "created", json_integer(r->created));
	json_object_set_new(o, "updated", json_integer(r->updated));
	return o;
}

/* The spend fields of a cluster's JSON: spent and hourly (null when no
 * run was priced), currency, node_hours, unpriced_runs, budget (null:
 * none). */
static void cluster_spend_json(json_t *o, const struct pbx_spend *s, int64_t budget)
{
	int priced = s->currency[0] != '\0';
	json_object_set_new(o, "spent", priced ? price_money(s->spent) : json_null());
	json_object_set_new(o, "hourly", priced ? price_money(s->hourly) : json_null());
	json_object_set_new(o, "currency", priced ? json_string(s->currency) : json_null());
	json_object_set_new(o, "node_hours", json_real((double)s->seconds / 3600.0));
	json_object_set_new(o, "unpriced_runs", json_integer((json_int_t)s->unpriced));
	json_object_set_new(o, "budget", budget > 0 ? price_money(budget) : json_null());
}

/* "12.3456 USD" (or "-" when nothing was priced) into out. */
static void cluster_spend_text(const struct pbx_spend *s, int64_t nanos, char *out, size_t len)
{
	char amount[32];
	if (!s->currency[0]) {
		snprintf(out, len, "-");
		return;
	}
	price_amount(nanos, amount);
	snprintf(out, len, "%s %s%s", amount, s->currency, s->unpriced ? " + ?" : "");
}

static void cluster_time(int64_t t, char *out, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;
	localtime_r(&tt, &tm);
	strftime(out, len, "%Y-%m-%d %H:%M", &tm);
}

/* A JSON array of the space-separated words of s. */
static json_t *cluster_words_json(const char *s)
{
	json_t *a = json_array();
	char *copy = xstrdup(s), *save = NULL, *w;
	for (w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
		json_array_append_new(a, json_string(w));
	free(copy);
	return a;
}

/* --refresh: asks each cluster's cloud whether its head is powered off
 * (autostop ran with the laptop away) and records "stopped" in the store
 * and in row->state; a stopped cluster is asked again, for the instances
 * that still run (billed) though its head is off.  Returns their node
 * names ("node1 node2"), or NULL; caller frees.  A cluster whose cloud
 * cannot be asked keeps its recorded state, with a warning. */
static char *cluster_list_refresh(struct pbx_ctx *ctx, struct pbx_cluster_row *row)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster *c;
	char *why, *running = NULL;
	if (!strcmp(row->state, "deleted"))
		return NULL;
	if (pbx_cluster_open(ctx->store, ctx->cfg, row->name, &c, &err) < 0) {
		pbx_warning("cluster %s: %s (its recorded state is shown)", row->name, err.msg);
		return NULL;
	}
	why = pbx_cluster_stopped_why(c);
	if (why) { /* recorded in the store by pbx_cluster_stopped_why */
		free(row->state);
		row->state = xstrdup("stopped");
		running = c->still_running ? xstrdup(c->still_running) : NULL;
	}
	free(why);
	pbx_cluster_close(c);
	return running;
}

/* The budget of a listed cluster's template (0: none, or no configuration
 * at hand: a plain list works whatever config.yaml holds). */
static int64_t cluster_budget_of(struct pbx_ctx *ctx, const struct pbx_cluster_row *r)
{
	const struct pbx_cluster_template *t;
	if (!ctx->cfg)
		return 0;
	t = pbx_config_template(ctx->cfg, r->template_name ? r->template_name : r->name);
	return t ? t->budget : 0;
}

struct list_opts {
	int all, json, refresh;
};

static const struct pbx_option cluster_list_opts[] = {
	PBX_OPT_FLAG('a', "all", struct list_opts, all, "include deleted clusters"),
	PBX_OPT_FLAG('j', "json", struct list_opts, json,
		     "print a JSON array of {name, id, cloud, state, created, updated,\n"
		     "still_running, spent, hourly, currency, node_hours, unpriced_runs,\n"
		     "budget}; still_running (with --refresh, else null): the nodes whose\n"
		     "instances run though the head is off"),
	PBX_OPT_FLAG('r', "refresh", struct list_opts, refresh,
		     "ask each cluster's cloud first: a cluster whose head is powered off "
		     "(autostop) is recorded and shown as stopped, with any node still "
		     "running (billed)"),
	PBX_OPT_END,
};

static int cmd_cluster_list_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster_row *rows;
	struct list_opts lo = { 0 };
	int json, all, refresh, first, rc;
	char **running; /* per row: what still runs with its head off (--refresh) */
	size_t n, i;
	if ((rc = pbx_opts_parse(&cmd_cluster_list, argc, argv, &lo, &first)))
		return rc;
	json = lo.json;
	all = lo.all;
	refresh = lo.refresh;
	if (first < argc)
		return pbx_usage_error(&cmd_cluster_list, "unexpected argument '%s'", argv[first]);
	/* the configuration only when the clouds are asked: a plain list
	 * works whatever config.yaml holds */
	if (refresh && !ctx->cfg && pbx_config_load(ctx->config_path, 1, &ctx->cfg, &err) < 0)
		return pbx_report(&err);
	if (!ctx->cfg && pbx_config_load(ctx->config_path, 1, &ctx->cfg, &err) < 0) {
		ctx->cfg = NULL; /* budgets are left out: the list itself needs none */
		pbx_err_clear(&err);
	}
	if (pbx_store_cluster_list(ctx->store, all, &rows, &n, &err) < 0)
		return pbx_report(&err);
	running = xcalloc(n ? n : 1, sizeof(*running));
	for (i = 0; refresh && i < n; i++)
		running[i] = cluster_list_refresh(ctx, &rows[i]);
	if (json) {
		json_t *a = json_array();
		for (i = 0; i < n; i++) {
			json_t *o = cluster_row_json(&rows[i]);
			struct pbx_spend sp;
			json_object_set_new(o, "still_running",
					    !refresh     ? json_null()
					    : running[i] ? cluster_words_json(running[i])
							 : json_array());
			if (pbx_cluster_spend_of(ctx->store, rows[i].id, time(NULL), &sp, &err) ==
			    0)
				cluster_spend_json(o, &sp, cluster_budget_of(ctx, &rows[i]));
			json_array_append_new(a, o);
		}
		pbx_print_json(a);
	} else {
		static const char *const hdr[] = { "NAME",    "CLOUD",   "STATE",
						   "CREATED", "PRICE/H", "SPENT" };
		struct pbx_table *t = pbx_table_new(6, hdr);
		for (i = 0; i < n; i++) {
			char when[32], hourly[48] = "-", spent[48] = "-", *state;
			const char *cells[6];
			struct pbx_spend sp;
			if (pbx_cluster_spend_of(ctx->store, rows[i].id, time(NULL), &sp, &err) ==
			    0) {
				cluster_spend_text(&sp, sp.hourly, hourly, sizeof(hourly));
				cluster_spend_text(&sp, sp.spent, spent, sizeof(spent));
			}
			cluster_time(rows[i].created, when, sizeof(when));
			cells[0] = rows[i].name;
			cells[1] = rows[i].cloud;
			state = running[i]
					? xasprintf("%s (running: %s)", rows[i].state, running[i])
					: xstrdup(rows[i].state);
			cells[2] = state;
			cells[3] = when;
			cells[4] = hourly;
			cells[5] = spent;
			pbx_table_add(t, cells);
			free(state);
		}
		pbx_table_print(t);
	}
	for (i = 0; i < n; i++)
		free(running[i]);
	free(running);
	pbx_cluster_rows_free(rows, n);
	return 0;
}

static const struct pbx_cmd cmd_cluster_list = {
	.name = "list",
	.summary = "list clusters",
	.usage = "pbx cluster list [-a] [-j] [-r]",
	.options = cluster_list_opts,
	.flags = PBX_NEED_STORE,
	.exec = cmd_cluster_list_exec,
};

/* ----------------------------------------------------------------- show */

void pbx_cli_learn_awake(const struct pbx_ctx *ctx, struct pbx_cluster *c)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_cluster_learn_awake(c, NULL, &err) < 0 && !ctx->quiet)
		pbx_warning("%s; going on with the nodes as this store last knew them", err.msg);
}

void pbx_cli_head_runs(const struct pbx_ctx *ctx, struct pbx_cluster *c)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_cluster_head_runs(c, &err) < 0 && !ctx->quiet)
		pbx_warning("%s; its spend counts the nodes that may sleep as this machine saw "
			    "them",
			    err.msg);
}

static const struct pbx_cmd cmd_cluster_show;

/* "autostop: after 1h idle (last: stopped itself at ...)" */
static void cluster_print_autostop(const struct pbx_cluster *c, const char *last)
{
	char d[32];
	pbx_duration_format(c->spec.t ? c->spec.t->autostop : 0, d, sizeof(d));
	if (!strcmp(d, "off"))
		printf("autostop: off");
	else
		printf("autostop: after %s idle (no SLURM job, no SSH session)%s", d,
		       c->spec.t->autostop_delete ? ", then the head deletes the cluster "
						    "once every result is harvested"
						  : "");
	printf(last ? "; last: %s\n" : "\n", last);
}

/* "cost: 1.1480 USD/h now; spent 3.2100 USD since ... (2.8 node-hours);
 * budget 10.00 USD (32%)" */
static void cluster_print_spend(const struct pbx_cluster *c, const struct pbx_spend *s)
{
	char hourly[48], spent[48], since[32], budget[32];
	int64_t b = c->spec.t ? c->spec.t->budget : 0;
	if (!strcmp(c->row.cloud, "local"))
		return; /* processes on this machine: no price */
	cluster_spend_text(s, s->hourly, hourly, sizeof(hourly));
	cluster_spend_text(s, s->spent, spent, sizeof(spent));
	cluster_time(c->row.created, since, sizeof(since));
	printf("cost: %s/h now; spent %s since %s (%.1f node-hours%s)", hourly, spent, since,
	       (double)s->seconds / 3600.0,
	       s->unpriced ? ", some unpriced: see 'pbx cluster price'" : "");
	if (b > 0) {
		pbx_money_format(b, 2, budget, sizeof(budget));
		printf("; budget %s (%d%%)", budget,
		       (int)((long double)s->spent * 100.0L / (long double)b));
	}
	printf("\n");
}

struct show_opts {
	int json;
};

static const struct pbx_option cluster_show_opts[] = {
	PBX_OPT_FLAG('j', "json", struct show_opts, json,
		     "print a JSON object with the cluster (name, id, cloud, state ...), its\n"
		     "template, its nodes (name, role, address, public_address, ssh_port,\n"
		     "gpus, state, slurm_state), ssh (which address blocks reach port 22),\n"
		     "autostop (seconds, 0 = off), autostop_action (stop or delete),\n"
		     "stopped (why it is powered off, or null),\n"
		     "last_autostop (the head's record of its last autostop, or null), and\n"
		     "its cost: spent, hourly (the running nodes' price now), currency (null\n"
		     "when nothing was priced), node_hours, unpriced_runs, budget (or null)"),
	PBX_OPT_END,
};

/* The user's job submit limit as cluster show says it (sacctmgr's answer,
 * after PBX_SACCTMGR_SCRIPT); caller frees. */
static char *cluster_submit_limit_text(const char *answer)
{
	struct pbx_submit_limit lim;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_sacctmgr_limit_parse(answer, strlen(answer), NULL, NULL, &lim, &err) < 0)
		return xasprintf("not known (%s)", err.msg);
	if (lim.kind == PBX_SUBMIT_LIMIT_UNKNOWN)
		return xstrdup("not known (no accounting database)");
	if (lim.kind == PBX_SUBMIT_LIMIT_NONE)
		return xstrdup("none set");
	return xasprintf("%ld (%s; each array task counts)", lim.max, lim.source);
}

/* What SLURM on a cluster pbx uses as it is says of its limits, its
 * partitions, the user's jobs (array tasks one by one) and the user's job
 * submit limit (sacctmgr, where slurmdbd is), in one round trip (printed;
 * nothing when it cannot be asked). */
static void cluster_show_limits(struct pbx_cluster *c)
{
	static const char script[] =
		"scontrol show config 2>/dev/null | grep -E '^(MaxArraySize|MaxJobCount) '\n"
		"echo PBX-SEP\n"
		"sinfo -h -o '%P' 2>/dev/null | tr '\\n' ' '\n"
		"echo\n"
		"echo PBX-SEP\n"
		"squeue -h -r -u \"$(id -un)\" -o '%i' 2>/dev/null | wc -l\n"
		"echo PBX-SEP\n" PBX_SACCTMGR_SCRIPT;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster_output o;
	struct pbx_slurm_limits lim;
	const char *parts, *mine, *acct;
	if (pbx_cluster_run(c, 0, script, NULL, &o, &err) < 0)
		return;
	parts = strstr(o.out.buf ? o.out.buf : "", "PBX-SEP\n");
	mine = parts ? strstr(parts + 8, "PBX-SEP\n") : NULL;
	acct = mine ? strstr(mine + 8, "PBX-SEP\n") : NULL;
	if (acct &&
	    pbx_scontrol_limits_parse(o.out.buf, (size_t)(parts - o.out.buf), &lim, &err) == 0) {
		char *raw = xstrndup(parts + 8, (size_t)(mine - parts - 8)), *p, *n, *m;
		char *count = xstrndup(mine + 8, (size_t)(acct - mine - 8));
		for (size_t k = strlen(raw); k > 0 && (raw[k - 1] == ' ' || raw[k - 1] == '\n');
		     k--)
			raw[k - 1] = '\0'; /* sinfo's list ends in a space, echo's newline */
		count[strcspn(count, "\n")] = '\0';
		p = pbx_visible(raw, PBX_VISIBLE_LINE);
		n = pbx_visible(count, PBX_VISIBLE_LINE);
		m = cluster_submit_limit_text(acct + 8);
		printf("limits: MaxArraySize %ld (tasks in one array; pbx splits bigger sweeps), "
		       "MaxJobCount %ld\npartitions: %s\nyour jobs queued or running: %s\n"
		       "your job submit limit (MaxSubmitJobs): %s\n",
		       (long)lim.max_array_size, (long)lim.max_job_count, p, n, m);
		free(raw);
		free(count);
		free(p);
		free(n);
		free(m);
	}
	pbx_cluster_output_release(&o);
}

/* `show` of a cluster pbx uses as it is (cloud ssh): how pbx reaches it,
 * what SLURM says of its limits, and SLURM's nodes there (pbx made none of
 * them). */
static void cluster_show_users(struct pbx_cluster *c, int live, const struct pbx_sinfo_node *sn,
			       size_t nsn, const struct pbx_err *serr)
{
	static const char *const hdr[] = { "NODE", "SLURM" };
	const struct pbx_cluster_template *t = c->spec.t;
	struct pbx_table *tb = pbx_table_new(2, hdr);
	size_t i;
	printf("cluster %s (ssh, id %s): an existing cluster pbx uses as it is\n", c->row.name,
	       c->row.uid);
	if (t) {
		char *login = pbx_template_login(t);
		printf("login: %s, work_dir %s%s%s\n", login, t->work_dir,
		       t->setup ? ", setup: " : "", t->setup ? t->setup : "");
		free(login);
	}
	if (live)
		cluster_show_limits(c);
	for (i = 0; live && i < nsn; i++) {
		const char *cells[2] = { sn[i].name, sn[i].state };
		pbx_table_add(tb, cells);
	}
	pbx_table_print(tb);
	if (!live && serr->code != PBX_EXIT_SECURITY)
		pbx_warning("cannot ask SLURM for node states: %s", serr->msg);
}

static int cmd_cluster_show_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT, serr = PBX_ERR_INIT;
	struct pbx_cluster *c;
	struct pbx_sinfo_node *sn = NULL;
	struct pbx_spend spend;
	size_t nsn = 0, i;
	struct show_opts so = { 0 };
	int json, live, first, rc;
	const char *name;
	char *exposure, *stopped, *last;
	if ((rc = pbx_opts_parse(&cmd_cluster_show, argc, argv, &so, &first)))
		return rc;
	json = so.json;
	name = first == argc - 1 ? argv[first] : NULL;
	if (!name)
		return pbx_usage_error(&cmd_cluster_show, "expected one cluster name");
	if (pbx_cluster_open(ctx->store, ctx->cfg, name, &c, &err) < 0)
		return pbx_report(&err);
	pbx_cli_learn_awake(ctx, c); /* the nodes the head woke or put to sleep */
	live = pbx_cluster_sinfo(c, &sn, &nsn, &serr) == 0;
	if (live)
		pbx_cli_head_runs(ctx, c); /* the exact runs of the nodes the head made */
	exposure = pbx_template_ssh_exposure(c->row.template_json);
	stopped = live ? NULL : pbx_cluster_stopped_why(c);
	last = pbx_cluster_last_stop(c);
	pbx_cluster_spend_sync(c, time(NULL)); /* a stop just learnt ends its runs */
	if (pbx_cluster_spend_of(ctx->store, c->row.id, time(NULL), &spend, &err) < 0)
		memset(&spend, 0, sizeof(spend));
	if (json) {
		json_t *o = cluster_row_json(&c->row), *nodes = json_array(), *tmpl;
		tmpl = json_loads(c->row.template_json, 0, NULL);
		json_object_set_new(o, "template", tmpl ? tmpl : json_null());
		for (i = 0; i < c->nnodes; i++) {
			json_t *n = json_object();
			const char *ss =
				live ? pbx_sinfo_state_of(sn, nsn, c->nodes[i].name) : NULL;
			json_object_set_new(n, "name", json_string(c->nodes[i].name));
			json_object_set_new(n, "role", json_string(c->nodes[i].role));
			json_object_set_new(n, "instance_id",
					    c->nodes[i].instance_id && *c->nodes[i].instance_id
						    ? json_string(c->nodes[i].instance_id)
						    : json_null());
			json_object_set_new(n, "address", json_string(c->nodes[i].address));
			json_object_set_new(n, "public_address",
					    c->nodes[i].public_address
						    ? json_string(c->nodes[i].public_address)
						    : json_null());
			json_object_set_new(n, "ssh_port", json_integer(c->nodes[i].ssh_port));
			json_object_set_new(n, "gpus", json_integer(c->nodes[i].gpus));
			json_object_set_new(n, "state", json_string(c->nodes[i].state));
			json_object_set_new(n, "slurm_state", ss ? json_string(ss) : json_null());
			json_array_append_new(nodes, n);
		}
		json_object_set_new(o, "nodes", nodes);
		json_object_set_new(o, "ssh", json_string(exposure));
		json_object_set_new(o, "reachable", json_boolean(live));
		json_object_set_new(o, "autostop",
				    json_integer(c->spec.t ? c->spec.t->autostop : 0));
		json_object_set_new(
			o, "autostop_action",
			json_string(c->spec.t && c->spec.t->autostop_delete ? "delete" : "stop"));
		json_object_set_new(o, "stopped", stopped ? json_string(stopped) : json_null());
		json_object_set_new(o, "last_autostop", last ? json_string(last) : json_null());
		cluster_spend_json(o, &spend, c->spec.t ? c->spec.t->budget : 0);
		pbx_print_json(o);
	} else if (pbx_cluster_is_users(c)) {
		cluster_show_users(c, live, sn, nsn, &serr);
	} else {
		static const char *const hdr[] = { "NODE", "ROLE", "ADDRESS", "GPUS", "SLURM" };
		struct pbx_table *t = pbx_table_new(5, hdr);
		printf("cluster %s (%s, id %s%s): %s\n%s\n", c->row.name, c->row.cloud, c->row.uid,
		       pbx_cluster_uid_legacy(c->row.uid) ? ", made by a pbx without ids" : "",
		       c->row.state, exposure);
		cluster_print_autostop(c, last);
		cluster_print_spend(c, &spend);
		for (i = 0; i < c->nnodes; i++) {
			char addr[128], gpus[16];
			const char *ss =
				live ? pbx_sinfo_state_of(sn, nsn, c->nodes[i].name) : NULL;
			const char *cells[5];
			snprintf(addr, sizeof(addr), "%s:%d", c->nodes[i].address,
				 c->nodes[i].ssh_port);
			snprintf(gpus, sizeof(gpus), "%d", c->nodes[i].gpus);
			cells[0] = c->nodes[i].name;
			cells[1] = c->nodes[i].role;
			cells[2] = addr;
			cells[3] = gpus;
			cells[4] = !strcmp(c->nodes[i].role, "head")
					   ? (live ? "slurmctld up" : "unreachable")
					   : (ss ? ss : "-");
			pbx_table_add(t, cells);
		}
		pbx_table_print(t);
		if (!live && serr.code != PBX_EXIT_SECURITY)
			pbx_warning("cannot ask SLURM for node states: %s", serr.msg);
	}
	pbx_sinfo_free(sn, nsn);
	free(exposure);
	free(stopped);
	free(last);
	pbx_cluster_close(c);
	/* what the store knows was shown; a refused host key is still a refusal */
	if (!live && serr.code == PBX_EXIT_SECURITY)
		return pbx_report(&serr);
	return 0;
}

static const struct pbx_cmd cmd_cluster_show = {
	.name = "show",
	.summary = "show a cluster's nodes and their SLURM states",
	.usage = "pbx cluster show [-j] NAME",
	.description =
		"Prints which address blocks reach the nodes' port 22 (the template's\n"
		"ssh_from) and the cluster's nodes as recorded, with their live SLURM states\n"
		"(one SSH round trip).  When the head cannot be reached the states are\n"
		"left out with a warning; when its host key changed, pbx exits 4.\n"
		"\n"
		"On a power-saving cluster on a cloud the head makes and deletes the nodes\n"
		"that may sleep; pbx first lists the cluster's instances (one call) and\n"
		"records each such node up, at its instance's addresses, or asleep.  When\n"
		"the cloud cannot be listed, the nodes are shown as last recorded, with a\n"
		"warning (none with -q).  Once the head answered, its pbx's runs of those\n"
		"nodes (pbx cluster runs, one SSH exec more) become the store's, so the\n"
		"cost counts them from their instances' creation to their deletion\n"
		"(docs/cost.md); a reply it refuses leaves them as seen here, with a\n"
		"warning.",
	.args = "CLUSTER",
	.options = cluster_show_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.exec = cmd_cluster_show_exec,
};

/* ----------------------------------------------------------------- exec */

static const struct pbx_cmd cmd_cluster_exec;

static int cmd_cluster_exec_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster *c;
	const char *node = NULL;
	int i = 1, status = 0, idx = 0, rc;
	if (i + 1 < argc && (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--node"))) {
		node = argv[i + 1];
		i += 2;
	}
	if (i >= argc || argv[i][0] == '-')
		return pbx_usage_error(&cmd_cluster_exec, "expected a cluster name");
	if (i + 2 > argc - 1 || strcmp(argv[i + 1], "--") != 0)
		return pbx_usage_error(&cmd_cluster_exec, "expected '-- COMMAND [ARGS...]'");
	if (pbx_cluster_open(ctx->store, ctx->cfg, argv[i], &c, &err) < 0)
		return pbx_report(&err);
	if (node) /* a node the head woke: its instance's address */
		pbx_cli_learn_awake(ctx, c);
	if (node && (idx = pbx_cluster_node_index(c, node)) < 0) {
		pbx_error("cluster %s has no node named '%s'", argv[i], node);
		pbx_cluster_close(c);
		return PBX_EXIT_NOTFOUND;
	}
	/* the node's bytes: as they are into a pipe, made visible on a terminal */
	rc = pbx_cluster_exec(c, (size_t)idx, (const char *const *)argv + i + 2,
			      pbx_cli_passthrough, NULL, &status, &err);
	pbx_cli_passthrough_end();
	pbx_cluster_close(c);
	if (rc < 0)
		return pbx_report(&err);
	if (status == 127 && argc == i + 3 && strpbrk(argv[i + 2], " \t;|&<>$`*"))
		pbx_info("'%s' ran as one command name; for a shell command line: pbx cluster "
			 "exec %s -- sh -c '...'",
			 argv[i + 2], argv[i]);
	return status;
}

/* Documents exec's one option; exec reads it itself, only before NAME:
 * everything after NAME is the command, which no option parser may touch. */
struct exec_opts {
	const char *node;
};

static const struct pbx_option cluster_exec_opts[] = {
	PBX_OPT_STRING('n', "node", "NODE", struct exec_opts, node,
		       "run on NODE instead of the head node"),
	PBX_OPT_END,
};

static const struct pbx_cmd cmd_cluster_exec = {
	.name = "exec",
	.summary = "run a command on the head node with the cluster's SLURM environment",
	.usage = "pbx cluster exec [-n NODE] NAME -- COMMAND [ARGS...]",
	.description = "Runs COMMAND with ARGS (each passed as one word, never re-split by a\n"
		       "shell) in the cluster's shared directory, with SLURM_CONF and PBX_SHARED\n"
		       "set.  Its stdout and stderr stream back (on a terminal with control\n"
		       "characters other than newline and tab shown as \\xHH); pbx exits with its\n"
		       "status.  With -n on a power-saving cluster on a cloud, pbx first lists\n"
		       "the cluster's instances (one call) to learn whether the head woke NODE\n"
		       "and at which address.",
	.args = "CLUSTER",
	.options = cluster_exec_opts,
	.examples = "pbx cluster exec local -- srun -N3 hostname\n"
		    "pbx cluster exec local -- sinfo",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.exec = cmd_cluster_exec_exec,
};

/* ------------------------------------------------------------------ ssh */

static const struct pbx_cmd cmd_cluster_ssh;

/* The remote command of `ssh NAME [NODE] -- COMMAND [ARGS...]`: each word
 * quoted, so the node's shell sees them as given (as `cluster exec` does).
 * NULL without "--".  Caller frees. */
static char *cluster_ssh_command(char **argv, int dashdash)
{
	struct pbx_buf b = PBX_BUF_INIT;
	if (dashdash < 0)
		return NULL;
	pbx_shell_join(&b, (const char *const *)argv + dashdash + 1);
	return pbx_buf_detach(&b, NULL);
}

static int cmd_cluster_ssh_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster *c;
	struct pbx_ssh *s;
	char *config = NULL, *alias = NULL, *command;
	int idx = 0, rc, dashdash = -1, nargs, i;
	for (i = 1; i < argc && dashdash < 0; i++)
		if (!strcmp(argv[i], "--"))
			dashdash = i;
	nargs = dashdash < 0 ? argc : dashdash;
	if (nargs < 2 || nargs > 3 || argv[1][0] == '-' || (nargs == 3 && argv[2][0] == '-'))
		return pbx_usage_error(&cmd_cluster_ssh,
				       "expected NAME [NODE] [-- COMMAND [ARGS...]]");
	if (dashdash >= 0 && dashdash == argc - 1)
		return pbx_usage_error(&cmd_cluster_ssh, "expected a COMMAND after '--'");
	if (pbx_cluster_open(ctx->store, ctx->cfg, argv[1], &c, &err) < 0)
		return pbx_report(&err);
	if (nargs == 3) /* a node the head woke: its instance's address */
		pbx_cli_learn_awake(ctx, c);
	if (nargs == 3 && (idx = pbx_cluster_node_index(c, argv[2])) < 0) {
		pbx_error("cluster %s has no node named '%s'", argv[1], argv[2]);
		pbx_cluster_close(c);
		return PBX_EXIT_NOTFOUND;
	}
	/* Connect once through libssh2, as every verb does (through the head
	 * for a node without a public address), so the pinned host keys are
	 * checked (or pinned), then hand the terminal to OpenSSH with those
	 * keys as its only known hosts, on the same path. */
	if (pbx_cluster_connect(c, (size_t)idx, &s, &err) < 0 ||
	    (!pbx_ssh_is_openssh(s) &&
	     pbx_cluster_ssh_config(c, (size_t)idx, &config, &alias, &err) < 0)) {
		pbx_cluster_close(c);
		return pbx_report(&err);
	}
	command = cluster_ssh_command(argv, dashdash);
	{
		const char *sargv[] = { "ssh",   "-F", config, alias, command ? "--" : NULL,
					command, NULL };
		/* transport: openssh: the user's own ssh, on the control
		 * connection the connect above made sure of */
		const char **own = pbx_ssh_interactive_argv(s, command);
		fflush(NULL);
		execvp("ssh", (char *const *)(own ? own : sargv));
		free(own);
	}
	pbx_error("cannot run ssh: %m");
	rc = PBX_EXIT_FAIL;
	free(config);
	free(alias);
	free(command);
	pbx_cluster_close(c);
	return rc;
}

static const struct pbx_cmd cmd_cluster_ssh = {
	.name = "ssh",
	.summary = "open a shell on a node (the head by default), or run a command there",
	.usage = "pbx cluster ssh NAME [NODE] [-- COMMAND [ARGS...]]",
	.description =
		"Runs ssh(1) the way pbx itself connects: to the head and to any node\n"
		"with a public address directly, to a node without one through the head\n"
		"(ProxyJump).  ssh(1) gets a configuration and a known_hosts file that pbx\n"
		"writes (mode 0600) in $PBX_HOME/clusters/NAME from the host keys it pinned,\n"
		"with StrictHostKeyChecking yes for both hops, so a changed host key is\n"
		"refused here as everywhere.  With '-- COMMAND', each word of COMMAND and\n"
		"ARGS reaches the node's shell as one word, as with 'cluster exec', but\n"
		"without the cluster's environment.  With NODE on a power-saving cluster on\n"
		"a cloud, pbx first lists the cluster's instances (one call) to learn\n"
		"whether the head woke NODE and at which address.",
	.examples = "pbx cluster ssh gce-gpu\n"
		    "pbx cluster ssh gce-gpu gpu1 -- nvidia-smi",
	.args = "CLUSTER",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.exec = cmd_cluster_ssh_exec,
};

/* ----------------------------------------------------------- disconnect */

extern const struct pbx_cmd pbx_cmd_cluster_disconnect; /* cmd-cluster-disconnect.c */
extern const struct pbx_cmd pbx_cmd_cluster_gc;         /* cmd-cluster-gc.c */

/* ---------------------------------------------------------- forget-host */

static const struct pbx_cmd cmd_cluster_forget_host;

static int cmd_cluster_forget_host_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	int removed, rc = pbx_plain_args(&cmd_cluster_forget_host, argc, argv, 1, 1);
	if (rc)
		return rc;
	if (pbx_store_hostkey_forget(ctx->store, argv[1], &removed, &err) < 0)
		return pbx_report(&err);
	if (!removed) {
		pbx_error("no host key pinned for '%s'", argv[1]);
		return PBX_EXIT_NOTFOUND;
	}
	pbx_info("forgot the host key of %s; it is pinned again on next contact", argv[1]);
	return 0;
}

static const struct pbx_cmd cmd_cluster_forget_host = {
	.name = "forget-host",
	.summary = "forget a pinned host key (after a node was legitimately rebuilt)",
	.usage = "pbx cluster forget-host HOST",
	.description = "pbx pins each node's SSH host key on first contact and refuses a changed\n"
		       "key.  HOST is the name printed in that refusal.",
	.flags = PBX_NEED_STORE,
	.exec = cmd_cluster_forget_host_exec,
};

/* ---------------------------------------------------------------- group */

/* ---------------------------------------------------------------- power */

static const struct pbx_cmd cmd_cluster_power;

static int cmd_cluster_power_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	int i;
	for (i = 1; i < argc; i++)
		if (argv[i][0] == '-')
			return pbx_usage_error(&cmd_cluster_power, "unknown option %s", argv[i]);
	if (argc < 4)
		return pbx_usage_error(&cmd_cluster_power, "expected NAME, resume or suspend, "
							   "and nodes");
	if (strcmp(argv[2], "resume") != 0 && strcmp(argv[2], "suspend") != 0)
		return pbx_usage_error(&cmd_cluster_power, "expected resume or suspend, got '%s'",
				       argv[2]);
	if ((i = cluster_not_users(ctx, argv[1], "power")))
		return i;
	if (pbx_cluster_power(ctx->store, ctx->cfg, argv[1], argv[2], argv + 3, (size_t)(argc - 3),
			      &err) < 0)
		return pbx_report(&err);
	return 0;
}

static const struct pbx_cmd cmd_cluster_power = {
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
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.exec = cmd_cluster_power_exec,
};

/* --------------------------------------------------------- record, adopt */

static const struct pbx_cmd cmd_cluster_record;

static int cmd_cluster_record_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *json = NULL;
	int rc = pbx_plain_args(&cmd_cluster_record, argc, argv, 1, 1);
	if (rc)
		return rc;
	if (pbx_cluster_record(ctx->store, ctx->cfg, argv[1], &json, &err) < 0)
		return pbx_report(&err);
	printf("%s\n", json);
	free(json);
	return 0;
}

static const struct pbx_cmd cmd_cluster_record = {
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
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.exec = cmd_cluster_record_exec,
};

#define CLUSTER_RECORD_MAX (64u << 20) /* bytes of a record file */

static const struct pbx_cmd cmd_cluster_adopt;

static int cmd_cluster_adopt_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_buf text = PBX_BUF_INIT;
	char *name = NULL;
	int rc = pbx_plain_args(&cmd_cluster_adopt, argc, argv, 1, 1);
	if (rc)
		return rc;
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

static const struct pbx_cmd cmd_cluster_adopt = {
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
	.flags = PBX_NEED_STORE,
	.exec = cmd_cluster_adopt_exec,
};

/* ----------------------------------------------------------------- runs */

static const struct pbx_cmd cmd_cluster_runs;

static int cmd_cluster_runs_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *json = NULL;
	int rc = pbx_plain_args(&cmd_cluster_runs, argc, argv, 1, 1);
	if (rc)
		return rc;
	if (pbx_head_runs_json(ctx->store, ctx->cfg, argv[1], &json, &err) < 0)
		return pbx_report(&err);
	printf("%s\n", json);
	free(json);
	return 0;
}

static const struct pbx_cmd cmd_cluster_runs = {
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
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.exec = cmd_cluster_runs_exec,
};

static const struct pbx_cmd *const cmd_cluster_subcmds[] = {
	&cmd_cluster_start, &cmd_cluster_price,          &cmd_cluster_list,   &cmd_cluster_show,
	&cmd_cluster_ssh,   &pbx_cmd_cluster_disconnect, &cmd_cluster_exec,   &cmd_cluster_resize,
	&cmd_cluster_stop,  &cmd_cluster_forget_host,    &cmd_cluster_power,  &cmd_cluster_record,
	&cmd_cluster_adopt, &cmd_cluster_runs,           &pbx_cmd_cluster_gc, NULL,
};

const struct pbx_cmd pbx_cmd_cluster = {
	.name = "cluster",
	.summary = "create, inspect, use and delete SLURM clusters",
	.usage = "pbx cluster start [-t TEMPLATE] [--autostop DURATION] [-n [-j]] NAME\n"
		 "pbx cluster list [-a] [-j]\n"
		 "pbx cluster show [-j] NAME\n"
		 "pbx cluster ssh NAME [NODE] [-- COMMAND [ARGS...]]\n"
		 "pbx cluster exec [-n NODE] NAME -- COMMAND [ARGS...]\n"
		 "pbx cluster stop [--id ID] [-n [-j]] NAME\n"
		 "pbx cluster gc [--dry-run] [--json] NAME\n"
		 "pbx cluster forget-host HOST",
	.description = "A cluster is built from a template in $PBX_HOME/config.yaml (cloud,\n"
		       "login user, SSH key, image, head node, node groups with GPU counts).\n"
		       "The cloud 'local' builds a real multi-node SLURM cluster on this machine:\n"
		       "each node is an sshd on its own loopback address with its own root\n"
		       "prefix, bootstrapped over SSH exactly as a cloud VM is.  Without any\n"
		       "configuration file, 'pbx cluster start local' uses a built-in template\n"
		       "of 2 compute nodes with 2 GPU GRES each.  The cloud 'gce' builds it\n"
		       "from Compute Engine VMs (clouds.gce), 'aws' from EC2 instances\n"
		       "(clouds.aws: region, profile, subnet; credentials as the AWS CLI finds\n"
		       "them: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN,\n"
		       "AWS_PROFILE, ~/.aws/credentials and ~/.aws/config, instance metadata).",
	.examples = "pbx cluster start local\n"
		    "pbx cluster exec local -- srun -N2 hostname\n"
		    "pbx cluster show local --json\n"
		    "pbx cluster stop local",
	.subcmds = cmd_cluster_subcmds,
};
