/*
 * fake_cuda_module.c - a stand-in for pbx-train-cuda.so that needs no GPU:
 * it exports the same entry point (train/cuda/cuda.h) over the host-memory
 * "device" of fake_device.c, so train_fake_cuda can run the whole trainer
 * (device selection, NCCL attach, pull/push around checkpoints, resume,
 * evaluation, summary) through the path a GPU run takes, and compare with
 * the CPU bit for bit.  PBX_FAKE_CUDA_NO_GPU_RANK=R makes local rank R
 * find "no GPU", to test that the ranks agree.  Loaded with
 * PBX_TRAIN_CUDA_MODULE; never installed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "train/cuda/cuda.h"

#include "fake_device.h"

static const char *fake_built(void)
{
	return "cpu, cuda (FAKE: the test module, CPU kernels on host memory)";
}

static int fake_open(int local_rank, int local_world, struct pbx_err *err)
{
	const char *no = getenv("PBX_FAKE_CUDA_NO_GPU_RANK");
	(void)local_world;
	if (no && atoi(no) == local_rank)
		return pbx_err_set(err, "no GPU: the fake module gives local rank %d none",
				   local_rank);
	return 0;
}

static int fake_check_model(const struct pbx_model *m, struct pbx_err *err)
{
	(void)m;
	(void)err;
	return 0;
}

static float *fake_grads(struct pbx_model *m)
{
	return pbx_fake_state(m)->g;
}

/* The fake device's memory is the host's: MPI reduces it as it is. */
static int fake_nccl_attach(struct pbx_comm *c, size_t bucket_bytes, double timeout_s,
			    struct pbx_err *err)
{
	(void)c;
	(void)bucket_bytes;
	(void)timeout_s;
	(void)err;
	return 0;
}

static void fake_close(void)
{
}

__attribute__((visibility("default"))) const struct pbx_cuda_api pbx_cuda_api = {
	.abi = PBX_CUDA_ABI,
	.built = fake_built,
	.open = fake_open,
	.backend = &pbx_fake_backend,
	.check_model = fake_check_model,
	.grads = fake_grads,
	.nccl_attach = fake_nccl_attach,
	.close = fake_close,
};
