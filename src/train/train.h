/*
 * train.h - the training loop of pbx-train: data, model, optimiser,
 * evaluation, metrics, checkpoints and signals, wired together.
 *
 * Signals: SIGTERM and SIGUSR1 only set a flag; at the next step boundary
 * the loop writes a checkpoint and pbx_train_run() returns
 * PBX_TRAIN_EXIT_REQUEUE, which main() uses as the exit status (SLURM:
 * requeue the job; `resume: auto` continues exactly).
 */
#ifndef PBX_TRAIN_TRAIN_H
#define PBX_TRAIN_TRAIN_H

#include "train/comm.h"
#include "train/config.h"
#include "util/err.h"

/* Exit status after a signal-triggered checkpoint (EX_TEMPFAIL: "try
 * again later").  Documented in pbx-train(1). */
#define PBX_TRAIN_EXIT_REQUEUE 75

/* Installs the SIGTERM / SIGUSR1 handlers (flag only). */
void pbx_train_install_signals(void);

/* Runs training as configured, as one rank of comm (pbx_comm_self() for
 * one process; every rank calls it with the same cfg).  Returns 0 when all epochs are done,
 * PBX_TRAIN_EXIT_REQUEUE after a signal checkpoint, or -1 with err set
 * (err->code is the exit status to use). */
int pbx_train_run(const struct pbx_train_config *cfg, struct pbx_comm *comm, struct pbx_err *err);

/* How a Downpour worker (downpour.h) replaces the optimiser step: step()
 * hands the step's (clipped) gradients over and may update params (e.g.
 * with parameters fetched from the servers); sync() makes params current
 * before an evaluation.  Both return 0 or -1 with err.  The worker's comm
 * has world 1 (no collectives); its rank is 0 for the one worker that
 * writes the outputs.  data_rank / data_world: the worker's share of the
 * training set. */
struct pbx_train_hook {
	void *ctx;
	int (*step)(void *ctx, float *params, float *grads, size_t n, double lr,
		    struct pbx_err *err);
	int (*sync)(void *ctx, float *params, size_t n, struct pbx_err *err);
	int data_rank, data_world;
};

/* pbx_train_run with the optimiser step replaced by hook (NULL: the
 * plain run). */
int pbx_train_run_hooked(const struct pbx_train_config *cfg, struct pbx_comm *comm,
			 const struct pbx_train_hook *hook, struct pbx_err *err);

#endif
