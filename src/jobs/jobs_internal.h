/*
 * jobs_internal.h - what the files of src/jobs share.
 */
#ifndef PBX_JOBS_INTERNAL_H
#define PBX_JOBS_INTERNAL_H

#include "jobs/jobs.h"
#include "slurm/sbatch.h"
#include "slurm/sacctmgr.h"
#include "slurm/squeue.h"
#include "util/buf.h"

/* Remote scripts run on the head with pbx_cluster_run (cluster.h). */

/* Waits for, then holds, the lock that makes submissions of one package
 * to one cluster (parrun, rerun) take turns on this machine, so the second
 * finds what the first submitted instead of submitting it again.  Returns
 * the lock's descriptor (close it to release), or -1 with err set. */
int jobs_lock(const char *package_id, int64_t cluster_id, struct pbx_err *err);
/* state.c: applies the ended tasks' status lines (the wrapper's `status`
 * files, one a line) to the store's tasks last seen RUNNING, as `pbx
 * harvest` reads them: the state, exit code and end they report.  Returns
 * how many tasks changed, or -1 with err. */
int jobs_states_from_status(struct pbx_store *st, int64_t submission_id, const char *status,
			    size_t len, struct pbx_err *err);
/* apt.c: installs e's environment.apt packages, as root, on every compute
 * node of c that is up (what is missing only); a cluster pbx did not build
 * is refused (PBX_EXIT_USAGE).  0, or -1 with err quoting apt-get. */
struct pbx_experiment;
int jobs_apt(struct pbx_cluster *c, const struct pbx_experiment *e, struct pbx_err *err);

/* Splits `text` at the first line equal to `sep`: the part before has
 * *before_len bytes, the part after starts at *after (pointers into text,
 * not copies); returns 0, or -1 when there is no such line. */
int jobs_split(const char *text, size_t len, const char *sep, const char **after,
	       size_t *before_len, size_t *after_len);

/* Appends an sbatch call for one array to `script`; it prints
 * "PBX-ARRAY ROWID JOBID" or "PBX-ARRAY-FAILED ROWID MESSAGE". */
void jobs_sbatch_line(struct pbx_buf *script, const struct pbx_array_row *a,
		      const char *const *sbatch_args, size_t nargs);

/* Reads one line of the submit script's answers: "PBX-ARRAY ROW JOBID"
 * gives *job_id (checked with pbx_slurm_job_id_ok: anything but digits
 * becomes an *error quoting it), "PBX-ARRAY-FAILED ROW MESSAGE" gives
 * *error.  Returns 1 with *row for an answer (one of *job_id and *error
 * set, caller frees), 0 for any other line. */
/* A hint for sbatch's errors when they say the user's job count limit
 * (MaxSubmitJobs) was reached; "" otherwise.  Static text. */
const char *jobs_limit_hint(const char *sbatch_errors);
int jobs_answer_line(const char *line, int64_t *row, char **job_id, char **error);

/* squeue's view of the tasks: live[first_task + i] = the pbx state of
 * SLURM's (static string) for every array task or pending range jobs[]
 * shows of arrays[] (matched by job id), for task indices below n only: a
 * range is clamped to them first, never walked beyond. */
void jobs_apply_squeue(const struct pbx_squeue_job *jobs, size_t nj,
		       const struct pbx_array_row *arrays, size_t na, const char **live, size_t n);

/* The state of a task whose status file says it ended as `reported`
 * (COMPLETED, FAILED, CANCELLED...) at `end` (the node's clock): CANCELLED
 * when `pbx cancel` cancelled it at `cancelled_at` (the laptop's clock, 0 =
 * never) and it ended no earlier than that, less JOBS_CLOCK_SLACK_S for
 * clocks apart; else `reported` (the same pointer). */
#define JOBS_CLOCK_SLACK_S 5
const char *jobs_ended_state(const char *reported, int64_t end, int64_t cancelled_at);

/* Builds the --array spec for sorted task indices idx[0..n) relative to
 * `offset` ("0-9,12,15-20"), with "%throttle" when throttle > 0. */
char *jobs_array_spec(const int64_t *idx, size_t n, int64_t offset, int throttle);

/* The task indices an array spec covers (inverse of jobs_array_spec):
 * *idx owned by the caller.  Returns -1 for a malformed spec. */
int jobs_spec_tasks(const char *spec, int64_t offset, int64_t **idx, size_t *n);

/* Records planned arrays, submits them in one round trip (pushing `tar`
 * first when non-NULL) and records the answers; arrays sbatch refuses for
 * a job count limit go again smaller, a round trip each (arrays.c,
 * tally_round).  Tasks idx[0..n) are the ones being submitted; chunk =
 * tasks per array at most; `opts` gives the sbatch options, the throttle
 * and the launcher (resolved, not AUTO).  *job_ids (*narrays of them) are
 * the arrays that went in, also when it fails; caller frees each and the
 * array.  *warning (when warning is not NULL) gets what went wrong besides
 * the arrays (the notify: job not submitted), or NULL; caller frees.
 * *round_trips (when not NULL) grows by the round trips made. */
int jobs_submit(struct pbx_store *st, struct pbx_cluster *c, const struct pbx_submission_row *sub,
		const char *short_id, const int64_t *idx, size_t n, long chunk,
		const struct pbx_sbatch_opts *opts, const struct pbx_buf *tar, char ***job_ids,
		size_t *narrays, char **warning, int *round_trips, struct pbx_err *err);

/* What one round trip learns about a package on a cluster before
 * submitting (parrun and rerun alike): the cluster's limits, whether the
 * package is there, its live arrays, which task directories exist, and the
 * user's job submit limit with the jobs (array tasks) the user has queued. */
struct jobs_probe {
	struct pbx_slurm_limits limits;
	struct pbx_submit_limit submit; /* sacctmgr's MaxSubmitJobs for the options' account/QOS */
	long queued;                    /* the user's jobs in squeue, array tasks one by one */
	int pushed;                     /* the package is complete on the cluster */
	struct pbx_buf live;            /* squeue "%F %k" lines */
	unsigned char *has_dir;         /* per task: its directory exists */
	size_t ntasks;
};
/* With `validate` non-NULL, the same round trip first has the cluster check
 * those options with `sbatch --test-only`; a refusal is an error with code
 * PBX_EXIT_USAGE quoting sbatch's reason.  `opts` (may be NULL) gives the
 * account and QOS whose submit limit applies. */
int jobs_probe(struct pbx_cluster *c, const char *short_id, size_t ntasks,
	       const struct pbx_sbatch_opts *validate, const struct pbx_sbatch_opts *opts,
	       struct jobs_probe *pr, struct pbx_err *err);
void jobs_probe_release(struct jobs_probe *pr);
/* Tasks per array the probed limits allow: MaxArraySize, MaxJobCount and the
 * user's job submit limit (an array bigger than that never goes in). */
long jobs_probe_chunk(const struct jobs_probe *pr);
/* How many more jobs (array tasks) the user's submit limit lets in now
 * (never below 0); -1 when no limit is known. */
long jobs_probe_room(const struct jobs_probe *pr);

/* Submits tasks idx[0..n) of t again with the options stored by the
 * latest parrun (throttle and launcher included). */
int jobs_resubmit(struct pbx_store *st, struct pbx_jobs_target *t, const int64_t *idx, size_t n,
		  struct pbx_err *err);

#endif
