/*
 * test_units.c - small checks of pbx-train's non-layer pieces: optimiser
 * updates against hand-computed values, learning-rate schedules, gradient
 * clipping, YAML config reading (top level and `train:`, layer lists,
 * errors with file:line:key), and checkpoint save/load round trips,
 * including refusal of another model's checkpoint.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tap.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/model.h"
#include "train/optim.h"

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-6 * (1.0 + fabs(b));
}

static void test_optim(void)
{
	struct pbx_optim o = { .kind = PBX_OPT_SGD, .momentum = 0.9f, .weight_decay = 0.1f };
	float p[1] = { 1.0f }, g[1] = { 0.5f };
	pbx_optim_init(&o, 1);
	pbx_optim_step(&o, p, g, 0.1); /* g' = 0.6, v = 0.6, p = 0.94 */
	pbx_optim_step(&o, p, g, 0.1); /* g' = 0.594, v = 1.134, p = 0.8266 */
	CHECKF(near(p[0], 0.8266), "sgd momentum + weight decay (%.6f)", p[0]);
	pbx_optim_free(&o);

	struct pbx_optim n = { .kind = PBX_OPT_SGD, .momentum = 0.9f, .nesterov = 1 };
	p[0] = 1.0f;
	pbx_optim_init(&n, 1);
	pbx_optim_step(&n, p, g, 0.1); /* v = 0.5, step 0.5 + 0.45 = 0.95 */
	CHECKF(near(p[0], 0.905), "sgd nesterov (%.6f)", p[0]);
	pbx_optim_free(&n);

	struct pbx_optim a = { .kind = PBX_OPT_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f };
	p[0] = 1.0f;
	pbx_optim_init(&a, 1);
	pbx_optim_step(&a, p, g, 0.01); /* first Adam step moves by lr */
	CHECKF(near(p[0], 0.99), "adam first step = lr (%.6f)", p[0]);
	pbx_optim_free(&a);

	struct pbx_optim w = { .kind = PBX_OPT_ADAMW,
			       .beta1 = 0.9f,
			       .beta2 = 0.999f,
			       .eps = 1e-8f,
			       .weight_decay = 0.5f };
	p[0] = 1.0f;
	pbx_optim_init(&w, 1);
	pbx_optim_step(&w, p, g, 0.01); /* 1 - 0.005 (decay) - 0.01 */
	CHECKF(near(p[0], 0.985), "adamw decoupled decay (%.6f)", p[0]);
	pbx_optim_free(&w);

	float gr[2] = { 3.0f, 4.0f };
	double norm = pbx_clip_grad_norm(gr, 2, 1.0);
	CHECKF(near(norm, 5.0) && fabs(gr[0] - 0.6f) < 1e-5 && fabs(gr[1] - 0.8f) < 1e-5,
	       "global-norm clipping");
}

static void test_schedule(void)
{
	struct pbx_schedule s = {
		.kind = PBX_SCHED_STEP, .lr = 1.0, .step_epochs = 2, .gamma = 0.5
	};
	CHECKF(near(pbx_schedule_lr(&s, 1.9), 1.0) && near(pbx_schedule_lr(&s, 2.0), 0.5) &&
		       near(pbx_schedule_lr(&s, 4.5), 0.25),
	       "step schedule");
	s.kind = PBX_SCHED_COSINE;
	s.total_epochs = 10;
	s.min_lr = 0.0;
	CHECKF(near(pbx_schedule_lr(&s, 0), 1.0) && near(pbx_schedule_lr(&s, 5), 0.5) &&
		       pbx_schedule_lr(&s, 10) < 1e-9,
	       "cosine schedule");
	s.warmup_epochs = 1;
	CHECKF(pbx_schedule_lr(&s, 0.0) < 0.01 && fabs(pbx_schedule_lr(&s, 0.5) - 0.5) < 0.01,
	       "linear warm-up rises from 0");
	CHECKF(pbx_schedule_lr(&s, 0.99) > 0.98 && pbx_schedule_lr(&s, 1.0) <= 1.0,
	       "warm-up reaches lr");
}

static const char *tmp_yaml(const char *name, const char *text)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/pbx-train-test-%d-%s",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), name);
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static void test_config(void)
{
	struct pbx_train_config c;
	struct pbx_err err = PBX_ERR_INIT;
	const char *p;

	pbx_train_config_defaults(&c);
	p = tmp_yaml("a.yaml",
		     "name: exp1\ncluster: x\ntrain:\n  model: lenet\n  epochs: 3\n"
		     "  lr: 0.2\n  nesterov: yes\n  augment:\n    crop_pad: 4\n    hflip: true\n");
	CHECKF(pbx_train_config_load(&c, p, &err) == 0 && strcmp(c.model, "lenet") == 0 &&
		       c.epochs == 3 && near(c.lr, 0.2) && c.nesterov && c.crop_pad == 4 && c.hflip,
	       "train: section of an experiment file (%s)", err.msg);
	remove(p);
	CHECKF(pbx_train_config_set(&c, "lr=0.5", &err) == 0 && near(c.lr, 0.5) &&
		       pbx_train_config_set(&c, "augment.hflip=false", &err) == 0 && !c.hflip,
	       "--set overrides");
	CHECKF(pbx_train_config_set(&c, "nope=1", &err) < 0 && err.code == 2 &&
		       strstr(err.msg, "unknown key 'nope'"),
	       "--set unknown key: %s", err.msg);
	pbx_train_config_free(&c);

	pbx_train_config_defaults(&c);
	p = tmp_yaml("b.yaml",
		     "model:\n  layers:\n    - {type: conv, filters: 8, kernel: 5, pad: 2}\n"
		     "    - relu\n    - maxpool: {size: 2}\n    - flatten\n    - linear\n");
	CHECKF(pbx_train_config_load(&c, p, &err) == 0 && c.nlayers == 5 && !c.model &&
		       c.layers[0].kind == PBX_L_CONV && c.layers[0].out == 8 &&
		       c.layers[0].k == 5 && c.layers[2].kind == PBX_L_MAXPOOL &&
		       c.layers[2].k == 2 && pbx_train_config_check(&c, &err) == 0,
	       "layer list (%s)", err.msg);
	remove(p);
	pbx_train_config_free(&c);

	pbx_train_config_defaults(&c);
	p = tmp_yaml("c.yaml", "epochs: 3\nbatch_size: many\n");
	CHECKF(pbx_train_config_load(&c, p, &err) < 0 && err.code == 2 &&
		       strstr(err.msg, ":2: key 'batch_size': expected an integer, got 'many'"),
	       "error names file, line and key: %s", err.msg);
	remove(p);
	pbx_train_config_free(&c);
}

static void test_checkpoint(void)
{
	const struct pbx_layer_spec *specs;
	struct pbx_err err = PBX_ERR_INIT;
	int n;
	pbx_model_builtin("lenet", &specs, &n);
	struct pbx_model *m = pbx_model_new(specs, n, 1, 28, 28, 10, 4, 3, &err);
	struct pbx_model *m2 = pbx_model_new(specs, n, 1, 28, 28, 10, 4, 99, &err);
	pbx_model_builtin("mlp", &specs, &n);
	struct pbx_model *other = pbx_model_new(specs, n, 1, 28, 28, 10, 4, 3, &err);
	struct pbx_optim o = { .kind = PBX_OPT_SGD }, o2 = { .kind = PBX_OPT_SGD };
	struct pbx_optim o3 = { .kind = PBX_OPT_SGD };
	struct pbx_ckpt_state st = { .epoch = 2,
				     .step = 123,
				     .loader = { 5, 2, 64 },
				     .epoch_correct = 7 },
			      st2;
	char path[256];
	pbx_optim_init(&o, m->nparams);
	pbx_optim_init(&o2, m2->nparams);
	pbx_optim_init(&o3, other->nparams);
	o.state[3] = 1.5f;
	o.t = 123;
	snprintf(path, sizeof(path), "/tmp/pbx-train-test-%d.pbxt", (int)getpid());
	CHECKF(pbx_checkpoint_save(path, m, &o, &st, &err) == 0, "checkpoint save (%s)", err.msg);
	memset(&st2, 0, sizeof(st2));
	CHECKF(pbx_checkpoint_load(path, m2, &o2, &st2, &err) == 0 &&
		       memcmp(m->params, m2->params, sizeof(float) * m->nparams) == 0 &&
		       o2.state[3] == 1.5f && o2.t == 123 && st2.step == 123 && st2.epoch == 2 &&
		       st2.loader.cursor == 64 && st2.epoch_correct == 7,
	       "checkpoint round trip (%s)", err.msg);
	CHECKF(pbx_checkpoint_load(path, other, &o3, &st2, &err) < 0 &&
		       strstr(err.msg, "different model"),
	       "other model refused: %s", err.msg);
	remove(path);
	pbx_optim_free(&o);
	pbx_optim_free(&o2);
	pbx_optim_free(&o3);
	pbx_model_free(m);
	pbx_model_free(m2);
	pbx_model_free(other);
}

int main(void)
{
	test_optim();
	test_schedule();
	test_config();
	test_checkpoint();
	return tap_done();
}
