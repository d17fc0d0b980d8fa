/*
 * cmd-ls.c - `pbx ls`: the experiments (packages) pbx knows, from the
 * store alone (no network).
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "jobs/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const struct pbx_cmd pbx_cmd_ls;

static int cmd_ls_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	static const char *const hdr[] = { "PACKAGE", "NAME", "CLUSTER", "CREATED", "TASKS" };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_package_row *pkgs;
	int json = argc > 1 && (!strcmp(argv[1], "--json") || !strcmp(argv[1], "-j"));
	json_t *list;
	struct pbx_table *t;
	size_t n, i;
	if (argc > 1 + json)
		return pbx_usage_error(&pbx_cmd_ls, "unexpected argument");
	if (pbx_store_package_list(ctx->store, &pkgs, &n, &err) < 0)
		return pbx_report(&err);
	list = json ? json_array() : NULL;
	t = json ? NULL : pbx_table_new(5, hdr);
	for (i = 0; i < n; i++) {
		struct pbx_submission_row *subs;
		struct pbx_task_row *tasks = NULL;
		size_t ns = 0, nt = 0;
		char when[32], *sum;
		time_t tt = (time_t)pkgs[i].created;
		struct tm tm;
		const char *cells[5];
		pbx_store_submissions_of(ctx->store, pkgs[i].id, &subs, &ns, &err);
		if (ns)
			pbx_store_tasks_list(ctx->store, subs[ns - 1].id, &tasks, &nt, &err);
		localtime_r(&tt, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
		sum = pbx_cli_state_summary(tasks, nt);
		if (list) {
			json_t *o = json_object();
			json_object_set_new(o, "package", json_string(pkgs[i].short_id));
			json_object_set_new(o, "id", json_string(pkgs[i].id));
			json_object_set_new(o, "name", json_string(pkgs[i].name));
			json_object_set_new(o, "cluster", ns ? json_string(subs[ns - 1].cluster_name) : json_null());
			json_object_set_new(o, "created", json_integer(pkgs[i].created));
			json_object_set_new(o, "tasks", json_integer(pkgs[i].ntasks));
			json_object_set_new(o, "counts", pbx_cli_state_counts(tasks, nt));
			json_object_set_new(o, "git_commit", pkgs[i].git_commit ? json_string(pkgs[i].git_commit) : json_null());
			json_array_append_new(list, o);
		}
		cells[0] = pkgs[i].short_id;
		cells[1] = pkgs[i].name;
		cells[2] = ns ? subs[ns - 1].cluster_name : "-";
		cells[3] = when;
		cells[4] = sum;
		if (t)
			pbx_table_add(t, cells);
		free(sum);
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

static const struct pbx_opt_doc ls_opts[] = {
	{ "-j, --json", "print an array of {\"package\", \"id\", \"name\", \"cluster\", \"created\",\n"
			"\"tasks\", \"counts\", \"git_commit\"}" },
	{ NULL, NULL },
};

const struct pbx_cmd pbx_cmd_ls = {
	.name = "ls",
	.summary = "list experiments (packages) and their task states as last seen",
	.usage = "pbx ls [-j]",
	.description = "Reads the store only; 'pbx state' refreshes the states from the clusters.",
	.options = ls_opts,
	.flags = PBX_NEED_STORE,
	.exec = cmd_ls_exec,
};
