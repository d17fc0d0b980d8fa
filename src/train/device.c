/*
 * device.c - the `device` key (cpu, cuda, auto) and the loop's calls that
 * depend on where the model lives (see device.h).  The CUDA backend is a
 * module, pbx-train-cuda.so (cuda/cuda.h), opened here the first time a
 * run asks for it: next to the pbx-train executable (the build tree), else
 * in ../lib/pbx beside it (an installed one), or $PBX_TRAIN_CUDA_MODULE.
 * Without the module in this build, `cuda` is an error that says so and
 * `auto` is the CPU.
 */
#include "train/device.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/cuda/cuda.h"

/* The loaded module's entry point (NULL until loaded, or when it failed:
 * device_why then says why). */
static const struct pbx_cuda_api *device_api;
static char device_why[PATH_MAX + 256];

/* Opens the module at `path`; 0, or -1 with device_why set. */
static int device_load(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(device_why, sizeof(device_why), "cannot load the CUDA backend: %s",
			 dlerror());
		return -1;
	}
	const struct pbx_cuda_api *api = dlsym(h, "pbx_cuda_api");
	if (!api || api->abi != PBX_CUDA_ABI) {
		snprintf(device_why, sizeof(device_why),
			 "%s is not this pbx-train's CUDA backend (%s)", path,
			 api ? "another version" : "no pbx_cuda_api");
		dlclose(h);
		return -1;
	}
	device_api = api;
	return 0;
}

/* The module, loaded once; NULL with device_why set when there is none. */
static const struct pbx_cuda_api *device_cuda(void)
{
	static int tried;
	char exe[PATH_MAX], path[PATH_MAX + 64];
	if (tried)
		return device_api;
	tried = 1;
#ifndef PBX_TRAIN_HAVE_CUDA
	snprintf(
		device_why, sizeof(device_why),
		"this pbx-train was built without the CUDA backend (configured with -DPBX_CUDA=OFF, or nvcc, cuBLAS, cuDNN or NCCL were not found at build time)");
	return NULL;
#endif
	const char *env = getenv("PBX_TRAIN_CUDA_MODULE");
	if (env && *env) {
		device_load(env);
		return device_api;
	}
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(
			device_why, sizeof(device_why),
			"cannot find the CUDA backend: /proc/self/exe unreadable (set PBX_TRAIN_CUDA_MODULE)");
		return NULL;
	}
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(path, sizeof(path), "%s/pbx-train-cuda.so", exe);
	if (access(path, F_OK) != 0)
		snprintf(path, sizeof(path), "%s/../lib/pbx/pbx-train-cuda.so", exe);
	device_load(path);
	return device_api;
}

int pbx_device_valid(const char *name)
{
	return strcmp(name, "cpu") == 0 || strcmp(name, "cuda") == 0 || strcmp(name, "auto") == 0;
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
	static char s[PATH_MAX + 320];
	const struct pbx_cuda_api *api = device_cuda();
	if (api)
		return api->built();
	if (!pbx_device_have_cuda())
		return "cpu; no CUDA backend";
	snprintf(s, sizeof(s), "cpu; the CUDA backend was built but %s", device_why);
	return s;
}

static void device_close(void)
{
	if (device_api)
		device_api->close();
}

/* This rank's GPU, or -1 + err saying what is missing. */
static int device_open_gpu(struct pbx_comm *comm, struct pbx_err *err)
{
	const struct pbx_cuda_api *api = device_cuda();
	if (!api)
		return pbx_err_set(err, "%s", device_why);
	if (api->open(comm->local_rank, comm->local_world, err) < 0)
		return -1;
	atexit(device_close);
	return 0;
}

/* Whether every rank has its GPU (ok: this one's); the ranks agree, so
 * that all of them train on the GPU or none does (a rank alone on the CPU
 * would wait for the others' NCCL).  -1 when the sum fails. */
static int device_agree(struct pbx_comm *comm, int *ok, struct pbx_err *why, struct pbx_err *err)
{
	double v = *ok;
	if (comm->world == 1)
		return 0;
	if (pbx_comm_sum(comm, &v, 1, err) < 0)
		return -1;
	if (*ok && (int)v != comm->world) {
		*ok = 0;
		pbx_err_set(why, "%d of the %d ranks have no usable GPU", comm->world - (int)v,
			    comm->world);
	}
	return 0;
}

int pbx_device_open(const struct pbx_train_config *cfg, struct pbx_comm *comm,
		    const struct pbx_backend **be, struct pbx_err *err)
{
	const char *name = cfg->device ? cfg->device : "cpu";
	struct pbx_err why = PBX_ERR_INIT;
	int ok, is_auto = strcmp(name, "auto") == 0;
	*be = &pbx_backend_cpu;
	if (!pbx_device_valid(name))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'device': unknown device '%s' (cpu, cuda, auto)", name);
	if (strcmp(name, "cpu") == 0)
		return 0;
	if (cfg->sync_bn && comm->world > 1) { /* the same on every rank */
		if (!is_auto)
			return pbx_err_setc(
				err, PBX_EXIT_USAGE,
				"key 'sync_bn': synchronised batch norm over several ranks is not implemented on device cuda; use device: cpu or sync_bn: false");
		pbx_err_set(&why, "sync_bn over several ranks is CPU-only");
		ok = 0;
	} else {
		ok = device_open_gpu(comm, &why) == 0;
	}
	if (device_agree(comm, &ok, &why, err) < 0)
		return -1;
	if (ok) {
		if (comm->world > 1 && device_api->nccl_attach(comm, (size_t)cfg->bucket_kb << 10,
							       cfg->comm_timeout, err) < 0)
			return -1;
		*be = device_api->backend;
		return 0;
	}
	if (!is_auto) {
		*err = why;
		return pbx_err_prefix(err, "device cuda");
	}
	if (comm->rank == 0)
		fprintf(stderr, "pbx-train: device auto: no usable GPU, training on the CPU: %s\n",
			why.msg);
	return 0;
}

int pbx_device_check(const struct pbx_backend *be, const struct pbx_model *m, struct pbx_err *err)
{
	if (device_api && be == device_api->backend)
		return device_api->check_model(m, err);
	(void)be;
	(void)m;
	(void)err;
	return 0;
}

float *pbx_device_grads(struct pbx_model *m)
{
	if (device_api && m->be == device_api->backend)
		return device_api->grads(m);
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
