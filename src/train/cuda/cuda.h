/*
 * cuda.h - pbx-train's CUDA backend as the rest of the trainer sees it
 * (built when CMake finds nvcc, cuBLAS, cuDNN and NCCL; PBX_TRAIN_HAVE_CUDA).
 * It is a loadable module, pbx-train-cuda.so, which device.c opens only
 * when a run asks for `device: cuda` or `auto`: pbx-train itself links no
 * CUDA library, so it starts as fast as before and runs on CPU nodes that
 * have none.  The module calls back into pbx-train (exported symbols).
 *
 *   pbx_cuda_open(local_rank)   once per process, before any model is
 *                               allocated on the backend: picks the GPU
 *                               (local rank modulo the visible GPUs, so one
 *                               process per GPU under mpirun or SLURM) and
 *                               creates the streams and library handles
 *   pbx_backend_cuda            the ops table (model.h): layers on cuDNN
 *                               (conv, batch norm, pooling, LRN), cuBLAS
 *                               (linear) and kernels.cu (the rest)
 *   pbx_comm_nccl_attach(c)     moves a multi-rank comm's gradient
 *                               reduction to NCCL (comm_nccl.c)
 *
 * Memory: the model's params, grads and buffers stay on the host as
 * mirrors (model.h); the device copies, optimiser state, the batch and
 * every cuDNN descriptor live in m->dev, freed with the model.
 */
#ifndef PBX_TRAIN_CUDA_H
#define PBX_TRAIN_CUDA_H

#include "train/comm.h"
#include "train/model.h"
#include "util/err.h"

/* The module's one entry point: pbx-train-cuda.so exports `pbx_cuda_api`,
 * which device.c finds with dlsym.  abi guards against a module built from
 * other headers (the structs of model.h, comm.h, err.h cross the line). */
#define PBX_CUDA_ABI 1
struct pbx_cuda_api {
	int abi; /* PBX_CUDA_ABI */
	/* what the module was compiled for (static string) */
	const char *(*built)(void);
	/* 0, or -1 with err naming what is missing (no driver, a driver too
	 * old for this CUDA runtime, no GPU, a GPU older than the code built
	 * for, fewer GPUs than the local_world ranks on this node: code 2) */
	int (*open)(int local_rank, int local_world, struct pbx_err *err);
	const struct pbx_backend *backend;
	/* whether the backend can run this model (cuDNN's limits on LRN);
	 * -1 + err naming the layer otherwise */
	int (*check_model)(const struct pbx_model *m, struct pbx_err *err);
	/* the device gradient buffer of a model on the backend (nparams) */
	float *(*grads)(struct pbx_model *m);
	/* replaces c's gradient ops by NCCL ones (the unique id goes over c's
	 * own bcast); the small collectives stay c's.  c->world > 1;
	 * bucket_bytes and timeout_s as in struct pbx_comm_opts */
	int (*nccl_attach)(struct pbx_comm *c, size_t bucket_bytes, double timeout_s,
			   struct pbx_err *err);
	/* destroys the handles and streams of open (models freed first);
	 * device.c runs it at exit, so compute-sanitizer's leak check sees
	 * only real leaks */
	void (*close)(void);
};

/* Inside the module (backend_cuda.c, comm_nccl.c). */
int pbx_cuda_open(int local_rank, int local_world, struct pbx_err *err);
void pbx_cuda_close(void);
extern const struct pbx_backend pbx_backend_cuda;
const char *pbx_cuda_built(void);
int pbx_cuda_check_model(const struct pbx_model *m, struct pbx_err *err);
float *pbx_cuda_grads(struct pbx_model *m);
int pbx_comm_nccl_attach(struct pbx_comm *c, size_t bucket_bytes, double timeout_s,
			 struct pbx_err *err);

#endif
