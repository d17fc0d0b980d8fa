/*
 * cmd-cluster-info.c - `pbx cluster list` and `pbx cluster show`: what
 * the store knows of the clusters, their spend, and (show) the live SLURM
 * states of a cluster's nodes.  Also the two steps `show` and `state`
 * share before they use a cluster's nodes (pbx_cli_learn_awake,
 * pbx_cli_head_runs; cmd.h).
 */
#include "cli/cluster_cli.h"
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "slurm/sacctmgr.h"
#include "slurm/squeue.h"
#include "util/duration.h"
#include "util/money.h"
#include "util/visible.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ----------------------------------------------------------------- list */

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
	json_object_set_new(o, "spent", priced ? pbx_cli_price_money(s->spent) : json_null());
	json_object_set_new(o, "hourly", priced ? pbx_cli_price_money(s->hourly) : json_null());
	json_object_set_new(o, "currency", priced ? json_string(s->currency) : json_null());
	json_object_set_new(o, "node_hours", json_real((double)s->seconds / 3600.0));
	json_object_set_new(o, "unpriced_runs", json_integer((json_int_t)s->unpriced));
	json_object_set_new(o, "budget", budget > 0 ? pbx_cli_price_money(budget) : json_null());
}

/* "12.3456 USD" (or "-" when nothing was priced) into out. */
static void cluster_spend_text(const struct pbx_spend *s, int64_t nanos, char *out, size_t len)
{
	char amount[32];
	if (!s->currency[0]) {
		snprintf(out, len, "-");
		return;
	}
	pbx_cli_price_amount(nanos, amount);
	snprintf(out, len, "%s %s%s", amount, s->currency, s->unpriced ? " + ?" : "");
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
	if ((rc = pbx_opts_parse(&pbx_cmd_cluster_list, argc, argv, &lo, &first)))
		return rc;
	json = lo.json;
	all = lo.all;
	refresh = lo.refresh;
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
			pbx_format_time(rows[i].created, when, sizeof(when));
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

const struct pbx_cmd pbx_cmd_cluster_list = {
	.name = "list",
	.summary = "list clusters",
	.usage = "pbx cluster list [-a] [-j] [-r]",
	.options = cluster_list_opts,
	.flags = PBX_NEED_STORE,
	.min_args = 0,
	.max_args = 0,
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
	pbx_format_time(c->row.created, since, sizeof(since));
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

/* The template's way out (proxy:, docs/configuration.md), when it has one. */
static void cluster_print_proxy(const struct pbx_cluster_template *t)
{
	size_t i;
	if (!t || !t->proxy)
		return;
	printf("outbound: through the proxy %s", t->proxy);
	for (i = 0; i < t->nno_proxy; i++)
		printf("%s%s", i ? ", " : " (not for ", t->no_proxy[i]);
	printf("%s\n", t->nno_proxy ? ")" : "");
}

static int cmd_cluster_show_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT, serr = PBX_ERR_INIT;
	struct pbx_cluster *c = ctx->cluster;
	struct pbx_sinfo_node *sn = NULL;
	struct pbx_spend spend;
	size_t nsn = 0, i;
	struct show_opts so = { 0 };
	int json, live, first, rc;
	char *exposure, *stopped, *last;
	if ((rc = pbx_opts_parse(&pbx_cmd_cluster_show, argc, argv, &so, &first)))
		return rc;
	json = so.json;
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
		cluster_print_proxy(c->spec.t);
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
	/* what the store knows was shown; a refused host key is still a refusal */
	if (!live && serr.code == PBX_EXIT_SECURITY)
		return pbx_report(&serr);
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_show = {
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
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE | PBX_NEED_CLUSTER,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_show_exec,
};
