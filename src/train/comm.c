/*
 * comm.c - the comm front (comm.h): the launcher check, the one-process
 * implementation, and the wrappers that stop at a failed comm.
 */
#include "train/comm.h"

#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

/* ------------------------------------------------------ one process */

static void self_grads_begin(struct pbx_comm *c, float *g, size_t n)
{
	(void)c;
	(void)g;
	(void)n;
}

static void self_grads_ready(struct pbx_comm *c, size_t lo)
{
	(void)c;
	(void)lo;
}

static int self_grads_finish(struct pbx_comm *c)
{
	c->stats.steps++;
	return 0;
}

static int self_sum(struct pbx_comm *c, double *v, int n)
{
	(void)c;
	(void)v;
	(void)n;
	return 0;
}

static int self_bcast(struct pbx_comm *c, void *buf, size_t bytes)
{
	(void)c;
	(void)buf;
	(void)bytes;
	return 0;
}

static int self_allreduce_floats(struct pbx_comm *c, float *v, size_t n)
{
	(void)c;
	(void)v;
	(void)n;
	return 0;
}

static void self_abort(struct pbx_comm *c, int code)
{
	(void)c;
	exit(code);
}

static void self_close(struct pbx_comm *c)
{
	(void)c;
}

static const struct pbx_comm_ops self_ops = {
	"self",     self_grads_begin,      self_grads_ready, self_grads_finish, self_sum,
	self_bcast, self_allreduce_floats, self_abort,       self_close,
};

struct pbx_comm *pbx_comm_self(void)
{
	struct pbx_comm *c = xcalloc(1, sizeof(*c));
	c->ops = &self_ops;
	c->world = c->local_world = 1;
	return c;
}

/* The world size an MPI launcher announces: mpirun sets
 * OMPI_COMM_WORLD_SIZE, srun --mpi=pmi2 PMI_SIZE, PMIx launchers PMIX_RANK
 * (size unknown before MPI_Init: -1).  0: not started by a launcher. */
static int comm_launcher_world(void)
{
	const char *v = getenv("OMPI_COMM_WORLD_SIZE");
	if (!v)
		v = getenv("PMI_SIZE");
	if (v && atoi(v) > 0)
		return atoi(v);
	return getenv("PMIX_RANK") ? -1 : 0;
}

struct pbx_comm *pbx_comm_open(const struct pbx_comm_opts *o, struct pbx_err *err)
{
	int world = comm_launcher_world();
	if (world == 0 && !o->force_mpi)
		return pbx_comm_self();
#ifdef PBX_TRAIN_HAVE_MPI
	return pbx_comm_mpi_open(o, err);
#else
	if (world == 1)
		return pbx_comm_self();
	(void)o;
	pbx_err_set(
		err,
		"started as one of %d ranks, but this pbx-train was built without MPI (install libopenmpi-dev and rebuild)",
		world);
	return NULL;
#endif
}

/* ------------------------------------------------------------- wrappers */

static int comm_failed(struct pbx_comm *c, struct pbx_err *err)
{
	if (err)
		*err = c->err;
	return -1;
}

void pbx_comm_grads_begin(struct pbx_comm *c, float *grads, size_t n)
{
	if (!c->failed)
		c->ops->grads_begin(c, grads, n);
}

void pbx_comm_grads_ready(struct pbx_comm *c, size_t lo)
{
	if (!c->failed)
		c->ops->grads_ready(c, lo);
}

int pbx_comm_grads_finish(struct pbx_comm *c, struct pbx_err *err)
{
	if (c->failed || c->ops->grads_finish(c) < 0)
		return comm_failed(c, err);
	return 0;
}

int pbx_comm_sum(struct pbx_comm *c, double *v, int n, struct pbx_err *err)
{
	if (c->failed || c->ops->sum(c, v, n) < 0)
		return comm_failed(c, err);
	return 0;
}

int pbx_comm_bcast(struct pbx_comm *c, void *buf, size_t bytes, struct pbx_err *err)
{
	if (c->failed || c->ops->bcast(c, buf, bytes) < 0)
		return comm_failed(c, err);
	return 0;
}

int pbx_comm_allreduce_floats(struct pbx_comm *c, float *v, size_t n, struct pbx_err *err)
{
	if (c->failed || c->ops->allreduce_floats(c, v, n) < 0)
		return comm_failed(c, err);
	return 0;
}

void pbx_comm_abort(struct pbx_comm *c, int code)
{
	c->ops->abort(c, code);
}

void pbx_comm_close(struct pbx_comm *c)
{
	if (!c)
		return;
	c->ops->close(c);
	free(c->impl);
	free(c);
}

void pbx_comm_hook_grads_ready(void *ctx, size_t lo)
{
	pbx_comm_grads_ready(ctx, lo);
}

void pbx_comm_hook_sum(void *ctx, double *v, int n)
{
	pbx_comm_sum(ctx, v, n, NULL); /* a failure is reported after the step */
}
