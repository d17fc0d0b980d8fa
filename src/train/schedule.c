/*
 * schedule.c - the learning rate as a function of (fractional) epoch:
 * constant, step (x gamma every step_epochs) or cosine (from lr down to
 * min_lr at total_epochs), each optionally preceded by a linear warm-up
 * from 0 to lr over warmup_epochs.  A pure function of the epoch, so a
 * resumed run needs no schedule state.
 */
#include "train/optim.h"

#include <math.h>
#include <string.h>

int pbx_sched_parse(const char *name, enum pbx_sched_kind *out)
{
	if (strcmp(name, "constant") == 0 || strcmp(name, "none") == 0)
		*out = PBX_SCHED_CONSTANT;
	else if (strcmp(name, "step") == 0)
		*out = PBX_SCHED_STEP;
	else if (strcmp(name, "cosine") == 0)
		*out = PBX_SCHED_COSINE;
	else
		return -1;
	return 0;
}

double pbx_schedule_lr(const struct pbx_schedule *s, double epoch)
{
	double lr = s->lr;
	if (s->warmup_epochs > 0.0 && epoch < s->warmup_epochs)
		return lr * (epoch + 1e-3) / (s->warmup_epochs + 1e-3);
	switch (s->kind) {
	case PBX_SCHED_CONSTANT:
		break;
	case PBX_SCHED_STEP:
		if (s->step_epochs > 0.0)
			lr *= pow(s->gamma, floor(epoch / s->step_epochs));
		break;
	case PBX_SCHED_COSINE: {
		double span = s->total_epochs - s->warmup_epochs;
		double t = span > 0.0 ? (epoch - s->warmup_epochs) / span : 1.0;
		if (t > 1.0)
			t = 1.0;
		lr = s->min_lr + 0.5 * (lr - s->min_lr) * (1.0 + cos(M_PI * t));
		break;
	}
	}
	return lr;
}
