/*
 * backend_cuda.c - the CUDA backend: device memory, the batch's copy to
 * the GPU, and one forward/backward adapter per layer kind, beside the CPU
 * ones of backend_cpu.c and with the same contracts (layers/layers.h):
 *
 *   conv        cuDNN (forward, backward data / filter / bias; algorithms
 *               from cuDNN's heuristics, deterministic ones for backward,
 *               FMA math: plain fp32, no TF32) + a bias kernel
 *   batchnorm   cuDNN spatial batch norm (train, eval); the replay pass of
 *               recomputation is a kernel over the saved statistics
 *   pooling     cuDNN (max: the deterministic mode; average: padding not
 *               counted, as on the CPU)
 *   LRN         cuDNN cross-channel LRN (alpha/size, as on the CPU)
 *   linear      cuBLAS sgemm / sgemv (default math: no TF32)
 *   the rest    kernels.cu: activations, dropout's product, loss, bias,
 *               optimiser, gradient norm
 *
 * Fusions: the CPU backend fuses a ReLU into the conv or BN before it and
 * BN+ReLU+pool; here every layer runs its own pass (the in-place ReLU
 * works on the conv's/BN's output, the pool runs after it), which the
 * memory map allows since every fused layer still has its own slot.
 *
 * Dropout masks are drawn on the host from the model's pbx_rng exactly as
 * on the CPU and copied over, so both backends drop the same units.  The
 * batch is copied from a pinned staging buffer on the copy stream; the
 * compute stream waits for it.  The loss and the gradient norm come back
 * to the host each step (the loop logs them), which synchronises.
 *
 * Errors inside a step are fatal (check.h); pbx_cuda_open reports.
 */
#include "train/cuda/cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "train/cuda/cuda_internal.h"
#include "train/cuda/kernels.h"
#include "train/optim.h"
#include "util/xalloc.h"

#ifndef PBX_CUDA_MIN_CC
#define PBX_CUDA_MIN_CC 90 /* lowest compute capability compiled for */
#endif
/* the most workspace one convolution algorithm may ask for */
#define CU_WS_LIMIT ((size_t)512 << 20)

struct pbx_cuda_dev pbx_cuda_dev;

/* cuDNN state of one layer, set for batch B. */
struct cu_layer {
	int B;    /* 0 = not set yet */
	int made; /* descriptors created */
	cudnnTensorDescriptor_t x, y, bias, bn;
	cudnnFilterDescriptor_t w;
	cudnnConvolutionDescriptor_t conv;
	cudnnPoolingDescriptor_t pool;
	cudnnLRNDescriptor_t lrn;
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t bwd_data;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter;
	size_t ws;        /* the most the three need */
	float *mask_host; /* dropout: pinned (maxB * N) */
};

/* A model's device side (m->dev). */
struct cu_model {
	float *params, *grads, *buffers; /* device copies (nparams, nbuffers) */
	float *ostate;                   /* optimiser state (nostate) */
	size_t nostate;
	float *x;         /* the batch (maxB, c, h, w) */
	int32_t *y;       /* labels (maxB) */
	float *x_host[2]; /* pinned staging, alternating */
	int32_t *y_host[2];
	int turn;
	float *ones;      /* maxB ones: linear bias gradients */
	double *red;      /* loss (2), norm (1), partials */
	double *red_host; /* pinned: loss (2), norm (1) */
	void *ws;         /* cuDNN workspace */
	size_t nws;
	cudaEvent_t ev_compute, ev_copied;
	struct cu_layer *L; /* nlayers */
};

static const float cu_one = 1.0f, cu_zero = 0.0f;

static struct cu_model *cu(struct pbx_model *m)
{
	return m->dev;
}

/* ------------------------------------------------------------- opening */

static int cuda_open_fail(struct pbx_err *err, cudaError_t e)
{
	int drv = 0, rt = 0;
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	if (drv == 0)
		return pbx_err_set(
			err,
			"no NVIDIA driver: libcuda.so.1 could not be loaded (cudaGetDeviceCount: %s)",
			cudaGetErrorString(e));
	if (drv < rt)
		return pbx_err_set(
			err,
			"the NVIDIA driver supports CUDA %d.%d, this pbx-train needs %d.%d (cudaGetDeviceCount: %s)",
			drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10,
			cudaGetErrorString(e));
	if (e == cudaErrorNoDevice)
		return pbx_err_set(
			err,
			"no GPU: the NVIDIA driver sees no CUDA device (CUDA_VISIBLE_DEVICES=%s)",
			getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
	return pbx_err_set(err, "no usable GPU (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
}

int pbx_cuda_open(int local_rank, int local_world, struct pbx_err *err)
{
	struct pbx_cuda_dev *d = &pbx_cuda_dev;
	struct cudaDeviceProp p;
	int n = 0;
	if (d->ready)
		return 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		cudaGetLastError(); /* clear it */
		return cuda_open_fail(err, e);
	}
	if (n < 1)
		return cuda_open_fail(err, cudaErrorNoDevice);
	if (local_world > n) /* NCCL refuses two ranks on one GPU */
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"%d ranks on this node but %d GPU(s) visible: device cuda takes one GPU per rank (NCCL refuses two ranks on one GPU)",
			local_world, n);
	d->device = (local_rank < 0 ? 0 : local_rank) % n;
	if (CU_TRY(cudaGetDeviceProperties(&p, d->device), err) < 0)
		return -1;
	if (p.major * 10 + p.minor < PBX_CUDA_MIN_CC)
		return pbx_err_set(
			err,
			"GPU %d (%s) has compute capability %d.%d; this pbx-train was built for %d.%d and newer (configure with -DPBX_CUDA_ARCHS=...)",
			d->device, p.name, p.major, p.minor, PBX_CUDA_MIN_CC / 10,
			PBX_CUDA_MIN_CC % 10);
	if (CU_TRY(cudaSetDevice(d->device), err) < 0 ||
	    CU_TRY(cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking), err) < 0 ||
	    CU_TRY(cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking), err) < 0 ||
	    CUDNN_TRY(cudnnCreate(&d->dnn), err) < 0 ||
	    CUDNN_TRY(cudnnSetStream(d->dnn, d->compute), err) < 0 ||
	    CUBLAS_TRY(cublasCreate(&d->blas), err) < 0 ||
	    CUBLAS_TRY(cublasSetStream(d->blas, d->compute), err) < 0 ||
	    CUBLAS_TRY(cublasSetMathMode(d->blas, CUBLAS_DEFAULT_MATH), err) < 0)
		return -1;
	fprintf(stderr,
		"pbx-train: device cuda: GPU %d of %d: %s (compute capability %d.%d, %.1f GiB), cuDNN %zu, cuBLAS\n",
		d->device, n, p.name, p.major, p.minor, (double)p.totalGlobalMem / (1 << 30),
		cudnnGetVersion());
	d->ready = 1;
	return 0;
}

#define CU_STR2(x) #x
#define CU_STR(x)  CU_STR2(x)
const char *pbx_cuda_built(void)
{
	return "cpu, cuda (sm_" CU_STR(PBX_CUDA_MIN_CC) " and newer, CUDA runtime " CU_STR(CUDART_VERSION) ", cuDNN " CU_STR(
		CUDNN_MAJOR) "." CU_STR(CUDNN_MINOR) ", NCCL " CU_STR(NCCL_MAJOR) "." CU_STR(NCCL_MINOR) ")";
}

void pbx_cuda_close(void)
{
	struct pbx_cuda_dev *d = &pbx_cuda_dev;
	if (!d->ready)
		return;
	cudaDeviceSynchronize();
	cublasDestroy(d->blas);
	cudnnDestroy(d->dnn);
	cudaStreamDestroy(d->copy);
	cudaStreamDestroy(d->compute);
	d->ready = 0;
}

int pbx_cuda_check_model(const struct pbx_model *m, struct pbx_err *err)
{
	for (int i = 0; i < m->nlayers; i++) {
		const struct pbx_layer_spec *s = &m->layers[i].spec;
		if (s->kind != PBX_L_LRN)
			continue;
		if (s->size < CUDNN_LRN_MIN_N || s->size > CUDNN_LRN_MAX_N || s->size % 2 == 0 ||
		    s->bias < CUDNN_LRN_MIN_K || s->beta < CUDNN_LRN_MIN_BETA)
			return pbx_err_setc(
				err, PBX_EXIT_USAGE,
				"layer %d (lrn): device cuda needs an odd size from %d to %d, bias (k) >= %g and beta >= %g (cuDNN's limits); got size %d, bias %g, beta %g",
				i + 1, CUDNN_LRN_MIN_N, CUDNN_LRN_MAX_N, CUDNN_LRN_MIN_K,
				CUDNN_LRN_MIN_BETA, s->size, (double)s->bias, (double)s->beta);
	}
	return 0;
}

/* -------------------------------------------------------------- memory */

static void *cu_malloc(size_t bytes)
{
	void *p = NULL;
	CU_CHECK(cudaMalloc(&p, bytes ? bytes : 4));
	CU_CHECK(cudaMemset(p, 0, bytes ? bytes : 4));
	return p;
}

static void *cu_host_malloc(size_t bytes)
{
	void *p = NULL;
	CU_CHECK(cudaMallocHost(&p, bytes ? bytes : 4));
	memset(p, 0, bytes ? bytes : 4);
	return p;
}

static float *cu_alloc(size_t n)
{
	return cu_malloc(sizeof(float) * n);
}

static void cu_release(float *p)
{
	if (p)
		CU_CHECK(cudaFree(p));
}

/* A workspace of at least `bytes` (cudaFree synchronises the device). */
static void *cu_workspace(struct cu_model *c, size_t bytes)
{
	if (bytes > c->nws) {
		if (c->ws)
			CU_CHECK(cudaFree(c->ws));
		c->ws = cu_malloc(bytes);
		c->nws = bytes;
	}
	return c->ws;
}

static void cu_attach(struct pbx_model *m)
{
	struct cu_model *c = xcalloc(1, sizeof(*c));
	size_t xin = (size_t)m->max_batch * m->c * m->h * m->w;
	m->dev = c;
	/* the CPU's im2col space: cuDNN brings its own workspace */
	cu_release(m->scratch);
	m->scratch = NULL;
	c->params = cu_alloc(m->nparams);
	c->grads = cu_alloc(m->nparams);
	c->buffers = cu_alloc(m->nbuffers);
	c->x = cu_alloc(xin);
	c->y = cu_malloc(sizeof(int32_t) * (size_t)m->max_batch);
	for (int k = 0; k < 2; k++) {
		c->x_host[k] = cu_host_malloc(sizeof(float) * xin);
		c->y_host[k] = cu_host_malloc(sizeof(int32_t) * (size_t)m->max_batch);
	}
	float *ones = xmalloc(sizeof(float) * (size_t)m->max_batch);
	for (int b = 0; b < m->max_batch; b++)
		ones[b] = 1.0f;
	c->ones = cu_alloc((size_t)m->max_batch);
	CU_CHECK(cudaMemcpy(c->ones, ones, sizeof(float) * (size_t)m->max_batch,
			    cudaMemcpyHostToDevice));
	free(ones);
	c->red = cu_malloc(sizeof(double) * (3 + CUK_NORM_BLOCKS));
	c->red_host = cu_host_malloc(sizeof(double) * 3);
	CU_CHECK(cudaEventCreateWithFlags(&c->ev_compute, cudaEventDisableTiming));
	CU_CHECK(cudaEventCreateWithFlags(&c->ev_copied, cudaEventDisableTiming));
	c->L = xcalloc((size_t)m->nlayers, sizeof(*c->L));
	for (int i = 0; i < m->nlayers; i++) {
		const struct pbx_layer *L = &m->layers[i];
		if (L->spec.kind == PBX_L_DROPOUT)
			c->L[i].mask_host = cu_host_malloc(sizeof(float) * (size_t)m->max_batch *
							   L->c * L->h * L->w);
	}
}

static void cu_layer_free(struct cu_layer *l)
{
	if (l->made) {
		cudnnDestroyTensorDescriptor(l->x);
		cudnnDestroyTensorDescriptor(l->y);
		cudnnDestroyTensorDescriptor(l->bias);
		cudnnDestroyTensorDescriptor(l->bn);
		cudnnDestroyFilterDescriptor(l->w);
		cudnnDestroyConvolutionDescriptor(l->conv);
		cudnnDestroyPoolingDescriptor(l->pool);
		cudnnDestroyLRNDescriptor(l->lrn);
	}
	if (l->mask_host)
		cudaFreeHost(l->mask_host);
}

static void cu_detach(struct pbx_model *m)
{
	struct cu_model *c = cu(m);
	if (!c)
		return;
	CU_CHECK(cudaStreamSynchronize(pbx_cuda_dev.compute));
	for (int i = 0; i < m->nlayers; i++)
		cu_layer_free(&c->L[i]);
	free(c->L);
	cu_release(c->params);
	cu_release(c->grads);
	cu_release(c->buffers);
	cu_release(c->ostate);
	cu_release(c->x);
	cudaFree(c->y);
	for (int k = 0; k < 2; k++) {
		cudaFreeHost(c->x_host[k]);
		cudaFreeHost(c->y_host[k]);
	}
	cu_release(c->ones);
	cudaFree(c->red);
	cudaFreeHost(c->red_host);
	if (c->ws)
		cudaFree(c->ws);
	cudaEventDestroy(c->ev_compute);
	cudaEventDestroy(c->ev_copied);
	free(c);
	m->dev = NULL;
}

float *pbx_cuda_grads(struct pbx_model *m)
{
	return cu(m)->grads;
}

/* ------------------------------------------------------ host <-> device */

static void cu_ensure_ostate(struct cu_model *c, size_t n)
{
	if (c->nostate == n)
		return;
	cu_release(c->ostate);
	c->ostate = cu_alloc(n);
	c->nostate = n;
}

static void cu_pull(struct pbx_model *m, struct pbx_optim *o)
{
	struct cu_model *c = cu(m);
	CU_CHECK(cudaStreamSynchronize(pbx_cuda_dev.compute));
	CU_CHECK(cudaMemcpy(m->params, c->params, sizeof(float) * m->nparams,
			    cudaMemcpyDeviceToHost));
	CU_CHECK(
		cudaMemcpy(m->grads, c->grads, sizeof(float) * m->nparams, cudaMemcpyDeviceToHost));
	CU_CHECK(cudaMemcpy(m->buffers, c->buffers, sizeof(float) * m->nbuffers,
			    cudaMemcpyDeviceToHost));
	if (o && c->ostate && c->nostate == o->nstate)
		CU_CHECK(cudaMemcpy(o->state, c->ostate, sizeof(float) * o->nstate,
				    cudaMemcpyDeviceToHost));
}

static void cu_push(struct pbx_model *m, const struct pbx_optim *o)
{
	struct cu_model *c = cu(m);
	CU_CHECK(cudaStreamSynchronize(pbx_cuda_dev.compute));
	CU_CHECK(cudaMemcpy(c->params, m->params, sizeof(float) * m->nparams,
			    cudaMemcpyHostToDevice));
	CU_CHECK(cudaMemcpy(c->buffers, m->buffers, sizeof(float) * m->nbuffers,
			    cudaMemcpyHostToDevice));
	if (o) {
		cu_ensure_ostate(c, o->nstate);
		CU_CHECK(cudaMemcpy(c->ostate, o->state, sizeof(float) * o->nstate,
				    cudaMemcpyHostToDevice));
	}
}

/* The batch: host copy into pinned staging, then an async copy on the
 * copy stream once the compute stream is done with the previous batch. */
static void cu_set_batch(struct pbx_model *m, const float *x, const int32_t *y, int B)
{
	struct pbx_cuda_dev *d = &pbx_cuda_dev;
	struct cu_model *c = cu(m);
	size_t nx = sizeof(float) * (size_t)B * m->c * m->h * m->w;
	int k = c->turn ^= 1;
	memcpy(c->x_host[k], x, nx);
	if (y)
		memcpy(c->y_host[k], y, sizeof(int32_t) * (size_t)B);
	CU_CHECK(cudaEventRecord(c->ev_compute, d->compute));
	CU_CHECK(cudaStreamWaitEvent(d->copy, c->ev_compute, 0));
	CU_CHECK(cudaMemcpyAsync(c->x, c->x_host[k], nx, cudaMemcpyHostToDevice, d->copy));
	if (y)
		CU_CHECK(cudaMemcpyAsync(c->y, c->y_host[k], sizeof(int32_t) * (size_t)B,
					 cudaMemcpyHostToDevice, d->copy));
	CU_CHECK(cudaEventRecord(c->ev_copied, d->copy));
	CU_CHECK(cudaStreamWaitEvent(d->compute, c->ev_copied, 0));
	m->input = c->x;
	m->labels = c->y;
}

/* --------------------------------------------------- layer descriptors */

static void cu_layer_make(struct cu_layer *l)
{
	if (l->made)
		return;
	CUDNN_CHECK(cudnnCreateTensorDescriptor(&l->x));
	CUDNN_CHECK(cudnnCreateTensorDescriptor(&l->y));
	CUDNN_CHECK(cudnnCreateTensorDescriptor(&l->bias));
	CUDNN_CHECK(cudnnCreateTensorDescriptor(&l->bn));
	CUDNN_CHECK(cudnnCreateFilterDescriptor(&l->w));
	CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&l->conv));
	CUDNN_CHECK(cudnnCreatePoolingDescriptor(&l->pool));
	CUDNN_CHECK(cudnnCreateLRNDescriptor(&l->lrn));
	l->made = 1;
}

/* The first algorithm of cuDNN's ranking that ran, fits the limit and
 * (for backward) is deterministic; ALGO_0 (implicit GEMM) otherwise. */
static void cu_conv_algos(struct cu_layer *l)
{
	cudnnHandle_t h = pbx_cuda_dev.dnn;
	cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	int n = 0;
	size_t a = 0, b = 0, w = 0;

	l->fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
	CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
		h, l->x, l->w, l->conv, l->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, pf));
	for (int i = 0; i < n; i++)
		if (pf[i].status == CUDNN_STATUS_SUCCESS && pf[i].memory <= CU_WS_LIMIT) {
			l->fwd = pf[i].algo;
			break;
		}
	l->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
	CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
		h, l->w, l->y, l->conv, l->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, pd));
	for (int i = 0; i < n; i++)
		if (pd[i].status == CUDNN_STATUS_SUCCESS && pd[i].memory <= CU_WS_LIMIT &&
		    pd[i].determinism == CUDNN_DETERMINISTIC) {
			l->bwd_data = pd[i].algo;
			break;
		}
	l->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
	CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
		h, l->x, l->y, l->conv, l->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, pw));
	for (int i = 0; i < n; i++)
		if (pw[i].status == CUDNN_STATUS_SUCCESS && pw[i].memory <= CU_WS_LIMIT &&
		    pw[i].determinism == CUDNN_DETERMINISTIC) {
			l->bwd_filter = pw[i].algo;
			break;
		}
	CUDNN_CHECK(
		cudnnGetConvolutionForwardWorkspaceSize(h, l->x, l->w, l->conv, l->y, l->fwd, &a));
	CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, l->w, l->y, l->conv, l->x,
								 l->bwd_data, &b));
	CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, l->x, l->y, l->conv, l->w,
								   l->bwd_filter, &w));
	l->ws = a > b ? a : b;
	if (w > l->ws)
		l->ws = w;
}

/* Layer i's descriptors for the current batch (set again when B changes:
 * the last, smaller batch of an epoch). */
static struct cu_layer *cu_prep(struct pbx_model *m, int i)
{
	struct cu_layer *l = &cu(m)->L[i];
	const struct pbx_layer *L = &m->layers[i];
	const struct pbx_layer_spec *s = &L->spec;
	int B = m->batch;
	if (l->B == B)
		return l;
	cu_layer_make(l);
	CUDNN_CHECK(cudnnSetTensor4dDescriptor(l->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, L->c,
					       L->h, L->w));
	CUDNN_CHECK(cudnnSetTensor4dDescriptor(l->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, L->oc,
					       L->oh, L->ow));
	switch (s->kind) {
	case PBX_L_CONV:
		CUDNN_CHECK(cudnnSetFilter4dDescriptor(l->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
						       L->oc, L->c, s->k, s->k));
		CUDNN_CHECK(cudnnSetConvolution2dDescriptor(l->conv, s->p, s->p, s->s, s->s, 1, 1,
							    CUDNN_CROSS_CORRELATION,
							    CUDNN_DATA_FLOAT));
		CUDNN_CHECK(cudnnSetConvolutionMathType(l->conv, CUDNN_FMA_MATH));
		CUDNN_CHECK(cudnnSetTensor4dDescriptor(l->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
						       1, L->oc, 1, 1));
		cu_conv_algos(l);
		break;
	case PBX_L_BATCHNORM:
		CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(l->bn, l->x, CUDNN_BATCHNORM_SPATIAL));
		break;
	case PBX_L_MAXPOOL:
	case PBX_L_AVGPOOL:
		CUDNN_CHECK(cudnnSetPooling2dDescriptor(
			l->pool,
			s->kind == PBX_L_MAXPOOL ? CUDNN_POOLING_MAX_DETERMINISTIC
						 : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
			CUDNN_NOT_PROPAGATE_NAN, s->k, s->k, s->p, s->p, s->s, s->s));
		break;
	case PBX_L_LRN:
		CUDNN_CHECK(cudnnSetLRNDescriptor(l->lrn, (unsigned)s->size, (double)s->alpha,
						  (double)s->beta, (double)s->bias));
		break;
	default:
		break;
	}
	l->B = B;
	return l;
}

/* What every adapter needs about layer i (device pointers). */
struct cu_ctx {
	const struct pbx_layer *L;
	const struct pbx_layer_spec *s;
	struct cu_model *c;
	float *in, *out, *aux, *p, *g;
	size_t n; /* input floats of the batch */
	int B;
	cudaStream_t st;
};

static struct cu_ctx cu_ctx(struct pbx_model *m, int i)
{
	struct pbx_layer *L = &m->layers[i];
	struct cu_ctx x = {
		L,
		&L->spec,
		cu(m),
		pbx_model_in(m, i),
		pbx_model_out(m, i),
		m->acts + L->aux_off,
		cu(m)->params,
		cu(m)->grads,
		(size_t)m->batch * L->c * L->h * L->w,
		m->batch,
		pbx_cuda_dev.compute,
	};
	return x;
}

/* ---------------------------------------------------------------- conv */

static void conv_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cu_ctx x = cu_ctx(m, i);
	struct cu_layer *l = cu_prep(m, i);
	(void)mode;
	void *ws = cu_workspace(x.c, l->ws);
	CUDNN_CHECK(cudnnConvolutionForward(pbx_cuda_dev.dnn, &cu_one, l->x, x.in, l->w,
					    x.p + x.L->w_off, l->conv, l->fwd, ws, l->ws, &cu_zero,
					    l->y, x.out));
	cuk_bias_add(x.out, x.p + x.L->b_off, x.B, x.L->oc, x.L->oh * x.L->ow, x.st);
}

static void conv_bwd(struct pbx_model *m, int i)
{
	struct cu_ctx x = cu_ctx(m, i);
	struct cu_layer *l = cu_prep(m, i);
	cudnnHandle_t h = pbx_cuda_dev.dnn;
	float *dout = pbx_model_dout(m, i), *din = pbx_model_din(m, i);
	void *ws = cu_workspace(x.c, l->ws);
	/* parameter gradients accumulate (beta 1), the input's is written */
	CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &cu_one, l->y, dout, &cu_one, l->bias,
						 x.g + x.L->b_off));
	CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &cu_one, l->x, x.in, l->y, dout, l->conv,
						   l->bwd_filter, ws, l->ws, &cu_one, l->w,
						   x.g + x.L->w_off));
	if (din)
		CUDNN_CHECK(cudnnConvolutionBackwardData(h, &cu_one, l->w, x.p + x.L->w_off, l->y,
							 dout, l->conv, l->bwd_data, ws, l->ws,
							 &cu_zero, l->x, din));
}

/* ------------------------------------------------------------- pooling */

static void pool_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cu_ctx x = cu_ctx(m, i);
	struct cu_layer *l = cu_prep(m, i);
	(void)mode;
	CUDNN_CHECK(cudnnPoolingForward(pbx_cuda_dev.dnn, l->pool, &cu_one, l->x, x.in, &cu_zero,
					l->y, x.out));
}

static void pool_bwd(struct pbx_model *m, int i)
{
	struct cu_ctx x = cu_ctx(m, i);
	struct cu_layer *l = cu_prep(m, i);
	float *din = pbx_model_din(m, i);
	if (din)
		CUDNN_CHECK(cudnnPoolingBackward(pbx_cuda_dev.dnn, l->pool, &cu_one, l->y, x.out,
						 l->y, pbx_model_dout(m, i), l->x, x.in, &cu_zero,
						 l->x, din));
}

/* ----------------------------------------------------------- batchnorm */

static void bn_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cu_ctx x = cu_ctx(m, i);
	struct cu_layer *l = cu_prep(m, i);
	float *rm = x.c->buffers + x.L->buf_off, *rv = rm + x.L->c;
	float *mean = x.aux, *invstd = x.aux + x.L->c;
	const float *gamma = x.p + x.L->w_off, *beta = x.p + x.L->b_off;
	if (mode == PBX_FWD_REPLAY) {
		cuk_bn_apply(x.out, x.in, gamma, beta, mean, invstd, x.B, x.L->c, x.L->h * x.L->w,
			     x.st);
	} else if (mode == PBX_FWD_TRAIN) {
		CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
			pbx_cuda_dev.dnn, CUDNN_BATCHNORM_SPATIAL, &cu_one, &cu_zero, l->x, x.in,
			l->x, x.out, l->bn, gamma, beta, (double)x.s->momentum, rm, rv,
			(double)x.s->eps, mean, invstd));
	} else {
		CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
			pbx_cuda_dev.dnn, CUDNN_BATCHNORM_SPATIAL, &cu_one, &cu_zero, l->x, x.in,
			l->x, x.out, l->bn, gamma, beta, rm, rv, (double)x.s->eps));
	}
}

static void bn_bwd(struct pbx_model *m, int i)
{
	struct cu_ctx x = cu_ctx(m, i);
	struct cu_layer *l = cu_prep(m, i);
	float *din = pbx_model_din(m, i);
	if (!din) /* a first layer: cuDNN writes the input gradient anyway */
		din = cu_workspace(x.c, sizeof(float) * x.n);
	CUDNN_CHECK(cudnnBatchNormalizationBackward(
		pbx_cuda_dev.dnn, CUDNN_BATCHNORM_SPATIAL, &cu_one, &cu_zero, &cu_one, &cu_one,
		l->x, x.in, l->x, pbx_model_dout(m, i), l->x, din, l->bn, x.p + x.L->w_off,
		x.g + x.L->w_off, x.g + x.L->b_off, (double)x.s->eps, x.aux, x.aux + x.L->c));
}

/* -------------------------------------------------------------- linear */

static void linear_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cu_ctx x = cu_ctx(m, i);
	int IN = x.L->c * x.L->h * x.L->w, OUT = x.L->oc;
	(void)mode;
	/* row-major out (B,OUT) = in (B,IN) w^T: column-major w^T in */
	CUBLAS_CHECK(cublasSgemm(pbx_cuda_dev.blas, CUBLAS_OP_T, CUBLAS_OP_N, OUT, x.B, IN, &cu_one,
				 x.p + x.L->w_off, IN, x.in, IN, &cu_zero, x.out, OUT));
	cuk_bias_add(x.out, x.p + x.L->b_off, x.B, OUT, 1, x.st);
}

static void linear_bwd(struct pbx_model *m, int i)
{
	struct cu_ctx x = cu_ctx(m, i);
	cublasHandle_t h = pbx_cuda_dev.blas;
	int IN = x.L->c * x.L->h * x.L->w, OUT = x.L->oc;
	float *dout = pbx_model_dout(m, i), *din = pbx_model_din(m, i);
	/* dw (OUT,IN) += dout^T in; db (OUT) += dout^T 1; din = dout w */
	CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, IN, OUT, x.B, &cu_one, x.in, IN, dout,
				 OUT, &cu_one, x.g + x.L->w_off, IN));
	CUBLAS_CHECK(cublasSgemv(h, CUBLAS_OP_N, OUT, x.B, &cu_one, dout, OUT, x.c->ones, 1,
				 &cu_one, x.g + x.L->b_off, 1));
	if (din)
		CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, IN, x.B, OUT, &cu_one,
					 x.p + x.L->w_off, IN, dout, OUT, &cu_zero, din, IN));
}

/* ------------------------------------------------- dropout, LRN, flatten */

/* Training: the mask is drawn on the host from m->rng as dropout_forward
 * draws it, then copied (stream-ordered before the product). */
static void dropout_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cu_ctx x = cu_ctx(m, i);
	struct cu_layer *l = &x.c->L[i];
	float p = x.s->rate;
	if (mode == PBX_FWD_EVAL) {
		CU_CHECK(cudaMemcpyAsync(x.out, x.in, sizeof(float) * x.n, cudaMemcpyDeviceToDevice,
					 x.st));
		return;
	}
	if (mode == PBX_FWD_TRAIN) {
		float scale = 1.0f / (1.0f - p);
		for (size_t k = 0; k < x.n; k++)
			l->mask_host[k] = p <= 0.0f                      ? 1.0f
					  : pbx_rng_uniform(&m->rng) < p ? 0.0f
									 : scale;
		CU_CHECK(cudaMemcpyAsync(x.aux, l->mask_host, sizeof(float) * x.n,
					 cudaMemcpyHostToDevice, x.st));
	}
	cuk_mul(x.out, x.in, x.aux, x.n, x.st);
}

static void dropout_bwd(struct pbx_model *m, int i)
{
	struct cu_ctx x = cu_ctx(m, i);
	float *din = pbx_model_din(m, i);
	if (din)
		cuk_mul(din, pbx_model_dout(m, i), x.aux, x.n, x.st);
}

static void lrn_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cu_ctx x = cu_ctx(m, i);
	struct cu_layer *l = cu_prep(m, i);
	(void)mode;
	CUDNN_CHECK(cudnnLRNCrossChannelForward(pbx_cuda_dev.dnn, l->lrn,
						CUDNN_LRN_CROSS_CHANNEL_DIM1, &cu_one, l->x, x.in,
						&cu_zero, l->x, x.out));
}

static void lrn_bwd(struct pbx_model *m, int i)
{
	struct cu_ctx x = cu_ctx(m, i);
	struct cu_layer *l = cu_prep(m, i);
	float *din = pbx_model_din(m, i);
	if (din)
		CUDNN_CHECK(cudnnLRNCrossChannelBackward(
			pbx_cuda_dev.dnn, l->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &cu_one, l->x,
			x.out, l->x, pbx_model_dout(m, i), l->x, x.in, &cu_zero, l->x, din));
}

static void nop_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	(void)m;
	(void)i;
	(void)mode;
}

static void nop_bwd(struct pbx_model *m, int i)
{
	(void)m;
	(void)i;
}

/* --------------------------------------------------------- activations */

/* layers.h's enum act_kind order: relu, leaky relu, tanh, sigmoid, gelu */
static int cu_act(enum pbx_layer_kind k)
{
	switch (k) {
	case PBX_L_LEAKY_RELU:
		return 1;
	case PBX_L_TANH:
		return 2;
	case PBX_L_SIGMOID:
		return 3;
	case PBX_L_GELU:
		return 4;
	default:
		return 0;
	}
}

/* Also after a conv or BN whose ReLU the CPU fuses: here it runs in place
 * on their output (the memory map aliases it). */
static void act_fwd(struct pbx_model *m, int i, enum pbx_fwd_mode mode)
{
	struct cu_ctx x = cu_ctx(m, i);
	(void)mode;
	cuk_act_forward(x.out, x.in, x.n, cu_act(x.s->kind), x.s->alpha, x.st);
}

static void act_bwd(struct pbx_model *m, int i)
{
	struct cu_ctx x = cu_ctx(m, i);
	float *din = pbx_model_din(m, i);
	if (din) /* in place: din == dout, out == in */
		cuk_act_backward(din, pbx_model_dout(m, i), x.in, x.out, x.n, cu_act(x.s->kind),
				 x.s->alpha, x.st);
}

/* ---------------------------------------------------------------- loss */

static double cu_loss_forward(struct pbx_model *m, int64_t *correct)
{
	struct cu_model *c = cu(m);
	cudaStream_t st = pbx_cuda_dev.compute;
	cuk_softmax_xent(m->acts + m->probs_off, c->red, pbx_model_out(m, m->nlayers - 1),
			 m->labels, m->batch, m->nclasses, st);
	CU_CHECK(cudaMemcpyAsync(c->red_host, c->red, 2 * sizeof(double), cudaMemcpyDeviceToHost,
				 st));
	CU_CHECK(cudaStreamSynchronize(st));
	if (correct)
		*correct += (int64_t)c->red_host[1];
	return c->red_host[0] / m->batch;
}

static void cu_loss_backward(struct pbx_model *m)
{
	cuk_softmax_xent_backward(pbx_model_dout(m, m->nlayers - 1), m->acts + m->probs_off,
				  m->labels, m->batch, m->nclasses, pbx_cuda_dev.compute);
}

/* ----------------------------------------------------------- optimiser */

static void cu_zero_grad(struct pbx_model *m)
{
	CU_CHECK(
		cudaMemsetAsync(cu(m)->grads, 0, sizeof(float) * m->nparams, pbx_cuda_dev.compute));
}

static double cu_clip(struct pbx_model *m, double max_norm)
{
	struct cu_model *c = cu(m);
	cudaStream_t st = pbx_cuda_dev.compute;
	cuk_clip(c->grads, m->nparams, max_norm, c->red + 3, c->red + 2, st);
	CU_CHECK(cudaMemcpyAsync(c->red_host + 2, c->red + 2, sizeof(double),
				 cudaMemcpyDeviceToHost, st));
	CU_CHECK(cudaStreamSynchronize(st));
	return c->red_host[2];
}

/* optim.c's pbx_optim_step on the device copies (o->t and the bias
 * corrections on the host, as there). */
static void cu_step(struct pbx_model *m, struct pbx_optim *o, double lr)
{
	struct cu_model *c = cu(m);
	cudaStream_t st = pbx_cuda_dev.compute;
	float flr = (float)lr;
	cu_ensure_ostate(c, o->nstate);
	o->t++;
	if (o->kind == PBX_OPT_SGD) {
		cuk_sgd(c->params, c->grads, c->ostate, m->nparams, flr, o->momentum, o->nesterov,
			o->weight_decay, st);
		return;
	}
	float c1 = (float)(1.0 - pow(o->beta1, (double)o->t));
	float c2 = (float)(1.0 - pow(o->beta2, (double)o->t));
	cuk_adam(c->params, c->grads, c->ostate, c->ostate + m->nparams, m->nparams, flr, o->beta1,
		 o->beta2, o->eps, c1, c2, o->weight_decay, o->kind == PBX_OPT_ADAMW, st);
}

/* ---------------------------------------------------------------- table */

static const struct pbx_layer_ops cu_ops[PBX_L_COUNT] = {
	[PBX_L_CONV] = { conv_fwd, conv_bwd },          [PBX_L_MAXPOOL] = { pool_fwd, pool_bwd },
	[PBX_L_AVGPOOL] = { pool_fwd, pool_bwd },       [PBX_L_BATCHNORM] = { bn_fwd, bn_bwd },
	[PBX_L_LINEAR] = { linear_fwd, linear_bwd },    [PBX_L_RELU] = { act_fwd, act_bwd },
	[PBX_L_LEAKY_RELU] = { act_fwd, act_bwd },      [PBX_L_TANH] = { act_fwd, act_bwd },
	[PBX_L_SIGMOID] = { act_fwd, act_bwd },         [PBX_L_GELU] = { act_fwd, act_bwd },
	[PBX_L_DROPOUT] = { dropout_fwd, dropout_bwd }, [PBX_L_LRN] = { lrn_fwd, lrn_bwd },
	[PBX_L_FLATTEN] = { nop_fwd, nop_bwd },
};

const struct pbx_backend pbx_backend_cuda = {
	.name = "cuda",
	.alloc = cu_alloc,
	.release = cu_release,
	.ops = cu_ops,
	.loss_forward = cu_loss_forward,
	.loss_backward = cu_loss_backward,
	.attach = cu_attach,
	.detach = cu_detach,
	.set_batch = cu_set_batch,
	.zero_grad = cu_zero_grad,
	.clip = cu_clip,
	.step = cu_step,
	.pull = cu_pull,
	.push = cu_push,
};

/* ------------------------------------------------------- the entry point */

__attribute__((visibility("default"))) const struct pbx_cuda_api pbx_cuda_api = {
	.abi = PBX_CUDA_ABI,
	.built = pbx_cuda_built,
	.open = pbx_cuda_open,
	.backend = &pbx_backend_cuda,
	.check_model = pbx_cuda_check_model,
	.grads = pbx_cuda_grads,
	.nccl_attach = pbx_comm_nccl_attach,
	.close = pbx_cuda_close,
};
