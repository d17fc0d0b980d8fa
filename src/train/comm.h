/*
 * comm.h - what pbx-train asks of the other ranks of a data-parallel job:
 * the seam between backward and the optimiser step, plus the few small
 * collectives the loop needs (metrics sums, synchronised BN, broadcasts).
 *
 * Two implementations behind one ops table: "self" (one process: every
 * call is a no-op or a copy) and "mpi" (comm_mpi.c, OpenMPI).  Gradients:
 *   pbx_comm_grads_begin(c, grads, n)   before backward
 *   pbx_comm_grads_ready(c, lo)         during backward: grads[lo, n) final
 *   pbx_comm_grads_finish(c, err)       after backward: grads averaged
 * The MPI version cuts the buffer into buckets from the END (backward fills
 * it back to front), starts a non-blocking allreduce for each bucket as
 * soon as it is final, and finish waits for the rest and divides by world.
 *
 * Failures.  Every wait polls with a deadline (timeout_s).  A collective
 * that does not complete in time, or an MPI error, puts the comm in the
 * failed state with a message naming the rank(s) that stopped answering
 * (heartbeats: every rank tells rank 0, and rank 0 tells every rank, that
 * it is alive, from inside every wait); later calls return at once.  The
 * caller then reports the error and calls pbx_comm_abort(), which ends
 * every rank (MPI_Abort).  A rank that dies is reported by mpirun itself
 * ("mpirun noticed that process rank N ... exited on signal 9").
 *
 * Ownership: pbx_comm_open() returns a comm the caller ends with
 * pbx_comm_close() (MPI_Finalize) or pbx_comm_abort().
 */
#ifndef PBX_TRAIN_COMM_H
#define PBX_TRAIN_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

struct pbx_comm_opts {
	size_t bucket_bytes; /* gradient allreduce bucket size (0 = 1 MiB) */
	double timeout_s;    /* longest wait in a collective (0 = 300 s) */
	int force_mpi;       /* initialise MPI even without a launcher */
};

struct pbx_comm;

struct pbx_comm_ops {
	const char *name;
	void (*grads_begin)(struct pbx_comm *c, float *grads, size_t n);
	void (*grads_ready)(struct pbx_comm *c, size_t lo);
	int (*grads_finish)(struct pbx_comm *c);
	int (*sum)(struct pbx_comm *c, double *v, int n);
	int (*bcast)(struct pbx_comm *c, void *buf, size_t bytes);
	int (*allreduce_floats)(struct pbx_comm *c, float *v, size_t n);
	void (*abort)(struct pbx_comm *c, int code);
	void (*close)(struct pbx_comm *c);
};

/* Time spent, for the benchmark and summary.json. */
struct pbx_comm_stats {
	double exposed_s;      /* waiting in grads_finish (not overlapped) */
	double other_s;        /* waiting in the small collectives */
	int64_t steps;         /* grads_finish calls */
	int64_t buckets;       /* allreduces started */
	int64_t started_early; /* ... of them while layers were left to compute */
};

struct pbx_comm {
	const struct pbx_comm_ops *ops;
	int rank, world;
	int local_rank, local_world; /* ranks on this node */
	int64_t step;                /* the trainer's step, for messages */
	int failed;
	struct pbx_err err; /* why, once failed */
	struct pbx_comm_stats stats;
	void *impl;
	int lossy; /* ranks may be lost (Downpour): close does
				    * not wait for the others (no barrier) */
};

/* Opens the job's communicator.  With a launcher's environment
 * (OMPI_COMM_WORLD_SIZE from mpirun, PMI_SIZE / PMIX_RANK from srun) or
 * force_mpi, initialises MPI (MPI_THREAD_FUNNELED); otherwise, or when
 * pbx-train was built without MPI and world is 1, a one-process comm
 * without MPI.  NULL + err when MPI is needed but unavailable. */
struct pbx_comm *pbx_comm_open(const struct pbx_comm_opts *o, struct pbx_err *err);
/* The one-process comm (tests; never fails). */
struct pbx_comm *pbx_comm_self(void);

void pbx_comm_grads_begin(struct pbx_comm *c, float *grads, size_t n);
void pbx_comm_grads_ready(struct pbx_comm *c, size_t lo);
/* 0, or -1 with err set from c->err. */
int pbx_comm_grads_finish(struct pbx_comm *c, struct pbx_err *err);
/* Sums n doubles over the ranks, in place, same result on every rank. */
int pbx_comm_sum(struct pbx_comm *c, double *v, int n, struct pbx_err *err);
/* rank 0's bytes to every rank. */
int pbx_comm_bcast(struct pbx_comm *c, void *buf, size_t bytes, struct pbx_err *err);
/* Blocking float sum of n values in place (the benchmark's baseline:
 * one MPI_Allreduce). */
int pbx_comm_allreduce_floats(struct pbx_comm *c, float *v, size_t n, struct pbx_err *err);
/* Ends every rank of the job with `code` (does not return with MPI). */
void pbx_comm_abort(struct pbx_comm *c, int code);
/* Finalises and frees; c may be NULL. */
void pbx_comm_close(struct pbx_comm *c);

/* model.h's hooks over a comm (ctx = the comm): the model calls them. */
void pbx_comm_hook_grads_ready(void *ctx, size_t lo);
void pbx_comm_hook_sum(void *ctx, double *v, int n);

#ifdef PBX_TRAIN_HAVE_MPI
/* comm_mpi.c: initialises MPI and returns the MPI comm, or NULL + err. */
struct pbx_comm *pbx_comm_mpi_open(const struct pbx_comm_opts *o, struct pbx_err *err);
#endif

#endif
