/*
 * squeue.h - parsing the SLURM output pbx relies on for experiments:
 * `squeue -h -r -o '%i %T'` (one line per job or array task) and
 * `scontrol show config` (the limits that size job-array chunks).
 */
#ifndef PBX_SLURM_SQUEUE_H
#define PBX_SLURM_SQUEUE_H

#include <stddef.h>

#include "util/err.h"

/* The squeue format pbx asks for: job id (JOB_TASK for array tasks) and
 * the long state name. */
#define PBX_SQUEUE_FORMAT "%i %T"

struct pbx_squeue_job {
	char *job_id;            /* "1234" for a plain job, "1234_7" for an array task */
	long array_job;          /* 1234 */
	long array_task;         /* 7, or -1 for a plain job or a pending range "1234_[8-99]" */
	long range_lo, range_hi; /* for a pending range "1234_[8-99%4]": 8 and 99; else -1 */
	char *state;             /* PENDING, RUNNING, COMPLETING, ... as printed */
};

/* 1 when `s` is a SLURM job id as pbx keeps it: 1 to 18 decimal digits
 * and nothing else (no sign, space, array suffix or shell syntax); the ids
 * read from sbatch and squeue are checked with it before they are stored
 * or reach a remote shell. */
int pbx_slurm_job_id_ok(const char *s);

/* Parses squeue output.  *jobs owned by the caller (pbx_squeue_free).
 * Malformed lines are errors naming the line. */
int pbx_squeue_parse(const char *text, size_t len, struct pbx_squeue_job **jobs, size_t *n,
		     struct pbx_err *err);
void pbx_squeue_free(struct pbx_squeue_job *jobs, size_t n);

struct pbx_slurm_limits {
	long max_array_size; /* MaxArraySize: array indices must be < this */
	long max_job_count;  /* MaxJobCount */
};

/* Reads MaxArraySize and MaxJobCount from `scontrol show config` output
 * ("Key = Value" lines); both are required. */
int pbx_scontrol_limits_parse(const char *text, size_t len, struct pbx_slurm_limits *out,
			      struct pbx_err *err);

/* Maps a SLURM job state name to a pbx task state: PENDING, RUNNING,
 * COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL,
 * OUT_OF_MEMORY (returned as is); CONFIGURING -> PENDING, COMPLETING ->
 * RUNNING, REQUEUED / REQUEUE_HOLD / RESIZING / SUSPENDED / STOPPED ->
 * PENDING / RUNNING as fits (20.11's REQUEUED_CRON -> PENDING); unknown names ->
 * "UNKNOWN".  The names of 20.11 to 24.11: docs/slurm-versions.md.  Static
 * string. */
const char *pbx_slurm_task_state(const char *slurm_state);

#endif
