/*
 * device.h - where pbx-train computes.  The `device` key picks a backend:
 *   cpu   the CPU reference (backend_cpu.c)
 *   cuda  the CUDA backend (cuda/), one GPU per process; an error naming
 *         what is missing when this build has no CUDA backend, there is no
 *         driver, or no GPU
 *   auto  cuda when a GPU is usable, else the CPU after a one-line notice
 * and the few things the loop does through the backend: the optimiser
 * step, gradient clipping, the pointer the comm reduces, and the host
 * mirrors of a device model (pull before the host reads parameters,
 * buffers or optimiser state; push after it wrote them).  On the CPU these
 * are the plain functions of optim.c and no-ops.
 */
#ifndef PBX_TRAIN_DEVICE_H
#define PBX_TRAIN_DEVICE_H

#include "train/comm.h"
#include "train/config.h"
#include "train/model.h"
#include "train/optim.h"
#include "util/err.h"

/* Whether `name` is one of cpu, cuda, auto. */
int pbx_device_valid(const char *name);
/* Picks the backend for cfg->device into *be.  For cuda: selects this
 * rank's GPU (local rank modulo the visible GPUs) and, with several ranks,
 * moves the comm's gradient reduction to NCCL (cfg->bucket_kb,
 * cfg->comm_timeout).  Collective with several ranks: they agree, and
 * either all train on their GPUs or none does.  -1 + err when the device
 * cannot be used (code 2 for a bad name or combination: sync_bn over
 * several ranks on cuda); `auto` never fails for want of a GPU: it prints
 * its notice on rank 0 and returns the CPU. */
int pbx_device_open(const struct pbx_train_config *cfg, struct pbx_comm *comm,
		    const struct pbx_backend **be, struct pbx_err *err);
/* Whether backend be can run model m (-1 + err naming the layer). */
int pbx_device_check(const struct pbx_backend *be, const struct pbx_model *m, struct pbx_err *err);
/* Whether this build has the CUDA backend. */
int pbx_device_have_cuda(void);
/* The backends of this build, for --version: "cpu, cuda (sm_90 and
 * newer, CUDA runtime 13000, cuDNN 9.19, NCCL 2.28)" or "cpu; no CUDA
 * backend" (static string). */
const char *pbx_device_built(void);

/* The gradients the comm reduces (device memory for a device model). */
float *pbx_device_grads(struct pbx_model *m);
double pbx_device_clip(struct pbx_model *m, double max_norm);
void pbx_device_step(struct pbx_model *m, struct pbx_optim *o, double lr);
/* Host mirrors <-> device (no-ops on the CPU); o may be NULL. */
void pbx_device_pull(struct pbx_model *m, struct pbx_optim *o);
void pbx_device_push(struct pbx_model *m, const struct pbx_optim *o);

#endif
