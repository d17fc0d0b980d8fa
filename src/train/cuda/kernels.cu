/*
 * kernels.cu - the device kernels of kernels.h.  Grid-stride loops over
 * elements; the two reductions (cross-entropy over the batch, the squared
 * gradient norm) use fixed launch shapes and shared-memory trees, so they
 * are deterministic.  Formulas copy the CPU reference's (layers/, optim.c)
 * operation for operation, in float, so the two agree to rounding.
 */
#include "train/cuda/kernels.h"

#define CUK_THREADS 256
#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */

/* enough blocks to cover n, capped: the loops stride over the rest */
static unsigned cuk_blocks(size_t n)
{
	size_t b = (n + CUK_THREADS - 1) / CUK_THREADS;
	if (b < 1)
		b = 1;
	return (unsigned)(b > 4096 ? 4096 : b);
}

#define CUK_FOR(i, n) \
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
	     i += (size_t)gridDim.x * blockDim.x)

/* ---------------------------------------------------------- activations */

__global__ void act_fwd_k(float *out, const float *in, size_t n, int kind,
			  float alpha)
{
	CUK_FOR(i, n) {
		float x = in[i];
		switch (kind) {
		case 0: out[i] = x > 0.0f ? x : 0.0f; break;
		case 1: out[i] = x > 0.0f ? x : alpha * x; break;
		case 2: out[i] = tanhf(x); break;
		case 3: out[i] = 1.0f / (1.0f + expf(-x)); break;
		default: {
			float t = tanhf(GELU_C * (x + 0.044715f * x * x * x));
			out[i] = 0.5f * x * (1.0f + t);
		}
		}
	}
}

__global__ void act_bwd_k(float *din, const float *dout, const float *in,
			  const float *out, size_t n, int kind, float alpha)
{
	CUK_FOR(i, n) {
		switch (kind) {
		case 0: din[i] = out[i] > 0.0f ? dout[i] : 0.0f; break;
		case 1: din[i] = in[i] > 0.0f ? dout[i] : alpha * dout[i]; break;
		case 2: din[i] = dout[i] * (1.0f - out[i] * out[i]); break;
		case 3: din[i] = dout[i] * out[i] * (1.0f - out[i]); break;
		default: {
			float x = in[i];
			float u = GELU_C * (x + 0.044715f * x * x * x);
			float t = tanhf(u);
			float du = GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
			din[i] = dout[i] * (0.5f * (1.0f + t) +
					    0.5f * x * (1.0f - t * t) * du);
		}
		}
	}
}

extern "C" void cuk_act_forward(float *out, const float *in, size_t n,
				int kind, float alpha, cudaStream_t s)
{
	act_fwd_k<<<cuk_blocks(n), CUK_THREADS, 0, s>>>(out, in, n, kind, alpha);
}

extern "C" void cuk_act_backward(float *din, const float *dout,
				 const float *in, const float *out, size_t n,
				 int kind, float alpha, cudaStream_t s)
{
	act_bwd_k<<<cuk_blocks(n), CUK_THREADS, 0, s>>>(din, dout, in, out, n,
							kind, alpha);
}

/* ------------------------------------------------- products, broadcasts */

__global__ void mul_k(float *out, const float *a, const float *b, size_t n)
{
	CUK_FOR(i, n)
		out[i] = a[i] * b[i];
}

extern "C" void cuk_mul(float *out, const float *a, const float *b, size_t n,
			cudaStream_t s)
{
	mul_k<<<cuk_blocks(n), CUK_THREADS, 0, s>>>(out, a, b, n);
}

__global__ void bias_add_k(float *out, const float *bias, size_t n, int C,
			   int HW)
{
	CUK_FOR(i, n)
		out[i] += bias[(i / (size_t)HW) % (size_t)C];
}

extern "C" void cuk_bias_add(float *out, const float *bias, int B, int C,
			     int HW, cudaStream_t s)
{
	size_t n = (size_t)B * C * HW;
	bias_add_k<<<cuk_blocks(n), CUK_THREADS, 0, s>>>(out, bias, n, C, HW);
}

__global__ void bn_apply_k(float *out, const float *in, const float *gamma,
			   const float *beta, const float *mean,
			   const float *invstd, size_t n, int C, int HW)
{
	CUK_FOR(i, n) {
		size_t c = (i / (size_t)HW) % (size_t)C;
		out[i] = (in[i] - mean[c]) * invstd[c] * gamma[c] + beta[c];
	}
}

extern "C" void cuk_bn_apply(float *out, const float *in, const float *gamma,
			     const float *beta, const float *mean,
			     const float *invstd, int B, int C, int HW,
			     cudaStream_t s)
{
	size_t n = (size_t)B * C * HW;
	bn_apply_k<<<cuk_blocks(n), CUK_THREADS, 0, s>>>(out, in, gamma, beta,
							 mean, invstd, n, C, HW);
}

/* ------------------------------------------------------------------ loss */

/* One block: thread t takes rows t, t + blockDim, ...; the per-thread loss
 * and hit counts are summed by a tree in shared memory. */
__global__ void softmax_xent_k(float *probs, double *res, const float *logits,
			       const int32_t *labels, int B, int V)
{
	__shared__ double sl[CUK_THREADS], sc[CUK_THREADS];
	double loss = 0.0, right = 0.0;
	for (int b = threadIdx.x; b < B; b += blockDim.x) {
		const float *z = logits + (size_t)b * V;
		float *p = probs + (size_t)b * V, m = z[0];
		int arg = 0;
		double sum = 0.0;
		for (int v = 1; v < V; v++)
			if (z[v] > m) {
				m = z[v];
				arg = v;
			}
		for (int v = 0; v < V; v++) {
			p[v] = expf(z[v] - m);
			sum += p[v];
		}
		for (int v = 0; v < V; v++)
			p[v] = (float)(p[v] / sum);
		loss += -(z[labels[b]] - m - log(sum));
		right += arg == labels[b] ? 1.0 : 0.0;
	}
	sl[threadIdx.x] = loss;
	sc[threadIdx.x] = right;
	__syncthreads();
	for (int h = blockDim.x / 2; h > 0; h /= 2) {
		if ((int)threadIdx.x < h) {
			sl[threadIdx.x] += sl[threadIdx.x + h];
			sc[threadIdx.x] += sc[threadIdx.x + h];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		res[0] = sl[0];
		res[1] = sc[0];
	}
}

extern "C" void cuk_softmax_xent(float *probs, double *res,
				 const float *logits, const int32_t *labels,
				 int B, int V, cudaStream_t s)
{
	softmax_xent_k<<<1, CUK_THREADS, 0, s>>>(probs, res, logits, labels, B, V);
}

__global__ void softmax_xent_bwd_k(float *dlogits, const float *probs,
				   const int32_t *labels, int B, int V)
{
	float inv = 1.0f / (float)B;
	CUK_FOR(i, (size_t)B * V) {
		int b = (int)(i / (size_t)V), v = (int)(i % (size_t)V);
		dlogits[i] = probs[i] * inv - (v == labels[b] ? inv : 0.0f);
	}
}

extern "C" void cuk_softmax_xent_backward(float *dlogits, const float *probs,
					  const int32_t *labels, int B, int V,
					  cudaStream_t s)
{
	size_t n = (size_t)B * V;
	softmax_xent_bwd_k<<<cuk_blocks(n), CUK_THREADS, 0, s>>>(dlogits, probs,
								 labels, B, V);
}

/* ------------------------------------------------------------- clipping */

__global__ void sumsq_k(const float *g, size_t n, double *partial)
{
	__shared__ double sh[CUK_THREADS];
	double acc = 0.0;
	CUK_FOR(i, n)
		acc += (double)g[i] * g[i];
	sh[threadIdx.x] = acc;
	__syncthreads();
	for (int h = blockDim.x / 2; h > 0; h /= 2) {
		if ((int)threadIdx.x < h)
			sh[threadIdx.x] += sh[threadIdx.x + h];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		partial[blockIdx.x] = sh[0];
}

__global__ void norm_k(const double *partial, double *norm)
{
	__shared__ double sh[CUK_NORM_BLOCKS];
	sh[threadIdx.x] = partial[threadIdx.x];
	__syncthreads();
	for (int h = blockDim.x / 2; h > 0; h /= 2) {
		if ((int)threadIdx.x < h)
			sh[threadIdx.x] += sh[threadIdx.x + h];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		*norm = sqrt(sh[0]);
}

__global__ void clip_scale_k(float *g, size_t n, double max_norm,
			     const double *norm)
{
	double nr = *norm;
	if (!(nr > max_norm))
		return;
	float k = (float)(max_norm / (nr + 1e-6));
	CUK_FOR(i, n)
		g[i] *= k;
}

extern "C" void cuk_clip(float *g, size_t n, double max_norm, double *partial,
			 double *norm, cudaStream_t s)
{
	sumsq_k<<<CUK_NORM_BLOCKS, CUK_THREADS, 0, s>>>(g, n, partial);
	norm_k<<<1, CUK_NORM_BLOCKS, 0, s>>>(partial, norm);
	if (max_norm > 0.0)
		clip_scale_k<<<cuk_blocks(n), CUK_THREADS, 0, s>>>(g, n, max_norm,
								   norm);
}

/* ------------------------------------------------------------ optimisers */

__global__ void sgd_k(float *p, const float *gr, float *v, size_t n, float lr,
		      float mu, int nest, float wd)
{
	CUK_FOR(i, n) {
		float g = gr[i] + wd * p[i];
		v[i] = mu * v[i] + g;
		p[i] -= lr * (nest ? g + mu * v[i] : v[i]);
	}
}

extern "C" void cuk_sgd(float *p, const float *g, float *v, size_t n,
			float lr, float mu, int nesterov, float wd,
			cudaStream_t s)
{
	sgd_k<<<cuk_blocks(n), CUK_THREADS, 0, s>>>(p, g, v, n, lr, mu, nesterov,
						    wd);
}

__global__ void adam_k(float *p, const float *gr, float *m, float *v, size_t n,
		       float lr, float b1, float b2, float eps, float c1,
		       float c2, float wd, int decoupled)
{
	CUK_FOR(i, n) {
		float g = gr[i];
		if (!decoupled)
			g += wd * p[i];
		else
			p[i] -= lr * wd * p[i];
		m[i] = b1 * m[i] + (1.0f - b1) * g;
		v[i] = b2 * v[i] + (1.0f - b2) * g * g;
		p[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
	}
}

extern "C" void cuk_adam(float *p, const float *g, float *m, float *v,
			 size_t n, float lr, float b1, float b2, float eps,
			 float c1, float c2, float wd, int decoupled,
			 cudaStream_t s)
{
	adam_k<<<cuk_blocks(n), CUK_THREADS, 0, s>>>(p, g, m, v, n, lr, b1, b2,
						     eps, c1, c2, wd, decoupled);
}
