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
int pbx_train_run(const struct pbx_train_config *cfg, struct pbx_comm *comm,
		  struct pbx_err *err);

#endif
