/*
 * jobs.h - experiments on a cluster: submitting a package's sweep as SLURM
 * job arrays (parrun, rerun), finding out where every task stands (state),
 * and reaching a task's output (log) or cancelling it.
 *
 * Remote layout, relative to the cluster's shared directory:
 *   pbx/PKG/pkg/          code/, experiment.yaml, pbx-task.sh, tasks.dat/idx
 *   pbx/PKG/tasks/INDEX/  one directory per task: status, stdout, stderr,
 *                         params.json and whatever the task writes
 *   pbx/PKG/slurm/        SLURM's own output of the batch scripts
 * The number of SSH round trips of every operation is constant in the
 * number of tasks: parrun makes 2 (limits + what exists; push + submit all
 * arrays; a few more, halving, when sbatch refuses arrays for a job count
 * limit pbx could not read), state makes 1.
 */
#ifndef PBX_JOBS_JOBS_H
#define PBX_JOBS_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "experiment/experiment.h"
#include "store/experiments.h"
#include "store/store.h"

struct pbx_parrun_result {
	char id[65], short_id[13];
	size_t ntasks;    /* tasks in the package */
	size_t submitted; /* tasks submitted by this call */
	size_t skipped;   /* tasks already submitted before */
	size_t held;      /* tasks not submitted because `hold` said so (left NEW) */
	size_t arrays;    /* sbatch calls made by this call */
	int pushed;       /* the package was pushed by this call */
	int round_trips;  /* SSH execs this call made */
	char **job_ids;   /* SLURM job ids of the arrays (caller frees each and the array) */
	char *warning;    /* what went wrong besides the arrays, or NULL (owned) */
};

/* Pushes (once per cluster) and submits every not yet submitted task of
 * `e` on cluster `c`, except those with hold[i] set (hold: NULL, or
 * e->npoints entries): they stay NEW, and a later parrun without them held
 * submits them.  Resource overrides must already be applied to e. */
int pbx_jobs_parrun(struct pbx_store *st, struct pbx_cluster *c, const struct pbx_experiment *e,
		    const unsigned char *hold, struct pbx_parrun_result *r, struct pbx_err *err);
void pbx_parrun_result_free(struct pbx_parrun_result *r);

/* One package on one cluster: what `state`, `log`, `cancel`, `rerun` work
 * on.  Owned by the caller: pbx_jobs_target_free. */
struct pbx_jobs_target {
	struct pbx_package_row pkg;
	struct pbx_submission_row sub;
	struct pbx_cluster *cluster; /* opened on demand, may be NULL */
};

/* Finds package `ref` (short-id prefix or experiment name) and its
 * (latest) submission; opens the cluster when `open_cluster`. */
int pbx_jobs_target(struct pbx_store *st, const struct pbx_config *cfg, const char *ref,
		    int open_cluster, struct pbx_jobs_target *t, struct pbx_err *err);
void pbx_jobs_target_free(struct pbx_jobs_target *t);

/* Refreshes the tasks of t from squeue and the task status files (one SSH
 * round trip) into the store. */
int pbx_jobs_refresh(struct pbx_store *st, struct pbx_jobs_target *t, struct pbx_err *err);

/* Resubmits every task whose state is FAILED, CANCELLED, TIMEOUT,
 * NODE_FAIL, OUT_OF_MEMORY, PREEMPTED or MISSING; or, with `only` >= 0,
 * that task whatever it ended as (COMPLETED too), and an error when it
 * does not exist or has not ended.  *count gets the number resubmitted. */
int pbx_jobs_rerun(struct pbx_store *st, struct pbx_jobs_target *t, long only, size_t *count,
		   struct pbx_err *err);

/* The submissions on cluster `cluster` whose results are not all home
 * (unharvested.c: tasks the store has pending or running are refreshed
 * first where the cluster is up); none for a name the store does not
 * know.  Owned: pbx_unharvested_free. */
int pbx_jobs_unharvested(struct pbx_store *st, const struct pbx_config *cfg, const char *cluster,
			 struct pbx_unharvested **rows, size_t *n, struct pbx_err *err);

/* scancel of every array of t, or of task `task` (>= 0) only. */
int pbx_jobs_cancel(struct pbx_store *st, struct pbx_jobs_target *t, long task,
		    struct pbx_err *err);

/* ---------------------------------------------------------------- harvest */

struct pbx_harvest_stats {
	size_t tasks_ended;    /* tasks whose status says they ended */
	size_t files_wanted;   /* new or changed files to fetch */
	size_t files_new;      /* files brought home by this harvest */
	size_t files_skipped;  /* already home, unchanged */
	size_t files_resumed;  /* left whole by an interrupted harvest: not fetched again */
	size_t refused;        /* unsafe names and links (see the log) */
	uint64_t bytes_wanted; /* sizes of the wanted files */
	uint64_t bytes;        /* bytes received (tar stream) */
	size_t metrics_added;  /* metric points ingested into the store */
	int round_trips;
	double seconds;
};

struct pbx_harvest_opts {
	int running; /* also tasks that are still running */
	/* Called as bytes arrive (may be NULL); stats is live. */
	void (*progress)(void *ctx, const struct pbx_harvest_stats *stats);
	void *progress_ctx;
};

/* Brings home what is new into $PBX_HOME/results/PKG/TASK/ (see harvest.c
 * for the steps); refusals and metrics warnings are appended to `log`. */
int pbx_jobs_harvest(struct pbx_store *st, struct pbx_jobs_target *t,
		     const struct pbx_harvest_opts *o, struct pbx_harvest_stats *stats,
		     struct pbx_buf *log, struct pbx_err *err);

/* True for the states a task ends in. */
int pbx_task_state_final(const char *state);
/* True for every state pbx records (NEW, PENDING, RUNNING, UNKNOWN and the
 * final ones); nothing else is ever written to the store. */
int pbx_task_state_known(const char *state);
/* True for the final states `rerun --failed` resubmits. */
int pbx_task_state_rerunnable(const char *state);

/* What `pbx cluster gc` removed (or, dry, would): envgc.c. */
struct pbx_env_gc_item {
	char *kind;      /* "package": a forgotten package's run directory;
			    "env": an environment's archive on the shared disk;
			    "local": its unpacked copy on a node;
			    "data": a staged dataset (SHARED/pbx/data/ID) */
	char *node;      /* where */
	char *id;        /* the package's short id or the environment's key */
	char *where;     /* local: the host and directory it was on, NULL else */
	long long bytes; /* its size */
};
struct pbx_env_gc {
	struct pbx_env_gc_item *gone;
	size_t ngone;
	char **kept; /* keys of the environments packages refer to */
	size_t nkept;
	long long freed; /* bytes */
	int busy;        /* environments left because a build or unpack held them */
	int young;       /* forgotten packages' directories left: changed in the last hour */
	int young_data;  /* datasets no package names, left: staged or named in the last hour */
	int busy_data;   /* datasets left because a staging held them */
	int dry;
};
/* Removes (dry: only says) what no package on cluster c refers to: the run
 * directories of packages this store forgot (not on a cluster of cloud
 * ssh), the staged datasets no run's data.links names, the environments
 * no run names, their unpacked copies on the nodes that are up.  *g owned by the caller (pbx_env_gc_free). */
int pbx_jobs_env_gc(struct pbx_store *st, struct pbx_cluster *c, int dry, struct pbx_env_gc *g,
		    struct pbx_err *err);
void pbx_env_gc_free(struct pbx_env_gc *g);
/* The collector's output from node `node` (its lines, the buffer cut at
 * each newline in place) added to g: "gone KIND ID BYTES [WHERE]" items
 * (one per KIND, ID and WHERE), "keep KEY", "busy", "young", "young-data"
 * and "busy-data" counts; other lines ignored.  For pbx_jobs_env_gc and
 * its fuzz target. */
void pbx_env_gc_parse(struct pbx_env_gc *g, const char *node, struct pbx_buf *out);

/* Registry credentials on cluster c's head (registry.c;
 * docs/environments.md, "Credentials"): skopeo's auth file of the user
 * tasks run as, on the head's own disk, which the pull of a registry image
 * uses.  Login: `registry` (HOST[:PORT]) and `user` checked by the caller;
 * `password` (len bytes) goes on the remote command's stdin only, and
 * never into err.  0 with *authfile the file's path on the head (caller
 * frees), or -1 with err (the registry's refusal, in skopeo's words). */
int pbx_jobs_registry_login(struct pbx_cluster *c, const char *registry, const char *user,
			    const char *password, size_t len, char **authfile, struct pbx_err *err);
/* Removes registry's credentials from that file (the file goes with the
 * last): 1 when it had some, 0 when it had none, -1 with err. */
int pbx_jobs_registry_logout(struct pbx_cluster *c, const char *registry, struct pbx_err *err);
/* The head's answer to a registry-login|logout (out: its output, len
 * bytes, untrusted): the last line, "PBX-REGISTRY-OK TEXT" -> 0 with
 * *said TEXT (caller frees), "PBX-REGISTRY-FAILED TEXT" -> -1 with TEXT
 * in err, anything else -> -1 naming `cluster`.  Pure (fuzz_registry_answer). */
int pbx_jobs_registry_answer(const char *out, size_t len, const char *cluster, char **said,
			     struct pbx_err *err);

#endif
