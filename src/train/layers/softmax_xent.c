/*
 * softmax_xent.c - softmax followed by the cross-entropy loss, fused for
 * numerical stability (log-sum-exp with the row maximum subtracted).
 * The loss is the batch mean, so dlogits carries the 1/B.
 */
#include "train/layers/layers.h"

#include <math.h>

double softmax_xent_forward(float *probs, const float *logits, const int32_t *labels, int B, int V,
			    int64_t *correct)
{
	double loss = 0.0;
	int64_t right = 0;
	for (int b = 0; b < B; b++) {
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
		right += arg == labels[b];
	}
	if (correct)
		*correct += right;
	return loss / B;
}

void softmax_xent_backward(float *dlogits, const float *probs, const int32_t *labels, int B, int V)
{
	float inv = 1.0f / (float)B;
	for (int b = 0; b < B; b++) {
		for (int v = 0; v < V; v++)
			dlogits[(size_t)b * V + v] = probs[(size_t)b * V + v] * inv;
		dlogits[(size_t)b * V + labels[b]] -= inv;
	}
}
