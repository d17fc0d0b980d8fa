/*
 * cuda_internal.h - what the CUDA backend's files share: the process's device
 * handles (one GPU per process) and the checked-call macros.
 */
#ifndef PBX_TRAIN_CUDA_INTERNAL_H
#define PBX_TRAIN_CUDA_INTERNAL_H

#include "train/cuda/check.h"

struct pbx_cuda_dev {
	int ready;            /* pbx_cuda_open succeeded */
	int device;           /* the GPU's ordinal */
	cudaStream_t compute; /* every layer, loss and optimiser kernel */
	cudaStream_t copy;    /* host -> device batches */
	cudnnHandle_t dnn;    /* on `compute` */
	cublasHandle_t blas;  /* on `compute` */
};

extern struct pbx_cuda_dev pbx_cuda_dev;

#endif
