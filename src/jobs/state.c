/*
 * state.c - where every task of a package stands (`pbx state`), and the
 * operations that act on tasks (`rerun`, `cancel`).
 *
 * One round trip gathers `squeue -r` for the package's job name and every
 * task's one-line status file.  The rules, per task:
 *   - squeue lists it: SLURM's state (mapped: PENDING, RUNNING, ...), with
 *     node, attempt and start from its status file when there is one;
 *   - otherwise its status file decides: COMPLETED / FAILED / CANCELLED as
 *     written, but a task that ended after `pbx cancel` is CANCELLED, as
 *     SLURM calls a job cancelled while it ran whatever its exit (a program
 *     whose `sleep` took the TERM and went on to exit 0 before its wrapper
 *     was signalled wrote COMPLETED); RUNNING with no job left means the task died with its node
 *     (NODE_FAIL), unless `pbx cancel` cancelled it (CANCELLED: the wrapper
 *     was killed before it could say so); REQUEUED with no job left means
 *     the requeued job vanished (MISSING, or CANCELLED after `pbx cancel`);
 *   - otherwise a submitted task that SLURM no longer knows and that never
 *     started is CANCELLED when `pbx cancel` cancelled it, else MISSING; a
 *     task never submitted stays NEW.
 */
#include "jobs/jobs_internal.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pbx_task_state_final(const char *s)
{
	static const char *const final[] = { "COMPLETED", "FAILED",    "CANCELLED",
					     "TIMEOUT",   "NODE_FAIL", "OUT_OF_MEMORY",
					     "PREEMPTED", "MISSING",   NULL };
	size_t i;
	for (i = 0; final[i]; i++)
		if (!strcmp(s, final[i]))
			return 1;
	return 0;
}

int pbx_task_state_known(const char *s)
{
	static const char *const live[] = { "NEW", "PENDING", "RUNNING", "UNKNOWN", NULL };
	size_t i;
	if (!s)
		return 0;
	for (i = 0; live[i]; i++)
		if (!strcmp(s, live[i]))
			return 1;
	return pbx_task_state_final(s);
}

int pbx_task_state_rerunnable(const char *s)
{
	return pbx_task_state_final(s) && strcmp(s, "COMPLETED") != 0;
}

/* --------------------------------------------------------------- target */

int pbx_jobs_target(struct pbx_store *st, const struct pbx_config *cfg, const char *ref,
		    int open_cluster, struct pbx_jobs_target *t, struct pbx_err *err)
{
	struct pbx_submission_row *subs;
	size_t n;
	memset(t, 0, sizeof(*t));
	if (pbx_store_package_find(st, ref, &t->pkg, err) < 0)
		return -1;
	if (pbx_store_submissions_of(st, t->pkg.id, &subs, &n, err) < 0)
		return -1;
	if (n == 0) {
		free(subs);
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "package %s was never submitted",
				    t->pkg.short_id);
	}
	t->sub = subs[n - 1]; /* ownership moves to t */
	memset(&subs[n - 1], 0, sizeof(subs[n - 1]));
	pbx_submission_rows_free(subs, n);
	if (open_cluster) {
		if (!strcmp(t->sub.cluster_state, "deleted"))
			return pbx_err_setc(err, PBX_EXIT_NOTFOUND,
					    "package %s ran on cluster %s, which was stopped",
					    t->pkg.short_id, t->sub.cluster_name);
		return pbx_cluster_open(st, cfg, t->sub.cluster_name, &t->cluster, err);
	}
	return 0;
}

void pbx_jobs_target_free(struct pbx_jobs_target *t)
{
	pbx_package_row_free(&t->pkg);
	pbx_submission_row_free(&t->sub);
	pbx_cluster_close(t->cluster);
	t->cluster = NULL;
}

/* -------------------------------------------------------------- refresh */

struct status_line {
	int present;
	char state[64];
	int exit_code;
	char node[64];
	int attempt;
	int64_t start, end;
	char job[64];
};

static int64_t field_num(const char *s)
{
	return strcmp(s, "-") ? strtoll(s, NULL, 10) : 0;
}

/* Parses "INDEX STATE EXIT NODE ATTEMPT START END JOBID" lines. */
static void parse_status(const char *p, size_t len, struct status_line *lines, size_t n)
{
	const char *end = p + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char buf[512], f[8][64];
		if (l < sizeof(buf)) {
			memcpy(buf, p, l);
			buf[l] = '\0';
			if (sscanf(buf, "%63s %63s %63s %63s %63s %63s %63s %63s", f[0], f[1], f[2],
				   f[3], f[4], f[5], f[6], f[7]) == 8) {
				char *e;
				unsigned long long idx = strtoull(f[0], &e, 10);
				if (!*e && idx < n) {
					struct status_line *s = &lines[idx];
					s->present = 1;
					snprintf(s->state, sizeof(s->state), "%s", f[1]);
					s->exit_code = strcmp(f[2], "-") ? atoi(f[2]) : -1;
					snprintf(s->node, sizeof(s->node), "%s", f[3]);
					s->attempt = (int)field_num(f[4]);
					s->start = field_num(f[5]);
					s->end = field_num(f[6]);
					snprintf(s->job, sizeof(s->job), "%s", f[7]);
				}
			}
		}
		p += nl ? l + 1 : l;
	}
}

void jobs_apply_squeue(const struct pbx_squeue_job *jobs, size_t nj,
		       const struct pbx_array_row *arrays, size_t na, const char **live, size_t n)
{
	size_t j, a;
	for (j = 0; j < nj; j++) {
		char jid[32];
		snprintf(jid, sizeof(jid), "%ld", jobs[j].array_job);
		for (a = 0; a < na; a++) {
			int64_t lo, hi, v, first = arrays[a].first_task;
			if (!arrays[a].job_id || strcmp(arrays[a].job_id, jid) != 0 || first < 0 ||
			    (uint64_t)first >= n)
				continue;
			lo = jobs[j].array_task >= 0 ? jobs[j].array_task : jobs[j].range_lo;
			hi = jobs[j].array_task >= 0 ? jobs[j].array_task : jobs[j].range_hi;
			/* Clamped to the experiment's tasks: squeue's range is
			 * input, "1_[0-999999999999]" must not be walked. */
			if (lo < 0)
				lo = 0;
			if (hi > (int64_t)n - 1 - first)
				hi = (int64_t)n - 1 - first;
			for (v = lo; v <= hi; v++)
				live[first + v] = pbx_slurm_task_state(jobs[j].state);
		}
	}
}

/* The state a status file reports, or NULL when it names no known state
 * (a hand-edited or truncated file must not reach the store). */
static const char *status_state(const struct status_line *s)
{
	if (!s->present || !strcmp(s->state, "NEW") ||
	    (!pbx_task_state_known(s->state) && strcmp(s->state, "REQUEUED") != 0))
		return NULL; /* REQUEUED: the wrapper's word for "exit 75, job requeued" */
	return s->state;
}

const char *jobs_ended_state(const char *reported, int64_t end, int64_t cancelled_at)
{
	if (cancelled_at && end >= cancelled_at - JOBS_CLOCK_SLACK_S &&
	    (!strcmp(reported, "COMPLETED") || !strcmp(reported, "FAILED")))
		return "CANCELLED";
	return reported;
}

static void merge_task(struct pbx_task_row *t, const struct status_line *s, const char *live)
{
	const char *reported = status_state(s);
	const char *state = NULL; /* NULL: the recorded state stands */
	if (live) {
		state = live;
	} else if (reported) {
		if (!strcmp(reported, "REQUEUED")) /* its job should be pending again */
			state = t->cancel_requested ? "CANCELLED" : "MISSING";
		else if (strcmp(reported, "RUNNING") != 0)
			state = jobs_ended_state(reported, s->end, t->cancel_requested);
		else
			state = t->cancel_requested ? "CANCELLED" : "NODE_FAIL";
	} else if (t->submits > 0 && !pbx_task_state_final(t->state)) {
		state = t->cancel_requested ? "CANCELLED" : "MISSING";
	} else if (!pbx_task_state_known(t->state)) {
		state = t->submits > 0 ? "UNKNOWN" : "NEW";
	}
	if (state) { /* never free what `state` may point into */
		char *copy = xstrdup(state);
		free(t->state);
		t->state = copy;
	}
	if (reported) {
		t->exit_code = live ? -1 : s->exit_code;
		free(t->node);
		t->node = strcmp(s->node, "-") ? xstrdup(s->node) : NULL;
		t->attempt = s->attempt;
		t->start_time = s->start;
		t->end_time = live ? 0 : s->end;
		free(t->job_id);
		t->job_id = strcmp(s->job, "-") ? xstrdup(s->job) : NULL;
	}
}

int jobs_states_from_status(struct pbx_store *st, int64_t submission_id, const char *status,
			    size_t len, struct pbx_err *err)
{
	struct pbx_task_row *tasks = NULL;
	struct status_line *lines;
	size_t nt = 0, i, k = 0;
	int rc;
	if (!len)
		return 0;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	rc = pbx_store_tasks_list(st, submission_id, &tasks, &nt, err);
	if (rc == 0) {
		lines = xcalloc(nt ? nt : 1, sizeof(*lines));
		parse_status(status, len, lines, nt);
		for (i = 0; i < nt; i++) {
			const struct status_line *l =
				(size_t)tasks[i].idx < nt ? &lines[tasks[i].idx] : NULL;
			const char *reported = l ? status_state(l) : NULL;
			/* only a task last seen RUNNING, and a line of that attempt or a
			 * later one that says it ended: a rerun's task is PENDING, not
			 * RUNNING, and keeps its state whatever an old line says */
			if (!reported || strcmp(tasks[i].state, "RUNNING") != 0 ||
			    !pbx_task_state_final(reported) || l->start < tasks[i].start_time)
				continue;
			merge_task(&tasks[i], l, NULL);
			if (k != i) {
				struct pbx_task_row tmp = tasks[k];
				tasks[k] = tasks[i];
				tasks[i] = tmp;
			}
			k++;
		}
		if (k)
			rc = pbx_store_tasks_update(st, submission_id, tasks, k, err);
		free(lines);
	}
	rc = rc == 0 ? pbx_store_commit(st, err) : (pbx_store_rollback(st), -1);
	pbx_task_rows_free(tasks, nt);
	return rc < 0 ? -1 : (int)k;
}

static int refresh_fetch(struct pbx_jobs_target *t, struct pbx_cluster_output *o,
			 struct pbx_err *err)
{
	struct pbx_buf script = PBX_BUF_INIT;
	int rc;
	pbx_buf_addf(&script, "squeue -h -r -n pbx-%s -o '", t->pkg.short_id);
	pbx_buf_adds(&script, PBX_SQUEUE_FORMAT); /* the format the parser expects */
	/* then the environment's status line (RUN/env is the task user's:
	 * read without following a link or blocking on a FIFO), first; an
	 * image with Python packages is ready once they are (RUN/env/py) */
	pbx_buf_addf(
		&script,
		"' || exit 1\n"
		"echo PBX-SEP\n"
		"R=\"$PBX_SHARED/%s\"\n"
		"line() { [ -f \"$1\" ] && [ ! -L \"$1\" ] &&"
		" dd if=\"$1\" iflag=nofollow,nonblock bs=512 count=1 2>/dev/null | head -n 1; }\n"
		"L=$(line \"$R/env/status\")\n"
		"case $L in READY\\ *) if [ -f \"$R/pkg/env/requirements.txt\" ] &&"
		" { [ -L \"$R/pkg/env/image\" ] || [ -f \"$R/pkg/env/image-ref\" ]; }; then"
		" L=$(line \"$R/env/py/status\"); fi ;; esac\n"
		"printf 'PBX-ENV %%s\\n' \"$L\"\n"
		"cd \"$R/tasks\" 2>/dev/null || exit 0\n"
		"find . -mindepth 2 -maxdepth 2 -name status -type f -exec cat {} + 2>/dev/null\n"
		"exit 0\n",
		t->sub.remote_dir);
	rc = pbx_cluster_run(t->cluster, 0, script.buf, NULL, o, err);
	pbx_buf_release(&script);
	return rc;
}

/* How often each task (by index) had been submitted before the remote
 * snapshot was taken; -1 where no task has that index.  Caller frees. */
static int *submits_before(struct pbx_store *st, int64_t submission_id, size_t *n,
			   struct pbx_err *err)
{
	struct pbx_task_row *tasks;
	size_t nt, i;
	int *submits;
	if (pbx_store_tasks_list(st, submission_id, &tasks, &nt, err) < 0)
		return NULL;
	submits = xcalloc(nt ? nt : 1, sizeof(*submits));
	for (i = 0; i < nt; i++)
		submits[i] = -1;
	for (i = 0; i < nt; i++)
		if (tasks[i].idx >= 0 && (size_t)tasks[i].idx < nt)
			submits[tasks[i].idx] = tasks[i].submits;
	pbx_task_rows_free(tasks, nt);
	*n = nt;
	return submits;
}

/* Merges the snapshot into the tasks and writes them back, in one
 * transaction that also reads them: a task (re)submitted by a concurrent
 * parrun or rerun after the snapshot was taken is left alone, as the
 * snapshot cannot know about it. */
static int refresh_apply(struct pbx_store *st, int64_t submission_id, const int *submits,
			 size_t nsubmits, const struct pbx_squeue_job *jobs, size_t nj,
			 const char *status, size_t statuslen, struct pbx_err *err)
{
	struct pbx_array_row *arrays = NULL;
	struct pbx_task_row *tasks = NULL;
	struct status_line *lines;
	const char **live;
	size_t na = 0, nt = 0, i, k = 0;
	int rc;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	rc = pbx_store_arrays_list(st, submission_id, &arrays, &na, err);
	if (rc == 0)
		rc = pbx_store_tasks_list(st, submission_id, &tasks, &nt, err);
	if (rc == 0) {
		lines = xcalloc(nt ? nt : 1, sizeof(*lines));
		live = xcalloc(nt ? nt : 1, sizeof(*live));
		parse_status(status, statuslen, lines, nt);
		jobs_apply_squeue(jobs, nj, arrays, na, live, nt);
		for (i = 0; i < nt; i++) {
			size_t x = (size_t)tasks[i].idx;
			if (x >= nt || x >= nsubmits || submits[x] != tasks[i].submits)
				continue;
			merge_task(&tasks[i], &lines[x], live[x]);
			if (k != i) { /* keep the merged rows at the front */
				struct pbx_task_row tmp = tasks[k];
				tasks[k] = tasks[i];
				tasks[i] = tmp;
			}
			k++;
		}
		for (i = 0; rc == 0 && i < k; i++)
			if (!pbx_task_state_known(tasks[i].state))
				rc = pbx_err_set(err,
						 "task %" PRId64 ": refusing unknown state '%s'",
						 tasks[i].idx, tasks[i].state);
		if (rc == 0)
			rc = pbx_store_tasks_update(st, submission_id, tasks, k, err);
		free(lines);
		free(live);
	}
	rc = rc == 0 ? pbx_store_commit(st, err) : (pbx_store_rollback(st), -1);
	pbx_array_rows_free(arrays, na);
	pbx_task_rows_free(tasks, nt);
	return rc;
}

/* The environment's status line that leads `after` ("PBX-ENV TEXT\n"):
 * TEXT in printable ASCII (at most 400 bytes), NULL when empty; `after`
 * and `len` move past it.  Caller frees. */
static char *refresh_environment(const char **after, size_t *len)
{
	const char *p = *after, *nl;
	char *text;
	size_t l, i;
	if (*len < 8 || strncmp(p, "PBX-ENV ", 8) != 0)
		return NULL;
	nl = memchr(p, '\n', *len);
	l = nl ? (size_t)(nl - p) : *len;
	*after = nl ? nl + 1 : p + *len;
	*len -= nl ? l + 1 : l;
	l -= 8;
	while (l && (p[8 + l - 1] == '\n' || p[8 + l - 1] == ' '))
		l--;
	if (l == 0)
		return NULL;
	text = xstrndup(p + 8, l > 400 ? 400 : l);
	for (i = 0; text[i]; i++)
		if ((unsigned char)text[i] < 0x20 || (unsigned char)text[i] > 0x7e)
			text[i] = '?';
	return text;
}

int pbx_jobs_refresh(struct pbx_store *st, struct pbx_jobs_target *t, struct pbx_err *err)
{
	struct pbx_cluster_output o;
	struct pbx_squeue_job *jobs = NULL;
	const char *after;
	char *env = NULL;
	size_t nj = 0, nsubmits = 0, before, afterlen;
	int *submits = submits_before(st, t->sub.id, &nsubmits, err);
	int rc;
	if (!submits)
		return -1;
	rc = refresh_fetch(t, &o, err);
	if (rc < 0) {
		free(submits);
		return -1;
	}
	pbx_buf_addc(&o.out, '\0'); /* keep the text terminated for the parsers */
	o.out.len--;
	if (jobs_split(o.out.buf, o.out.len, "PBX-SEP", &after, &before, &afterlen) < 0)
		rc = pbx_err_set(err, "unexpected answer from %s", t->sub.cluster_name);
	if (rc == 0)
		rc = pbx_squeue_parse(o.out.buf, before, &jobs, &nj, err);
	if (rc == 0) {
		env = refresh_environment(&after, &afterlen);
		rc = refresh_apply(st, t->sub.id, submits, nsubmits, jobs, nj, after, afterlen,
				   err);
	}
	if (rc == 0 && env && (!t->sub.environment || strcmp(env, t->sub.environment) != 0))
		rc = pbx_store_submission_set_environment(st, t->sub.id, env, err);
	if (rc == 0 && env) {
		free(t->sub.environment);
		t->sub.environment = env;
		env = NULL;
	}
	free(env);
	pbx_cluster_output_release(&o);
	pbx_squeue_free(jobs, nj);
	free(submits);
	return rc;
}

/* ---------------------------------------------------------- rerun/cancel */

/* Why task `only` of t cannot run again now: it does not exist, or has not
 * ended (a task runs once at a time). */
static void rerun_refuse_one(const struct pbx_jobs_target *t, const struct pbx_task_row *tasks,
			     size_t nt, long only, struct pbx_err *err)
{
	size_t i;
	for (i = 0; i < nt && tasks[i].idx != only; i++)
		;
	if (i == nt)
		pbx_err_setc(err, PBX_EXIT_NOTFOUND, "%s has no task %ld (tasks 0 to %zu)",
			     t->pkg.short_id, only, nt ? nt - 1 : 0);
	else
		pbx_err_setc(err, PBX_EXIT_USAGE,
			     "task %ld of %s is %s: it runs again once it has ended ('pbx cancel "
			     "%s:%ld' ends it)",
			     only, t->pkg.short_id, tasks[i].state, t->pkg.short_id, only);
}

int pbx_jobs_rerun(struct pbx_store *st, struct pbx_jobs_target *t, long only, size_t *count,
		   struct pbx_err *err)
{
	struct pbx_task_row *tasks;
	int64_t *idx;
	size_t nt, n = 0, i;
	int rc, lock;
	*count = 0;
	if (t->cluster && pbx_cluster_budget_refuse(t->cluster, "rerun", err) < 0)
		return -1;
	lock = jobs_lock(t->pkg.id, t->sub.cluster_id,
			 err); /* a parrun submits nothing meanwhile */
	if (lock < 0)
		return -1;
	if (pbx_store_tasks_list(st, t->sub.id, &tasks, &nt, err) < 0) {
		close(lock);
		return -1;
	}
	idx = xcalloc(nt ? nt : 1, sizeof(*idx));
	for (i = 0; i < nt; i++)
		if (only < 0 ? pbx_task_state_rerunnable(tasks[i].state)
			     : tasks[i].idx == only && pbx_task_state_final(tasks[i].state))
			idx[n++] = tasks[i].idx;
	if (n == 0 && only >= 0)
		rerun_refuse_one(t, tasks, nt, only, err);
	pbx_task_rows_free(tasks, nt);
	if (n == 0) {
		free(idx);
		close(lock);
		return only >= 0 ? -1 : 0;
	}
	rc = jobs_resubmit(st, t, idx, n, err);
	if (rc == 0)
		*count = n;
	free(idx);
	close(lock);
	return rc;
}

/* Marks the cancelled tasks (one, or every unfinished one when task < 0)
 * in the store, for the state rules above. */
static int remember_cancel(struct pbx_store *st, struct pbx_jobs_target *t, long task,
			   struct pbx_err *err)
{
	struct pbx_task_row *tasks;
	int64_t *idx;
	size_t nt, n = 0, i;
	int rc;
	if (pbx_store_tasks_list(st, t->sub.id, &tasks, &nt, err) < 0)
		return -1;
	idx = xcalloc(nt ? nt : 1, sizeof(*idx));
	for (i = 0; i < nt; i++)
		if (task < 0 ? !pbx_task_state_final(tasks[i].state) : tasks[i].idx == task)
			idx[n++] = tasks[i].idx;
	pbx_task_rows_free(tasks, nt);
	rc = pbx_store_begin(st, err);
	if (rc == 0 && pbx_store_tasks_cancelled(st, t->sub.id, idx, n, err) < 0) {
		pbx_store_rollback(st);
		rc = -1;
	}
	if (rc == 0)
		rc = pbx_store_commit(st, err);
	free(idx);
	return rc;
}

int pbx_jobs_cancel(struct pbx_store *st, struct pbx_jobs_target *t, long task, struct pbx_err *err)
{
	struct pbx_buf script = PBX_BUF_INIT;
	struct pbx_cluster_output o;
	int rc;
	if (task < 0) { /* its arrays and its environment's build job */
		pbx_buf_addf(&script, "scancel -n pbx-%s && scancel -n pbx-%s-env", t->pkg.short_id,
			     t->pkg.short_id);
	} else {
		struct pbx_array_row *arrays;
		size_t na, i;
		if (pbx_store_arrays_list(st, t->sub.id, &arrays, &na, err) < 0)
			return -1;
		pbx_buf_adds(&script, "scancel");
		for (i = 0; i < na; i++) {
			int64_t *idx;
			size_t n, k;
			if (!arrays[i].job_id || !pbx_slurm_job_id_ok(arrays[i].job_id) ||
			    jobs_spec_tasks(arrays[i].spec, arrays[i].first_task, &idx, &n) < 0)
				continue;
			for (k = 0; k < n; k++) {
				char *word;
				if (idx[k] != task)
					continue;
				/* digits only (checked), quoted anyway */
				word = xasprintf("%s_%" PRId64, arrays[i].job_id,
						 task - arrays[i].first_task);
				pbx_buf_adds(&script, " ");
				pbx_shell_quote(&script, word);
				free(word);
			}
			free(idx);
		}
		pbx_array_rows_free(arrays, na);
		if (!strcmp(script.buf, "scancel")) {
			pbx_buf_release(&script);
			return pbx_err_setc(err, PBX_EXIT_NOTFOUND,
					    "task %ld of %s was never submitted", task,
					    t->pkg.short_id);
		}
	}
	rc = pbx_cluster_run(t->cluster, 0, script.buf, NULL, &o, err);
	if (rc == 0) {
		pbx_cluster_output_release(&o);
		rc = remember_cancel(st, t, task, err);
	}
	pbx_buf_release(&script);
	return rc;
}
