/*
 * loader.c - sharded, shuffled, augmented, prefetching batches (see
 * loader.h for the contract: order, sharding, determinism, threads).
 *
 * Legend: N = examples, B = batch, D = C*H*W floats per example,
 * G = world*B positions per global step, S = steps of this rank.
 *
 * Threading.  One mutex guards the ring and the counters.  Step s (counted
 * from the epoch's starting cursor) always goes to slot s % nslots.  A
 * worker claims the next step once its slot has been consumed, marks it
 * FILLING, fills it without the lock, then marks it READY.  The consumer
 * waits for its step's slot to be READY, copies it out, marks it EMPTY.
 * Starting an epoch (or set_state) first sets `pausing` and waits until no
 * slot is FILLING: only then are the permutation and counters replaced, so
 * a worker never reads them while they change.
 */
#include "runtime/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng.h"
#include "util/xalloc.h"

#define LOADER_MAX_THREADS 64
#define SHUFFLE_STREAM     (1ULL << 63) /* | epoch; augmentation uses e<<32 | i */

enum slot_state { SLOT_EMPTY, SLOT_FILLING, SLOT_READY };

struct loader_slot {
	float *x;     /* (B, D) */
	int32_t *y;   /* (B,) */
	int n;        /* examples in it */
	int64_t step; /* the step it holds */
	enum slot_state state;
};

/* What a worker needs to fill one batch, copied under the lock. */
struct loader_job {
	uint64_t seed;
	int64_t epoch;
	const int32_t *perm;
	int64_t lo, hi; /* positions [lo, hi) of the epoch's order */
};

struct pbx_loader {
	/* fixed at creation */
	const struct pbx_dataset *ds;
	int batch, shuffle, rank, world, drop_last, nthreads;
	struct pbx_augment aug;
	size_t d; /* floats per example */

	/* the epoch being served (replaced only by epoch_begin) */
	uint64_t seed;
	int64_t epoch;
	int64_t cursor0;  /* position where this run of the epoch started */
	int64_t steps;    /* S: this rank's batches from cursor0 to the end */
	int32_t *perm;    /* (N,) example index at each position */
	int64_t consumed; /* batches handed out since cursor0 */

	/* prefetching (nthreads > 0) */
	pthread_t *threads;
	int nstarted;
	struct loader_slot *ring;
	int nslots;
	int64_t next_job; /* next step to claim */
	int nfilling, pausing, stopping;
	pthread_mutex_t mu;
	pthread_cond_t work_cv; /* workers wait: a step can be claimed, or stop */
	pthread_cond_t done_cv; /* consumer waits: a slot became READY */
};

/* ---------------------------------------------------------------------- */
/* the order: permutation, steps and shards */

/* perm: (N,), identity or shuffled by (seed, epoch). */
static void make_perm(struct pbx_loader *l)
{
	int n = l->ds->n;
	struct pbx_rng r;
	for (int i = 0; i < n; i++)
		l->perm[i] = i;
	if (!l->shuffle)
		return;
	pbx_rng_seed(&r, l->seed, SHUFFLE_STREAM | (uint64_t)l->epoch);
	for (int i = n; i > 1; i--) {
		int k = (int)pbx_rng_below(&r, (uint32_t)i);
		int32_t t = l->perm[i - 1];
		l->perm[i - 1] = l->perm[k];
		l->perm[k] = t;
	}
}

/* This rank's slice of the tail of `rem` (< G) positions: [lo, hi) offsets. */
static void tail_share(const struct pbx_loader *l, int64_t rem, int64_t *lo, int64_t *hi)
{
	*lo = rem * l->rank / l->world;
	*hi = rem * (l->rank + 1) / l->world;
}

/* S: this rank's batches when the epoch starts at position cursor0. */
static int64_t count_steps(const struct pbx_loader *l, int64_t cursor0)
{
	int64_t g = (int64_t)l->batch * l->world, avail = l->ds->n - cursor0;
	int64_t full = avail / g, rem = avail % g, lo, hi;
	if (l->drop_last || rem == 0)
		return full;
	tail_share(l, rem, &lo, &hi);
	return full + (hi > lo);
}

/* Positions [*lo, *hi) of step s, for this rank. */
static void step_range(const struct pbx_loader *l, int64_t s, int64_t *lo, int64_t *hi)
{
	int64_t g = (int64_t)l->batch * l->world, start = l->cursor0 + s * g;
	int64_t rem = l->ds->n - start;
	if (rem >= g) {
		*lo = start + (int64_t)l->rank * l->batch;
		*hi = *lo + l->batch;
		return;
	}
	tail_share(l, rem, lo, hi);
	*lo += start;
	*hi += start;
}

/* ---------------------------------------------------------------------- */
/* filling a batch */

/* out: (C, H, W) <- src: (C, H, W), randomly cropped (zero padding) and
 * flipped with example idx's stream for this epoch. */
static void augment_example(const struct pbx_loader *l, uint64_t seed, int64_t epoch, int32_t idx,
			    const float *src, float *out)
{
	const struct pbx_dataset *ds = l->ds;
	int pad = l->aug.crop_pad, dy = 0, dx = 0, flip = 0;
	struct pbx_rng r;
	pbx_rng_seed(&r, seed, (uint64_t)epoch << 32 | (uint32_t)idx);
	if (pad > 0) {
		dy = (int)pbx_rng_below(&r, (uint32_t)(2 * pad + 1)) - pad;
		dx = (int)pbx_rng_below(&r, (uint32_t)(2 * pad + 1)) - pad;
	}
	if (l->aug.hflip)
		flip = (int)pbx_rng_below(&r, 2);
	for (int ch = 0; ch < ds->c; ch++) {
		const float *sc = src + (size_t)ch * ds->h * ds->w;
		float *oc = out + (size_t)ch * ds->h * ds->w;
		for (int yy = 0; yy < ds->h; yy++)
			for (int xx = 0; xx < ds->w; xx++) {
				int sy = yy + dy, sx = (flip ? ds->w - 1 - xx : xx) + dx;
				int inside = sy >= 0 && sy < ds->h && sx >= 0 && sx < ds->w;
				oc[yy * ds->w + xx] = inside ? sc[sy * ds->w + sx] : 0.0f;
			}
	}
}

/* x: (n, D), y: (n,) <- positions [lo, hi) of the job's order. */
static int fill_batch(const struct pbx_loader *l, const struct loader_job *job, float *x,
		      int32_t *y)
{
	const struct pbx_dataset *ds = l->ds;
	int n = (int)(job->hi - job->lo);
	int plain = l->aug.crop_pad == 0 && !l->aug.hflip;
	for (int k = 0; k < n; k++) {
		int32_t idx = job->perm[job->lo + k];
		const float *src = ds->x + (size_t)idx * l->d;
		y[k] = ds->y[idx];
		if (plain)
			memcpy(x + (size_t)k * l->d, src, l->d * sizeof(float));
		else
			augment_example(l, job->seed, job->epoch, idx, src, x + (size_t)k * l->d);
	}
	return n;
}

static void make_job(const struct pbx_loader *l, int64_t s, struct loader_job *job)
{
	job->seed = l->seed;
	job->epoch = l->epoch;
	job->perm = l->perm;
	step_range(l, s, &job->lo, &job->hi);
}

/* ---------------------------------------------------------------------- */
/* workers */

/* Under mu: may a worker take step next_job now? */
static int can_claim(const struct pbx_loader *l)
{
	return !l->pausing && l->next_job < l->steps && l->next_job < l->consumed + l->nslots &&
	       l->ring[l->next_job % l->nslots].state == SLOT_EMPTY;
}

static void *worker_main(void *arg)
{
	struct pbx_loader *l = arg;
	pthread_mutex_lock(&l->mu);
	for (;;) {
		struct loader_job job;
		struct loader_slot *slot;
		while (!l->stopping && !can_claim(l))
			pthread_cond_wait(&l->work_cv, &l->mu);
		if (l->stopping)
			break;
		slot = &l->ring[l->next_job % l->nslots];
		slot->state = SLOT_FILLING;
		slot->step = l->next_job;
		make_job(l, l->next_job++, &job);
		l->nfilling++;
		pthread_mutex_unlock(&l->mu);

		slot->n = fill_batch(l, &job, slot->x, slot->y);

		pthread_mutex_lock(&l->mu);
		slot->state = SLOT_READY;
		l->nfilling--;
		pthread_cond_broadcast(&l->done_cv);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* Starts serving (seed, epoch) from position cursor; under mu if threaded. */
static void epoch_begin(struct pbx_loader *l, uint64_t seed, int64_t epoch, int64_t cursor)
{
	if (l->nthreads) {
		l->pausing = 1;
		while (l->nfilling > 0)
			pthread_cond_wait(&l->done_cv, &l->mu);
	}
	l->seed = seed;
	l->epoch = epoch;
	l->cursor0 = cursor;
	l->consumed = 0;
	l->steps = count_steps(l, cursor);
	make_perm(l);
	if (l->nthreads) {
		l->next_job = 0;
		for (int i = 0; i < l->nslots; i++)
			l->ring[i].state = SLOT_EMPTY;
		l->pausing = 0;
		pthread_cond_broadcast(&l->work_cv);
	}
}

/* ---------------------------------------------------------------------- */
/* public API */

static int loader_args_ok(const struct pbx_dataset *ds, int batch, const struct pbx_augment *aug,
			  int rank, int world, int nthreads)
{
	return ds && ds->n > 0 && ds->x && ds->y && ds->c > 0 && ds->h > 0 && ds->w > 0 &&
	       batch > 0 && world > 0 && rank >= 0 && rank < world && nthreads >= 0 &&
	       nthreads <= LOADER_MAX_THREADS && (!aug || aug->crop_pad >= 0);
}

static int start_threads(struct pbx_loader *l)
{
	l->nslots = l->nthreads + 2;
	l->ring = xcalloc((size_t)l->nslots, sizeof(*l->ring));
	for (int i = 0; i < l->nslots; i++) {
		l->ring[i].x = xmalloc((size_t)l->batch * l->d * sizeof(float));
		l->ring[i].y = xmalloc((size_t)l->batch * sizeof(int32_t));
	}
	l->threads = xcalloc((size_t)l->nthreads, sizeof(pthread_t));
	for (int i = 0; i < l->nthreads; i++) {
		if (pthread_create(&l->threads[i], NULL, worker_main, l) != 0)
			return -1;
		l->nstarted++;
	}
	return 0;
}

struct pbx_loader *pbx_loader_new(const struct pbx_dataset *ds, int batch, int shuffle,
				  const struct pbx_augment *aug, uint64_t seed, int rank, int world,
				  int nthreads, int drop_last)
{
	struct pbx_loader *l;
	if (!loader_args_ok(ds, batch, aug, rank, world, nthreads))
		return NULL;
	l = xcalloc(1, sizeof(*l));
	l->ds = ds;
	l->batch = batch, l->shuffle = shuffle, l->rank = rank, l->world = world;
	l->drop_last = drop_last, l->nthreads = nthreads;
	if (aug)
		l->aug = *aug;
	l->d = (size_t)ds->c * ds->h * ds->w;
	l->perm = xmalloc((size_t)ds->n * sizeof(int32_t));
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->work_cv, NULL);
	pthread_cond_init(&l->done_cv, NULL);
	l->pausing = 1; /* no claims before the first epoch is set up */
	if (nthreads && start_threads(l) < 0) {
		pbx_loader_free(l);
		return NULL;
	}
	pthread_mutex_lock(&l->mu);
	epoch_begin(l, seed, 0, 0);
	pthread_mutex_unlock(&l->mu);
	return l;
}

/* Threaded next: wait for this step's slot, copy it out, free the slot. */
static int next_prefetched(struct pbx_loader *l, float *x, int32_t *y)
{
	struct loader_slot *slot = &l->ring[l->consumed % l->nslots];
	int n;
	while (!(slot->state == SLOT_READY && slot->step == l->consumed))
		pthread_cond_wait(&l->done_cv, &l->mu);
	/* READY slots are never touched by workers: copy without the lock. */
	pthread_mutex_unlock(&l->mu);
	n = slot->n;
	memcpy(x, slot->x, (size_t)n * l->d * sizeof(float));
	memcpy(y, slot->y, (size_t)n * sizeof(int32_t));
	pthread_mutex_lock(&l->mu);
	slot->state = SLOT_EMPTY;
	l->consumed++;
	pthread_cond_broadcast(&l->work_cv);
	return n;
}

int pbx_loader_next(struct pbx_loader *l, float *x, int32_t *y)
{
	int n;
	if (!l->nthreads) {
		struct loader_job job;
		if (l->consumed >= l->steps) {
			epoch_begin(l, l->seed, l->epoch + 1, 0);
			return 0;
		}
		make_job(l, l->consumed++, &job);
		return fill_batch(l, &job, x, y);
	}
	pthread_mutex_lock(&l->mu);
	if (l->consumed >= l->steps) {
		epoch_begin(l, l->seed, l->epoch + 1, 0);
		n = 0;
	} else {
		n = next_prefetched(l, x, y);
	}
	pthread_mutex_unlock(&l->mu);
	return n;
}

void pbx_loader_get_state(const struct pbx_loader *l, struct pbx_loader_state *st)
{
	int64_t g = (int64_t)l->batch * l->world;
	int64_t cursor = l->cursor0 + l->consumed * g;
	st->seed = l->seed;
	st->epoch = l->epoch;
	st->cursor = cursor < l->ds->n ? cursor : l->ds->n;
}

int pbx_loader_set_state(struct pbx_loader *l, const struct pbx_loader_state *st)
{
	if (st->epoch < 0 || st->cursor < 0 || st->cursor > l->ds->n)
		return -1;
	pthread_mutex_lock(&l->mu);
	epoch_begin(l, st->seed, st->epoch, st->cursor);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

int64_t pbx_loader_batches_per_epoch(const struct pbx_loader *l)
{
	return count_steps(l, 0);
}

void pbx_loader_free(struct pbx_loader *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stopping = 1;
	pthread_cond_broadcast(&l->work_cv);
	pthread_mutex_unlock(&l->mu);
	for (int i = 0; i < l->nstarted; i++)
		pthread_join(l->threads[i], NULL);
	for (int i = 0; i < l->nslots; i++) {
		free(l->ring[i].x);
		free(l->ring[i].y);
	}
	free(l->ring);
	free(l->threads);
	free(l->perm);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->work_cv);
	pthread_cond_destroy(&l->done_cv);
	free(l);
}
