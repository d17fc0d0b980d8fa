/*
 * submit.c - `pbx parrun`: record the package, learn the cluster's limits
 * and what already exists there (one round trip), then push the package
 * once and submit all arrays (a second round trip).
 *
 * The options submitted (resources, throttle, launcher: src/slurm/sbatch.h)
 * are stored whole with the submission; `rerun` reads them back and uses
 * the same probe.
 *
 * Never twice: an array is recorded as "planned" before sbatch runs and
 * carries --comment=pbx:PKG:ROW.  A later parrun adopts planned arrays that
 * squeue shows (the answer was lost) and tasks whose directory exists (they
 * ran), and submits only the rest.
 */
#include "jobs/jobs_internal.h"
#include "experiment/package.h"
#include "util/fs.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -------------------------------------------------------------- record */

/* The options e's tasks are submitted with: e's resources with the
 * launcher resolved for its kind.  *o released with pbx_sbatch_opts_free. */
static void jobs_opts_of(const struct pbx_experiment *e, struct pbx_sbatch_opts *o)
{
	pbx_sbatch_opts_copy(o, &e->res);
	o->launcher = pbx_sbatch_opts_launcher(&e->res, e->command == NULL);
}

/* jobs_opts_of as the JSON the store keeps; caller frees. */
static char *jobs_opts_json(const struct pbx_experiment *e)
{
	struct pbx_sbatch_opts o;
	char *json;
	jobs_opts_of(e, &o);
	json = pbx_sbatch_opts_json(&o);
	pbx_sbatch_opts_free(&o);
	return json;
}

static int parrun_record(struct pbx_store *st, struct pbx_cluster *c,
			 const struct pbx_experiment *e, const struct pbx_package *p,
			 struct pbx_submission_row *sub, struct pbx_err *err)
{
	struct pbx_package_row row = { 0 };
	struct pbx_submission_row s = { 0 };
	char **params = NULL, *dir = NULL, *res = NULL;
	size_t i;
	int64_t id;
	int rc;

	row.id = (char *)p->id;
	row.short_id = (char *)p->short_id;
	row.name = e->name;
	row.experiment_path = e->path;
	row.experiment_text = e->text;
	row.git_commit = p->git_commit;
	row.git_diff = p->git_diff;
	row.user = p->user;
	row.host = p->host;
	row.ntasks = (int64_t)e->npoints;
	row.created = p->created;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	rc = pbx_store_package_put(st, &row, err);
	if (rc == 0 && pbx_store_submission_get(st, p->id, c->row.id, sub, err) < 0) {
		if (err->code != PBX_EXIT_NOTFOUND) {
			rc = -1;
		} else {
			pbx_err_clear(err);
			res = jobs_opts_json(e);
			params = xcalloc(e->npoints, sizeof(char *));
			for (i = 0; i < e->npoints; i++)
				params[i] = pbx_experiment_point_json(e, i);
			dir = xasprintf("pbx/%s", p->short_id);
			s.package_id = (char *)p->id;
			s.cluster_id = c->row.id;
			s.remote_dir = dir;
			s.resources_json = res;
			s.state = "submitting";
			rc = pbx_store_submission_create(st, &s, (const char *const *)params,
							 e->npoints, &id, err);
			if (rc == 0)
				rc = pbx_store_submission_get(st, p->id, c->row.id, sub, err);
			for (i = 0; i < e->npoints; i++)
				free(params[i]);
			free(params);
			free(dir);
			free(res);
		}
	}
	if (rc < 0) {
		pbx_store_rollback(st);
		return -1;
	}
	pbx_store_event(st, c->row.id, "parrun", "package %s (%s), %zu tasks", p->short_id, e->name,
			e->npoints);
	return pbx_store_commit(st, err);
}

/* --------------------------------------------------------------- probe */

/* Exit status of the probe when sbatch refuses the options. */
#define PROBE_REFUSED 3

/* The probe's first lines: `sbatch --test-only` with the options validates
 * them (partition, gres, time, ...) without submitting anything, so a
 * refusal comes before pbx records anything. */
static void probe_validate(struct pbx_buf *script, const struct pbx_sbatch_opts *opts)
{
	size_t nargs = 0, i;
	char **args = pbx_sbatch_opts_argv(opts, &nargs);
	pbx_buf_adds(script, "v=$(sbatch --test-only --array=0-0 -J pbx-validate -o /dev/null");
	for (i = 0; i < nargs; i++) {
		pbx_buf_addc(script, ' ');
		pbx_shell_quote(script, args[i]);
	}
	pbx_sbatch_argv_free(args, nargs);
	pbx_buf_addf(script, " --wrap=true 2>&1) || { printf '%%s\n' \"$v\" >&2; exit %d; }\n",
		     PROBE_REFUSED);
}

/* The user's submit limit and queued jobs from the probe's sacctmgr and
 * squeue -u section (PBX_SACCTMGR_SCRIPT's answer, then "PBX-QUEUED N"):
 * an answer pbx cannot read leaves the limit unknown. */
static void probe_submit_limit(const char *p, size_t len, const struct pbx_sbatch_opts *opts,
			       struct jobs_probe *pr)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *q = NULL, *s;
	for (s = p; s + 11 <= p + len; s++)
		if (!memcmp(s, "PBX-QUEUED ", 11) && (s == p || s[-1] == '\n'))
			q = s;
	pr->queued = q ? strtol(q + 11, NULL, 10) : 0;
	if (!q || pbx_sacctmgr_limit_parse(p, (size_t)(q - p), pbx_sbatch_opts_get(opts, "account"),
					   pbx_sbatch_opts_get(opts, "qos"), &pr->submit, &err) < 0)
		pr->submit.kind = PBX_SUBMIT_LIMIT_UNKNOWN;
}

int jobs_probe(struct pbx_cluster *c, const char *short_id, size_t ntasks,
	       const struct pbx_sbatch_opts *validate, const struct pbx_sbatch_opts *opts,
	       struct jobs_probe *pr, struct pbx_err *err)
{
	struct pbx_cluster_output o;
	struct pbx_buf script = PBX_BUF_INIT;
	const char *p, *rest;
	size_t len, restlen, n1, n2, n3, n4;
	int rc;

	if (validate)
		probe_validate(&script, validate);
	pbx_buf_addf(&script,
		     "R=\"$PBX_SHARED/pbx/%s\"\n"
		     "scontrol show config | grep -E '^(MaxArraySize|MaxJobCount) ' || exit 1\n"
		     "echo PBX-SEP\n"
		     "[ -f \"$R/pkg/.complete\" ] && echo PUSHED\n"
		     "echo PBX-SEP\n"
		     "squeue -h -n pbx-%s -o '%%F %%k' || exit 1\n"
		     "echo PBX-SEP\n",
		     short_id, short_id);
	pbx_buf_adds(&script, PBX_SACCTMGR_SCRIPT); /* the user's submit limit */
	pbx_buf_adds(&script, "echo \"PBX-QUEUED $(squeue -h -r -u \"$(id -un)\" -o %i"
			      " 2>/dev/null | wc -l)\"\n"
			      "echo PBX-SEP\n"
			      "ls \"$R/tasks\" 2>/dev/null\n"
			      "exit 0\n");
	rc = pbx_cluster_run(c, 0, script.buf, NULL, &o, err);
	pbx_buf_release(&script);
	if (rc < 0 && o.status == PROBE_REFUSED) {
		const char *why = strstr(err->msg, "): ");
		char *reason = xstrdup(why ? why + 3 : err->msg);
		pbx_err_setc(err, PBX_EXIT_USAGE,
			     "%s refuses the experiment's resources (nothing"
			     " was recorded or submitted): %s",
			     c->row.name, reason);
		free(reason);
	}
	if (rc < 0)
		return -1;
	pr->has_dir = xcalloc(ntasks ? ntasks : 1, 1);
	pr->ntasks = ntasks;
	pbx_buf_init(&pr->live, 0);
	p = o.out.buf;
	len = o.out.len;
	if (jobs_split(p, len, "PBX-SEP", &rest, &n1, &restlen) < 0 ||
	    pbx_scontrol_limits_parse(p, n1, &pr->limits, err) < 0) {
		pbx_cluster_output_release(&o);
		return err->msg[0] ? -1
				   : pbx_err_set(err, "unexpected answer from %s", c->row.name);
	}
	p = rest;
	len = restlen;
	jobs_split(p, len, "PBX-SEP", &rest, &n2, &restlen);
	pr->pushed = n2 >= 6 && !memcmp(p, "PUSHED", 6);
	p = rest;
	len = restlen;
	pr->submit.kind = PBX_SUBMIT_LIMIT_UNKNOWN;
	if (jobs_split(p, len, "PBX-SEP", &rest, &n3, &restlen) < 0) {
		pbx_cluster_output_release(&o);
		return 0; /* a cut answer: no live arrays, limit or directories known */
	}
	pbx_buf_add(&pr->live, p, n3);
	p = rest;
	len = restlen;
	if (jobs_split(p, len, "PBX-SEP", &rest, &n4, &restlen) == 0) {
		probe_submit_limit(p, n4, opts, pr);
		/* the rest: task directory names */
		while (restlen) {
			const char *nl = memchr(rest, '\n', restlen);
			size_t l = nl ? (size_t)(nl - rest) : restlen;
			char num[24];
			if (l && l < sizeof(num)) {
				char *end;
				unsigned long long v;
				memcpy(num, rest, l);
				num[l] = '\0';
				v = strtoull(num, &end, 10);
				if (!*end && v < ntasks)
					pr->has_dir[v] = 1;
			}
			rest += nl ? l + 1 : l;
			restlen -= nl ? l + 1 : l;
		}
	}
	pbx_cluster_output_release(&o);
	return 0;
}

void jobs_probe_release(struct jobs_probe *pr)
{
	free(pr->has_dir);
	pr->has_dir = NULL;
	pbx_buf_release(&pr->live);
}

long jobs_probe_chunk(const struct jobs_probe *pr)
{
	long chunk = pr->limits.max_array_size;
	if (pr->limits.max_job_count < chunk)
		chunk = pr->limits.max_job_count;
	if (pr->submit.kind == PBX_SUBMIT_LIMIT_SET && pr->submit.max > 0 && pr->submit.max < chunk)
		chunk = pr->submit.max;
	return chunk;
}

long jobs_probe_room(const struct jobs_probe *pr)
{
	if (pr->submit.kind != PBX_SUBMIT_LIMIT_SET)
		return -1;
	return pr->submit.max > pr->queued ? pr->submit.max - pr->queued : 0;
}

/* Keeps the first tasks of idx[0..*n) that the user's submit limit lets in
 * now; the others stay NEW.  Returns what to tell the user about them, or
 * NULL when all fit; caller frees. */
static char *parrun_fit_limit(const struct jobs_probe *pr, size_t *n)
{
	long room = jobs_probe_room(pr);
	size_t left;
	if (room < 0 || (size_t)room >= *n)
		return NULL;
	left = *n - (size_t)room;
	*n = (size_t)room;
	return xasprintf("%zu task%s left NEW: your job submit limit is %ld (%s) and you have "
			 "%ld job%s queued or running (each array task counts); 'pbx parrun' "
			 "again once some have ended submits more",
			 left, left == 1 ? "" : "s", pr->submit.max, pr->submit.source, pr->queued,
			 pr->queued == 1 ? "" : "s");
}

/* The array job id squeue shows for comment pbx:SHORT:ROW, or NULL. */
static char *probe_live_job(const struct jobs_probe *pr, const char *short_id, int64_t row)
{
	char want[128];
	const char *p = pr->live.buf;
	snprintf(want, sizeof(want), " pbx:%s:%" PRId64, short_id, row);
	while (p && *p) {
		const char *nl = strchr(p, '\n'), *hit = strstr(p, want);
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		if (hit && hit < p + l && (size_t)(hit - p) + strlen(want) == l) {
			char *job = xstrndup(p, (size_t)(hit - p));
			if (pbx_slurm_job_id_ok(job))
				return job;
			free(job); /* not a job id: as if squeue had not shown it */
		}
		p = nl ? nl + 1 : NULL;
	}
	return NULL;
}

/* Sends the tasks of an array that never reached SLURM back to NEW,
 * except those whose directory shows they ran. */
static int parrun_revert(struct pbx_store *st, const struct pbx_submission_row *sub,
			 const struct pbx_array_row *a, const struct jobs_probe *pr,
			 struct pbx_err *err)
{
	int64_t *idx;
	size_t n, i, k = 0;
	int rc;
	if (jobs_spec_tasks(a->spec, a->first_task, &idx, &n) < 0)
		return pbx_err_set(err, "array %" PRId64 " has a malformed spec '%s'", a->id,
				   a->spec);
	for (i = 0; i < n; i++)
		if (idx[i] < 0 || (size_t)idx[i] >= pr->ntasks || !pr->has_dir[idx[i]])
			idx[k++] = idx[i];
	rc = pbx_store_tasks_unsubmit(st, sub->id, idx, k, err);
	free(idx);
	return rc;
}

/* Adopts planned arrays that did reach SLURM (squeue shows their comment);
 * the others are "lost" and their tasks become NEW again. */
static int parrun_adopt(struct pbx_store *st, const struct pbx_submission_row *sub,
			const char *short_id, const struct jobs_probe *pr, struct pbx_err *err)
{
	struct pbx_array_row *arrays;
	size_t n, i;
	int rc = 0;
	if (pbx_store_arrays_list(st, sub->id, &arrays, &n, err) < 0)
		return -1;
	for (i = 0; rc == 0 && i < n; i++) {
		char *job;
		if (strcmp(arrays[i].state, "planned") != 0)
			continue;
		job = probe_live_job(pr, short_id, arrays[i].id);
		rc = pbx_store_array_set(st, arrays[i].id, job, job ? "submitted" : "lost", err);
		if (rc == 0 && !job)
			rc = parrun_revert(st, sub, &arrays[i], pr, err);
		free(job);
	}
	pbx_array_rows_free(arrays, n);
	return rc;
}

/* ------------------------------------------------------------- submit */

/* Tasks that still need submitting: never submitted (or in no state pbx
 * knows) and no sign that they ran; those of them held are counted in
 * r->held, the others already submitted in r->skipped. */
static int parrun_pending(struct pbx_store *st, const struct pbx_submission_row *sub,
			  const struct jobs_probe *pr, const unsigned char *hold, int64_t **idx,
			  size_t *n, struct pbx_parrun_result *r, struct pbx_err *err)
{
	struct pbx_task_row *tasks;
	size_t nt, i;
	if (pbx_store_tasks_list(st, sub->id, &tasks, &nt, err) < 0)
		return -1;
	*idx = xcalloc(nt ? nt : 1, sizeof(int64_t));
	*n = 0;
	r->skipped = r->held = 0;
	for (i = 0; i < nt; i++) {
		int due = !strcmp(tasks[i].state, "NEW") || tasks[i].submits == 0 ||
			  !pbx_task_state_known(tasks[i].state);
		int ran = (size_t)tasks[i].idx < pr->ntasks && pr->has_dir[tasks[i].idx];
		if (!due || ran)
			r->skipped++;
		else if (hold && (size_t)tasks[i].idx < pr->ntasks && hold[tasks[i].idx])
			r->held++;
		else
			(*idx)[(*n)++] = tasks[i].idx;
	}
	pbx_task_rows_free(tasks, nt);
	return 0;
}

int pbx_jobs_parrun(struct pbx_store *st, struct pbx_cluster *c, const struct pbx_experiment *e,
		    const unsigned char *hold, struct pbx_parrun_result *r, struct pbx_err *err)
{
	struct pbx_package *p = NULL;
	struct pbx_submission_row sub = { 0 };
	struct jobs_probe pr = { 0 };
	struct pbx_buf tar = PBX_BUF_INIT;
	struct pbx_sbatch_opts opts = { 0 };
	int64_t *idx = NULL;
	char *limit_note = NULL;
	size_t n = 0;
	int rc, lock = -1;

	memset(r, 0, sizeof(*r));
	if (pbx_cluster_budget_refuse(c, "parrun", err) < 0)
		return -1;
	if (jobs_apt(c, e, err) < 0) /* before anything is recorded */
		return -1;
	rc = pbx_package_build(e, &p, err);
	if (rc == 0) {
		memcpy(r->id, p->id, sizeof(r->id));
		memcpy(r->short_id, p->short_id, sizeof(r->short_id));
		r->ntasks = e->npoints;
		lock = jobs_lock(p->id, c->row.id, err);
		rc = lock < 0 ? -1 : 0;
	}
	if (rc == 0) {
		/* validated by the cluster before anything is recorded */
		rc = jobs_probe(c, p->short_id, e->npoints, &e->res, &e->res, &pr, err);
		if (rc < 0 && err->code == PBX_EXIT_USAGE)
			pbx_err_prefix(err, "%s", e->path);
		r->round_trips++;
	}
	if (rc == 0)
		rc = parrun_record(st, c, e, p, &sub, err);
	if (rc == 0 && pbx_store_begin(st, err) == 0) {
		rc = parrun_adopt(st, &sub, p->short_id, &pr, err);
		rc = rc == 0 ? pbx_store_commit(st, err) : (pbx_store_rollback(st), -1);
	}
	if (rc == 0)
		rc = parrun_pending(st, &sub, &pr, hold, &idx, &n, r, err);
	if (rc == 0)
		limit_note = parrun_fit_limit(&pr, &n);
	if (rc == 0 && n > 0 && !pr.pushed) {
		/* an unguessable name of our own, replaced whole by the tar */
		char *base = xasprintf("%s/tmp-%s.tar", pbx_home(), p->short_id), *path;
		int fd = pbx_tmpfile_beside(base, &path, err);
		rc = fd < 0 ? -1 : 0;
		if (fd >= 0)
			close(fd);
		if (rc == 0)
			rc = pbx_package_write_tar(p, e, 0, e->npoints, path, err);
		if (rc == 0)
			rc = pbx_read_file(path, &tar, err);
		if (path)
			unlink(path);
		free(path);
		free(base);
		r->pushed = rc == 0;
	}
	if (rc == 0 && n > 0)
		jobs_opts_of(e, &opts);
	if (rc == 0 && n > 0) {
		/* stored whole before sbatch runs: rerun submits what this did */
		char *json = pbx_sbatch_opts_json(&opts);
		rc = pbx_store_submission_set_resources(st, sub.id, json, err);
		free(json);
	}
	if (rc == 0 && n > 0) {
		rc = jobs_submit(st, c, &sub, p->short_id, idx, n, jobs_probe_chunk(&pr), &opts,
				 tar.len ? &tar : NULL, &r->job_ids, &r->arrays, &r->warning,
				 &r->round_trips, err);
		if (rc == 0)
			r->submitted = n;
	}
	if (rc == 0)
		pbx_store_submission_set(st, sub.id, 1, "submitted", err);
	if (limit_note) { /* said with the notice job's warning, if any */
		char *w = r->warning ? xasprintf("%s\n%s", limit_note, r->warning) : NULL;
		free(r->warning);
		r->warning = w ? w : limit_note;
		if (w)
			free(limit_note);
	}
	pbx_sbatch_opts_free(&opts);
	free(idx);
	jobs_probe_release(&pr);
	pbx_buf_release(&tar);
	pbx_submission_row_free(&sub);
	pbx_package_free(p);
	if (lock >= 0)
		close(lock);
	return rc;
}

/* -------------------------------------------------------------- rerun */

int jobs_resubmit(struct pbx_store *st, struct pbx_jobs_target *t, const int64_t *idx, size_t n,
		  struct pbx_err *err)
{
	struct jobs_probe pr = { 0 };
	struct pbx_sbatch_opts opts;
	char **job_ids = NULL;
	size_t narrays = 0, i;
	int rc;
	if (pbx_sbatch_opts_from_json(t->sub.resources_json, &opts, err) < 0)
		return -1;
	if (opts.launcher == PBX_LAUNCHER_AUTO) /* stores from before launchers */
		opts.launcher = PBX_LAUNCHER_NONE;
	rc = jobs_probe(t->cluster, t->pkg.short_id, (size_t)t->pkg.ntasks, NULL, &opts, &pr, err);
	if (rc == 0)
		rc = jobs_submit(st, t->cluster, &t->sub, t->pkg.short_id, idx, n,
				 jobs_probe_chunk(&pr), &opts, NULL, &job_ids, &narrays, NULL, NULL,
				 err);
	for (i = 0; i < narrays; i++)
		free(job_ids[i]);
	free(job_ids);
	jobs_probe_release(&pr);
	pbx_sbatch_opts_free(&opts);
	return rc;
}

void pbx_parrun_result_free(struct pbx_parrun_result *r)
{
	size_t i;
	for (i = 0; r->job_ids && i < r->arrays; i++)
		free(r->job_ids[i]);
	free(r->job_ids);
	r->job_ids = NULL;
	free(r->warning);
	r->warning = NULL;
}
