/*
 * train.c - the loop, which reads like the recipe:
 *
 *   for each step: loader_next -> forward -> zero_grad -> backward
 *                  -> clip -> optim_step -> log -> maybe checkpoint
 *   at each epoch end: evaluate on the test set, log, maybe checkpoint
 *
 * Determinism: every source of randomness is a pbx_rng seeded from
 * (seed, something that is saved): parameters from (seed, "init"), batch
 * order and augmentation inside the loader from (seed, epoch, example),
 * dropout from (seed, step).  With the same thread count, sgemm and the
 * static OpenMP loops give the same floats, so a run interrupted and
 * resumed ends with bit-identical parameters.
 *
 * Data parallelism (comm.h): batch_size is the GLOBAL batch; each of the
 * world ranks takes batch_size/world examples of every step (the loader's
 * shard), backward hands finished gradient buckets to the comm, and after
 * the average every rank takes the same optimiser step.  Loss, accuracy
 * and the stop flag are summed over ranks each step; evaluation is
 * sharded too.  Rank 0 alone writes metrics, TensorBoard files, the
 * summary and checkpoints, and reads the checkpoint it resumes from (then
 * broadcasts it), so the other ranks need no shared file system.  Without
 * sync_bn the BN running statistics are rank 0's: they are broadcast before
 * every evaluation and checkpoint.  Dropout draws from (seed, step*world +
 * rank).
 */
#include "train/train.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define TRAIN_HAVE_MXCSR 1
#endif

#include "runtime/dataset.h"
#include "runtime/loader.h"
#include "runtime/metrics.h"
#include "runtime/tfrecord.h"
#include "train/checkpoint.h"
#include "train/comm.h"
#include "train/device.h"
#include "train/layers/layers.h"
#include "train/model.h"
#include "train/optim.h"
#include "util/fs.h"
#include "util/xalloc.h"

static volatile sig_atomic_t train_stop_signal;

static void train_on_signal(int sig)
{
	train_stop_signal = sig;
}

void pbx_train_install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = train_on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
}

/* Flush denormals to zero (FTZ) and read them as zero (DAZ).  Gradients
 * that shrink towards 0 late in training otherwise hit the x86 slow path
 * for subnormal floats (about 100x per operation).  The mode is per
 * thread: set it in this thread, whose settings new threads inherit, and in
 * every OpenMP worker.  Deterministic (it is an exact rule). */
static void train_flush_denormals(void)
{
#ifdef TRAIN_HAVE_MXCSR
	_mm_setcsr(_mm_getcsr() | 0x8040);
#pragma omp parallel
	_mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}

static double train_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Everything a run owns, released in one place. */
struct train_run {
	const struct pbx_train_config *cfg;
	struct pbx_dataset train, test;
	struct pbx_model *model;
	const struct pbx_backend *be; /* cpu or cuda (cfg->device) */
	struct pbx_optim optim;
	struct pbx_schedule sched;
	struct pbx_loader *loader, *test_loader;
	struct pbx_metrics *metrics;       /* rank 0 only */
	struct pbx_comm *comm;             /* borrowed */
	const struct pbx_train_hook *hook; /* borrowed; NULL = the usual step */
	int data_rank, data_world;         /* this process's share of the training set */
	int local_batch;                   /* batch_size / world */
	float *x;                          /* (local_batch, C, H, W) */
	int32_t *y;                        /* (local_batch) */
	char *ckpt_path;
	int threads;
	double flops; /* forward FLOPs per example */
};

static void train_release(struct train_run *r)
{
	pbx_loader_free(r->loader);
	pbx_loader_free(r->test_loader);
	pbx_metrics_close(r->metrics);
	pbx_model_free(r->model);
	pbx_optim_free(&r->optim);
	pbx_dataset_free(&r->train);
	pbx_dataset_free(&r->test);
	free(r->x);
	free(r->y);
	free(r->ckpt_path);
}

/* ------------------------------------------------------------- set-up */

/* The training shards: this process's share (file level, then record
 * level: runtime/tfrecord.h), decoded by loader_threads threads; the test
 * shards whole (evaluation shards them like any data set).  Data-parallel
 * ranks then agree on the step count (the smallest share, in full batches)
 * and the number of classes (the largest label seen anywhere). */
static int train_load_tfrecord(struct train_run *r, struct pbx_err *err)
{
	const struct pbx_train_config *c = r->cfg;
	int nt = c->loader_threads > 0 ? c->loader_threads : 1;
	if (pbx_dataset_load_tfrecord(c->train_files, r->data_rank, r->data_world, nt, &r->train,
				      err) < 0 ||
	    pbx_dataset_load_tfrecord(c->test_files, 0, 1, nt, &r->test, err) < 0)
		return -1;
	if (r->test.h != r->train.h || r->test.w != r->train.w || r->test.c != r->train.c)
		return pbx_err_set(err,
				   "%s holds %dx%d images with %d channel(s), %s %dx%d with %d",
				   c->train_files, r->train.h, r->train.w, r->train.c,
				   c->test_files, r->test.h, r->test.w, r->test.c);
	if (r->test.nclasses > r->train.nclasses)
		r->train.nclasses = r->test.nclasses;
	r->test.nclasses = r->train.nclasses;
	int world = r->comm->world;
	if (world > 1 && !r->hook) {
		double *v = xcalloc(2 * (size_t)world, sizeof(double));
		int minn = r->train.n, maxk = r->train.nclasses;
		v[r->comm->rank] = r->train.n;
		v[world + r->comm->rank] = r->train.nclasses;
		int rc = pbx_comm_sum(r->comm, v, 2 * world, err);
		for (int i = 0; i < world && rc == 0; i++) {
			minn = (int)v[i] < minn ? (int)v[i] : minn;
			maxk = (int)v[world + i] > maxk ? (int)v[world + i] : maxk;
		}
		free(v);
		if (rc < 0)
			return -1;
		pbx_dataset_subset(&r->train, minn);
		r->train.nclasses = r->test.nclasses = maxk;
	}
	/* the loader sees the local share as a whole data set */
	r->data_rank = 0;
	r->data_world = 1;
	return 0;
}

static int train_load_data(struct train_run *r, struct pbx_err *err)
{
	const struct pbx_train_config *c = r->cfg;
	enum pbx_corruption kind;
	if (pbx_corruption_parse(c->corruption ? c->corruption : "none", &kind) < 0)
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"key 'corruption': unknown corruption '%s' (none, labels, random_labels, shuffled_pixels, random_pixels, gaussian)",
			c->corruption);
	if (strcmp(c->dataset, "synthetic") == 0) {
		int nt = c->test_subset > 0 ? c->test_subset : 256;
		pbx_dataset_synthetic_at(&r->train, 0, c->synthetic_n, 1, 28, 28, 10, c->seed);
		pbx_dataset_synthetic_at(&r->test, c->synthetic_n, nt, 1, 28, 28, 10, c->seed);
	} else if (strcmp(c->dataset, "tfrecord") == 0) {
		if (train_load_tfrecord(r, err) < 0)
			return -1;
	} else {
		if (pbx_dataset_load_named(c->dataset, c->data_dir, 1, &r->train, err) < 0 ||
		    pbx_dataset_load_named(c->dataset, c->data_dir, 0, &r->test, err) < 0)
			return -1;
	}
	if (c->subset > 0)
		pbx_dataset_subset(&r->train, c->subset);
	if (c->test_subset > 0)
		pbx_dataset_subset(&r->test, c->test_subset);
	if (r->train.n < 1 || r->test.n < 1)
		return pbx_err_set(err, "data set %s is empty", c->dataset);
	if (kind != PBX_CORRUPT_NONE)
		pbx_dataset_corrupt(&r->train, kind, (float)c->corruption_prob, c->seed);
	/* standardise both sets with the training set's statistics */
	float *mean = xcalloc((size_t)r->train.c, sizeof(float));
	float *sd = xcalloc((size_t)r->train.c, sizeof(float));
	pbx_dataset_channel_stats(&r->train, mean, sd);
	pbx_dataset_normalize(&r->train, mean, sd);
	pbx_dataset_normalize(&r->test, mean, sd);
	free(mean);
	free(sd);
	return 0;
}

static int train_setup(struct train_run *r, struct pbx_err *err)
{
	const struct pbx_train_config *c = r->cfg;
	const struct pbx_layer_spec *specs = c->layers;
	int nspecs = c->nlayers;
	struct pbx_augment aug = { c->crop_pad, c->hflip };

	/* ranks on one node share its CPUs */
	r->threads = c->threads > 0 ? c->threads
				    : (int)sysconf(_SC_NPROCESSORS_ONLN) / r->comm->local_world;
	if (r->threads < 1)
		r->threads = 1;
	if (c->batch_size % r->comm->world != 0)
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"key 'batch_size': the global batch %d does not split evenly over %d ranks",
			c->batch_size, r->comm->world);
	r->local_batch = c->batch_size / r->comm->world;
	r->data_rank = r->hook ? r->hook->data_rank : r->comm->rank;
	r->data_world = r->hook ? r->hook->data_world : r->comm->world;
	pbx_gemm_init(); /* one thread pool: OpenMP's (see layers/gemm.c) */
	omp_set_num_threads(r->threads);
	train_flush_denormals();

	if (train_load_data(r, err) < 0)
		return -1;
	if (r->hook && c->device && strcmp(c->device, "auto") == 0) {
		/* Downpour hands host parameters to the servers: the CPU (config.c
		 * refuses device cuda with it). */
		struct pbx_train_config on_cpu = *c;
		on_cpu.device = (char *)"cpu";
		if (pbx_device_open(&on_cpu, r->comm, &r->be, err) < 0)
			return -1;
	} else if (pbx_device_open(c, r->comm, &r->be, err) < 0) {
		return -1;
	}
	if (!specs)
		pbx_model_builtin(c->model, &specs, &nspecs);
	struct pbx_model_opts mo = { .max_batch = r->local_batch,
				     .recompute = c->recompute,
				     .sync_bn = c->sync_bn && r->comm->world > 1 };
	r->model = pbx_model_plan(specs, nspecs, r->train.c, r->train.h, r->train.w,
				  r->train.nclasses, &mo, err);
	if (!r->model)
		return pbx_err_prefix(err, "model %s", c->model ? c->model : "(layers)");
	if (pbx_device_check(r->be, r->model, err) < 0)
		return -1;
	pbx_model_alloc(r->model, r->be);
	pbx_model_init_params(r->model, c->seed);
	if (r->comm->world > 1) {
		r->model->hooks.ctx = r->comm;
		r->model->hooks.grads_ready = pbx_comm_hook_grads_ready;
		r->model->hooks.reduce_sum = pbx_comm_hook_sum;
	}
	r->flops = pbx_model_flops(r->model);

	pbx_optim_parse(c->optimizer, &r->optim.kind);
	r->optim.momentum = (float)c->momentum;
	r->optim.nesterov = c->nesterov;
	r->optim.weight_decay = (float)c->weight_decay;
	r->optim.beta1 = (float)c->beta1;
	r->optim.beta2 = (float)c->beta2;
	r->optim.eps = (float)c->adam_eps;
	pbx_optim_init(&r->optim, r->model->nparams);
	pbx_sched_parse(c->schedule, &r->sched.kind);
	r->sched.lr = c->lr;
	r->sched.warmup_epochs = c->warmup_epochs;
	r->sched.step_epochs = c->step_epochs;
	r->sched.gamma = c->gamma;
	r->sched.total_epochs = c->epochs;
	r->sched.min_lr = c->min_lr;

	r->loader = pbx_loader_new(&r->train, r->local_batch, 1, &aug, c->seed, r->data_rank,
				   r->data_world, c->loader_threads, 1);
	r->test_loader =
		pbx_loader_new(&r->test, r->local_batch, 0, NULL, c->seed,
			       r->hook ? 0 : r->comm->rank, r->hook ? 1 : r->comm->world, 0, 0);
	if (!r->loader || !r->test_loader)
		return pbx_err_set(err,
				   "cannot create the data loader (batch %d, %d training examples)",
				   c->batch_size, r->train.n);
	if (pbx_loader_batches_per_epoch(r->loader) < 1)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "key 'batch_size': %d is larger than the %d training examples",
				    c->batch_size, r->train.n);
	r->x = xmalloc(sizeof(float) * (size_t)r->local_batch * r->train.c * r->train.h *
		       r->train.w);
	r->y = xmalloc(sizeof(int32_t) * (size_t)r->local_batch);
	const char *dir = c->checkpoint_dir ? c->checkpoint_dir : c->output_dir;
	r->ckpt_path = xasprintf("%s/checkpoint.pbxt", dir);
	if (r->comm->rank != 0)
		return 0;
	if (pbx_mkdir_p(c->output_dir, 0755, err) < 0 || pbx_mkdir_p(dir, 0755, err) < 0)
		return -1;
	return 0;
}

/* --------------------------------------------------------------- steps */

/* Every rank gets rank 0's BN running statistics. */
static int train_sync_buffers(struct train_run *r, struct pbx_err *err)
{
	if (r->comm->world == 1 || r->model->nbuffers == 0)
		return 0;
	pbx_device_pull(r->model, NULL);
	if (pbx_comm_bcast(r->comm, r->model->buffers, sizeof(float) * r->model->nbuffers, err) < 0)
		return -1;
	pbx_device_push(r->model, NULL);
	return 0;
}

/* Test-set loss and accuracy (BN running stats, no dropout), each rank on
 * its shard, summed. */
static int train_evaluate(struct train_run *r, double *loss, double *acc, struct pbx_err *err)
{
	double lsum = 0.0;
	int64_t correct = 0, seen = 0;
	int n;
	if (train_sync_buffers(r, err) < 0)
		return -1;
	if (r->hook && r->hook->sync(r->hook->ctx, r->model->params, r->model->nparams, err) < 0)
		return -1;
	while ((n = pbx_loader_next(r->test_loader, r->x, r->y)) > 0) {
		lsum += n * pbx_model_forward(r->model, r->x, r->y, n, 0, &correct);
		seen += n;
	}
	if (r->comm->world > 1) {
		double v[3] = { lsum, (double)correct, (double)seen };
		if (pbx_comm_sum(r->comm, v, 3, err) < 0)
			return -1;
		lsum = v[0];
		correct = (int64_t)v[1];
		seen = (int64_t)v[2];
	}
	*loss = seen ? lsum / (double)seen : 0.0;
	*acc = seen ? (double)correct / (double)seen : 0.0;
	return 0;
}

/* Rank 0 writes the checkpoint; every rank first checks that its
 * parameters are rank 0's (they must be: same averaged gradients). */
static int train_save(struct train_run *r, const struct pbx_ckpt_state *st, struct pbx_err *err)
{
	struct pbx_ckpt_state s = *st;
	if (train_sync_buffers(r, err) < 0)
		return -1;
	pbx_device_pull(r->model, &r->optim); /* a device model's host mirrors */
	if (r->comm->world > 1) {
		char mine[65], root[65];
		pbx_sha256_hex(r->model->params, sizeof(float) * r->model->nparams, mine);
		memcpy(root, mine, sizeof(root));
		if (pbx_comm_bcast(r->comm, root, sizeof(root), err) < 0)
			return -1;
		if (memcmp(mine, root, sizeof(root)) != 0)
			return pbx_err_set(
				err,
				"rank %d: parameters differ from rank 0's at step %lld (ranks diverged)",
				r->comm->rank, (long long)st->step);
	}
	if (r->comm->rank != 0)
		return 0;
	pbx_loader_get_state(r->loader, &s.loader);
	s.rng = r->model->rng;
	s.world = r->comm->world;
	return pbx_checkpoint_save(r->ckpt_path, r->model, &r->optim, &s, err);
}

/* Resumes from `path` (rank 0 reads it, every rank gets its contents).
 * have: whether there is a checkpoint to resume from, rank 0's view. */
static int train_resume(struct train_run *r, const char *path, struct pbx_ckpt_state *st,
			struct pbx_err *err)
{
	struct pbx_comm *c = r->comm;
	struct pbx_model *m = r->model;
	int rc = 0;
	if (c->rank == 0)
		rc = pbx_checkpoint_load(path, m, &r->optim, st, err);
	if (c->world > 1) {
		struct pbx_err e2 = PBX_ERR_INIT;
		if (pbx_comm_bcast(c, &rc, sizeof(rc), &e2) < 0) {
			*err = e2;
			return -1;
		}
		if (rc < 0)
			return c->rank == 0
				       ? -1
				       : pbx_err_set(err,
						     "rank %d: rank 0 could not resume from %s",
						     c->rank, path);
		if (pbx_comm_bcast(c, m->params, sizeof(float) * m->nparams, err) < 0 ||
		    pbx_comm_bcast(c, m->buffers, sizeof(float) * m->nbuffers, err) < 0 ||
		    pbx_comm_bcast(c, r->optim.state, sizeof(float) * r->optim.nstate, err) < 0 ||
		    pbx_comm_bcast(c, &r->optim.t, sizeof(r->optim.t), err) < 0 ||
		    pbx_comm_bcast(c, st, sizeof(*st), err) < 0)
			return -1;
	} else if (rc < 0) {
		return -1;
	}
	pbx_device_push(m, &r->optim);
	if (pbx_loader_set_state(r->loader, &st->loader) < 0)
		return pbx_err_set(err, "%s: loader position does not fit this data set", path);
	m->rng = st->rng;
	if (c->rank == 0 && st->world != c->world)
		fprintf(stderr,
			"pbx-train: %s was written by %d rank(s), resuming on %d: same global batch and data order, but per-rank BN statistics and dropout streams differ, so the run is not bit-identical to an uninterrupted one\n",
			path, st->world, c->world);
	return 0;
}

static long train_peak_rss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* JSON cannot hold NaN: a missing figure is null. */
static json_t *train_jnum(double d)
{
	return isfinite(d) ? json_real(d) : json_null();
}

static int train_summary(struct train_run *r, const struct pbx_ckpt_state *st, const char *status,
			 double train_loss, double train_acc, double test_loss, double test_acc,
			 double best_acc, double ips, struct pbx_err *err)
{
	char hash[65];
	pbx_device_pull(r->model, NULL);
	pbx_sha256_hex(r->model->params, sizeof(float) * r->model->nparams, hash);
	json_t *o = json_object();
	char ah[17];
	json_object_set_new(o, "status", json_string(status));
	json_object_set_new(o, "model", json_string(r->cfg->model ? r->cfg->model : "(layers)"));
	json_object_set_new(o, "dataset", json_string(r->cfg->dataset));
	json_object_set_new(o, "epochs", json_integer(st->epoch));
	json_object_set_new(o, "steps", json_integer(st->step));
	json_object_set_new(o, "nparams", json_integer((json_int_t)r->model->nparams));
	json_object_set_new(o, "train_loss", train_jnum(train_loss));
	json_object_set_new(o, "train_acc", train_jnum(train_acc));
	json_object_set_new(o, "test_loss", train_jnum(test_loss));
	json_object_set_new(o, "test_acc", train_jnum(test_acc));
	json_object_set_new(o, "best_test_acc", train_jnum(best_acc));
	json_object_set_new(o, "train_seconds", train_jnum(st->elapsed_s));
	json_object_set_new(o, "images_per_s", train_jnum(ips));
	json_object_set_new(o, "gflops", train_jnum(ips * 3.0 * r->flops * 1e-9));
	/* training ~ 3x the forward FLOPs (forward, input grads, weight grads) */
	json_object_set_new(o, "train_flops_per_example", json_real(3.0 * r->flops));
	json_object_set_new(o, "params_sha256", json_string(hash));
	json_object_set_new(o, "peak_rss_kb", json_integer(train_peak_rss_kb()));
	json_object_set_new(o, "threads", json_integer(r->threads));
	json_object_set_new(o, "world", json_integer(r->comm->world));
	json_object_set_new(o, "comm", json_string(r->comm->ops->name));
	json_object_set_new(o, "device", json_string(r->model->be->name));
	/* per step: not overlapped gradient communication, and the rest */
	double steps = r->comm->stats.steps ? (double)r->comm->stats.steps : 1.0;
	json_object_set_new(o, "comm_exposed_ms_per_step",
			    json_real(1e3 * r->comm->stats.exposed_s / steps));
	json_object_set_new(o, "comm_other_ms_per_step",
			    json_real(1e3 * r->comm->stats.other_s / steps));
	json_object_set_new(o, "step_ms",
			    train_jnum(st->step ? 1e3 * st->elapsed_s / (double)st->step : NAN));
	json_object_set_new(o, "buckets_started_in_backward",
			    json_integer(r->comm->stats.started_early));
	json_object_set_new(o, "buckets", json_integer(r->comm->stats.buckets));
	json_object_set_new(o, "recompute_segments",
			    json_integer(r->model->nsegs > 1 ? r->model->nsegs : 0));
	json_object_set_new(o, "activation_floats",
			    json_integer((json_int_t)(r->model->nacts + r->model->ndacts)));
	json_object_set_new(o, "train_examples", json_integer(r->train.n));
	snprintf(ah, sizeof(ah), "%016llx", (unsigned long long)r->model->arch_hash);
	json_object_set_new(o, "arch_hash", json_string(ah));
	char *cj = pbx_train_config_json(r->cfg);
	json_object_set_new(o, "config", json_loads(cj, 0, NULL));
	free(cj);
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
	json_decref(o);
	int rc = pbx_metrics_summary(r->metrics, text);
	free(text);
	if (rc < 0)
		return pbx_err_set(err, "%s", pbx_metrics_error(r->metrics));
	return 0;
}

static int train_log(struct train_run *r, int64_t step, int n, const char *const *names,
		     const double *values, struct pbx_err *err)
{
	if (r->comm->rank != 0)
		return 0;
	if (pbx_metrics_log(r->metrics, step, n, names, values) < 0)
		return pbx_err_set(err, "%s", pbx_metrics_error(r->metrics));
	return 0;
}

int pbx_train_run(const struct pbx_train_config *cfg, struct pbx_comm *comm, struct pbx_err *err)
{
	return pbx_train_run_hooked(cfg, comm, NULL, err);
}

int pbx_train_run_hooked(const struct pbx_train_config *cfg, struct pbx_comm *comm,
			 const struct pbx_train_hook *hook, struct pbx_err *err)
{
	struct train_run r;
	struct pbx_ckpt_state st;
	int rc = -1, resumed = 0;
	double train_loss = NAN, train_acc = NAN, test_loss = NAN, test_acc = NAN;
	double best_acc = 0.0, t_run = train_now(), ips = 0.0;
	const char *status = "completed";

	memset(&r, 0, sizeof(r));
	memset(&st, 0, sizeof(st));
	r.cfg = cfg;
	r.comm = comm;
	r.hook = hook;
	int root = comm->rank == 0;
	if (train_setup(&r, err) < 0)
		goto out;
	pbx_loader_get_state(r.loader, &st.loader);

	/* resume: "auto" continues from the latest checkpoint if there is one */
	if (cfg->resume) {
		int is_auto = strcmp(cfg->resume, "auto") == 0 ||
			      strcmp(cfg->resume, "true") == 0 ||
			      strcmp(cfg->resume, "latest") == 0;
		const char *path = is_auto ? r.ckpt_path : cfg->resume;
		int have = !(is_auto && access(path, F_OK) != 0); /* rank 0's view */
		if (comm->world > 1 && pbx_comm_bcast(comm, &have, sizeof(have), err) < 0)
			goto out;
		if (have) {
			if (train_resume(&r, path, &st, err) < 0)
				goto out;
			if (root && pbx_metrics_truncate_after(cfg->output_dir, st.step, err) < 0)
				goto out;
			resumed = 1;
			if (root)
				fprintf(stderr,
					"pbx-train: resumed from %s at epoch %lld step %lld\n",
					path, (long long)st.epoch, (long long)st.step);
		}
	}
	if (root) {
		r.metrics = pbx_metrics_open(cfg->output_dir, resumed, err);
		if (!r.metrics)
			goto out;
	}

	int64_t per_epoch = pbx_loader_batches_per_epoch(r.loader);
	double t_log = train_now(), t_epoch = t_log, t_step;
	int64_t log_images = 0, epoch_images = 0;
	if (root)
		fprintf(stderr,
			"pbx-train: %s on %s (%d train, %d test), %zu parameters, %.1f MFLOP/example, %d threads x %d rank(s)\n",
			cfg->model ? cfg->model : "(layers)", cfg->dataset, r.train.n, r.test.n,
			r.model->nparams, r.flops * 1e-6, r.threads, comm->world);
	double exposed0 = comm->stats.exposed_s;

	while (st.epoch < cfg->epochs) {
		t_step = train_now(); /* images/s include waiting for data */
		int n = pbx_loader_next(r.loader, r.x, r.y);
		if (n == 0) {
			/* ---- end of epoch: evaluate, log, maybe checkpoint */
			double now = train_now();
			st.epoch++;
			train_loss =
				st.epoch_loss_sum / (double)(st.epoch_seen ? st.epoch_seen : 1);
			train_acc = (double)st.epoch_correct /
				    (double)(st.epoch_seen ? st.epoch_seen : 1);
			int evaluated = cfg->eval_every > 0 && (st.epoch % cfg->eval_every == 0 ||
								st.epoch == cfg->epochs);
			if (evaluated) {
				if (train_evaluate(&r, &test_loss, &test_acc, err) < 0)
					goto out;
				if (test_acc > best_acc)
					best_acc = test_acc;
			}
			double ep_s = now - t_epoch;
			ips = epoch_images / (ep_s > 0 ? ep_s : 1e-9);
			/* test metrics only at the steps where they were measured */
			const char *names[] = { "epoch",
						"train_loss",
						"train_acc",
						"epoch_seconds",
						"epoch_images_per_s",
						"elapsed_seconds",
						"test_loss",
						"test_acc" };
			double vals[] = { (double)st.epoch, train_loss, train_acc, ep_s, ips,
					  st.elapsed_s,     test_loss,  test_acc };
			if (train_log(&r, st.step, evaluated ? 8 : 6, names, vals, err) < 0)
				goto out;
			if (root && evaluated)
				fprintf(stderr,
					"epoch %lld: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s, %.0f images/s\n",
					(long long)st.epoch, train_loss, train_acc, test_loss,
					test_acc, ep_s, ips);
			else if (root)
				fprintf(stderr,
					"epoch %lld: train loss %.4f acc %.4f | not evaluated | %.1f s, %.0f images/s\n",
					(long long)st.epoch, train_loss, train_acc, ep_s, ips);
			st.epoch_loss_sum = 0.0;
			st.epoch_correct = st.epoch_seen = 0;
			epoch_images = 0;
			t_epoch = t_log = train_now();
			log_images = 0;
			continue;
		}

		/* ---- one optimisation step */
		double epoch_pos =
			(double)st.epoch + (double)(st.step % per_epoch) / (double)per_epoch;
		double lr = pbx_schedule_lr(&r.sched, epoch_pos);
		pbx_rng_seed(&r.model->rng, cfg->seed ^ 0x64726f70ULL /* "drop" */,
			     (uint64_t)st.step * (uint64_t)comm->world + (uint64_t)comm->rank);
		comm->step = st.step + 1;
		int64_t correct = 0;
		double loss = pbx_model_forward(r.model, r.x, r.y, n, 1, &correct);
		pbx_model_zero_grad(r.model);
		pbx_comm_grads_begin(comm, pbx_device_grads(r.model), r.model->nparams);
		pbx_model_backward(r.model);
		if (pbx_comm_grads_finish(comm, err) < 0)
			goto out;
		int stop = train_stop_signal != 0;
		if (comm->world > 1) { /* the whole batch's figures; anyone's stop */
			double v[4] = { loss * n, (double)correct, (double)n, stop };
			if (pbx_comm_sum(comm, v, 4, err) < 0)
				goto out;
			loss = v[0] / v[2];
			correct = (int64_t)v[1];
			n = (int)v[2];
			stop = v[3] > 0.0;
		}
		double gnorm = pbx_device_clip(r.model, cfg->clip_norm);
		if (hook) { /* Downpour: host parameters (CPU only, see config.c) */
			if (hook->step(hook->ctx, r.model->params, r.model->grads, r.model->nparams,
				       lr, err) < 0)
				goto out;
		} else {
			pbx_device_step(r.model, &r.optim, lr);
		}
		st.step++;
		st.epoch_loss_sum += loss * n;
		st.epoch_correct += correct;
		st.epoch_seen += n;
		log_images += n;
		epoch_images += n;
		double now = train_now();
		st.elapsed_s += now - t_step;

		if (st.step % cfg->log_every == 0) {
			double dt = now - t_log;
			const char *names[] = { "loss",         "acc",     "lr",    "grad_norm",
						"images_per_s", "step_ms", "epoch", "comm_ms" };
			double vals[] = { loss,
					  (double)correct / n,
					  lr,
					  gnorm,
					  log_images / (dt > 0 ? dt : 1e-9),
					  1e3 * dt / cfg->log_every,
					  epoch_pos,
					  1e3 * (comm->stats.exposed_s - exposed0) /
						  cfg->log_every };
			exposed0 = comm->stats.exposed_s;
			if (train_log(&r, st.step, comm->world > 1 ? 8 : 7, names, vals, err) < 0)
				goto out;
			t_log = now;
			log_images = 0;
		}
		if (!isfinite(loss)) {
			pbx_err_set(
				err,
				"loss is %g at step %lld; lower the learning rate or set clip_norm",
				loss, (long long)st.step);
			goto out;
		}
		if (cfg->signal_at_step > 0 && st.step == cfg->signal_at_step)
			raise(SIGTERM); /* testing: the real handler path */
		if (cfg->checkpoint_every > 0 && st.step % cfg->checkpoint_every == 0 &&
		    train_save(&r, &st, err) < 0)
			goto out;
		if (stop || (cfg->max_steps > 0 && st.step >= cfg->max_steps)) {
			int sig = train_stop_signal;
			if (train_save(&r, &st, err) < 0)
				goto out;
			if (root)
				fprintf(stderr,
					"pbx-train: %s at step %lld: checkpoint written to %s\n",
					stop ? (sig == SIGUSR1 ? "SIGUSR1"
						: sig          ? "SIGTERM"
							       : "a signal on another rank")
					     : "max_steps",
					(long long)st.step, r.ckpt_path);
			status = stop ? "interrupted" : "stopped";
			break;
		}
	}
	if (!strcmp(status, "completed") && train_save(&r, &st, err) < 0)
		goto out;
	if (st.elapsed_s > 0 && strcmp(status, "completed") == 0)
		ips = (double)st.step * cfg->batch_size / st.elapsed_s;
	if (root && train_summary(&r, &st, status, train_loss, train_acc, test_loss, test_acc,
				  best_acc, ips, err) < 0)
		goto out;
	if (root)
		fprintf(stderr, "pbx-train: %s after %lld steps (%.1f s wall)\n", status,
			(long long)st.step, train_now() - t_run);
	rc = strcmp(status, "interrupted") == 0 ? PBX_TRAIN_EXIT_REQUEUE : 0;
out:
	train_release(&r);
	return rc;
}
