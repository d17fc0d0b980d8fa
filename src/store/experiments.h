/*
 * experiments.h - the store's rows for experiments: packages (content-
 * addressed code + experiment file), submissions (a package on a cluster),
 * job arrays (one sbatch each) and tasks (one per sweep point).
 *
 * Memory: row structs filled by these functions own their strings; release
 * them with the matching *_free function.
 */
#ifndef PBX_STORE_EXPERIMENTS_H
#define PBX_STORE_EXPERIMENTS_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct pbx_package_row {
	char *id;       /* full SHA-256 hex content id */
	char *short_id; /* first 12 hex digits */
	char *name;     /* experiment name */
	char *experiment_path;
	char *experiment_text;
	char *git_commit; /* NULL outside a git checkout */
	char *git_diff;   /* NULL when clean or outside git */
	char *user, *host;
	int64_t ntasks;
	int64_t created;
};

/* Inserts the package unless a package with that id exists. */
int pbx_store_package_put(struct pbx_store *st, const struct pbx_package_row *p,
			  struct pbx_err *err);
/* Finds a package by short-id prefix (at least 4 hex digits) or, failing
 * that, the newest package of that experiment name.  Errors: not found
 * (PBX_EXIT_NOTFOUND) and ambiguous prefix (PBX_EXIT_USAGE). */
int pbx_store_package_find(struct pbx_store *st, const char *ref, struct pbx_package_row *out,
			   struct pbx_err *err);
/* All packages, newest first. */
int pbx_store_package_list(struct pbx_store *st, struct pbx_package_row **rows, size_t *n,
			   struct pbx_err *err);
void pbx_package_row_free(struct pbx_package_row *p);
/* Removes package `package_id` and everything the store keeps of it (its
 * submissions, arrays, tasks, metrics and harvested files), in one
 * transaction.  Files (results at home, the run on the cluster) are the
 * caller's. */
int pbx_store_package_forget(struct pbx_store *st, const char *package_id, struct pbx_err *err);
/* The short ids of the packages with a submission on cluster
 * `cluster_id`, sorted, each once; *ids and its strings are the caller's. */
int pbx_store_cluster_package_ids(struct pbx_store *st, int64_t cluster_id, char ***ids, size_t *n,
				  struct pbx_err *err);
/* The names of every parameter any task of the store has, sorted, each
 * once (for completion); *names and its strings are the caller's. */
int pbx_store_param_names(struct pbx_store *st, char ***names, size_t *n, struct pbx_err *err);
void pbx_package_rows_free(struct pbx_package_row *rows, size_t n);

struct pbx_submission_row {
	int64_t id;
	char *package_id;
	int64_t cluster_id;
	char *cluster_name;   /* filled by the getters (join) */
	char *cluster_state;  /* likewise */
	char *remote_dir;     /* relative to the cluster's shared directory */
	char *resources_json; /* the sbatch options of the latest submission
				  (src/slurm/sbatch.h's JSON; older stores: an
				  argv array) */
	int pushed;
	char *state; /* submitting, submitted, partial */
	int64_t created;
	char *environment; /* "READY KEY" / "FAILED REASON" as last read; NULL: none */
};

/* Returns 0 and fills *out, or -1 with PBX_EXIT_NOTFOUND. */
int pbx_store_submission_get(struct pbx_store *st, const char *package_id, int64_t cluster_id,
			     struct pbx_submission_row *out, struct pbx_err *err);
/* Creates the submission and its `ntasks` task rows (state NEW) in the
 * caller's transaction; params_json[i] is task i's parameters. */
int pbx_store_submission_create(struct pbx_store *st, const struct pbx_submission_row *s,
				const char *const *params_json, size_t ntasks, int64_t *id,
				struct pbx_err *err);
/* Submissions of a package (on any cluster), oldest first. */
int pbx_store_submissions_of(struct pbx_store *st, const char *package_id,
			     struct pbx_submission_row **rows, size_t *n, struct pbx_err *err);
int pbx_store_submission_set(struct pbx_store *st, int64_t id, int pushed, const char *state,
			     struct pbx_err *err);
/* Replaces the stored sbatch options (what `rerun` submits with). */
/* Records the environment's status line as read on the cluster (NULL:
 * none). */
int pbx_store_submission_set_environment(struct pbx_store *st, int64_t id, const char *status,
					 struct pbx_err *err);
int pbx_store_submission_set_resources(struct pbx_store *st, int64_t id, const char *json,
				       struct pbx_err *err);
void pbx_submission_row_free(struct pbx_submission_row *s);
void pbx_submission_rows_free(struct pbx_submission_row *rows, size_t n);

struct pbx_array_row {
	int64_t id;
	int64_t submission_id;
	int64_t first_task; /* PBX_TASK_OFFSET: task index = first_task + array index */
	int64_t ntasks;     /* number of tasks in the array */
	char *spec;         /* the --array value */
	char *job_id;       /* SLURM's array job id, NULL until submitted */
	char *state;        /* planned, submitted, failed */
};

int pbx_store_array_add(struct pbx_store *st, const struct pbx_array_row *a, int64_t *id,
			struct pbx_err *err);
int pbx_store_array_set(struct pbx_store *st, int64_t id, const char *job_id, const char *state,
			struct pbx_err *err);
int pbx_store_arrays_list(struct pbx_store *st, int64_t submission_id, struct pbx_array_row **rows,
			  size_t *n, struct pbx_err *err);
void pbx_array_rows_free(struct pbx_array_row *rows, size_t n);

struct pbx_task_row {
	int64_t idx;
	char *params_json;
	char *state;   /* NEW, PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ... */
	int exit_code; /* -1 when unknown */
	char *node;
	int attempt;
	int64_t start_time, end_time; /* 0 when unknown */
	char *job_id;
	int submits;              /* how often pbx submitted it */
	int64_t cancel_requested; /* when `pbx cancel` cancelled it since its last
	                              submission (Unix seconds; 1 in older stores), or 0 */
};

/* Tasks of a submission by index. */
int pbx_store_tasks_list(struct pbx_store *st, int64_t submission_id, struct pbx_task_row **rows,
			 size_t *n, struct pbx_err *err);
/* Writes state, exit code, node, attempt, times and job id of n tasks
 * (one prepared statement; call inside a transaction). */
int pbx_store_tasks_update(struct pbx_store *st, int64_t submission_id,
			   const struct pbx_task_row *rows, size_t n, struct pbx_err *err);
/* Marks tasks [first, first+n) as submitted once more (state PENDING). */
int pbx_store_tasks_submitted(struct pbx_store *st, int64_t submission_id, const int64_t *idx,
			      size_t n, struct pbx_err *err);
/* Undoes pbx_store_tasks_submitted for tasks whose array never reached
 * SLURM: back to NEW. */
int pbx_store_tasks_unsubmit(struct pbx_store *st, int64_t submission_id, const int64_t *idx,
			     size_t n, struct pbx_err *err);
/* Records that `pbx cancel` cancelled tasks idx[0..n) (read by the state
 * rules; cleared when a task is submitted again). */
int pbx_store_tasks_cancelled(struct pbx_store *st, int64_t submission_id, const int64_t *idx,
			      size_t n, struct pbx_err *err);
void pbx_task_rows_free(struct pbx_task_row *rows, size_t n);

/* ---------------------------------------------------------------- results */

struct pbx_metric {
	int64_t idx; /* task index */
	int64_t step;
	const char *name; /* borrowed in puts; owned by the row array in lists */
	double value;
	int is_null; /* the file had null (or NaN) */
};

/* Adds metric points of a submission; points already stored (same task,
 * name and step) are left as they are, so ingesting a file twice adds
 * nothing.  *added counts the new points.  Call inside a transaction. */
int pbx_store_metrics_put(struct pbx_store *st, int64_t submission_id, const struct pbx_metric *m,
			  size_t n, size_t *added, struct pbx_err *err);
/* All metric points of a submission, by task, name, step.  Names are owned
 * by the array: free with pbx_metrics_free. */
int pbx_store_metrics_list(struct pbx_store *st, int64_t submission_id, struct pbx_metric **rows,
			   size_t *n, struct pbx_err *err);
void pbx_metrics_free(struct pbx_metric *rows, size_t n);

struct pbx_harvested {
	int64_t idx;
	char *path;          /* relative to the task directory */
	int64_t size, mtime; /* as the remote listing said (size: of the local copy);
			      * a status taken while its task ran: mtime -1 */
};

/* Every file harvested for a submission (owned: pbx_harvested_free). */
int pbx_store_harvested_list(struct pbx_store *st, int64_t submission_id,
			     struct pbx_harvested **rows, size_t *n, struct pbx_err *err);
/* Records (or updates) harvested files; call inside a transaction. */
int pbx_store_harvested_put(struct pbx_store *st, int64_t submission_id,
			    const struct pbx_harvested *rows, size_t n, struct pbx_err *err);
void pbx_harvested_free(struct pbx_harvested *rows, size_t n);
/* Whether rows (any order) hold the final status of task idx, which ended
 * at end_time (0: unknown): a status no older than the end, never one taken
 * while the task ran.  The same rule as pbx_store_unharvested's. */
int pbx_harvested_final_status(const struct pbx_harvested *rows, size_t n, int64_t idx,
			       int64_t end_time);

/* A submission on a cluster whose results are not all home: its tasks
 * that have not ended (`live`: PENDING, RUNNING, UNKNOWN as last known)
 * and those that ran and ended but whose status file was not harvested
 * since (`ended`). */
struct pbx_unharvested {
	char *package_id, *short_id, *name;
	int64_t submission_id;
	long live, ended;
};
/* The submissions of cluster `cluster_id` with any such task, oldest
 * first (owned: pbx_unharvested_free). */
int pbx_store_unharvested(struct pbx_store *st, int64_t cluster_id, struct pbx_unharvested **rows,
			  size_t *n, struct pbx_err *err);
void pbx_unharvested_free(struct pbx_unharvested *rows, size_t n);
/* Tasks of a submission whose metrics.jsonl is recorded as harvested but
 * which have no metric point (a harvest from before metrics and harvested
 * rows were committed together, killed between the two).  *idx is owned
 * by the caller (free). */
int pbx_store_metrics_unmatched(struct pbx_store *st, int64_t submission_id, int64_t **idx,
				size_t *n, struct pbx_err *err);

#endif
