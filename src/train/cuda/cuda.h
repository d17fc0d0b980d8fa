/*
 * cuda.h - pbx-train's CUDA backend as the rest of the trainer sees it
 * (built when CMake finds nvcc, cuBLAS, cuDNN and NCCL; PBX_TRAIN_HAVE_CUDA).
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

/* 0, or -1 with err naming what is missing (no driver, a driver too old
 * for this CUDA runtime, no GPU, a GPU older than the code built for). */
int pbx_cuda_open(int local_rank, struct pbx_err *err);
extern const struct pbx_backend pbx_backend_cuda;
/* What this build's backend was compiled for (static string). */
const char *pbx_cuda_built(void);
/* Whether the backend can run this model (cuDNN's limits on LRN); -1 +
 * err naming the layer otherwise. */
int pbx_cuda_check_model(const struct pbx_model *m, struct pbx_err *err);
/* The device gradient buffer of a model on the backend (nparams floats). */
float *pbx_cuda_grads(struct pbx_model *m);
/* Replaces c's gradient ops by NCCL ones (the unique id goes over c's own
 * bcast); the small collectives stay c's.  c->world > 1; bucket_bytes and
 * timeout_s as in struct pbx_comm_opts (0 = 1 MiB, 300 s). */
int pbx_comm_nccl_attach(struct pbx_comm *c, size_t bucket_bytes,
			 double timeout_s, struct pbx_err *err);

#endif
