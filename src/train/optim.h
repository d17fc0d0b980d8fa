/*
 * optim.h - optimisers (SGD with momentum / Nesterov / weight decay, Adam,
 * AdamW), learning-rate schedules, and global-norm gradient clipping.
 *
 * The optimiser state is one allocation (`state`, nstate floats) so that
 * checkpoints save it as a single block.  Ownership: pbx_optim_init()
 * allocates, pbx_optim_free() releases.
 */
#ifndef PBX_TRAIN_OPTIM_H
#define PBX_TRAIN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

enum pbx_optim_kind { PBX_OPT_SGD, PBX_OPT_ADAM, PBX_OPT_ADAMW };
enum pbx_sched_kind { PBX_SCHED_CONSTANT, PBX_SCHED_STEP, PBX_SCHED_COSINE };

struct pbx_optim {
	enum pbx_optim_kind kind;
	float momentum;          /* SGD */
	int nesterov;            /* SGD */
	float weight_decay;      /* L2 for SGD/Adam, decoupled for AdamW */
	float beta1, beta2, eps; /* Adam */
	int64_t t;               /* steps taken (Adam bias correction) */
	size_t nparams;
	size_t nstate;
	float *state; /* SGD: velocity (n); Adam: m (n) then v (n) */
};

struct pbx_schedule {
	enum pbx_sched_kind kind;
	double lr;            /* base learning rate */
	double warmup_epochs; /* linear warm-up from ~0 to lr */
	double step_epochs;   /* step: multiply by gamma every step_epochs */
	double gamma;
	double total_epochs; /* cosine: decays to min_lr at the end */
	double min_lr;
};

int pbx_optim_parse(const char *name, enum pbx_optim_kind *out);
int pbx_sched_parse(const char *name, enum pbx_sched_kind *out);

void pbx_optim_init(struct pbx_optim *o, size_t nparams);
void pbx_optim_free(struct pbx_optim *o);
/* One update of params (n) from grads (n) with learning rate lr. */
void pbx_optim_step(struct pbx_optim *o, float *params, const float *grads, double lr);
/* Learning rate at fractional epoch `epoch` (0 = start of training). */
double pbx_schedule_lr(const struct pbx_schedule *s, double epoch);
/* Scales grads so their global L2 norm is at most max_norm (if > 0);
 * returns the norm before clipping. */
double pbx_clip_grad_norm(float *grads, size_t n, double max_norm);

#endif
