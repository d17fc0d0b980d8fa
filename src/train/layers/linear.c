/*
 * linear.c - fully connected layer, out = in W^T + b, on OpenBLAS sgemm.
 * The weight layout (OUT, IN) matches PyTorch, so weight shapes read the
 * same in both; every product is a single gemm over the whole batch.
 */
#include "train/layers/layers.h"

void linear_forward(float *out, const float *in, const float *w, const float *b, int B, int IN,
		    int OUT)
{
/* out (B,OUT) = b (broadcast) + in (B,IN) x W^T (IN,OUT) */
#pragma omp parallel for schedule(static)
	for (int i = 0; i < B; i++)
		for (int o = 0; o < OUT; o++)
			out[(size_t)i * OUT + o] = b[o];
	pbx_gemm(0, 1, B, OUT, IN, 1.0f, in, IN, w, IN, 1.0f, out, OUT);
}

void linear_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		     const float *w, int B, int IN, int OUT)
{
/* db (OUT) += sum over the batch of dout (B,OUT) */
#pragma omp parallel for schedule(static)
	for (int o = 0; o < OUT; o++) {
		float s = 0.0f;
		for (int i = 0; i < B; i++)
			s += dout[(size_t)i * OUT + o];
		db[o] += s;
	}
	/* dW (OUT,IN) += dout^T (OUT,B) x in (B,IN) */
	pbx_gemm(1, 0, OUT, IN, B, 1.0f, dout, OUT, in, IN, 1.0f, dw, IN);
	/* din (B,IN) = dout (B,OUT) x W (OUT,IN) */
	if (din)
		pbx_gemm(0, 0, B, IN, OUT, 1.0f, dout, OUT, w, IN, 0.0f, din, IN);
}
