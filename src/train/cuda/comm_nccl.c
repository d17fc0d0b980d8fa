/*
 * comm_nccl.c - gradient averaging over NCCL for the CUDA backend, behind
 * the comm interface (comm.h).  pbx_comm_nccl_attach() takes an open
 * multi-rank comm (MPI): rank 0 makes the NCCL unique id, the comm's own
 * bcast sends it to every rank, and every rank joins one communicator on
 * its GPU (one process per GPU, pbx_cuda_open).  Then only the gradient
 * ops change; sums, broadcasts, abort and close stay MPI's.
 *
 * Buckets: as comm_mpi.c, the device gradient buffer is cut into buckets
 * from its END (backward fills it back to front); when grads_ready(lo)
 * says [lo, n) is final, every bucket inside that tail is queued as an
 * in-place ncclAllReduce(ncclAvg) on the NCCL stream, after an event that
 * makes it wait for the compute stream's work so far, so the reduction
 * runs while backward goes on computing earlier layers.  grads_finish
 * queues the rest and makes the compute stream wait for the NCCL stream
 * (clipping and the optimiser step then see averaged gradients), and
 * waits for the reductions with a deadline (timeout_s): a rank that stops
 * answering ends with a message and ncclCommAbort instead of a hang.
 *
 * One comm per process: its state is this file's.
 */
#include "train/cuda/cuda.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/cuda/cuda_internal.h"

static struct {
	const struct pbx_comm_ops *mpi; /* the comm's own ops (small collectives) */
	struct pbx_comm_ops ops;        /* mpi's with the gradient ops replaced */
	ncclComm_t nc;
	cudaStream_t stream;
	cudaEvent_t ready, done;
	float *grads; /* device, n */
	size_t n;
	size_t bucket; /* floats per bucket */
	size_t next;   /* [next, n) queued already */
	double timeout_s;
	double t_finish; /* time spent waiting in finish */
} nccl;

static double nccl_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int nccl_fail(struct pbx_comm *c, const char *what)
{
	if (!c->failed) {
		pbx_err_set(&c->err, "rank %d: %s at step %lld", c->rank, what, (long long)c->step);
		c->failed = 1;
	}
	return -1;
}

static void nccl_grads_begin(struct pbx_comm *c, float *grads, size_t n)
{
	(void)c;
	nccl.grads = grads;
	nccl.n = n;
	nccl.next = n;
}

/* Queues an allreduce of [lo, hi) after the compute stream's work so far. */
static void nccl_queue(struct pbx_comm *c, size_t lo, size_t hi)
{
	CU_CHECK(cudaEventRecord(nccl.ready, pbx_cuda_dev.compute));
	CU_CHECK(cudaStreamWaitEvent(nccl.stream, nccl.ready, 0));
	NCCL_CHECK(ncclAllReduce(nccl.grads + lo, nccl.grads + lo, hi - lo, ncclFloat, ncclAvg,
				 nccl.nc, nccl.stream));
	c->stats.buckets++;
}

/* [lo, n) is final: queue every whole bucket inside it. */
static void nccl_grads_ready(struct pbx_comm *c, size_t lo)
{
	while (nccl.next > lo && nccl.next - lo >= nccl.bucket) {
		size_t hi = nccl.next;
		nccl_queue(c, hi - nccl.bucket, hi);
		nccl.next = hi - nccl.bucket;
		c->stats.started_early++;
	}
}

static int nccl_grads_finish(struct pbx_comm *c)
{
	double t0 = nccl_now();
	if (nccl.next > 0)
		nccl_queue(c, 0, nccl.next);
	nccl.next = 0;
	CU_CHECK(cudaEventRecord(nccl.done, nccl.stream));
	CU_CHECK(cudaStreamWaitEvent(pbx_cuda_dev.compute, nccl.done, 0));
	c->stats.steps++;
	/* wait with a deadline, watching for NCCL's asynchronous errors */
	for (;;) {
		cudaError_t e = cudaEventQuery(nccl.done);
		ncclResult_t ae = ncclSuccess;
		if (e == cudaSuccess)
			break;
		if (e != cudaErrorNotReady) {
			CU_CHECK(e);
		}
		NCCL_CHECK(ncclCommGetAsyncError(nccl.nc, &ae));
		if (ae != ncclSuccess && ae != ncclInProgress) {
			ncclCommAbort(nccl.nc);
			nccl.nc = NULL;
			return nccl_fail(c, ncclGetErrorString(ae));
		}
		if (nccl_now() - t0 > nccl.timeout_s) {
			ncclCommAbort(nccl.nc);
			nccl.nc = NULL;
			return nccl_fail(
				c,
				"NCCL gradient allreduce did not complete in time (comm_timeout); another rank stopped answering");
		}
		usleep(20);
	}
	c->stats.exposed_s += nccl_now() - t0;
	return 0;
}

static void nccl_abort(struct pbx_comm *c, int code)
{
	if (nccl.nc)
		ncclCommAbort(nccl.nc);
	nccl.nc = NULL;
	nccl.mpi->abort(c, code);
}

static void nccl_close(struct pbx_comm *c)
{
	if (nccl.nc)
		ncclCommDestroy(nccl.nc);
	nccl.nc = NULL;
	cudaEventDestroy(nccl.ready);
	cudaEventDestroy(nccl.done);
	cudaStreamDestroy(nccl.stream);
	nccl.mpi->close(c);
}

int pbx_comm_nccl_attach(struct pbx_comm *c, size_t bucket_bytes, double timeout_s,
			 struct pbx_err *err)
{
	ncclUniqueId id;
	memset(&id, 0, sizeof(id));
	if (c->rank == 0 && NCCL_TRY(ncclGetUniqueId(&id), err) < 0)
		return -1; /* the other ranks then time out in the bcast */
	if (pbx_comm_bcast(c, &id, sizeof(id), err) < 0)
		return -1;
	if (CU_TRY(cudaStreamCreateWithFlags(&nccl.stream, cudaStreamNonBlocking), err) < 0 ||
	    CU_TRY(cudaEventCreateWithFlags(&nccl.ready, cudaEventDisableTiming), err) < 0 ||
	    CU_TRY(cudaEventCreateWithFlags(&nccl.done, cudaEventDisableTiming), err) < 0 ||
	    NCCL_TRY(ncclCommInitRank(&nccl.nc, c->world, id, c->rank), err) < 0)
		return pbx_err_prefix(err, "rank %d of %d: joining the NCCL communicator", c->rank,
				      c->world);
	nccl.bucket = (bucket_bytes ? bucket_bytes : (size_t)1 << 20) / sizeof(float);
	if (nccl.bucket < 1)
		nccl.bucket = 1;
	nccl.timeout_s = timeout_s > 0 ? timeout_s : 300.0;
	nccl.mpi = c->ops;
	nccl.ops = *c->ops;
	nccl.ops.name = "nccl";
	nccl.ops.grads_begin = nccl_grads_begin;
	nccl.ops.grads_ready = nccl_grads_ready;
	nccl.ops.grads_finish = nccl_grads_finish;
	nccl.ops.abort = nccl_abort;
	nccl.ops.close = nccl_close;
	c->ops = &nccl.ops;
	return 0;
}
