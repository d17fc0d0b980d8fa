/*
 * harvest.c - `pbx harvest`: bring home, incrementally, every file of a
 * package's tasks that is new or changed since the last harvest.
 *
 *   1. one round trip: the tasks' status lines and a manifest of their
 *      files (path, type, size, mtime, link target), NUL-separated;
 *      The ended tasks' status lines also update the store's tasks last
 *      seen RUNNING (jobs_states_from_status, state.c);
 *   2. locally: pick the files of ended tasks (or running ones with
 *      --running) that are status/stdout/stderr/params/metrics/TensorBoard
 *      files or match the experiment's `outputs`, drop what the harvested
 *      table and the local copy show as already home, refuse (and log)
 *      unsafe names and every link but a relative one without ".."
 *      (place_link_ok); check that the results file system has room;
 *   3. one round trip: those files as one tar stream into
 *      results/PKG/.incoming, checked by the SSH layer's tar gatekeeper
 *      and member by member against what was asked for (place_expect):
 *      a stream either checker refuses installs nothing;
 *   4. each file whose size is right is renamed into place, so a file
 *      appears whole or not at all, walking results/PKG without following
 *      any link (harvest_place.c: what an earlier harvest left as a link is
 *      never written through; such a file is named and not placed); then
 *      the harvested rows and the metrics of every metrics.jsonl among
 *      them are written in ONE transaction: a file counts as harvested
 *      only with its metrics;
 *   5. on a cluster whose head deletes it (autostop_action: delete,
 *      docs/autostop.md), when every wanted file came and none was
 *      refused: one round trip writes the ended tasks' status lines to
 *      RUN_DIR/.pbx-harvested on the head, which the head checks.
 *
 * Killed at any point (kill -9 included), nothing whole is lost: the
 * extractor writes each file under a reserved name and renames it when
 * whole, so .incoming holds only whole files (plus that one partial name);
 * the next harvest keeps those whose size and mtime still match the
 * listing and fetches only the rest ("staged"), and takes files already
 * renamed into place but not yet recorded (same size and mtime as listed)
 * without fetching them ("adopted").  A metrics.jsonl recorded by an
 * older pbx without its metrics is ingested again.
 */
#define _GNU_SOURCE /* nftw */
#include "jobs/jobs_internal.h"
#include "jobs/harvest_place.h"
#include "experiment/experiment.h"
#include "results/metrics.h"
#include "util/fs.h"
#include "util/quote.h"
#include "util/testkill.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* Free space a harvest leaves on the results file system, at the least. */
#define HARVEST_MARGIN (16u << 20)
/* What one file takes on disk at the most beyond its bytes (a block). */
#define HARVEST_BLOCK  4096u

struct manifest_entry {
	int64_t idx;
	char *name;      /* "IDX/REL": the path below results/PKG (owned) */
	const char *rel; /* REL: the path inside the task directory (in name) */
	char type;       /* 'f' or 'l' */
	int64_t size, mtime;
	char *target; /* links */
	int want;     /* to be brought home (fetched unless staged) */
	int staged;   /* whole in .incoming from an interrupted harvest */
	int adopt;    /* home already but not recorded: record only */
};

struct harvest {
	struct pbx_store *st;
	struct pbx_jobs_target *t;
	const struct pbx_harvest_opts *o;
	struct pbx_harvest_stats *stats;
	struct pbx_buf *log;
	char *remote_tasks; /* absolute remote tasks directory */
	char *local_root;   /* $PBX_HOME/results/PKG */
	char *incoming;     /* local_root/.incoming */
	struct manifest_entry *m;
	size_t nm;
	unsigned char *final; /* per task index: it has ended */
	size_t ntasks;
	struct pbx_experiment *exp;
	int root_fd;                 /* local_root, or -1 while it does not exist */
	struct place_walk res;       /* walks below local_root, following no link */
	struct place_expect *expect; /* the members the stream was asked for */
	struct pbx_buf refusal;      /* why the stream was refused; empty: it was not */
	int refusal_code;
	uint64_t budget;              /* bytes the stream may bring (free space less the margin) */
	uint64_t announced;           /* bytes its members announced so far */
	size_t blocked;               /* files not placed: something in their way locally */
	struct pbx_buf blocked_first; /* the first of them, for the error */
	struct pbx_buf ended;         /* the ended tasks' status lines, as listed */
};

/* With PBX_STATS set, prints how long each phase took (to stderr). */
static void harvest_phase(const char *name)
{
	static struct timespec last;
	struct timespec now;
	if (!getenv("PBX_STATS") || !*getenv("PBX_STATS"))
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (name && last.tv_sec)
		fprintf(stderr, "pbx: harvest %-10s %.3f s\n", name,
			(double)(now.tv_sec - last.tv_sec) + (now.tv_nsec - last.tv_nsec) / 1e9);
	last = now;
}

/* ------------------------------------------------------------ manifest */

static int harvest_fetch_manifest(struct harvest *h, struct pbx_cluster_output *o,
				  struct pbx_err *err)
{
	struct pbx_buf script = PBX_BUF_INIT;
	int rc;
	/* A running task renames files while find reads (its status:
	 * .status.PID, then status): one that vanishes is not an error
	 * (-ignore_readdir_race); the next harvest sees what it became. */
	pbx_buf_addf(
		&script,
		"cd \"$PBX_SHARED/%s/tasks\" 2>/dev/null || exit 0\n"
		"pwd\n"
		"find . -mindepth 2 -maxdepth 2 -name status -type f -exec cat {} + 2>/dev/null\n"
		"echo PBX-SEP\n"
		"find . -ignore_readdir_race -mindepth 2 \\( -type f -o -type l \\) "
		"-printf '%%P\\0%%y\\0%%s\\0%%T@\\0%%l\\0'\n",
		h->t->sub.remote_dir);
	rc = pbx_cluster_run(h->t->cluster, 0, script.buf, NULL, o, err);
	pbx_buf_release(&script);
	h->stats->round_trips++;
	return rc;
}

/* Marks tasks whose status line says they ended. */
static void harvest_states(struct harvest *h, const char *p, size_t len)
{
	const char *end = p + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char idx[32], state[32];
		char line[256];
		if (l < sizeof(line)) {
			memcpy(line, p, l);
			line[l] = '\0';
			if (sscanf(line, "%31s %31s", idx, state) == 2) {
				char *e;
				unsigned long long i = strtoull(idx, &e, 10);
				if (!*e && i < h->ntasks && strcmp(state, "RUNNING") != 0) {
					h->final[i] = 1;
					pbx_buf_addf(&h->ended, "%s\n", line);
				}
			}
		}
		p += nl ? l + 1 : l;
	}
}

/* Reads one NUL-terminated field; NULL at the end of the data. */
static const char *harvest_field(const char **p, const char *end)
{
	const char *f = *p, *z;
	if (f >= end)
		return NULL;
	z = memchr(f, '\0', (size_t)(end - f));
	if (!z)
		return NULL;
	*p = z + 1;
	return f;
}

static void harvest_parse_manifest(struct harvest *h, const char *p, size_t len)
{
	const char *end = p + len, *path, *type, *size, *mtime, *target;
	size_t cap = 0;
	while ((path = harvest_field(&p, end)) && (type = harvest_field(&p, end)) &&
	       (size = harvest_field(&p, end)) && (mtime = harvest_field(&p, end)) &&
	       (target = harvest_field(&p, end))) {
		struct manifest_entry *e;
		const char *slash = strchr(path, '/');
		char *endp;
		unsigned long long idx = strtoull(path, &endp, 10);
		if (!slash || endp != slash || slash == path || !slash[1])
			continue;
		if (h->nm == cap) {
			cap = cap ? 2 * cap : 256;
			h->m = xreallocarray(h->m, cap, sizeof(*h->m));
		}
		e = &h->m[h->nm++];
		memset(e, 0, sizeof(*e));
		e->idx = (int64_t)idx;
		e->name = xasprintf("%" PRId64 "/%s", e->idx, slash + 1);
		e->rel = strchr(e->name, '/') + 1;
		e->type = type[0];
		e->size = strtoll(size, NULL, 10);
		e->mtime = (int64_t)strtod(mtime, NULL);
		e->target = xstrdup(target);
	}
}

/* ------------------------------------------------------------ selection */

static int harvest_name_ok(const char *rel)
{
	const char *p = rel;
	if (!*rel || *rel == '/')
		return 0;
	while (*p) {
		const char *q = strchr(p, '/');
		size_t l = q ? (size_t)(q - p) : strlen(p);
		if (l == 0 || (l == 2 && !memcmp(p, "..", 2)) || (l == 1 && *p == '.'))
			return 0;
		p += l + (q ? 1 : 0);
	}
	return 1;
}

/* The task wrapper links each top-level entry of the package's code into
 * the task directory; those links are not results. */
static int harvest_is_code_link(const struct harvest *h, const struct manifest_entry *e)
{
	const char *slash = h->remote_tasks ? strrchr(h->remote_tasks, '/') : NULL;
	size_t l;
	if (!slash || strchr(e->rel, '/'))
		return 0;
	l = (size_t)(slash - h->remote_tasks);
	return !strncmp(e->target, h->remote_tasks, l) && !strncmp(e->target + l, "/pkg/code/", 10);
}

static int harvest_wanted_name(const struct harvest *h, const char *rel)
{
	static const char *const always[] = { "status",          "stdout",
					      "stderr",          "params.json",
					      "metrics.jsonl",   "summary.json",
					      "environment.txt", NULL };
	size_t i;
	for (i = 0; always[i]; i++)
		if (!strcmp(rel, always[i]))
			return 1;
	if (!strncmp(rel, "events.out.tfevents.", 20) && !strchr(rel, '/'))
		return 1;
	for (i = 0; h->exp && i < h->exp->noutputs; i++)
		if (pbx_pattern_match(h->exp->outputs[i], rel, false))
			return 1;
	return 0;
}

/* Warns, in the log, of each `outputs` pattern that matches no file of any
 * ended task (a typo, or a directory the tasks never write). */
static void harvest_warn_unmatched(const struct harvest *h)
{
	size_t k, i, ended = 0;
	for (i = 0; i < h->ntasks; i++)
		ended += h->final[i];
	for (k = 0; ended && h->exp && k < h->exp->noutputs; k++) {
		for (i = 0; i < h->nm; i++) {
			int64_t idx = h->m[i].idx;
			if (idx >= 0 && (size_t)idx < h->ntasks && h->final[idx] &&
			    pbx_pattern_match(h->exp->outputs[k], h->m[i].rel, false))
				break;
		}
		if (i == h->nm)
			pbx_buf_addf(h->log,
				     "warning: %s:%d: outputs[%zu]: '%s' matches nothing in "
				     "the %zu ended task%s\n",
				     h->exp->path, h->exp->outputs_lines[k], k, h->exp->outputs[k],
				     ended, ended == 1 ? "" : "s");
	}
}

/* Whether the file below w's root at e->name is the listed file: same
 * type, size (files) or target (links), and mtime (pbx keeps the remote
 * mtime).  No link is followed on the way. */
static int harvest_same_copy(struct place_walk *w, const struct manifest_entry *e)
{
	struct place_stop stop;
	struct stat sb;
	const char *leaf;
	int dir = w->root < 0 ? -1 : place_parent(w, e->name, 0, &leaf, &stop);
	if (dir < 0 || fstatat(dir, leaf, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (int64_t)sb.st_mtime != e->mtime)
		return 0;
	if (e->type == 'l') {
		char target[4096];
		ssize_t l = S_ISLNK(sb.st_mode) ? readlinkat(dir, leaf, target, sizeof(target) - 1)
						: -1;
		if (l < 0)
			return 0;
		target[l] = '\0';
		return !strcmp(target, e->target);
	}
	return S_ISREG(sb.st_mode) && (int64_t)sb.st_size == e->size;
}

enum { NOT_HOME, HOME, HOME_UNRECORDED };

/* HOME: recorded with the same size and mtime, and still there.
 * HOME_UNRECORDED: not recorded, but the local copy is the listed file
 * (a harvest killed between placing and recording it). */
static int harvest_is_home(struct harvest *h, const struct manifest_entry *e,
			   const struct pbx_harvested *done, size_t ndone)
{
	size_t lo = 0, hi = ndone;
	int home = NOT_HOME;
	while (lo < hi) { /* done is sorted by (idx, path) */
		size_t mid = (lo + hi) / 2;
		int c = done[mid].idx < e->idx   ? -1
			: done[mid].idx > e->idx ? 1
						 : strcmp(done[mid].path, e->rel);
		if (c == 0) {
			struct stat sb;
			if (done[mid].size == e->size && done[mid].mtime == e->mtime &&
			    h->root_fd >= 0 && place_lstat(&h->res, e->name, &sb, NULL) == 0 &&
			    (e->type == 'l' ? S_ISLNK(sb.st_mode)
					    : S_ISREG(sb.st_mode) && sb.st_size == e->size))
				home = HOME;
			break;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (home == NOT_HOME && harvest_same_copy(&h->res, e))
		home = HOME_UNRECORDED;
	return home;
}

static int harvest_select(struct harvest *h, struct pbx_err *err)
{
	struct pbx_harvested *done;
	size_t ndone, i;
	if (pbx_store_harvested_list(h->st, h->t->sub.id, &done, &ndone, err) < 0)
		return -1;
	for (i = 0; i < h->nm; i++) {
		struct manifest_entry *e = &h->m[i];
		if (e->idx < 0 || (size_t)e->idx >= h->ntasks ||
		    (!h->final[e->idx] && !h->o->running) || !harvest_wanted_name(h, e->rel))
			continue;
		if (!harvest_name_ok(e->rel) || (e->type != 'f' && e->type != 'l')) {
			pbx_buf_addf(h->log,
				     "refused task %" PRId64
				     " file '%s': not a plain relative name\n",
				     e->idx, e->rel);
			h->stats->refused++;
			continue;
		}
		if (e->type == 'l' && harvest_is_code_link(h, e))
			continue; /* the wrapper's links to the package code */
		if (e->type == 'l' && !place_link_ok(e->target)) {
			pbx_buf_addf(h->log,
				     "refused task %" PRId64 " link '%s' -> '%s': only links to a"
				     " relative path without '..' are harvested\n",
				     e->idx, e->rel, e->target);
			h->stats->refused++;
			continue;
		}
		switch (harvest_is_home(h, e, done, ndone)) {
		case HOME:
			h->stats->files_skipped++;
			continue;
		case HOME_UNRECORDED:
			e->adopt = 1;
			h->stats->files_resumed++;
			continue;
		}
		e->want = 1;
		h->stats->files_wanted++;
		h->stats->bytes_wanted += (uint64_t)e->size;
	}
	harvest_warn_unmatched(h);
	pbx_harvested_free(done, ndone);
	return 0;
}

/* NUL-separated list for tar: each needed directory once, before its
 * files; every one of them goes into h->expect too. */
static void harvest_list(struct harvest *h, struct pbx_buf *list)
{
	char **dirs = NULL;
	size_t ndirs = 0, cap = 0, i, k;
	for (i = 0; i < h->nm; i++) {
		const struct manifest_entry *e = &h->m[i];
		const char *path = e->name, *p;
		if (!e->want || e->staged)
			continue;
		for (p = path; (p = strchr(p, '/')) != NULL; p++) {
			size_t l = (size_t)(p - path);
			int seen = 0;
			for (k = ndirs; k-- > 0 && !seen;)
				seen = strlen(dirs[k]) == l && !memcmp(dirs[k], path, l);
			if (seen)
				continue;
			if (ndirs == cap) {
				cap = cap ? 2 * cap : 64;
				dirs = xreallocarray(dirs, cap, sizeof(*dirs));
			}
			dirs[ndirs++] = xstrndup(path, l);
			place_expect_add(h->expect, dirs[ndirs - 1], 'd', NULL);
			pbx_buf_add(list, path, l);
			pbx_buf_addc(list, '\0');
		}
		place_expect_add(h->expect, path, e->type, e->type == 'l' ? e->target : NULL);
		pbx_buf_add(list, path, strlen(path) + 1);
	}
	for (k = 0; k < ndirs; k++)
		free(dirs[k]);
	free(dirs);
}

/* ----------------------------------------------------------- free space */

/* statvfs(2) of `path`, or of its nearest existing parent; fills *where
 * with the directory asked (caller frees). */
static int harvest_statvfs(const char *path, struct statvfs *vfs, char **where)
{
	char *p = xstrdup(path), *slash;
	while (statvfs(p, vfs) < 0) {
		slash = strrchr(p, '/');
		if (errno != ENOENT || !slash || slash == p) {
			free(p);
			return -1;
		}
		*slash = '\0';
	}
	*where = p;
	return 0;
}

static uint64_t harvest_on_disk(uint64_t bytes)
{
	return (bytes + HARVEST_BLOCK - 1) / HARVEST_BLOCK * HARVEST_BLOCK + HARVEST_BLOCK;
}

/* Before anything is written: the files to fetch (as the manifest lists
 * them) plus HARVEST_MARGIN must fit in the free space of the results file
 * system.  Sets h->budget, what the stream may bring (files still being
 * written under --running may have grown since they were listed). */
static int harvest_check_space(struct harvest *h, struct pbx_err *err)
{
	struct statvfs vfs;
	uint64_t need = 0, avail;
	size_t files = 0, i;
	char *where;
	for (i = 0; i < h->nm; i++)
		if (h->m[i].want && !h->m[i].staged) {
			need += harvest_on_disk(h->m[i].type == 'f' ? (uint64_t)h->m[i].size : 0);
			files++;
		}
	if (harvest_statvfs(h->local_root, &vfs, &where) < 0)
		return pbx_err_set(err, "cannot tell the free space for %s: %s", h->local_root,
				   strerror(errno));
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (need + HARVEST_MARGIN > avail) {
		pbx_err_set(
			err,
			"not enough free space to harvest %s: %zu file%s need %.1f MB plus a "
			"margin of %u MB, and the file system of %s has %.1f MB free; nothing was "
			"written: free some space there and run pbx harvest again",
			h->t->pkg.short_id, files, files == 1 ? "" : "s", (double)need / 1e6,
			HARVEST_MARGIN >> 20, where, (double)avail / 1e6);
		free(where);
		return -1;
	}
	h->budget = avail - HARVEST_MARGIN;
	free(where);
	return 0;
}

/* --------------------------------------------------------------- fetch */

static void harvest_bytes(void *ctx, size_t bytes)
{
	struct harvest *h = ctx;
	h->stats->bytes += bytes;
	pbx_test_kill_point("stream", h->stats->bytes);
	if (h->o->progress)
		h->o->progress(h->o->progress_ctx, h->stats);
}

/* Keeps the first reason the stream was refused (it installs nothing). */
static void harvest_refuse(struct harvest *h, int code, const char *why)
{
	if (h->refusal.len)
		return;
	pbx_buf_adds(&h->refusal, why);
	h->refusal_code = code;
}

/* The tar gatekeeper refused a member (ssh/tarcheck.c). */
static void harvest_refused(void *ctx, const char *name, const char *why)
{
	struct harvest *h = ctx;
	struct pbx_buf b = PBX_BUF_INIT;
	place_describe(&b, name);
	pbx_buf_addf(&b, ": %s", why);
	harvest_refuse(h, PBX_EXIT_SECURITY, b.buf);
	pbx_buf_release(&b);
}

/* Each member the gatekeeper passed: it must be one asked for, as the
 * manifest listed it, and fit in the free space. */
static int harvest_member(void *ctx, const struct pbx_tar_member *m, struct pbx_err *err)
{
	struct harvest *h = ctx;
	if (place_expect_member(h->expect, m, err) < 0) {
		harvest_refuse(h, err->code, err->msg);
		return -1;
	}
	h->announced += harvest_on_disk(m->size);
	if (h->announced > h->budget) {
		struct pbx_buf b = PBX_BUF_INIT;
		place_describe(&b, m->path);
		pbx_err_set(
			err,
			"%s: the stream brings more than the %.1f MB the results file system "
			"can spare (%u MB kept free); free some space and run pbx harvest again",
			b.buf, (double)h->budget / 1e6, HARVEST_MARGIN >> 20);
		pbx_buf_release(&b);
		harvest_refuse(h, err->code, err->msg);
		return -1;
	}
	return 0;
}

/* Whether the staged copy of e arrived whole; fills *sb. */
static int harvest_whole(struct place_walk *inc, const struct manifest_entry *e, struct stat *sb,
			 int fetch_ok)
{
	return place_lstat(inc, e->name, sb, NULL) == 0 &&
	       (e->type == 'l' ? S_ISLNK(sb->st_mode)
			       : S_ISREG(sb->st_mode) && (sb->st_size == e->size || fetch_ok));
}

/* A task seen for the first time whose files all arrived whole moves into
 * place with one rename of its staged directory (10,000 files: one
 * rename, not 10,000), only where results/PKG has nothing of its name.
 * Returns per task whether it moved. */
static unsigned char *harvest_move_tasks(struct harvest *h, int in_fd, const unsigned char *whole)
{
	unsigned char *seen = xcalloc(h->ntasks ? h->ntasks : 1, 1); /* 1 wanted, 2 broken */
	unsigned char *moved = xcalloc(h->ntasks ? h->ntasks : 1, 1);
	size_t i, t;
	for (i = 0; i < h->nm; i++)
		if (h->m[i].want)
			seen[h->m[i].idx] |= whole[i] ? 1 : 3;
	for (t = 0; t < h->ntasks; t++) {
		char name[32];
		if (seen[t] != 1)
			continue;
		snprintf(name, sizeof(name), "%zu", t);
		moved[t] = place_move_new(in_fd, h->root_fd, name) == 0;
	}
	free(seen);
	return moved;
}

/* Moves e from .incoming into place; when something local is in the way
 * (a link or file where a directory must be, a directory where the file
 * goes), logs it, names it in h->blocked_first and returns -1. */
static int harvest_place_one(struct harvest *h, struct place_walk *inc,
			     const struct manifest_entry *e)
{
	struct place_stop stop;
	struct pbx_buf line = PBX_BUF_INIT;
	if (place_move(inc, &h->res, e->name, &stop) == 0)
		return 0;
	place_describe(&line, e->name);
	pbx_buf_adds(&line, " not placed: ");
	if (stop.source) {
		place_explain(&line, h->incoming, e->name, &stop);
	} else {
		place_explain(&line, h->local_root, e->name, &stop);
		pbx_buf_adds(&line,
			     " (left by an earlier harvest?); pbx never writes through a link "
			     "nor replaces a directory: move it away and run pbx harvest again");
	}
	pbx_buf_addf(h->log, "%s\n", line.buf);
	if (!h->blocked++)
		pbx_buf_adds(&h->blocked_first, line.buf);
	pbx_buf_release(&line);
	return -1;
}

/* The mtime recorded for e.  A task's status brought home while the task
 * ran is recorded as -1: the task may end within the same second, its
 * final status then has the mtime of the RUNNING one, and the store would
 * take the RUNNING line for the final status (pbx_store_unharvested: a
 * status no older than the task's end), so a plain harvest would skip the
 * package and a stop would think its results home.  A -1 is never home:
 * the next harvest brings the status again. */
static int64_t harvest_recorded_mtime(const struct harvest *h, const struct manifest_entry *e)
{
	if (!strcmp(e->rel, "status") && !h->final[e->idx])
		return -1;
	return e->mtime;
}

/* Moves the files that arrived whole into place; returns how many did not. */
static size_t harvest_install(struct harvest *h, int in_fd, struct pbx_harvested **rows,
			      size_t *nrows, int fetch_ok)
{
	size_t i, missing = 0;
	struct place_walk inc;
	struct stat *sbs = xcalloc(h->nm ? h->nm : 1, sizeof(*sbs));
	unsigned char *whole = xcalloc(h->nm ? h->nm : 1, 1), *moved;
	*rows = xcalloc(h->nm ? h->nm : 1, sizeof(**rows));
	*nrows = 0;
	place_walk_init(&inc, in_fd);
	for (i = 0; i < h->nm; i++)
		if (h->m[i].want)
			whole[i] = (unsigned char)harvest_whole(&inc, &h->m[i], &sbs[i], fetch_ok);
	moved = harvest_move_tasks(h, in_fd, whole);
	for (i = 0; i < h->nm; i++) {
		struct manifest_entry *e = &h->m[i];
		if (!e->want)
			continue;
		if (moved[e->idx] || (whole[i] && harvest_place_one(h, &inc, e) == 0)) {
			struct pbx_harvested *r = &(*rows)[(*nrows)++];
			r->idx = e->idx;
			r->path = xstrdup(e->rel);
			r->size = e->type == 'f' ? (int64_t)sbs[i].st_size : e->size;
			r->mtime = harvest_recorded_mtime(h, e);
			h->stats->files_new++;
			pbx_test_kill_point("install", h->stats->files_new);
		} else {
			missing++;
		}
	}
	place_walk_release(&inc);
	free(moved);
	free(whole);
	free(sbs);
	return missing;
}

/* ---------------------------------------------------------- staging */

/* nftw() takes no context: the whole files to keep while pruning. */
static const char *prune_root;
static char **prune_keep;
static size_t prune_nkeep;

static int prune_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int prune_one(const char *path, const struct stat *sb, int type, struct FTW *f)
{
	const char *rel = path + strlen(prune_root) + 1;
	(void)sb;
	if (f->level == 0)
		return 0;
	if (type == FTW_DP)
		rmdir(path); /* fails, as it should, when something is kept inside */
	else if (!prune_nkeep ||
		 !bsearch(&rel, prune_keep, prune_nkeep, sizeof(*prune_keep), prune_cmp))
		unlink(path);
	return 0;
}

/* Keeps in .incoming the wanted files an interrupted harvest left whole
 * (same size, mtime or target as listed now, reached through real
 * directories only): they are not fetched again.  Everything else there
 * (a partial file, files no longer wanted or changed since) is removed. */
static void harvest_stage(struct harvest *h)
{
	struct place_walk inc;
	size_t i, cap = 0;
	int in_fd = h->root_fd < 0 ? -1
				   : openat(h->root_fd, ".incoming",
					    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (in_fd < 0)
		return;
	place_walk_init(&inc, in_fd);
	prune_keep = NULL;
	prune_nkeep = 0;
	for (i = 0; i < h->nm; i++) {
		struct manifest_entry *e = &h->m[i];
		if (!e->want || !harvest_same_copy(&inc, e))
			continue;
		e->staged = 1;
		h->stats->files_resumed++;
		if (prune_nkeep == cap) {
			cap = cap ? 2 * cap : 64;
			prune_keep = xreallocarray(prune_keep, cap, sizeof(*prune_keep));
		}
		prune_keep[prune_nkeep++] = xstrdup(e->name);
	}
	place_walk_release(&inc);
	close(in_fd);
	if (prune_nkeep) /* qsort and bsearch take no NULL array, even empty */
		qsort(prune_keep, prune_nkeep, sizeof(*prune_keep), prune_cmp);
	prune_root = h->incoming;
	nftw(h->incoming, prune_one, 16, FTW_DEPTH | FTW_PHYS);
	for (i = 0; i < prune_nkeep; i++)
		free(prune_keep[i]);
	free(prune_keep);
	prune_keep = NULL;
	prune_nkeep = 0;
}

/* ------------------------------------------------------------- record */

/* Ingests the local metrics.jsonl of task idx inside the open transaction;
 * a failure is logged and returns -1. */
static int harvest_ingest(struct harvest *h, int64_t idx, struct pbx_buf *warnings)
{
	struct pbx_err merr = PBX_ERR_INIT;
	size_t added = 0;
	char *path = xasprintf("%s/%" PRId64 "/metrics.jsonl", h->local_root, idx);
	static uint64_t ingested;
	int rc = pbx_results_ingest_locked(h->st, h->t->sub.id, idx, path, &added, warnings, &merr);
	pbx_test_kill_point("ingest", ++ingested);
	if (rc < 0)
		pbx_buf_addf(h->log, "%s\n", merr.msg);
	h->stats->metrics_added += added;
	free(path);
	return rc;
}

/* Records the files brought home and the metrics of every metrics.jsonl
 * among them in one transaction, so a kill leaves both or neither.  A
 * metrics.jsonl that cannot be read is not recorded (the next harvest
 * brings it again).  Also ingests again the metrics of files an older pbx
 * recorded without them. */
static int harvest_record(struct harvest *h, struct pbx_harvested *rows, size_t n,
			  struct pbx_err *err)
{
	struct pbx_harvested *keep;
	int64_t *redo = NULL;
	size_t nredo = 0, nkeep = 0, i;
	int rc;
	if (pbx_store_metrics_unmatched(h->st, h->t->sub.id, &redo, &nredo, err) < 0)
		return -1;
	if (n == 0 && nredo == 0) {
		free(redo);
		return 0;
	}
	keep = xcalloc(n ? n : 1, sizeof(*keep));
	rc = pbx_store_begin(h->st, err);
	for (i = 0; rc == 0 && i < nredo; i++)
		harvest_ingest(h, redo[i], NULL); /* its warnings were shown when it came */
	for (i = 0; rc == 0 && i < n; i++)
		if (strcmp(rows[i].path, "metrics.jsonl") != 0 ||
		    harvest_ingest(h, rows[i].idx, h->log) == 0)
			keep[nkeep++] = rows[i]; /* shallow: rows owns the paths */
	if (rc == 0 && pbx_store_harvested_put(h->st, h->t->sub.id, keep, nkeep, err) < 0) {
		pbx_store_rollback(h->st);
		rc = -1;
	}
	if (rc == 0)
		rc = pbx_store_commit(h->st, err);
	if (rc < 0)
		h->stats->metrics_added = 0;
	free(keep);
	free(redo);
	return rc;
}

/* Rows for the files found home but unrecorded, appended to *rows. */
static void harvest_adopted(struct harvest *h, struct pbx_harvested **rows, size_t *n)
{
	size_t i, k = 0;
	for (i = 0; i < h->nm; i++)
		k += h->m[i].adopt;
	if (k == 0)
		return;
	*rows = xreallocarray(*rows, *n + k, sizeof(**rows));
	for (i = 0; i < h->nm; i++) {
		struct pbx_harvested *r;
		if (!h->m[i].adopt)
			continue;
		r = &(*rows)[(*n)++];
		r->idx = h->m[i].idx;
		r->path = xstrdup(h->m[i].rel);
		r->size = h->m[i].size;
		r->mtime = harvest_recorded_mtime(h, &h->m[i]);
	}
}

/* -------------------------------------------------------------- fetch */

/* Makes sure results/PKG and its .incoming exist, .incoming as a real
 * directory, and opens them; returns .incoming's descriptor (the caller
 * closes it), or -1 with err set. */
static int harvest_open_dirs(struct harvest *h, struct pbx_err *err)
{
	int in_fd;
	if (h->root_fd < 0) {
		if (pbx_mkdir_p(h->local_root, 0755, err) < 0)
			return -1;
		h->root_fd = open(h->local_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (h->root_fd < 0)
			return pbx_err_set(err, "cannot open %s: %s", h->local_root,
					   strerror(errno));
		place_walk_init(&h->res, h->root_fd);
	}
	if (mkdirat(h->root_fd, ".incoming", 0700) < 0 && errno != EEXIST)
		return pbx_err_set(err, "cannot create %s: %s", h->incoming, strerror(errno));
	in_fd = openat(h->root_fd, ".incoming", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (in_fd < 0)
		return pbx_err_set(err, "cannot open %s as a directory: %s", h->incoming,
				   strerror(errno));
	return in_fd;
}

/* Streams the listed files into .incoming; 0, or -1 with *ferr set. */
static int harvest_stream(struct harvest *h, const struct pbx_buf *list, struct pbx_err *ferr)
{
	struct pbx_ssh_get_hooks hooks = { harvest_bytes, harvest_member, harvest_refused, h };
	struct pbx_ssh *s;
	int rc = pbx_cluster_connect(h->t->cluster, 0, &s, ferr);
	if (rc < 0)
		return -1;
	harvest_phase("connect");
	rc = pbx_ssh_get_files(s, h->remote_tasks, list, h->incoming, &hooks, ferr);
	h->stats->round_trips++;
	harvest_phase("stream");
	return rc;
}

/* Brings the wanted files home (those staged from an interrupted harvest
 * without fetching them) into place; *rows: what was placed.  A refused
 * stream places nothing; a file something local is in the way of is not
 * placed (the others are) and makes the harvest fail. */
static int harvest_fetch(struct harvest *h, struct pbx_harvested **rows, size_t *nrows,
			 struct pbx_err *err)
{
	struct pbx_buf list = PBX_BUF_INIT;
	struct pbx_err ferr = PBX_ERR_INIT;
	size_t missing;
	int rc = 0, in_fd;
	harvest_stage(h);
	if (harvest_check_space(h, err) < 0 || (in_fd = harvest_open_dirs(h, err)) < 0)
		return -1;
	harvest_list(h, &list);
	harvest_phase("prepare");
	if (list.len)
		rc = harvest_stream(h, &list, &ferr);
	if (h->refusal.len) {
		rc = pbx_err_setc(err, h->refusal_code, "%s; nothing from the stream was installed",
				  h->refusal.buf);
	} else {
		missing = harvest_install(h, in_fd, rows, nrows, rc == 0);
		harvest_phase("install");
		if (rc < 0) {
			*err = ferr;
			if (missing)
				pbx_err_prefix(err,
					       "%zu file%s not harvested (run pbx harvest again to "
					       "resume)",
					       missing, missing == 1 ? "" : "s");
		} else if (h->blocked) {
			rc = pbx_err_setc(err, PBX_EXIT_SECURITY,
					  "%zu file%s not placed (each one is "
					  "named above); the first: %s",
					  h->blocked, h->blocked == 1 ? "" : "s",
					  h->blocked_first.buf);
		}
	}
	close(in_fd);
	pbx_buf_release(&list);
	pbx_rm_rf(h->incoming, NULL); /* what was whole is in place now */
	harvest_phase("cleanup");
	return rc;
}

/* Fetches what is wanted, then records it with what was found home. */
static int harvest_bring(struct harvest *h, struct pbx_err *err)
{
	struct pbx_harvested *rows = NULL;
	size_t nrows = 0;
	struct pbx_err rerr = PBX_ERR_INIT;
	int rc = 0;
	if (h->stats->files_wanted > 0)
		rc = harvest_fetch(h, &rows, &nrows, err);
	else
		pbx_rm_rf(h->incoming, NULL); /* nothing wanted: nothing there to keep */
	harvest_adopted(h, &rows, &nrows);
	if (harvest_record(h, rows, nrows, &rerr) < 0 && rc == 0) {
		*err = rerr;
		rc = -1;
	}
	harvest_phase("record");
	pbx_harvested_free(rows, nrows);
	return rc;
}

/* After a harvest that brought every file it wanted home: the ended
 * tasks' status lines, as listed, go to the head's own disk,
 * ROOT/var/lib/pbx/harvested/PKG (root's alone, replaced whole; never the
 * shared directory, where a task could forge it: docs/SECURITY.md).  A
 * head that deletes its own cluster (autostop_action: delete,
 * templates/autostop.sh) does so only when every task's status line is in
 * it: a task that ended since, or was run again, holds results not yet
 * home.  One round trip, for such a cluster only (one that turns the
 * setting on later stops instead of deleting until its next harvest); a
 * failure is the caller's warning, never the harvest's error. */
/* Whether NAME is a file name the head's watcher takes for a package:
 * [A-Za-z0-9._-], not empty, not starting with a dot. */
static int mark_name_ok(const char *name)
{
	if (!*name || *name == '.')
		return 0;
	return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
	       strlen(name);
}

static int harvest_mark(struct harvest *h, struct pbx_err *err)
{
	struct pbx_buf script = PBX_BUF_INIT;
	struct pbx_cluster_output o;
	const char *pkg = strrchr(h->t->sub.remote_dir, '/');
	int rc;
	pkg = pkg ? pkg + 1 : h->t->sub.remote_dir;
	if (!mark_name_ok(pkg))
		return pbx_err_set(err, "the package's directory '%s' is not a plain name", pkg);
	pbx_buf_addf(
		&script,
		"d=\"${PBX_ROOT:-}/var/lib/pbx/harvested\"\n"
		"umask 077 && mkdir -p \"$d\" || exit 1\n"
		"[ -d \"$d\" ] && [ ! -L \"$d\" ] && [ \"$(stat -c %%u \"$d\")\" = \"$(id -u)\" ] ||"
		" { echo \"$d is not a directory of $(id -un)'s\" >&2; exit 1; }\n"
		"t=$(mktemp \"$d/.new.XXXXXX\") && { cat >\"$t\" && mv -f \"$t\" \"$d/%s\"; } ||"
		" { rm -f \"$t\"; exit 1; }\n",
		pkg);
	rc = pbx_cluster_run(h->t->cluster, 0, script.buf, &h->ended, &o, err);
	if (rc == 0)
		pbx_cluster_output_release(&o);
	pbx_buf_release(&script);
	h->stats->round_trips++;
	return rc;
}

/* ---------------------------------------------------------------- main */

static void harvest_free(struct harvest *h)
{
	size_t i;
	for (i = 0; i < h->nm; i++) {
		free(h->m[i].name);
		free(h->m[i].target);
	}
	free(h->m);
	place_walk_release(&h->res);
	if (h->root_fd >= 0)
		close(h->root_fd);
	place_expect_free(h->expect);
	pbx_buf_release(&h->refusal);
	pbx_buf_release(&h->blocked_first);
	pbx_buf_release(&h->ended);
	free(h->final);
	free(h->remote_tasks);
	free(h->local_root);
	free(h->incoming);
	pbx_experiment_free(h->exp);
}

int pbx_jobs_harvest(struct pbx_store *st, struct pbx_jobs_target *t,
		     const struct pbx_harvest_opts *o, struct pbx_harvest_stats *stats,
		     struct pbx_buf *log, struct pbx_err *err)
{
	struct harvest h = { .st = st,
			     .t = t,
			     .o = o,
			     .stats = stats,
			     .log = log,
			     .refusal = PBX_BUF_INIT,
			     .blocked_first = PBX_BUF_INIT,
			     .ended = PBX_BUF_INIT };
	struct pbx_cluster_output out;
	struct pbx_err perr = PBX_ERR_INIT;
	const char *after;
	size_t before, afterlen;
	struct timespec t0, t1;
	int rc;

	memset(stats, 0, sizeof(*stats));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	h.ntasks = (size_t)t->pkg.ntasks;
	h.final = xcalloc(h.ntasks ? h.ntasks : 1, 1);
	h.local_root = xasprintf("%s/results/%s", pbx_home(), t->pkg.short_id);
	h.incoming = xasprintf("%s/.incoming", h.local_root);
	h.root_fd = open(h.local_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* -1: none yet */
	place_walk_init(&h.res, h.root_fd);
	h.expect = place_expect_new();
	if (pbx_experiment_parse(t->pkg.experiment_path, t->pkg.experiment_text,
				 strlen(t->pkg.experiment_text), NULL, &h.exp, &perr) < 0)
		h.exp = NULL; /* outputs unknown: harvest the standard files only */
	harvest_phase(NULL);
	rc = harvest_fetch_manifest(&h, &out, err);
	harvest_phase("manifest");
	if (rc == 0) {
		const char *nl = memchr(out.out.buf, '\n', out.out.len);
		if (nl && jobs_split(nl + 1, out.out.len - (size_t)(nl + 1 - out.out.buf),
				     "PBX-SEP", &after, &before, &afterlen) == 0) {
			h.remote_tasks = xstrndup(out.out.buf, (size_t)(nl - out.out.buf));
			harvest_states(&h, nl + 1, before);
			harvest_parse_manifest(&h, after, afterlen);
		}
		{ /* what the status lines say, the store learns (`pbx state`
		   * would too): a failure here is not the harvest's */
			struct pbx_err serr = PBX_ERR_INIT;
			if (jobs_states_from_status(st, t->sub.id, h.ended.buf ? h.ended.buf : "",
						    h.ended.len, &serr) < 0 &&
			    log)
				pbx_buf_addf(log, "warning: task states not updated: %s\n",
					     serr.msg);
		}
		pbx_cluster_output_release(&out);
		rc = harvest_select(&h, err);
		harvest_phase("select");
	}
	if (rc == 0)
		rc = harvest_bring(&h, err);
	if (rc == 0 && h.ended.len && !h.blocked && !stats->refused &&
	    pbx_head_deletes(h.t->cluster)) {
		struct pbx_err merr = PBX_ERR_INIT;
		/* the files are home whatever happens here: a failure is a warning
		 * (a head that would delete its cluster then stops it instead) */
		if (harvest_mark(&h, &merr) < 0 && log)
			pbx_buf_addf(
				log,
				"warning: could not record on the head that every result is home (%s): "
				"with autostop_action: delete it stops instead of deleting "
				"until a harvest records it\n",
				merr.msg);
		harvest_phase("mark");
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	stats->seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	for (size_t i = 0; i < h.ntasks; i++)
		stats->tasks_ended += h.final[i];
	harvest_free(&h);
	return rc;
}
