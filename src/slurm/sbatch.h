/*
 * sbatch.h - the options of one submission, typed: sbatch long options
 * (checked against the real ones; those pbx sets itself are refused), the
 * array throttle (the %N of --array) and the launcher of a task's program.
 * One serializer to sbatch's argv, one to JSON (what the store keeps, so
 * that `pbx rerun` submits exactly what `pbx parrun` did) and its reader.
 *
 * Ownership: a struct pbx_sbatch_opts owns its strings; release it with
 * pbx_sbatch_opts_free.  Functions documented "caller frees" return fresh
 * memory released with free(3).
 */
#ifndef PBX_SLURM_SBATCH_H
#define PBX_SLURM_SBATCH_H

#include <stddef.h>

#include "util/err.h"

#define PBX_SBATCH_MAX_VALUE    1024
#define PBX_SBATCH_MAX_THROTTLE 1000000

/* How pbx-task.sh starts a task's program (PBX_LAUNCHER). */
enum pbx_launcher {
	PBX_LAUNCHER_AUTO = 0, /* train tasks with more than one rank: mpi; else none */
	PBX_LAUNCHER_NONE,     /* the program runs once, in the batch step */
	PBX_LAUNCHER_SRUN,     /* srun: one copy per SLURM task */
	PBX_LAUNCHER_MPI,      /* mpirun inside the allocation, one rank per SLURM task */
};

struct pbx_sbatch_opts {
	char **keys, **values; /* long options without "--"; value "" = a bare flag */
	size_t n;
	int throttle; /* 0 = none */
	enum pbx_launcher launcher;
};

/*
 * Sets (replacing, or adding last) option `key` to `value`; `throttle` and
 * `launcher` are the two keys that are not sbatch's.  A flag takes "",
 * "true" or "false" (removes it).  On a bad key or value returns -1 with a
 * sentence in why[size] ("is set by pbx and cannot be given", ...) and
 * leaves o as it was.
 */
int pbx_sbatch_opts_set(struct pbx_sbatch_opts *o, const char *key, const char *value, char *why,
			size_t size);
/* Every key pbx_sbatch_opts_set accepts, NULL-terminated (static). */
const char *const *pbx_sbatch_known_keys(void);
/* 1 when `key` is one pbx sets itself (array, output, ...). */
int pbx_sbatch_key_reserved(const char *key);
/* The value of `key`, or NULL. */
const char *pbx_sbatch_opts_get(const struct pbx_sbatch_opts *o, const char *key);

/* "none", "srun", "mpi" or "auto". */
const char *pbx_launcher_name(enum pbx_launcher l);
/* The launcher to use: o->launcher, or for AUTO, MPI when `train` and
 * the options ask for more than one task (nodes, ntasks, ntasks-per-node
 * above 1) or more than one GPU (gres gpu:N, gpus, gpus-per-node: then
 * pbx-task.sh starts one rank per GPU of a one-task job), else NONE. */
enum pbx_launcher pbx_sbatch_opts_launcher(const struct pbx_sbatch_opts *o, int train);

/* sbatch arguments "--key=value" / "--key", in order (throttle and launcher
 * are not sbatch options: --array and PBX_LAUNCHER carry them).  *n gets the
 * count.  Caller frees each string and the array. */
char **pbx_sbatch_opts_argv(const struct pbx_sbatch_opts *o, size_t *n);
void pbx_sbatch_argv_free(char **argv, size_t n);

/* {"options": [["key", "value"], ...], "throttle": N, "launcher": "..."}
 * (compact).  Caller frees. */
char *pbx_sbatch_opts_json(const struct pbx_sbatch_opts *o);
/* Reads what pbx_sbatch_opts_json wrote (also the older form, a JSON array
 * of "--key=value" strings, which had no throttle) into *o (zeroed first;
 * release with pbx_sbatch_opts_free).  Every option is checked again. */
int pbx_sbatch_opts_from_json(const char *text, struct pbx_sbatch_opts *o, struct pbx_err *err);
void pbx_sbatch_opts_free(struct pbx_sbatch_opts *o);
/* *dst = a deep copy of *src (release with pbx_sbatch_opts_free). */
void pbx_sbatch_opts_copy(struct pbx_sbatch_opts *dst, const struct pbx_sbatch_opts *src);

#endif
