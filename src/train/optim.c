/*
 * optim.c - parameter updates, PyTorch's formulations:
 *   SGD:   g += wd*p;  v = mu*v + g;  p -= lr * (nesterov ? g + mu*v : v)
 *   Adam:  g += wd*p;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
 *          p -= lr * mhat / (sqrt(vhat) + eps)
 *   AdamW: as Adam without the L2 term, plus p -= lr*wd*p (decoupled)
 * Elements are independent, so the loops split across threads freely.
 */
#include "train/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

int pbx_optim_parse(const char *name, enum pbx_optim_kind *out)
{
	if (strcmp(name, "sgd") == 0)
		*out = PBX_OPT_SGD;
	else if (strcmp(name, "adam") == 0)
		*out = PBX_OPT_ADAM;
	else if (strcmp(name, "adamw") == 0)
		*out = PBX_OPT_ADAMW;
	else
		return -1;
	return 0;
}

void pbx_optim_init(struct pbx_optim *o, size_t nparams)
{
	o->nparams = nparams;
	o->nstate = (o->kind == PBX_OPT_SGD ? 1 : 2) * nparams;
	o->state = xcalloc(o->nstate ? o->nstate : 1, sizeof(float));
	o->t = 0;
}

void pbx_optim_free(struct pbx_optim *o)
{
	free(o->state);
	o->state = NULL;
}

void pbx_optim_step(struct pbx_optim *o, float *params, const float *grads, double lr)
{
	long long n = (long long)o->nparams;
	float flr = (float)lr, wd = o->weight_decay;
	o->t++;
	if (o->kind == PBX_OPT_SGD) {
		float mu = o->momentum, *v = o->state;
		int nest = o->nesterov;
#pragma omp parallel for schedule(static)
		for (long long i = 0; i < n; i++) {
			float g = grads[i] + wd * params[i];
			v[i] = mu * v[i] + g;
			params[i] -= flr * (nest ? g + mu * v[i] : v[i]);
		}
		return;
	}
	float b1 = o->beta1, b2 = o->beta2, eps = o->eps;
	float c1 = (float)(1.0 - pow(b1, (double)o->t));
	float c2 = (float)(1.0 - pow(b2, (double)o->t));
	float *m = o->state, *v = o->state + o->nparams;
	int decoupled = o->kind == PBX_OPT_ADAMW;
#pragma omp parallel for schedule(static)
	for (long long i = 0; i < n; i++) {
		float g = grads[i];
		if (!decoupled)
			g += wd * params[i];
		else
			params[i] -= flr * wd * params[i];
		m[i] = b1 * m[i] + (1.0f - b1) * g;
		v[i] = b2 * v[i] + (1.0f - b2) * g * g;
		params[i] -= flr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
	}
}

double pbx_clip_grad_norm(float *grads, size_t n, double max_norm)
{
	double ss = 0.0;
	for (size_t i = 0; i < n; i++)
		ss += (double)grads[i] * grads[i];
	double norm = sqrt(ss);
	if (max_norm > 0.0 && norm > max_norm) {
		float k = (float)(max_norm / (norm + 1e-6));
		for (size_t i = 0; i < n; i++)
			grads[i] *= k;
	}
	return norm;
}
