/*
 * device.c - the `device` key (cpu, cuda, auto) and the loop's calls that
 * depend on where the model lives (see device.h).  Built with or without
 * the CUDA backend: without it, `cuda` is an error that says so and
 * `auto` is the CPU.
 */
#include "train/device.h"

#include <stdio.h>
#include <string.h>

#ifdef PBX_TRAIN_HAVE_CUDA
#include "train/cuda/cuda.h"
#endif

int pbx_device_valid(const char *name)
{
	return strcmp(name, "cpu") == 0 || strcmp(name, "cuda") == 0 ||
	       strcmp(name, "auto") == 0;
}

int pbx_device_have_cuda(void)
{
#ifdef PBX_TRAIN_HAVE_CUDA
	return 1;
#else
	return 0;
#endif
}

const char *pbx_device_built(void)
{
#ifdef PBX_TRAIN_HAVE_CUDA
	return pbx_cuda_built();
#else
	return "cpu; no CUDA backend";
#endif
}

/* The GPU for this rank, or -1 + err saying what is missing. */
static int device_open_cuda(const struct pbx_train_config *cfg,
			    struct pbx_comm *comm, struct pbx_err *err)
{
#ifdef PBX_TRAIN_HAVE_CUDA
	if (pbx_cuda_open(comm->local_rank, err) < 0)
		return -1;
	if (cfg->sync_bn && comm->world > 1)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'sync_bn': synchronised batch norm is not implemented on device cuda; use device: cpu or sync_bn: false");
	if (comm->world > 1 &&
	    pbx_comm_nccl_attach(comm, (size_t)cfg->bucket_kb << 10,
				 cfg->comm_timeout, err) < 0)
		return -1;
	return 0;
#else
	(void)cfg;
	(void)comm;
	return pbx_err_set(err, "this pbx-train was built without the CUDA backend (configured with -DPBX_CUDA=OFF, or nvcc, cuBLAS, cuDNN or NCCL were not found at build time)");
#endif
}

int pbx_device_open(const struct pbx_train_config *cfg, struct pbx_comm *comm,
		    const struct pbx_backend **be, struct pbx_err *err)
{
	const char *name = cfg->device ? cfg->device : "cpu";
	*be = &pbx_backend_cpu;
	if (!pbx_device_valid(name))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'device': unknown device '%s' (cpu, cuda, auto)", name);
	if (strcmp(name, "cpu") == 0)
		return 0;
	struct pbx_err why = PBX_ERR_INIT;
	if (device_open_cuda(cfg, comm, &why) == 0) {
#ifdef PBX_TRAIN_HAVE_CUDA
		*be = &pbx_backend_cuda;
#endif
		return 0;
	}
	if (strcmp(name, "cuda") == 0 || why.code == PBX_EXIT_USAGE) {
		*err = why;
		return pbx_err_prefix(err, "device cuda");
	}
	if (comm->rank == 0)
		fprintf(stderr, "pbx-train: device auto: no usable GPU, training on the CPU: %s\n", why.msg);
	return 0;
}

int pbx_device_check(const struct pbx_backend *be, const struct pbx_model *m,
		     struct pbx_err *err)
{
#ifdef PBX_TRAIN_HAVE_CUDA
	if (be == &pbx_backend_cuda)
		return pbx_cuda_check_model(m, err);
#endif
	(void)be;
	(void)m;
	(void)err;
	return 0;
}

float *pbx_device_grads(struct pbx_model *m)
{
#ifdef PBX_TRAIN_HAVE_CUDA
	if (m->be == &pbx_backend_cuda)
		return pbx_cuda_grads(m);
#endif
	return m->grads;
}

double pbx_device_clip(struct pbx_model *m, double max_norm)
{
	if (m->be->clip)
		return m->be->clip(m, max_norm);
	return pbx_clip_grad_norm(m->grads, m->nparams, max_norm);
}

void pbx_device_step(struct pbx_model *m, struct pbx_optim *o, double lr)
{
	if (m->be->step)
		m->be->step(m, o, lr);
	else
		pbx_optim_step(o, m->params, m->grads, lr);
}

void pbx_device_pull(struct pbx_model *m, struct pbx_optim *o)
{
	if (m->be->pull)
		m->be->pull(m, o);
}

void pbx_device_push(struct pbx_model *m, const struct pbx_optim *o)
{
	if (m->be->push)
		m->be->push(m, o);
}
