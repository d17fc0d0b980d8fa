/*
 * check.c - the reporting half of check.h: one function per library that
 * turns a status into "LIBRARY error: CALL at FILE:LINE: TEXT", returned in
 * a struct pbx_err or printed before exit(1).
 */
#include "train/cuda/check.h"

#include <stdio.h>
#include <stdlib.h>

static int check_fail(const char *lib, const char *call, const char *file, int line,
		      const char *text, struct pbx_err *err)
{
	if (err)
		return pbx_err_set(err, "%s error: %s at %s:%d: %s", lib, call, file, line, text);
	fprintf(stderr, "pbx-train: %s error: %s at %s:%d: %s\n", lib, call, file, line, text);
	fflush(stderr);
	exit(1);
}

int pbx_cu_check_rt(cudaError_t e, const char *call, const char *file, int line,
		    struct pbx_err *err)
{
	if (e == cudaSuccess)
		return 0;
	return check_fail("CUDA", call, file, line, cudaGetErrorString(e), err);
}

int pbx_cu_check_dnn(cudnnStatus_t e, const char *call, const char *file, int line,
		     struct pbx_err *err)
{
	if (e == CUDNN_STATUS_SUCCESS)
		return 0;
	return check_fail("cuDNN", call, file, line, cudnnGetErrorString(e), err);
}

int pbx_cu_check_blas(cublasStatus_t e, const char *call, const char *file, int line,
		      struct pbx_err *err)
{
	if (e == CUBLAS_STATUS_SUCCESS)
		return 0;
	return check_fail("cuBLAS", call, file, line, cublasGetStatusString(e), err);
}

int pbx_cu_check_nccl(ncclResult_t e, const char *call, const char *file, int line,
		      struct pbx_err *err)
{
	if (e == ncclSuccess)
		return 0;
	return check_fail("NCCL", call, file, line, ncclGetErrorString(e), err);
}
