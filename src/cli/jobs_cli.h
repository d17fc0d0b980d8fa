/*
 * jobs_cli.h - what the experiment verbs (parrun, run, state, ls, log,
 * cancel, rerun) share: parsing PKG[:TASK] and printing task states.
 */
#ifndef PBX_CLI_JOBS_CLI_H
#define PBX_CLI_JOBS_CLI_H

#include <stdint.h>

#include <jansson.h>

#include "store/experiments.h"

/* Splits "PKG:TASK"; *task = -1 when absent.  *pkg owned by the caller.
 * Returns -1 (after printing an error) for a malformed TASK. */
int pbx_cli_pkg_task(const char *arg, char **pkg, long *task);
/* Counts of tasks per state as a JSON object {"COMPLETED": 3, ...}. */
json_t *pbx_cli_state_counts(const struct pbx_task_row *tasks, size_t n);
/* "24 tasks: 20 COMPLETED, 3 RUNNING, 1 FAILED" into a fresh string. */
char *pbx_cli_state_summary(const struct pbx_task_row *tasks, size_t n);

/* Whether submission `sub` on cluster `cluster_id` has tasks not ended or
 * ended and not harvested, as the store last saw them (also when the store
 * cannot say); their counts into *live and *ended (either may be NULL).
 * `pbx harvest` skips a submission without; `pbx forget` refuses one with. */
struct pbx_store;
int pbx_cli_results_pending(struct pbx_store *st, int64_t cluster_id, int64_t sub, long *live,
			    long *ended);

/* Stages e's data: sources on c (data_cli.c, src/jobs/data.h), printing
 * progress and one line per source on stderr; with dry_run only lists and
 * compares (c may be NULL), printing the plan on stdout.  Returns 0 or the
 * exit code of the error it printed. */
struct pbx_ctx;
struct pbx_cluster;
struct pbx_experiment;
int pbx_cli_data_stage(struct pbx_ctx *ctx, struct pbx_cluster *c, const struct pbx_experiment *e,
		       int dry_run);

#endif
