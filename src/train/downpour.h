/*
 * downpour.h - asynchronous Downpour SGD with parameter servers
 * (`mode: downpour`, as in DistBelief; MXNet's dist_async kvstore).
 *
 * Roles.  MPI ranks 0..ps_ranks-1 are parameter servers; each holds a
 * contiguous shard of the flat parameter vector ([s*n/S, (s+1)*n/S)) and
 * the optimiser state for it (ps_optimizer: sgd with the config's momentum
 * and weight_decay, or adagrad).  The other ranks are workers: each trains
 * on its own share of the training set (the loader's rank/world are the
 * worker's index and count; with dataset: tfrecord, its files or records),
 * with batch_size examples per step.  The first worker (rank ps_ranks)
 * gives the servers their initial parameters and alone evaluates and
 * writes the outputs (metrics.jsonl, summary.json, checkpoint, and
 * downpour.json with the servers' statistics).
 *
 * Messages.  Point-to-point only, non-blocking, never between workers: a
 * worker pushes its gradients accumulated over n_push steps to every
 * server, and every n_fetch steps asks each server for its shard (and
 * before each evaluation).  A server applies each push as it arrives.
 * Staleness of a push = the updates the server applied to its shard
 * between the worker's fetch and this push (from other workers' pushes,
 * and the worker's own since its fetch); servers log its mean and maximum
 * every 500 updates and report it at the end.
 *
 * Resume (pbx runs train: tasks with --resume): the first worker resumes
 * from its checkpoint and starts the servers from those parameters (their
 * optimiser state starts afresh); the other workers fetch the servers'
 * parameters at their first step (dropping that step's gradient) and start
 * their data from the beginning.  Under --enable-recovery mpirun exits 0
 * whatever the ranks do, so exit status 75 (requeue) does not reach SLURM.
 *
 * Failures.  A server that hears nothing from a worker for ps_timeout
 * seconds reports it lost and goes on with the others (start mpirun with
 * --enable-recovery, or OMPI_MCA_orte_enable_recovery=1 in its
 * environment; otherwise mpirun ends the whole job when a rank dies).  A
 * worker whose server does not answer within ps_timeout returns an error
 * naming the server; main() then ends the job (pbx_downpour_abort).
 */
#ifndef PBX_TRAIN_DOWNPOUR_H
#define PBX_TRAIN_DOWNPOUR_H

#include "train/comm.h"
#include "train/config.h"
#include "util/err.h"

/* Runs this rank's part of a Downpour job (comm: the MPI comm, world >
 * ps_ranks).  Returns what pbx_train_run returns (0, or -1 with err). */
int pbx_downpour_run(const struct pbx_train_config *cfg, struct pbx_comm *comm,
		     struct pbx_err *err);

/* Ends the whole job after an error on this rank.  Under --enable-recovery
 * MPI_Abort ends only the caller and mpirun later exits 0 (measured with
 * Open MPI 4.1.4), so this first sends SIGTERM to the launcher that started
 * this rank (mpirun, or orted on another node), which then ends every rank
 * and exits non-zero; then MPI_Abort.  Does not return. */
void pbx_downpour_abort(struct pbx_comm *comm, int code);

/* pbx_comm_close (MPI_Finalize) with a 30 s limit: Open MPI's finalize can
 * wait on a rank that was lost (seen once in ~10 runs of the kill test);
 * past the limit the process says so and exits with status rc. */
void pbx_downpour_close(struct pbx_comm *comm, int rc);

#endif
