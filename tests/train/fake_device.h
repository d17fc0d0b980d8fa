/*
 * fake_device.h - a "device" backend whose memory is other host memory and
 * whose every op is the CPU kernel run on the device copies: it goes
 * through exactly the seams the CUDA backend uses (model.h: attach,
 * set_batch, zero_grad, clip, step, pull, push), so tests can check the
 * host side of a device backend without a GPU.  Used by test_device.c and
 * by the fake CUDA module (fake_cuda_module.c) that pbx-train loads in
 * train_fake_cuda.
 */
#ifndef PBX_TESTS_TRAIN_FAKE_DEVICE_H
#define PBX_TESTS_TRAIN_FAKE_DEVICE_H

#include "train/model.h"
#include "train/optim.h"

/* What the fake device counts (tests read it through pbx_fake_state). */
struct pbx_fake {
	float *p, *g, *b, *ostate; /* "device" params, grads, buffers, optimiser */
	size_t nostate;
	float *x;
	int32_t *y;
	int calls_set_batch, calls_zero, calls_step, pushes;
};

extern const struct pbx_backend pbx_fake_backend;
struct pbx_fake *pbx_fake_state(struct pbx_model *m);

#endif
