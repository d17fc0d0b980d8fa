/*
 * cmd-state.c - `pbx state [PKG]`: refresh tasks from the cluster (one SSH
 * round trip per package) and show where they stand; `--watch` repeats
 * until every task has ended.
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "jobs/jobs.h"
#include "util/proc.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct pbx_cmd *state_cmd(void);

static json_t *state_task_json(const struct pbx_task_row *t)
{
	json_t *o = json_object(), *params = json_loads(t->params_json, 0, NULL);
	json_object_set_new(o, "index", json_integer(t->idx));
	json_object_set_new(o, "params", params ? params : json_object());
	json_object_set_new(o, "state", json_string(t->state));
	json_object_set_new(o, "exit_code",
			    t->exit_code >= 0 ? json_integer(t->exit_code) : json_null());
	json_object_set_new(o, "node", t->node ? json_string(t->node) : json_null());
	json_object_set_new(o, "attempt", json_integer(t->attempt));
	json_object_set_new(o, "start", t->start_time ? json_integer(t->start_time) : json_null());
	json_object_set_new(o, "end", t->end_time ? json_integer(t->end_time) : json_null());
	json_object_set_new(o, "job_id", t->job_id ? json_string(t->job_id) : json_null());
	return o;
}

static void state_print_tasks(const struct pbx_task_row *tasks, size_t n)
{
	static const char *const hdr[] = { "TASK",    "STATE", "EXIT",  "NODE",
					   "ATTEMPT", "TIME",  "PARAMS" };
	struct pbx_table *t = pbx_table_new(7, hdr);
	size_t i;
	for (i = 0; i < n; i++) {
		char idx[24], ex[16], att[16], secs[32];
		const char *cells[7];
		snprintf(idx, sizeof(idx), "%lld", (long long)tasks[i].idx);
		snprintf(ex, sizeof(ex), "%d", tasks[i].exit_code);
		snprintf(att, sizeof(att), "%d", tasks[i].attempt);
		if (tasks[i].start_time)
			snprintf(secs, sizeof(secs), "%llds",
				 (long long)((tasks[i].end_time ? tasks[i].end_time
								: (int64_t)time(NULL)) -
					     tasks[i].start_time));
		else
			snprintf(secs, sizeof(secs), "-");
		cells[0] = idx;
		cells[1] = tasks[i].state;
		cells[2] = tasks[i].exit_code >= 0 ? ex : "-";
		cells[3] = tasks[i].node;
		cells[4] = tasks[i].attempt ? att : "-";
		cells[5] = secs;
		cells[6] = tasks[i].params_json;
		pbx_table_add(t, cells);
	}
	pbx_table_print(t);
}

/* The package's environment (the experiment's environment:) as the
 * cluster last said: {"state": "READY", "key": KEY} or {"state": "FAILED",
 * "reason": WHY}; null when it has none or it is not built yet. */
static json_t *state_env_json(const char *status)
{
	if (!status)
		return json_null();
	if (!strncmp(status, "READY ", 6))
		return json_pack("{s:s, s:s}", "state", "READY", "key", status + 6);
	if (!strncmp(status, "FAILED ", 7))
		return json_pack("{s:s, s:s}", "state", "FAILED", "reason", status + 7);
	return json_null();
}

/* Under the package's line: the first task that ended without
 * completing, and the command that shows what it printed. */
static void state_print_first_failure(const char *pkg, const struct pbx_task_row *tasks, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		const struct pbx_task_row *t = &tasks[i];
		if (!pbx_task_state_final(t->state) || !strcmp(t->state, "COMPLETED"))
			continue;
		printf("  first failure: task %lld %s", (long long)t->idx, t->state);
		if (t->exit_code >= 0)
			printf(" (exit %d)", t->exit_code);
		if (t->node && *t->node && strcmp(t->node, "-") != 0)
			printf(" on %s", t->node);
		printf(": 'pbx log %s:%lld' shows its output\n", pkg, (long long)t->idx);
		return;
	}
}

/* Under the package's line: a failed environment always (every task
 * failed for it), a ready one's key with -v. */
static void state_print_env(const char *pkg, const char *status, int verbose)
{
	if (status && !strncmp(status, "FAILED ", 7))
		printf("  environment failed: %s\n  ('pbx log %s:env' shows its build log)\n",
		       status + 7, pkg);
	else if (status && verbose && !strncmp(status, "READY ", 6))
		printf("  environment %s\n", status + 6);
}

/* The clusters whose nodes this run of `state` learnt from the cloud
 * (pbx_cli_learn_awake), and those whose head's runs it took
 * (pbx_cli_head_runs): once each, however many packages ran there and
 * however many times --watch refreshes. */
struct state_once {
	char **names;
	size_t n;
};
static struct state_once state_learnt, state_runs;

/* 1 the first time `name` is asked for in *o, else 0. */
static int state_first(struct state_once *o, const char *name)
{
	size_t i;
	for (i = 0; i < o->n; i++)
		if (!strcmp(o->names[i], name))
			return 0;
	o->names = xreallocarray(o->names, o->n + 1, sizeof(*o->names));
	o->names[o->n++] = xstrdup(name);
	return 1;
}

/* Learns cluster c's awake nodes unless this run did already; never fails
 * (0: the refresh goes on). */
static int state_learn_awake(const struct pbx_ctx *ctx, struct pbx_cluster *c)
{
	if (state_first(&state_learnt, c->row.name))
		pbx_cli_learn_awake(ctx, c);
	return 0;
}

/* Once the refresh reached cluster c's head: takes the head's runs of
 * the nodes it makes, unless this run did already. */
static void state_head_runs(const struct pbx_ctx *ctx, struct pbx_cluster *c)
{
	if (state_first(&state_runs, c->row.name))
		pbx_cli_head_runs(ctx, c);
}

/* Tasks never submitted (held back by parrun --skip-done or --split, or
 * a submission cut short) and how to submit them. */
static void state_print_new(const struct pbx_jobs_target *t, const struct pbx_task_row *tasks,
			    size_t n)
{
	size_t i, k = 0;
	for (i = 0; i < n; i++)
		k += !strcmp(tasks[i].state, "NEW");
	if (k && !strcmp(t->sub.state, "submitted"))
		printf("  %zu task%s NEW, never submitted: 'pbx parrun %s %s' submits %s\n", k,
		       k == 1 ? "" : "s", t->pkg.experiment_path, t->sub.cluster_name,
		       k == 1 ? "it" : "them");
}

/* Refreshes and prints one package; *all_final tells whether every task
 * has ended, *none_completed whether none of them COMPLETED. */
static int state_one(struct pbx_ctx *ctx, const char *ref, int verbose, int json, json_t *json_list,
		     int *all_final, int *none_completed)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_jobs_target t;
	struct pbx_task_row *tasks = NULL;
	size_t n = 0, i;
	int rc = 0, live = 1;
	if (pbx_jobs_target(ctx->store, ctx->cfg, ref, 0, &t, &err) < 0)
		return pbx_report(&err);
	if (strcmp(t.sub.cluster_state, "deleted") != 0 &&
	    (pbx_cluster_open(ctx->store, ctx->cfg, t.sub.cluster_name, &t.cluster, &err) < 0 ||
	     state_learn_awake(ctx, t.cluster) < 0 || pbx_jobs_refresh(ctx->store, &t, &err) < 0)) {
		live = 0;
		if (err.code == PBX_EXIT_SECURITY) { /* shown below, but a refusal */
			pbx_error("%s: showing the last known states: %s", t.pkg.short_id, err.msg);
			rc = PBX_EXIT_SECURITY;
		} else {
			pbx_warning("%s: showing the last known states: %s", t.pkg.short_id,
				    err.msg);
		}
	}
	if (live && t.cluster)
		state_head_runs(ctx, t.cluster);
	if (pbx_store_tasks_list(ctx->store, t.sub.id, &tasks, &n, &err) < 0) {
		rc = pbx_report(&err);
		goto out;
	}
	*all_final = 1;
	*none_completed = n > 0;
	for (i = 0; i < n; i++) {
		/* a NEW task never submitted (held back by --skip-done or
		 * --split, or left by a cut submission) waits for a parrun, not
		 * for SLURM: a watch does not wait for it */
		int held = !strcmp(tasks[i].state, "NEW") && tasks[i].submits == 0 &&
			   strcmp(t.sub.state, "submitting") != 0;
		if (!pbx_task_state_final(tasks[i].state) && !held)
			*all_final = 0;
		if (!strcmp(tasks[i].state, "COMPLETED"))
			*none_completed = 0;
	}
	if (json) {
		json_t *o = json_object(), *arr = json_array();
		json_object_set_new(o, "package", json_string(t.pkg.short_id));
		json_object_set_new(o, "id", json_string(t.pkg.id));
		json_object_set_new(o, "name", json_string(t.pkg.name));
		json_object_set_new(o, "cluster", json_string(t.sub.cluster_name));
		json_object_set_new(o, "live", json_boolean(live));
		json_object_set_new(o, "counts", pbx_cli_state_counts(tasks, n));
		json_object_set_new(o, "environment", state_env_json(t.sub.environment));
		for (i = 0; i < n; i++)
			json_array_append_new(arr, state_task_json(&tasks[i]));
		json_object_set_new(o, "tasks", arr);
		if (json_list)
			json_array_append_new(json_list, o);
		else
			pbx_print_json(o);
	} else {
		char *sum = pbx_cli_state_summary(tasks, n);
		printf("%s  %-20s %-10s %s\n", t.pkg.short_id, t.pkg.name, t.sub.cluster_name, sum);
		free(sum);
		state_print_env(t.pkg.short_id, t.sub.environment, verbose);
		state_print_new(&t, tasks, n);
		if (!t.sub.environment || strncmp(t.sub.environment, "FAILED ", 7) != 0)
			state_print_first_failure(t.pkg.short_id, tasks, n);
		if (verbose)
			state_print_tasks(tasks, n);
	}
out:
	pbx_task_rows_free(tasks, n);
	pbx_jobs_target_free(&t);
	return rc;
}

static int state_all(struct pbx_ctx *ctx, int verbose, int json, int *all_final)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_package_row *pkgs;
	json_t *list = json ? json_array() : NULL;
	size_t n, i;
	int rc = 0;
	*all_final = 1;
	if (pbx_store_package_list(ctx->store, &pkgs, &n, &err) < 0)
		return pbx_report(&err);
	for (i = 0; i < n && (rc == 0 || rc == PBX_EXIT_SECURITY); i++) {
		int fin = 1, none,
		    one = state_one(ctx, pkgs[i].id, verbose, json, list, &fin, &none);
		if (one && rc != PBX_EXIT_SECURITY)
			rc = one; /* every package is shown; a refusal is kept */
		*all_final &= fin;
	}
	pbx_package_rows_free(pkgs, n);
	if (list)
		pbx_print_json(list);
	return rc;
}

struct state_opts {
	int verbose, json;
	const char *watch;
};

static const struct pbx_option state_opts[] = {
	PBX_OPT_FLAG('v', "verbose", struct state_opts, verbose,
		     "one line per task: state, exit code, node, attempt, time, parameters"),
	PBX_OPT_FLAG(
		'j', "json", struct state_opts, json,
		"print an object with \"package\", \"id\", \"name\", \"cluster\", \"live\",\n"
		"\"counts\", \"environment\" (null, or \"state\" READY with its \"key\" or\n"
		"FAILED with the \"reason\") and \"tasks\" (each with \"index\", \"params\", \"state\",\n"
		"\"exit_code\", \"node\", \"attempt\", \"start\", \"end\", \"job_id\"); an array\n"
		"of them without PKG"),
	PBX_OPT_OPTIONAL('w', "watch", "SECONDS", struct state_opts, watch,
			 "refresh every SECONDS (default 2) until every task has ended"),
	PBX_OPT_END,
};

/* The end of a watch, said where the user may not be looking: the
 * terminal's bell, and a desktop notification (notify-send, when a
 * desktop session is there: DISPLAY, WAYLAND_DISPLAY or a session bus). */
static void state_notice(struct pbx_ctx *ctx, const char *pkg, int rc)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *title;
	if (ctx->stdout_tty) {
		fputs("\a", stdout);
		fflush(stdout);
	}
	if (!getenv("DISPLAY") && !getenv("WAYLAND_DISPLAY") && !getenv("DBUS_SESSION_BUS_ADDRESS"))
		return;
	title = xasprintf("pbx: %s ended", pkg ? pkg : "every package");
	{
		const char *argv[] = { "notify-send", "--app-name=pbx", title,
				       rc ? "no task completed: 'pbx state' says which failed"
					  : "'pbx harvest' brings the results home",
				       NULL };
		pbx_run(argv, NULL, &err); /* no notify-send: nothing to say */
	}
	free(title);
}

/* A refresh interval: a number of seconds, 0.1 to a day; -1 otherwise. */
static int state_seconds(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v >= 0.1 && v <= 86400))
		return -1;
	*out = v;
	return 0;
}

static int cmd_state_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct state_opts o = { 0 };
	int verbose, json, first, rc, all_final, none_completed = 0;
	double watch = 0;
	if ((rc = pbx_opts_parse(state_cmd(), argc, argv, &o, &first)))
		return rc;
	verbose = o.verbose;
	json = o.json;
	/* `-w 5 PKG`, as people type it: the 5 is -w's (its value is optional,
	 * so getopt leaves it a word of its own) */
	if (o.watch && !o.watch[0] && argc - first == 2)
		o.watch = argv[first++];
	if (o.watch && o.watch[0] && state_seconds(o.watch, &watch) < 0)
		return pbx_usage_error(state_cmd(), "-w/--watch: '%s' is not a number of seconds",
				       o.watch);
	if (!o.watch)
		watch = 0;
	else if (!o.watch[0])
		watch = 2.0;
	if (argc - first > 1) /* max_args is 2 for `-w 5 PKG` only */
		return pbx_usage_error(state_cmd(), "expected at most one package");
	for (;;) {
		if (watch > 0 && ctx->stdout_tty)
			printf("\033[H\033[2J");
		rc = first < argc ? state_one(ctx, argv[first], verbose, json, NULL, &all_final,
					      &none_completed)
				  : state_all(ctx, verbose, json, &all_final);
		/* a script's test: PKG ended and nothing of it completed */
		if (rc == 0 && first < argc && all_final && none_completed)
			rc = PBX_EXIT_FAIL;
		if (watch > 0 && all_final && (rc == 0 || rc == PBX_EXIT_FAIL))
			state_notice(ctx, first < argc ? argv[first] : NULL, rc);
		if (rc || watch <= 0 || all_final)
			return rc;
		fflush(stdout);
		usleep((useconds_t)(watch * 1e6));
	}
}

const struct pbx_cmd pbx_cmd_state = {
	.name = "state",
	.summary = "where every task of an experiment stands",
	.usage = "pbx state [-v] [-j] [-w[SECONDS]] [PKG]",
	.description = "Refreshes the tasks of package PKG (a package id prefix or an experiment\n"
		       "name; all packages without PKG) from squeue and the tasks' own status\n"
		       "files in one SSH round trip, stores them and prints a summary.  Task\n"
		       "states: NEW (never submitted: held back by 'parrun --skip-done' or\n"
		       "'--split'; 'pbx parrun' again submits it), PENDING, RUNNING, COMPLETED,\n"
		       "FAILED, CANCELLED, TIMEOUT,\n"
		       "PREEMPTED, NODE_FAIL (the task died with its node), OUT_OF_MEMORY and\n"
		       "MISSING (submitted, but SLURM no longer knows it and it never started).\n"
		       "A task stopped by `pbx cancel` reads CANCELLED even when its job vanished\n"
		       "before it could record that itself.  A package whose environment\n"
		       "(the experiment's environment:) failed to build says so under its\n"
		       "line, with the reason; -v shows a ready one's key.  A package with a\n"
		       "task that ended without completing names the first one and the\n"
		       "'pbx log' that shows its output.\n"
		       "When the cluster cannot be reached, the last known states are shown;\n"
		       "when its host key changed they are shown too, and pbx exits 4.\n"
		       "With PKG, pbx exits 1 when every task of it has ended and none\n"
		       "COMPLETED (a script's test that a sweep failed as a whole), 0 otherwise.\n"
		       "With -w, the watch ends when every task has ended (tasks held back,\n"
		       "never submitted, are not waited for), with the terminal's bell and, in\n"
		       "a desktop session, a notification (notify-send).\n"
		       "On a power-saving cluster on a cloud it also learns, from one list of\n"
		       "the cluster's instances, which nodes the head woke or put to sleep, and\n"
		       "takes the head's own runs of them for the cluster's spend (as `pbx\n"
		       "cluster show` does).",
	.args = "PACKAGE",
	.options = state_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 0,
	.max_args = 2 /* `-w 5 PKG`: the 5 is -w's */,
	.exec = cmd_state_exec,
};

static const struct pbx_cmd *state_cmd(void)
{
	return &pbx_cmd_state;
}
