/*
 * submit.c - `pbx parrun`: record the package, learn the cluster's limits
 * and what already exists there (one round trip), then push the package
 * once and submit all arrays (a second round trip).
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

static int parrun_record(struct pbx_store *st, struct pbx_cluster *c,
			 const struct pbx_experiment *e, const struct pbx_package *p,
			 struct pbx_submission_row *sub, struct pbx_err *err)
{
	struct pbx_package_row row = {0};
	struct pbx_submission_row s = {0};
	char **params = NULL, *dir = NULL, *res = NULL;
	size_t i, nargs = 0;
	char **args;
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
			json_t *rj = json_array();
			pbx_err_clear(err);
			args = pbx_experiment_sbatch_args(e, &nargs);
			for (i = 0; i < nargs; i++) {
				json_array_append_new(rj, json_string(args[i]));
				free(args[i]);
			}
			free(args);
			res = json_dumps(rj, JSON_COMPACT);
			json_decref(rj);
			params = xcalloc(e->npoints, sizeof(char *));
			for (i = 0; i < e->npoints; i++)
				params[i] = pbx_experiment_point_json(e, i);
			dir = xasprintf("pbx/%s", p->short_id);
			s.package_id = (char *)p->id;
			s.cluster_id = c->row.id;
			s.remote_dir = dir;
			s.resources_json = res;
			s.state = "submitting";
			rc = pbx_store_submission_create(st, &s, (const char *const *)params, e->npoints,
							 &id, err);
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

struct parrun_probe {
	struct pbx_slurm_limits limits;
	int pushed;                    /* the package is complete on the cluster */
	struct pbx_buf live;           /* squeue "%F %k" lines */
	unsigned char *has_dir;        /* per task: its directory exists */
	size_t ntasks;
};

/* Exit status of the probe when sbatch refuses the experiment's options. */
#define PROBE_REFUSED 3

/* The probe's first lines: `sbatch --test-only` with the experiment's
 * options validates them (partition, gres, time, ...) without submitting
 * anything, so a refusal comes before pbx records anything. */
static void probe_validate(struct pbx_buf *script, const struct pbx_experiment *e)
{
	size_t nargs = 0, i;
	char **args = pbx_experiment_sbatch_args(e, &nargs);
	pbx_buf_adds(script, "v=$(sbatch --test-only --array=0-0 -J pbx-validate -o /dev/null");
	for (i = 0; i < nargs; i++) {
		pbx_buf_addc(script, ' ');
		pbx_shell_quote(script, args[i]);
		free(args[i]);
	}
	free(args);
	pbx_buf_addf(script, " --wrap=true 2>&1) || { printf '%%s\n' \"$v\" >&2; exit %d; }\n",
		     PROBE_REFUSED);
}

static int parrun_probe(struct pbx_cluster *c, const struct pbx_experiment *e,
			const char *short_id, size_t ntasks, struct parrun_probe *pr,
			struct pbx_err *err)
{
	struct jobs_output o;
	struct pbx_buf script = PBX_BUF_INIT;
	const char *p, *rest;
	size_t len, restlen, n1, n2, n3;
	int rc, status = 0;

	probe_validate(&script, e);
	pbx_buf_addf(&script,
		     "R=\"$PBX_SHARED/pbx/%s\"\n"
		     "scontrol show config | grep -E '^(MaxArraySize|MaxJobCount) ' || exit 1\n"
		     "echo PBX-SEP\n"
		     "[ -f \"$R/pkg/.complete\" ] && echo PUSHED\n"
		     "echo PBX-SEP\n"
		     "squeue -h -n pbx-%s -o '%%F %%k' || exit 1\n"
		     "echo PBX-SEP\n"
		     "ls \"$R/tasks\" 2>/dev/null\n"
		     "exit 0\n", short_id, short_id);
	rc = jobs_remote_status(c, script.buf, NULL, &o, &status, err);
	pbx_buf_release(&script);
	if (rc < 0 && status == PROBE_REFUSED) {
		pbx_err_set(err, "%s: %s refuses the experiment's resources (nothing was recorded"
			    " or submitted): %s", e->path, c->row.name, o.err.buf);
		err->code = PBX_EXIT_USAGE;
	}
	if (rc < 0) {
		jobs_output_release(&o);
		return -1;
	}
	pr->has_dir = xcalloc(ntasks ? ntasks : 1, 1);
	pr->ntasks = ntasks;
	pbx_buf_init(&pr->live, 0);
	p = o.out.buf;
	len = o.out.len;
	if (jobs_split(p, len, "PBX-SEP", &rest, &n1, &restlen) < 0 ||
	    pbx_scontrol_limits_parse(p, n1, &pr->limits, err) < 0) {
		jobs_output_release(&o);
		return err->msg[0] ? -1 : pbx_err_set(err, "unexpected answer from %s", c->row.name);
	}
	p = rest;
	len = restlen;
	jobs_split(p, len, "PBX-SEP", &rest, &n2, &restlen);
	pr->pushed = n2 >= 6 && !memcmp(p, "PUSHED", 6);
	p = rest;
	len = restlen;
	if (jobs_split(p, len, "PBX-SEP", &rest, &n3, &restlen) == 0) {
		pbx_buf_add(&pr->live, p, n3);
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
	jobs_output_release(&o);
	return 0;
}

/* The array job id squeue shows for comment pbx:SHORT:ROW, or NULL. */
static char *probe_live_job(const struct parrun_probe *pr, const char *short_id, int64_t row)
{
	char want[128];
	const char *p = pr->live.buf;
	snprintf(want, sizeof(want), " pbx:%s:%" PRId64, short_id, row);
	while (p && *p) {
		const char *nl = strchr(p, '\n'), *hit = strstr(p, want);
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		if (hit && hit < p + l && (size_t)(hit - p) + strlen(want) == l)
			return xstrndup(p, (size_t)(hit - p));
		p = nl ? nl + 1 : NULL;
	}
	return NULL;
}

/* Sends the tasks of an array that never reached SLURM back to NEW,
 * except those whose directory shows they ran. */
static int parrun_revert(struct pbx_store *st, const struct pbx_submission_row *sub,
			 const struct pbx_array_row *a, const struct parrun_probe *pr,
			 struct pbx_err *err)
{
	int64_t *idx;
	size_t n, i, k = 0;
	int rc;
	if (jobs_spec_tasks(a->spec, a->first_task, &idx, &n) < 0)
		return pbx_err_set(err, "array %" PRId64 " has a malformed spec '%s'", a->id, a->spec);
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
			const char *short_id, const struct parrun_probe *pr, struct pbx_err *err)
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
 * knows) and no sign that they ran. */
static int parrun_pending(struct pbx_store *st, const struct pbx_submission_row *sub,
			  const struct parrun_probe *pr, int64_t **idx, size_t *n,
			  size_t *skipped, struct pbx_err *err)
{
	struct pbx_task_row *tasks;
	size_t nt, i;
	if (pbx_store_tasks_list(st, sub->id, &tasks, &nt, err) < 0)
		return -1;
	*idx = xcalloc(nt ? nt : 1, sizeof(int64_t));
	*n = 0;
	*skipped = 0;
	for (i = 0; i < nt; i++) {
		int due = !strcmp(tasks[i].state, "NEW") || tasks[i].submits == 0 ||
			  !pbx_task_state_known(tasks[i].state);
		if (!due || ((size_t)tasks[i].idx < pr->ntasks && pr->has_dir[tasks[i].idx]))
			(*skipped)++;
		else
			(*idx)[(*n)++] = tasks[i].idx;
	}
	pbx_task_rows_free(tasks, nt);
	return 0;
}

int pbx_jobs_parrun(struct pbx_store *st, struct pbx_cluster *c, const struct pbx_experiment *e,
		    struct pbx_parrun_result *r, struct pbx_err *err)
{
	struct pbx_package *p = NULL;
	struct pbx_submission_row sub = {0};
	struct parrun_probe pr = {0};
	struct pbx_buf tar = PBX_BUF_INIT;
	int64_t *idx = NULL;
	size_t n = 0, nargs = 0, i;
	char **args = NULL;
	int rc, lock = -1;

	memset(r, 0, sizeof(*r));
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
		rc = parrun_probe(c, e, p->short_id, e->npoints, &pr, err);
		r->round_trips++;
	}
	if (rc == 0)
		rc = parrun_record(st, c, e, p, &sub, err);
	if (rc == 0 && pbx_store_begin(st, err) == 0) {
		rc = parrun_adopt(st, &sub, p->short_id, &pr, err);
		rc = rc == 0 ? pbx_store_commit(st, err) : (pbx_store_rollback(st), -1);
	}
	if (rc == 0)
		rc = parrun_pending(st, &sub, &pr, &idx, &n, &r->skipped, err);
	if (rc == 0 && n > 0 && !pr.pushed) {
		char *path = xasprintf("%s/tmp-%s-%ld.tar", pbx_home(), p->short_id, (long)getpid());
		rc = pbx_package_write_tar(p, e, 0, e->npoints, path, err);
		if (rc == 0)
			rc = pbx_read_file(path, &tar, err);
		unlink(path);
		free(path);
		r->pushed = rc == 0;
	}
	if (rc == 0 && n > 0) {
		long chunk = pr.limits.max_array_size;
		if (pr.limits.max_job_count < chunk)
			chunk = pr.limits.max_job_count;
		args = pbx_experiment_sbatch_args(e, &nargs);
		rc = jobs_submit(st, c, &sub, p->short_id, idx, n, chunk, e->throttle,
				 (const char *const *)args, nargs, tar.len ? &tar : NULL, &r->job_ids,
				 &r->arrays, err);
		r->round_trips++;
		if (rc == 0)
			r->submitted = n;
	}
	if (rc == 0)
		pbx_store_submission_set(st, sub.id, 1, "submitted", err);
	for (i = 0; i < nargs; i++)
		free(args[i]);
	free(args);
	free(idx);
	free(pr.has_dir);
	pbx_buf_release(&pr.live);
	pbx_buf_release(&tar);
	pbx_submission_row_free(&sub);
	pbx_package_free(p);
	if (lock >= 0)
		close(lock);
	return rc;
}

void pbx_parrun_result_free(struct pbx_parrun_result *r)
{
	size_t i;
	for (i = 0; r->job_ids && i < r->arrays; i++)
		free(r->job_ids[i]);
	free(r->job_ids);
	r->job_ids = NULL;
}
