/*
 * cmd-harvest.c - `pbx harvest [PKG]`: bring results home, incrementally,
 * with a files/bytes/rate display; `--json` prints a summary per package.
 */
#include "cli/cmd.h"
#include "cli/jobs_cli.h"
#include "cli/output.h"
#include "jobs/jobs.h"
#include "util/fs.h"
#include "util/visible.h"
#include "util/xalloc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern const struct pbx_cmd pbx_cmd_harvest;

struct harvest_display {
	const char *pkg;
	int live;           /* stderr is a terminal and not quiet */
	double start, last; /* first and latest redraw (monotonic seconds) */
};

static double harvest_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void harvest_show(void *ctx, const struct pbx_harvest_stats *s)
{
	struct harvest_display *d = ctx;
	double now = harvest_now();
	if (!d->live)
		return;
	if (d->start == 0)
		d->start = now;
	if (now - d->last < 0.1)
		return;
	d->last = now;
	fprintf(stderr, "\r\033[2Kharvest %s: %zu files, %.1f / %.1f MB, %.1f MB/s", d->pkg,
		s->files_wanted, (double)s->bytes / 1e6, (double)s->bytes_wanted / 1e6,
		now > d->start ? (double)s->bytes / 1e6 / (now - d->start) : 0.0);
}

static json_t *harvest_json(const char *pkg, const struct pbx_harvest_stats *s)
{
	json_t *o = json_object();
	json_object_set_new(o, "package", json_string(pkg));
	json_object_set_new(o, "tasks_ended", json_integer((json_int_t)s->tasks_ended));
	json_object_set_new(o, "files", json_integer((json_int_t)s->files_new));
	json_object_set_new(o, "files_unchanged", json_integer((json_int_t)s->files_skipped));
	json_object_set_new(o, "files_resumed", json_integer((json_int_t)s->files_resumed));
	json_object_set_new(o, "refused", json_integer((json_int_t)s->refused));
	json_object_set_new(o, "bytes", json_integer((json_int_t)s->bytes));
	json_object_set_new(o, "metrics_added", json_integer((json_int_t)s->metrics_added));
	json_object_set_new(o, "round_trips", json_integer(s->round_trips));
	json_object_set_new(o, "seconds", json_real(s->seconds));
	return o;
}

static int harvest_one(struct pbx_ctx *ctx, const char *ref, int running, json_t *list)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_jobs_target t;
	struct pbx_harvest_stats s;
	struct pbx_buf log = PBX_BUF_INIT;
	struct harvest_display d = { NULL, 0, 0, 0 };
	struct pbx_harvest_opts o = { running, harvest_show, &d };
	int rc = pbx_jobs_target(ctx->store, ctx->cfg, ref, 1, &t, &err);
	if (rc == 0) {
		d.pkg = t.pkg.short_id;
		d.live = ctx->stderr_tty && !ctx->quiet;
		rc = pbx_jobs_harvest(ctx->store, &t, &o, &s, &log, &err);
		if (d.live)
			fprintf(stderr, "\r\033[2K");
		if (log.len) { /* names files and tasks of the node's */
			char *shown = pbx_visible(log.buf, PBX_VISIBLE_LAYOUT);
			fputs(shown, stderr);
			free(shown);
		}
		if (list)
			json_array_append_new(list, harvest_json(t.pkg.short_id, &s));
		else
			printf("%s: %zu new file%s (%.1f MB) from %zu ended task%s in %.2f s; %zu unchanged,"
			       " %zu refused, %zu metric points added\n",
			       t.pkg.short_id, s.files_new, s.files_new == 1 ? "" : "s",
			       (double)s.bytes / 1e6, s.tasks_ended, s.tasks_ended == 1 ? "" : "s",
			       s.seconds, s.files_skipped, s.refused, s.metrics_added);
		if (!list && s.files_resumed)
			pbx_info(
				"%zu file%s left whole by an interrupted harvest kept, not fetched again",
				s.files_resumed, s.files_resumed == 1 ? "" : "s");
		if (rc == 0)
			pbx_info("results in %s/results/%s", pbx_home(), t.pkg.short_id);
	}
	pbx_buf_release(&log);
	pbx_jobs_target_free(&t);
	return rc < 0 ? pbx_report(&err) : 0;
}

/* What plain `pbx harvest` left out, said once at the end. */
struct harvest_skips {
	size_t done, gone;    /* packages fully harvested; on deleted clusters */
	char **down;          /* clusters that could not be reached (names) */
	size_t ndown, downed; /* those, and the packages they held */
};

static int harvest_is_down(const struct harvest_skips *k, const char *cluster)
{
	size_t i;
	for (i = 0; i < k->ndown; i++)
		if (!strcmp(k->down[i], cluster))
			return 1;
	return 0;
}

/* Every package: those with results still to bring, once per reachable
 * cluster; a cluster that fails is said once and its other packages are
 * left for the next harvest. */
static int harvest_all(struct pbx_ctx *ctx, int running, json_t *list)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_package_row *pkgs;
	struct harvest_skips k = { 0 };
	size_t n, i;
	int rc = 0;
	if (pbx_store_package_list(ctx->store, &pkgs, &n, &err) < 0)
		return pbx_report(&err);
	for (i = 0; i < n; i++) {
		struct pbx_jobs_target t;
		int r;
		if (pbx_jobs_target(ctx->store, ctx->cfg, pkgs[i].id, 0, &t, &err) < 0) {
			pbx_err_clear(&err);
			continue;
		}
		if (!strcmp(t.sub.cluster_state, "deleted"))
			k.gone++;
		else if (harvest_is_down(&k, t.sub.cluster_name))
			k.downed++;
		else if (!pbx_cli_results_pending(ctx->store, t.sub.cluster_id, t.sub.id, NULL,
						  NULL))
			k.done++;
		else if ((r = harvest_one(ctx, pkgs[i].id, running, list)) != 0) {
			if (!rc)
				rc = r;
			k.down = xreallocarray(k.down, k.ndown + 1, sizeof(*k.down));
			k.down[k.ndown++] = xstrdup(t.sub.cluster_name);
		}
		pbx_jobs_target_free(&t);
	}
	pbx_package_rows_free(pkgs, n);
	if (k.done && !list)
		pbx_info("%zu package%s already home whole (every task ended and harvested): "
			 "skipped",
			 k.done, k.done == 1 ? "" : "s");
	if (k.gone)
		pbx_info("%zu package%s on clusters that are gone: skipped (what was harvested "
			 "is in %s/results)",
			 k.gone, k.gone == 1 ? "" : "s", pbx_home());
	if (k.downed)
		pbx_warning("%zu more package%s on the cluster%s that could not be reached, left "
			    "for the next harvest",
			    k.downed, k.downed == 1 ? "" : "s", k.ndown == 1 ? "" : "s");
	for (i = 0; i < k.ndown; i++)
		free(k.down[i]);
	free(k.down);
	return rc;
}

struct harvest_opts {
	int running, json;
};

static const struct pbx_option harvest_opts[] = {
	PBX_OPT_FLAG('r', "running", struct harvest_opts, running,
		     "also harvest tasks that are still running (their files as they are now)"),
	PBX_OPT_FLAG(
		'j', "json", struct harvest_opts, json,
		"print an array of {\"package\", \"tasks_ended\", \"files\", \"files_unchanged\",\n"
		"\"refused\", \"bytes\", \"metrics_added\", \"round_trips\", \"seconds\"}"),
	PBX_OPT_END,
};

/* Ctrl-C (or a TERM) during a harvest: what is kept and what to do, then
 * the signal's own death.  Only async-signal-safe calls. */
static void harvest_interrupted(int sig)
{
	static const char msg[] =
		"\npbx: harvest interrupted: every file that came whole is kept; 'pbx harvest' "
		"again fetches the rest\n";
	ssize_t w = write(2, msg, sizeof(msg) - 1);
	(void)w;
	signal(sig, SIG_DFL);
	raise(sig);
}

static int cmd_harvest_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct harvest_opts o = { 0 };
	int running, json, first, rc = 0;
	json_t *list;
	if ((rc = pbx_opts_parse(&pbx_cmd_harvest, argc, argv, &o, &first)))
		return rc;
	running = o.running;
	json = o.json;
	list = json ? json_array() : NULL;
	signal(SIGINT, harvest_interrupted);
	signal(SIGTERM, harvest_interrupted);
	if (first < argc) {
		rc = harvest_one(ctx, argv[first], running, list);
	} else {
		rc = harvest_all(ctx, running, list);
	}
	if (list)
		pbx_print_json(list);
	return rc;
}

const struct pbx_cmd pbx_cmd_harvest = {
	.name = "harvest",
	.summary = "bring the results of experiments home, incrementally",
	.usage = "pbx harvest [-r] [-j] [PKG]",
	.description =
		"For every ended task of PKG (all packages without PKG), fetches what is new\n"
		"or changed since the last harvest: status, stdout, stderr, params.json,\n"
		"metrics.jsonl, summary.json, environment.txt, TensorBoard event files and the\n"
		"files matching the experiment's 'outputs', into $PBX_HOME/results/PKG/TASK/.  One round trip\n"
		"lists the files, one tar stream per cluster brings them.  Each file appears\n"
		"whole or not at all (written under .incoming, checked, renamed); a harvest cut\n"
		"short keeps every file that arrived whole and the next one fetches the rest.\n"
		"The points of metrics.jsonl files go into the store (see pbx-report(1));\n"
		"harvesting twice adds nothing.  A task last seen RUNNING whose status file\n"
		"says it ended gets that state in the store, as 'pbx state' would give it.\n"
		"Without PKG, packages already home whole (every task ended and harvested)\n"
		"and those on deleted clusters are skipped, and a cluster that cannot be\n"
		"reached is said once: its other packages wait for the next harvest.\n"
		"Nothing is written outside the results directory, whatever the tasks leave:\n"
		"names that are absolute or have '..' are refused and reported.  A link is\n"
		"brought home, as a link, only when its target is relative with no '..'\n"
		"component (it points at or below its own directory); other links are\n"
		"refused and reported without failing the harvest.  Files are placed without\n"
		"following any link: where a link or file left by an earlier harvest stands\n"
		"where a directory must be, or a directory where a file or link goes, that\n"
		"file is not placed and is named (task and path), the others are, and the\n"
		"harvest exits 4; move the local path away and harvest again.  The tar stream\n"
		"must carry exactly what was listed (same types, same link targets): if not,\n"
		"or if its checks refuse a member, nothing from it is installed and the\n"
		"harvest exits 4 naming the task and path.  The files' sizes plus 16 MB must\n"
		"be free on the results file system before anything is fetched; otherwise\n"
		"the harvest stops (exit 1) saying how much is needed and free, and where.\n"
		"An 'outputs' pattern (pbx-experiment(5), Patterns) that matches no file of\n"
		"any ended task is reported as a warning naming its file and line.",
	.args = "PACKAGE",
	.options = harvest_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 0,
	.max_args = 1,
	.exec = cmd_harvest_exec,
};
