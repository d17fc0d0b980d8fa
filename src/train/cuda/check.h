/*
 * check.h - checked calls for the CUDA runtime, cuDNN, cuBLAS and NCCL.
 *
 *   CU_CHECK(cudaMalloc(&p, n));      fatal: prints the call, file and line
 *   CUDNN_CHECK(...), CUBLAS_CHECK(...), NCCL_CHECK(...) likewise
 *
 * A failed call inside a training step cannot be recovered from (the
 * device state is unknown), so these print
 *   pbx-train: CUDA error: cudaMalloc(&p, n) at src/train/cuda/x.c:12: out of memory
 * and exit with status 1, like xmalloc on exhaustion.  Under mpirun the
 * other ranks are then ended by mpirun.  Set-up code that can report an
 * error instead (no GPU, no driver) uses the _TRY forms, which fill a
 * struct pbx_err with the same text and return -1.
 */
#ifndef PBX_TRAIN_CUDA_CHECK_H
#define PBX_TRAIN_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "util/err.h"

#define CU_CHECK(call)        pbx_cu_check_rt((call), #call, __FILE__, __LINE__, NULL)
#define CUDNN_CHECK(call)     pbx_cu_check_dnn((call), #call, __FILE__, __LINE__, NULL)
#define CUBLAS_CHECK(call)    pbx_cu_check_blas((call), #call, __FILE__, __LINE__, NULL)
#define NCCL_CHECK(call)      pbx_cu_check_nccl((call), #call, __FILE__, __LINE__, NULL)
/* 0, or -1 with err set (nothing printed). */
#define CU_TRY(call, err)     pbx_cu_check_rt((call), #call, __FILE__, __LINE__, (err))
#define CUDNN_TRY(call, err)  pbx_cu_check_dnn((call), #call, __FILE__, __LINE__, (err))
#define CUBLAS_TRY(call, err) pbx_cu_check_blas((call), #call, __FILE__, __LINE__, (err))
#define NCCL_TRY(call, err)   pbx_cu_check_nccl((call), #call, __FILE__, __LINE__, (err))

/* Each returns 0 on success; on failure fills err and returns -1, or with
 * err NULL prints and exits(1). */
int pbx_cu_check_rt(cudaError_t e, const char *call, const char *file, int line,
		    struct pbx_err *err);
int pbx_cu_check_dnn(cudnnStatus_t e, const char *call, const char *file, int line,
		     struct pbx_err *err);
int pbx_cu_check_blas(cublasStatus_t e, const char *call, const char *file, int line,
		      struct pbx_err *err);
int pbx_cu_check_nccl(ncclResult_t e, const char *call, const char *file, int line,
		      struct pbx_err *err);

#endif
