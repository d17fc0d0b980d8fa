/*
 * cmd-ls.c - `pbx ls`: the experiments (packages) pbx knows, from the
 * store alone (no network), with their node-hours and estimated cost
 * (src/results/cost.h).
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "jobs/jobs.h"
#include "results/cost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const struct pbx_cmd pbx_cmd_ls;

/* An experiment's cost fields (c NULL: never submitted, or unreadable):
 * node_hours, cost (currency units, exact to 1e-9) and cost_nanos (null
 * when unknown), currency (null when no task has a price), unpriced_tasks. */
static void ls_cost_json(json_t *o, const struct pbx_cost *c)
{
	int known = c && c->nanos >= 0;
	json_object_set_new(o, "node_hours", c ? json_real(c->node_hours) : json_real(0));
	json_object_set_new(o, "cost", known ? json_real((double)c->nanos / 1e9) : json_null());
	json_object_set_new(o, "cost_nanos", known ? json_integer(c->nanos) : json_null());
	json_object_set_new(o, "currency",
			    c && c->currency[0] ? json_string(c->currency) : json_null());
	json_object_set_new(o, "unpriced_tasks", json_integer(c ? (json_int_t)c->unpriced : 0));
}

struct ls_opts {
	int json;
};

static const struct pbx_option ls_opts[] = {
	PBX_OPT_FLAG('j', "json", struct ls_opts, json,
		     "print an array of {\"package\", \"id\", \"name\", \"cluster\", \"created\",\n"
		     "\"tasks\", \"counts\", \"git_commit\", \"node_hours\", \"cost\",\n"
		     "\"cost_nanos\", \"currency\", \"unpriced_tasks\"}"),
	PBX_OPT_END,
};

static int cmd_ls_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	static const char *const hdr[] = { "PACKAGE", "NAME",   "CLUSTER", "CREATED",
					   "TASKS",   "NODE-H", "COST" };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_package_row *pkgs;
	struct ls_opts lo = { 0 };
	int json, first, rc;
	json_t *list;
	struct pbx_table *t;
	size_t n, i;
	if ((rc = pbx_opts_parse(&pbx_cmd_ls, argc, argv, &lo, &first)))
		return rc;
	json = lo.json;
	if (pbx_store_package_list(ctx->store, &pkgs, &n, &err) < 0)
		return pbx_report(&err);
	list = json ? json_array() : NULL;
	t = json ? NULL : pbx_table_new(7, hdr);
	for (i = 0; i < n; i++) {
		struct pbx_submission_row *subs;
		struct pbx_task_row *tasks = NULL;
		size_t ns = 0, nt = 0;
		char when[32], *sum, hours[32] = "-", cost[48] = "-";
		const char *cells[7];
		struct pbx_cost c;
		int costed = 0;
		pbx_store_submissions_of(ctx->store, pkgs[i].id, &subs, &ns, &err);
		if (ns && pbx_store_tasks_list(ctx->store, subs[ns - 1].id, &tasks, &nt, &err) == 0)
			costed = pbx_cost_of(ctx->store, &subs[ns - 1], tasks, nt,
					     (int64_t)time(NULL), &c, &err) == 0;
		if (costed) {
			pbx_node_hours_text(c.node_hours, hours, sizeof(hours));
			pbx_cost_text(c.nanos, c.currency, cost, sizeof(cost));
		}
		pbx_format_time(pkgs[i].created, when, sizeof(when));
		sum = pbx_cli_state_summary(tasks, nt);
		if (list) {
			json_t *o = json_object();
			json_object_set_new(o, "package", json_string(pkgs[i].short_id));
			json_object_set_new(o, "id", json_string(pkgs[i].id));
			json_object_set_new(o, "name", json_string(pkgs[i].name));
			json_object_set_new(o, "cluster",
					    ns ? json_string(subs[ns - 1].cluster_name)
					       : json_null());
			json_object_set_new(o, "created", json_integer(pkgs[i].created));
			json_object_set_new(o, "tasks", json_integer(pkgs[i].ntasks));
			json_object_set_new(o, "counts", pbx_cli_state_counts(tasks, nt));
			json_object_set_new(o, "git_commit",
					    pkgs[i].git_commit ? json_string(pkgs[i].git_commit)
							       : json_null());
			ls_cost_json(o, costed ? &c : NULL);
			json_array_append_new(list, o);
		}
		cells[0] = pkgs[i].short_id;
		cells[1] = pkgs[i].name;
		cells[2] = ns ? subs[ns - 1].cluster_name : "-";
		cells[3] = when;
		cells[4] = sum;
		cells[5] = hours;
		cells[6] = cost;
		if (t)
			pbx_table_add(t, cells);
		free(sum);
		if (costed)
			pbx_cost_free(&c);
		pbx_task_rows_free(tasks, nt);
		pbx_submission_rows_free(subs, ns);
	}
	pbx_package_rows_free(pkgs, n);
	if (list)
		pbx_print_json(list);
	else
		pbx_table_print(t);
	return 0;
}

const struct pbx_cmd pbx_cmd_ls = {
	.name = "ls",
	.summary = "list experiments (packages) and their task states as last seen",
	.usage = "pbx ls [-j]",
	.description = "Reads the store only; 'pbx state' refreshes the states from the clusters.\n"
		       "\n"
		       "NODE-H is the node-hours of the tasks of the experiment's newest\n"
		       "submission: each task's time (end - start, until now while RUNNING) x\n"
		       "its share of its node (the GPUs it asked for over the node's, else the\n"
		       "whole node; --nodes=N counts N nodes).  COST is their estimated cost:\n"
		       "node-hours x the price an hour of the node's run (see 'pbx cluster\n"
		       "show'), summed exactly; \"-\" when a task's node has no known price, as\n"
		       "on a local cluster.  Only a task's last attempt counts.",
	.options = ls_opts,
	.flags = PBX_NEED_STORE,
	.min_args = 0,
	.max_args = 0,
	.exec = cmd_ls_exec,
};
