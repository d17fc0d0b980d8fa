/*
 * cmd-log.c - `pbx log PKG[:TASK]`: a task's stdout and stderr, streamed
 * from the cluster; --follow keeps streaming as the task writes.
 * `pbx log PKG:env` is the build log of the package's Python environment
 * (templates/pbx-env.sh).
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "jobs/jobs.h"
#include "util/fs.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct pbx_cmd pbx_cmd_log;

struct log_opts {
	int follow, out, err;
};

static const struct pbx_option log_opts[] = {
	PBX_OPT_FLAG('f', "follow", struct log_opts, follow,
		     "keep streaming as the task writes (stdout, or stderr with -e)"),
	PBX_OPT_FLAG('o', "stdout", struct log_opts, out, "only stdout"),
	PBX_OPT_FLAG('e', "stderr", struct log_opts, err, "only stderr"),
	PBX_OPT_END,
};

/* The harvested copy of task `task`'s stdout and/or stderr (which: 1, 2,
 * 3 both), for a package whose cluster is gone or cannot be reached;
 * 0, or -1 when none is home. */
static int log_harvested(const struct pbx_jobs_target *t, long task, int which, const char *why)
{
	static const char *const names[] = { "stdout", "stderr" };
	int k, found = 0;
	for (k = 0; k < 2; k++) {
		struct pbx_buf b = PBX_BUF_INIT;
		struct pbx_err err = PBX_ERR_INIT;
		char *path = xasprintf("%s/results/%s/%ld/%s", pbx_home(), t->pkg.short_id, task,
				       names[k]);
		if (pbx_read_file(path, &b, &err) == 0) {
			if (!found)
				pbx_info("%s: the harvested copy (%s/results/%s/%ld)", why,
					 pbx_home(), t->pkg.short_id, task);
			found = 1;
			if (which & (1 << k))
				pbx_cli_passthrough(NULL, k + 1, b.buf ? b.buf : "", b.len);
		}
		pbx_buf_release(&b);
		free(path);
	}
	pbx_cli_passthrough_end();
	return found ? 0 : -1;
}

static int cmd_log_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_jobs_target t;
	struct pbx_buf cmd = PBX_BUF_INIT;
	struct log_opts o = { 0 };
	int follow, which, first, status = 0, rc;
	char *pkg, *dir, *ref;
	long task;
	size_t reflen;
	bool env = false;
	if ((rc = pbx_opts_parse(&pbx_cmd_log, argc, argv, &o, &first)))
		return rc;
	follow = o.follow;
	which = o.err ? 2 : o.out ? 1 : 3; /* 1 stdout, 2 stderr, 3 both */
	ref = xstrdup(argv[first]);
	reflen = strlen(ref);
	if (reflen > 4 && !strcmp(ref + reflen - 4, ":env")) {
		env = true; /* PKG:env, the environment's build log */
		ref[reflen - 4] = '\0';
	}
	rc = pbx_cli_pkg_task(ref, &pkg, &task);
	free(ref);
	if (rc < 0)
		return PBX_EXIT_USAGE;
	rc = pbx_jobs_target(ctx->store, ctx->cfg, pkg, 0, &t, &err);
	free(pkg);
	if (task < 0)
		task = 0;
	if (rc == 0 && !env && !strcmp(t.sub.cluster_state, "deleted")) {
		char *why = xasprintf("cluster %s is gone", t.sub.cluster_name);
		rc = log_harvested(&t, task, which, why);
		free(why);
		if (rc == 0) {
			pbx_jobs_target_free(&t);
			return 0;
		}
	}
	if (rc == 0) { /* now with its cluster open */
		char *id = xstrdup(t.pkg.id);
		pbx_jobs_target_free(&t);
		rc = pbx_jobs_target(ctx->store, ctx->cfg, id, 1, &t, &err);
		free(id);
	}
	if (rc < 0) {
		pbx_jobs_target_free(&t);
		return pbx_report(&err);
	}
	if (task >= t.pkg.ntasks) {
		pbx_error("package %s has %lld tasks; no task %ld", t.pkg.short_id,
			  (long long)t.pkg.ntasks, task);
		pbx_jobs_target_free(&t);
		return PBX_EXIT_NOTFOUND;
	}
	if (env) {
		follow = 0;
		which = 1;
		dir = xasprintf("%s/env", t.sub.remote_dir);
	} else {
		dir = xasprintf("%s/tasks/%ld", t.sub.remote_dir, task);
	}
	pbx_buf_adds(&cmd, "cd ");
	pbx_shell_quote(&cmd, dir);
	pbx_buf_addf(&cmd, " 2>/dev/null || { echo '%s' >&2; exit 3; }; ",
		     env ? "the package has no environment (no environment: key), or it was never "
			   "submitted"
			 : "the task has not started yet");
	if (env)
		pbx_buf_adds(&cmd, "cat build.log 2>/dev/null || echo 'its build has not started "
				   "yet' >&2; ");
	else if (follow)
		pbx_buf_addf(&cmd, "exec tail -n +1 -F %s", which == 2 ? "stderr" : "stdout");
	else
		pbx_buf_addf(&cmd, "%s%s", which & 1 ? "cat stdout 2>/dev/null; " : "",
			     which & 2 ? "cat stderr >&2 2>/dev/null; " : "");
	pbx_buf_adds(&cmd, "exit 0");
	/* the task's bytes: as they are into a pipe, made visible on a terminal */
	rc = pbx_cluster_exec_sh(t.cluster, 0, cmd.buf, pbx_cli_passthrough, NULL, &status, &err);
	pbx_cli_passthrough_end();
	pbx_buf_release(&cmd);
	free(dir);
	if (rc < 0 && !env && !follow && err.code != PBX_EXIT_SECURITY) {
		char *why = xasprintf("cannot reach %s (%s)", t.sub.cluster_name, err.msg);
		if (log_harvested(&t, task, which, why) == 0)
			rc = status = 0;
		free(why);
	}
	pbx_jobs_target_free(&t);
	if (rc < 0)
		return pbx_report(&err);
	return status;
}

const struct pbx_cmd pbx_cmd_log = {
	.name = "log",
	.summary = "show a task's stdout and stderr",
	.usage = "pbx log [-f] [-o|-e] PKG[:TASK]",
	.description =
		"TASK defaults to 0; PKG:env shows the build log of the package's Python\n"
		"environment (the experiment's environment: key).  The task's stdout goes to stdout, the program's bytes\n"
		"alone (pipe it), and its stderr to stderr, where each attempt of the task\n"
		"starts with a '=== pbx task ... start ... ===' line and ends with an\n"
		"'=== pbx task ... end ... ===' line.  On a terminal, control characters\n"
		"other than newline and tab are shown as \\xHH (ESC as \\x1b), so that the\n"
		"task cannot retitle or clear it.  When the cluster is gone or cannot\n"
		"be reached, the harvested copy is shown, saying so.",
	.args = "TASK",
	.options = log_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_log_exec,
};
