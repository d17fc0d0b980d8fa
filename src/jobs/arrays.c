/*
 * arrays.c - submitting tasks as SLURM job arrays in one SSH round trip
 * (see jobs_internal.h).  Tasks are grouped into arrays of at most `chunk`
 * tasks by index: array k carries PBX_TASK_OFFSET = k * chunk and the
 * indices of its tasks relative to that offset, so every array index stays
 * below MaxArraySize.
 */
#include "jobs/jobs_internal.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct array_plan {
	struct pbx_array_row row;
	const int64_t *idx; /* into the caller's sorted index list */
	size_t n;
	int ok;
	char *job_id;
	char *error;
};

static size_t plan_arrays(int64_t sub_id, const int64_t *idx, size_t n, long chunk, int throttle,
			  struct array_plan **plans)
{
	size_t i = 0, np = 0;
	*plans = xcalloc(n ? n : 1, sizeof(**plans));
	while (i < n) {
		int64_t k = idx[i] / chunk;
		size_t j = i;
		struct array_plan *a = &(*plans)[np++];
		while (j < n && idx[j] / chunk == k)
			j++;
		a->idx = idx + i;
		a->n = j - i;
		a->row.submission_id = sub_id;
		a->row.first_task = k * chunk;
		a->row.ntasks = (int64_t)(j - i);
		a->row.spec = jobs_array_spec(idx + i, j - i, k * chunk, throttle);
		a->row.state = "planned";
		i = j;
	}
	return np;
}

static int record_plans(struct pbx_store *st, int64_t sub_id, struct array_plan *plans, size_t np,
			struct pbx_err *err)
{
	size_t i;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	for (i = 0; i < np; i++) {
		if (pbx_store_array_add(st, &plans[i].row, &plans[i].row.id, err) < 0 ||
		    pbx_store_tasks_submitted(st, sub_id, plans[i].idx, plans[i].n, err) < 0) {
			pbx_store_rollback(st);
			return -1;
		}
	}
	return pbx_store_commit(st, err);
}

/* env_sbatch: sbatch as the task user with the experiment's options that
 * say where its jobs may run (partition, account, qos, reservation,
 * constraint), for the environment's build job: it runs where the tasks
 * will (their platform), and a cluster that refuses jobs without an
 * account takes it. */
static void env_placement(struct pbx_buf *s, const struct pbx_sbatch_opts *opts)
{
	static const char *const keys[] = { "partition",   "account",    "qos",
					    "reservation", "constraint", NULL };
	size_t i;
	pbx_buf_adds(s, "env_sbatch() { as_user sbatch");
	for (i = 0; keys[i]; i++) {
		const char *v = pbx_sbatch_opts_get(opts, keys[i]);
		char *word;
		if (!v || !*v)
			continue;
		word = xasprintf("--%s=%s", keys[i], v);
		pbx_buf_adds(s, " ");
		pbx_shell_quote(s, word);
		free(word);
	}
	pbx_buf_adds(s, " \"$@\"; }\n");
}

/* notify: (templates/pbx-notify.sh, docs/notify.md): one small job after
 * every array this script submitted (afterany: it starts when their last
 * task has ended), where the tasks may run; its failure to submit is said
 * (PBX-NOTIFY-FAILED) and changes nothing else. */
static void notify_job(struct pbx_buf *s, const char *short_id)
{
	pbx_buf_addf(
		s,
		"if [ -f \"$R/pkg/pbx-notify.sh\" ] && [ -n \"$JOBS\" ]; then\n"
		"  out=$(env_sbatch --parsable ${U:+--uid=\"$U\" --gid=\"$U\"} --ntasks=1"
		" --time=00:05:00 --dependency=afterany$JOBS --job-name=pbx-%s-notify"
		" --comment=\"pbx:%s:notify\" --output=\"$R/slurm/notify.log\" --open-mode=append"
		" --export=ALL \"$R/pkg/pbx-notify.sh\" 2>&1) ||"
		" echo \"PBX-NOTIFY-FAILED $(printf '%%s' \"$out\" | tr '\\n' ' ')\"\n"
		"fi\n",
		short_id, short_id);
}

/* The remote script: unpack the package once, then one `submit` per array.
 * The wrapper's variables reach sbatch in its own environment with plain
 * --export=ALL: the form --export=ALL,VAR=... makes SLURM (22.05) set
 * SLURM_GET_USER_ENV, and slurmd then runs `su - USER` (a login shell,
 * with the user's dotfiles) before every task.  `envdep` is NULL for a
 * submission's first round; a retry (smaller arrays after a refusal for
 * the submit limit) passes the first round's environment build job ("" for
 * none) and neither pulls the image nor submits that build or the notice
 * job again. */
static void build_script(struct pbx_buf *s, const char *short_id, const struct pbx_buf *tar,
			 const struct array_plan *plans, size_t np,
			 const struct pbx_sbatch_opts *opts, const char *envdep)
{
	size_t i, nargs;
	char **args = pbx_sbatch_opts_argv(opts, &nargs);
	/* NL: sbatch --parsable's job id is its last line (a site's job_submit
	 * messages come before it, on stderr, which the script keeps) */
	pbx_buf_addf(s, "R=\"$PBX_SHARED/pbx/%s\"\nNL='\n'\n", short_id);
	if (tar)
		pbx_buf_adds(
			s,
			"if [ ! -f \"$R/pkg/.complete\" ]; then\n"
			/* its own, unguessable: another pbx may unpack too */
			"  mkdir -p \"$R\" && T=$(mktemp -d \"$R/pkg.tmp.XXXXXX\") &&"
			" chmod 755 \"$T\" &&"
			" tar -C \"$T\" -xf - &&"
			" : >\"$T/.complete\" && { [ -f \"$R/pkg/.complete\" ] ||"
			" { rm -rf \"$R/pkg\" && mv \"$T\" \"$R/pkg\"; } || [ -f \"$R/pkg/.complete\" ]; } ||"
			" { rm -rf \"$T\"; echo \"cannot unpack the package in $R\" >&2; exit 1; }\n"
			"  rm -rf \"$T\"\n"
			"fi\n");
	else
		pbx_buf_adds(s, "[ -f \"$R/pkg/.complete\" ] ||"
				" { echo \"the package is missing from $R\" >&2; exit 1; }\n");
	env_placement(s, opts);
	pbx_buf_addf(
		s,
		"mkdir -p \"$R/tasks\" \"$R/slurm\" || exit 1\n"
		/* tasks run as the node's task user (env.sh; docs/SECURITY.md),
		 * never as root: theirs are the directories they write, those of
		 * a package first run as root (before the upgrade) included */
		"U= UHOME=\n"
		"if [ -n \"${PBX_TASK_USER:-}\" ] && [ \"$(id -u)\" = 0 ]; then\n"
		"  U=$PBX_TASK_USER UHOME=$(getent passwd \"$U\" | cut -d: -f6)\n"
		"  chmod o+x \"$PBX_SHARED/pbx\" \"$R\" || exit 1\n"
		"fi\n"
		/* the Python environment (templates/pbx-env.sh): one build job
		 * unless it is built, the arrays after it (afterany: a failed
		 * build makes every task fail at once, saying why) */
		"ENVDEP=%s%s ENVFAIL=\n"
		"if [ -f \"$R/pkg/pbx-env.sh\" ]; then\n"
		"  mkdir -p \"$R/env\" \"$PBX_SHARED/pbx/envs\" || exit 1\n"
		"fi\n"
		"if [ -n \"$U\" ]; then\n"
		"  for d in \"$R/tasks\" \"$R/slurm\" \"$R/env\" \"$PBX_SHARED/pbx/envs\"; do\n"
		"    [ ! -d \"$d\" ] || [ \"$(stat -c %%U \"$d\")\" = \"$U\" ] || chown -R -h \"$U:\" \"$d\" || exit 1\n"
		"  done\n"
		"fi\n"
		"as_user() {\n"
		"  env ${U:+HOME=\"$UHOME\" USER=\"$U\" LOGNAME=\"$U\"} PBX_PKG_DIR=\"$R/pkg\" PBX_RUN_DIR=\"$R\""
		" PBX_SHARED=\"$PBX_SHARED\" \"$@\"\n"
		"}\n"
		/* RUN/env is the task user's: its status (FILE) is read without
		 * following a link or blocking on a FIFO (root must not hang on a
		 * task's) */
		"env_ready() {\n"
		"  [ -f \"$1\" ] && [ ! -L \"$1\" ] &&"
		" dd if=\"$1\" iflag=nofollow,nonblock bs=256 count=1 2>/dev/null | grep -q '^READY '\n"
		"}\n"
		/* a registry image: pulled on the head, now, as the task user
		 * (pbx-env.sh pull: once per cluster, keyed by digest); its
		 * status says READY or FAILED, no build job unless the image has
		 * Python packages to install (RUN/env/py: python: with
		 * container:) */
		"RETRY=%s REF= PYIMG=\n"
		"[ ! -f \"$R/pkg/env/image-ref\" ] || REF=1\n"
		"if [ -f \"$R/pkg/env/requirements.txt\" ] && { [ -n \"$REF\" ] || [ -L \"$R/pkg/env/image\" ]; }; then"
		" PYIMG=1; fi\n"
		"if [ -z \"$RETRY\" ] && [ -n \"$REF\" ]; then\n"
		"  env_ready \"$R/env/status\" || as_user ${U:+setpriv --reuid=\"$U\" --regid=\"$U\" --init-groups --}"
		" sh \"$R/pkg/pbx-env.sh\" pull </dev/null\n"
		"fi\n"
		"if [ -z \"$RETRY\" ] && [ -f \"$R/pkg/pbx-env.sh\" ] && { { [ -z \"$REF\" ] && ! env_ready \"$R/env/status\"; } ||"
		" { [ -n \"$PYIMG\" ] && ! env_ready \"$R/env/py/status\"; }; }; then\n"
		"  [ -n \"$REF\" ] || rm -f \"$R/env/status\"\n"
		"  rm -f \"$R/env/py/status\"\n"
		"  if out=$(env_sbatch --parsable ${U:+--uid=\"$U\" --gid=\"$U\"} --ntasks=1"
		" --job-name=pbx-%s-env --comment=\"pbx:%s:env\" --output=\"$R/env/build.log\" --open-mode=append"
		" --export=ALL \"$R/pkg/pbx-env.sh\" build 2>&1); then\n"
		"    out=${out##*\"$NL\"}; out=${out%%%%;*}\n"
		"    ENVDEP=--dependency=afterany:$out\n"
		"    echo \"PBX-ENV $out\"\n"
		"  else\n"
		"    ENVFAIL=\"the environment's build job: $(printf '%%s' \"$out\" | tr '\\n' ' ')\"\n"
		"  fi\n"
		"fi\n"
		"JOBS=\n"
		"submit() {\n"
		"  row=$1 first=$2 spec=$3; shift 3\n"
		"  if [ -n \"$ENVFAIL\" ]; then echo \"PBX-ARRAY-FAILED $row $ENVFAIL\"; return; fi\n"
		"  if out=$(as_user PBX_TASK_OFFSET=\"$first\""
		" PBX_LAUNCHER=%s sbatch --parsable ${U:+--uid=\"$U\" --gid=\"$U\"} $ENVDEP \"$@\" --array=\"$spec\" --requeue"
		" --job-name=pbx-%s --comment=\"pbx:%s:$row\""
		" --output=\"$R/slurm/%%A_%%a.out\" --export=ALL"
		" \"$R/pkg/pbx-task.sh\" 2>&1); then\n"
		"    out=${out##*\"$NL\"}; out=${out%%%%;*}\n"
		"    echo \"PBX-ARRAY $row $out\"\n"
		"    JOBS=\"$JOBS:$out\"\n"
		"  else\n"
		"    echo \"PBX-ARRAY-FAILED $row $(printf '%%s' \"$out\" | tr '\\n' ' ')\"\n"
		"  fi\n"
		"}\n",
		envdep && *envdep ? "--dependency=afterany:" : "", envdep ? envdep : "",
		envdep ? "retry" : "", short_id, short_id, pbx_launcher_name(opts->launcher),
		short_id, short_id);
	for (i = 0; i < np; i++)
		jobs_sbatch_line(s, &plans[i].row, (const char *const *)args, nargs);
	pbx_sbatch_argv_free(args, nargs);
	if (!envdep)
		notify_job(s, short_id);
}

const char *jobs_limit_hint(const char *sbatch_errors)
{
	/* SLURM's words for a per-user (association or QOS) job count limit */
	static const char *const marks[] = { "MaxSubmitJob", "job submit limit", NULL };
	size_t i;
	for (i = 0; marks[i]; i++)
		if (sbatch_errors && strstr(sbatch_errors, marks[i]))
			return "\nThe cluster limits how many jobs you may have queued at once "
			       "(MaxSubmitJobs; each array task counts): the arrays that went in "
			       "run, and the tasks left stay NEW; 'pbx parrun' again once some have "
			       "ended submits more ('pbx state' shows how many are left).";
	return "";
}

int jobs_answer_line(const char *line, int64_t *row, char **job_id, char **error)
{
	int failed = !strncmp(line, "PBX-ARRAY-FAILED ", 17);
	const char *text;
	char *rest;
	long long r;
	*job_id = *error = NULL;
	if (!failed && strncmp(line, "PBX-ARRAY ", 10) != 0)
		return 0;
	r = strtoll(line + (failed ? 17 : 10), &rest, 10);
	if (*rest != ' ')
		return 0;
	*row = r;
	text = rest + 1;
	if (failed)
		*error = xstrdup(text);
	else if (pbx_slurm_job_id_ok(text))
		*job_id = xstrdup(text);
	else
		*error = xasprintf("sbatch answered '%.80s' where a job id (digits) was expected",
				   text);
	return 1;
}

/* "the notice job (notify:) was not submitted: WHY" from the script's
 * PBX-NOTIFY-FAILED line, or NULL.  Caller frees. */
static char *notify_answer(const char *out)
{
	const char *p = strstr(out, "PBX-NOTIFY-FAILED ");
	char *why, *res;
	if (!p || (p != out && p[-1] != '\n'))
		return NULL;
	p += 18;
	why = xstrndup(p, strcspn(p, "\n"));
	res = xasprintf("the notice job (notify:) was not submitted: %.300s", why);
	free(why);
	return res;
}

static void parse_answers(const char *out, struct array_plan *plans, size_t np)
{
	const char *p = out;
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p), i;
		char *line = xstrndup(p, l), *job_id, *error;
		int64_t row;
		if (jobs_answer_line(line, &row, &job_id, &error)) {
			for (i = 0; i < np; i++) {
				if (plans[i].row.id != row)
					continue;
				free(plans[i].job_id);
				free(plans[i].error);
				plans[i].ok = job_id != NULL;
				plans[i].job_id = job_id ? xstrdup(job_id) : NULL;
				plans[i].error = error ? xstrdup(error) : NULL;
			}
			free(job_id);
			free(error);
		}
		free(line);
		p = nl ? nl + 1 : NULL;
	}
}

static int record_answers(struct pbx_store *st, int64_t sub_id, struct array_plan *plans, size_t np,
			  struct pbx_err *err)
{
	size_t i;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	for (i = 0; i < np; i++) {
		int rc = pbx_store_array_set(st, plans[i].row.id, plans[i].job_id,
					     plans[i].ok ? "submitted" : "failed", err);
		if (rc == 0 && !plans[i].ok)
			rc = pbx_store_tasks_unsubmit(st, sub_id, plans[i].idx, plans[i].n, err);
		if (rc < 0) {
			pbx_store_rollback(st);
			return -1;
		}
	}
	return pbx_store_commit(st, err);
}

/* "PBX-ENV JOBID" of a first round: the environment's build job the arrays
 * depend on, for a retry's; NULL when none (or not a job id).  Caller frees. */
static char *env_answer(const char *out)
{
	const char *p = strstr(out, "PBX-ENV ");
	char *job;
	if (!p || (p != out && p[-1] != '\n'))
		return NULL;
	job = xstrndup(p + 8, strcspn(p + 8, "\n"));
	if (pbx_slurm_job_id_ok(job))
		return job;
	free(job);
	return NULL;
}

/* What the rounds of one submission add up to. */
struct submit_tally {
	char **job_ids;          /* the arrays that went in (owned) */
	size_t nok, cap;         /* job_ids' count and room */
	size_t narrays;          /* arrays planned, every round */
	size_t nfailed;          /* of them, not submitted */
	size_t ntasks_ok;        /* tasks that went in */
	struct pbx_buf failures; /* "  array of tasks SPEC: WHY" lines */
	char *envdep;            /* the first round's environment build job, or NULL */
	int64_t *retry;          /* the next round's tasks (room for every task) */
	size_t nretry;
	long next_chunk; /* tasks per array in the next round */
};

/* Adds a round's answers to t and picks the next round's tasks.  When
 * sbatch refused arrays for a job count limit (one pbx does not read, such
 * as an account's GrpSubmitJobs, or jobs queued since the probe) and the
 * smallest of them held k > 1 tasks, fewer than k fit now: the first k - 1
 * of the refused tasks go again in arrays of at most k / 2, so a sweep is
 * never stuck on arrays bigger than the room left.  k halves every round. */
static void tally_round(struct submit_tally *t, const struct array_plan *plans, size_t np)
{
	size_t i, j, k = 0;
	t->nretry = 0;
	t->narrays += np;
	for (i = 0; i < np; i++)
		if (!plans[i].ok && *jobs_limit_hint(plans[i].error) && (k == 0 || plans[i].n < k))
			k = plans[i].n;
	for (i = 0; i < np; i++) {
		char *tasks;
		if (plans[i].ok) {
			if (t->nok == t->cap) {
				t->cap = t->cap ? 2 * t->cap : 8;
				t->job_ids = xreallocarray(t->job_ids, t->cap, sizeof(char *));
			}
			t->job_ids[t->nok++] = xstrdup(plans[i].job_id);
			t->ntasks_ok += plans[i].n;
			continue;
		}
		t->nfailed++;
		for (j = 0; k > 1 && *jobs_limit_hint(plans[i].error) && j < plans[i].n &&
			    t->nretry < k - 1;
		     j++)
			t->retry[t->nretry++] = plans[i].idx[j];
		tasks = jobs_array_spec(plans[i].idx, plans[i].n, 0, 0);
		pbx_buf_addf(&t->failures, "%s  array of tasks %s: %s", t->failures.len ? "\n" : "",
			     tasks, plans[i].error ? plans[i].error : "no answer");
		free(tasks);
	}
	t->next_chunk = k > 1 ? (long)(k / 2) : 1;
}

/* One round: plans tasks idx[0..n) as arrays of at most `chunk`, records,
 * submits them in one round trip (the first round pushes `tar`, submits
 * the environment's build and the notice job, *warning) and records the
 * answers into the store and t. */
static int submit_round(struct pbx_store *st, struct pbx_cluster *c,
			const struct pbx_submission_row *sub, const char *short_id,
			const int64_t *idx, size_t n, long chunk,
			const struct pbx_sbatch_opts *opts, const struct pbx_buf *tar, int first,
			struct submit_tally *t, char **warning, struct pbx_err *err)
{
	struct array_plan *plans;
	struct pbx_buf script = PBX_BUF_INIT;
	struct pbx_cluster_output o;
	size_t np = plan_arrays(sub->id, idx, n, chunk > 0 ? chunk : 1, opts->throttle, &plans), i;
	int rc = record_plans(st, sub->id, plans, np, err);
	if (rc == 0) {
		build_script(&script, short_id, tar, plans, np, opts,
			     first       ? NULL
			     : t->envdep ? t->envdep
					 : "");
		rc = pbx_cluster_run(c, 0, script.buf, tar, &o, err);
	}
	if (rc == 0) {
		parse_answers(o.out.buf, plans, np);
		if (first && warning)
			*warning = notify_answer(o.out.buf);
		if (first)
			t->envdep = env_answer(o.out.buf);
		pbx_cluster_output_release(&o);
		rc = record_answers(st, sub->id, plans, np, err);
	}
	if (rc == 0)
		tally_round(t, plans, np);
	for (i = 0; i < np; i++) {
		free(plans[i].row.spec);
		free(plans[i].job_id);
		free(plans[i].error);
	}
	free(plans);
	pbx_buf_release(&script);
	return rc;
}

int jobs_submit(struct pbx_store *st, struct pbx_cluster *c, const struct pbx_submission_row *sub,
		const char *short_id, const int64_t *idx, size_t n, long chunk,
		const struct pbx_sbatch_opts *opts, const struct pbx_buf *tar, char ***job_ids,
		size_t *narrays, char **warning, int *round_trips, struct pbx_err *err)
{
	struct submit_tally t = { 0 };
	int64_t *next = xcalloc(n ? n : 1, sizeof(*next));
	int rc;
	*job_ids = NULL;
	*narrays = 0;
	if (warning)
		*warning = NULL;
	t.retry = xcalloc(n ? n : 1, sizeof(*t.retry));
	rc = submit_round(st, c, sub, short_id, idx, n, chunk, opts, tar, 1, &t, warning, err);
	if (round_trips)
		++*round_trips;
	while (rc == 0 && t.nretry > 0) {
		if (round_trips)
			++*round_trips;
		memcpy(next, t.retry, t.nretry * sizeof(*next));
		rc = submit_round(st, c, sub, short_id, next, t.nretry, t.next_chunk, opts, NULL, 0,
				  &t, NULL, err);
	}
	if (rc == 0 && t.nfailed > 0) {
		pbx_store_submission_set(st, sub->id, 1, "partial", err);
		rc = pbx_err_set(
			err,
			"%zu of %zu arrays were not submitted (run parrun again to submit "
			"the rest):\n%s\n%zu of the %zu tasks went in; the others stay NEW%s",
			t.nfailed, t.narrays, t.failures.buf, t.ntasks_ok, n,
			jobs_limit_hint(t.failures.buf));
	}
	*job_ids = t.job_ids; /* what went in, also when a later round failed */
	*narrays = t.nok;
	pbx_buf_release(&t.failures);
	free(t.envdep);
	free(t.retry);
	free(next);
	return rc;
}
