/*
 * cost.h - what an experiment's tasks cost: each task's
 * node-hours and estimated cost, from the node runs of its cluster (each
 * node's running intervals and price an hour, src/cluster/spend.c) and the
 * share of its node the task allocated.  `pbx ls` and `pbx report` show it.
 *
 * Definitions:
 *   elapsed     end_time - start_time; while RUNNING now - start_time (no
 *               later than the end of its node's run when that ended);
 *               0 when it never started or ended without an end time
 *   share       of the node it ran on (tasks.node), from its submission's
 *               sbatch options: the GPUs it asked for (--gres=gpu[:TYPE]:N
 *               and --gpus-per-node per node, --gpus in all, --gpus-per-task
 *               per task) over the node's GPUs (nodes.gpus, else its node
 *               group's in the cluster's template) when both are > 0; else
 *               the whole node, as the store does not record a node's CPUs;
 *               --nodes=N (its lower bound) counts N nodes, --exclusive
 *               whole nodes
 *   node_hours  elapsed x share / 3600
 *   cost        elapsed x share x the price an hour of the node run that
 *               covers the task's start (same cluster and node, started <=
 *               start_time < ended, or still open), in 1e-9 units of its
 *               currency, rounded half up; unknown when no run covers it or
 *               the run's price is unknown (0 when elapsed is 0)
 *   total       node-hours summed; the cost the exact sum of the tasks'
 *               (integers of 1e-9), unknown when a task's is or the tasks'
 *               currencies differ
 * A local cluster has no node runs (its nodes are processes here): its
 * tasks have node-hours but no cost.  Only a task's last attempt is
 * counted (the store keeps its times only).
 *
 * Memory: a struct pbx_cost owns its tasks array (pbx_cost_free); the
 * inputs are borrowed during the calls only.
 */
#ifndef PBX_RESULTS_COST_H
#define PBX_RESULTS_COST_H

#include <stddef.h>
#include <stdint.h>

#include "store/experiments.h"
#include "store/store.h"
#include "util/err.h"

struct pbx_task_cost {
	int64_t idx;
	int64_t seconds;              /* elapsed */
	int64_t share_num, share_den; /* node share num / den (den >= 1) */
	int whole;                    /* counted as whole nodes for want of GPUs */
	double node_hours;
	int64_t nanos;    /* 1e-9 of currency; -1 = unknown */
	char currency[8]; /* "" when unknown (or elapsed 0) */
};

struct pbx_cost {
	int tracked; /* the cluster has node runs (pbx records
					   what it spends: gce, aws) */
	size_t n;
	struct pbx_task_cost *tasks; /* one per task row given, in its order */
	double node_hours;           /* the tasks' sum */
	int64_t nanos;               /* the tasks' sum; -1 = unknown */
	char currency[8];            /* "" when no task has a price */
	size_t unpriced;             /* tasks that ran whose cost is unknown */
};

/* What the cost of a cluster's tasks is computed from (borrowed). */
struct pbx_cost_inputs {
	const char *template_json; /* the cluster's (node groups' gpus); may be NULL */
	const struct pbx_node_row *nodes;
	size_t nnodes;
	const struct pbx_node_run *runs;
	size_t nruns;
	const char *resources_json; /* the submission's sbatch options; may be NULL */
};

/* Computes the cost of tasks[0..n) at time `now` (unix s) into *out
 * (owned by the caller: pbx_cost_free).  Never fails. */
void pbx_cost_compute(const struct pbx_cost_inputs *in, const struct pbx_task_row *tasks, size_t n,
		      int64_t now, struct pbx_cost *out);
/* The same for the tasks of submission `sub`, reading its cluster's
 * template, nodes and runs from the store.  *out owned by the caller
 * (pbx_cost_free), also on error (then empty). */
int pbx_cost_of(struct pbx_store *st, const struct pbx_submission_row *sub,
		const struct pbx_task_row *tasks, size_t n, int64_t now, struct pbx_cost *out,
		struct pbx_err *err);
void pbx_cost_free(struct pbx_cost *c);

/* Text of an amount: "0.1234 USD" (4 decimals), "-" when unknown. */
void pbx_cost_text(int64_t nanos, const char *currency, char *out, size_t size);
/* Text of node-hours: 2 decimals ("0.00" .. "1234.57"). */
void pbx_node_hours_text(double h, char *out, size_t size);

#endif
