/*
 * loader.h - batches for the training loop, prepared by background threads
 * while the step computes, sharded across data-parallel ranks, and exactly
 * resumable from a checkpoint.
 *
 * Order.  Epoch e visits the N examples in a permutation that depends only
 * on (seed, e) (the identity when !shuffle); all ranks compute the same one.
 * Each step of the epoch takes the next G = world*batch positions of it;
 * rank r gets positions [r*batch, (r+1)*batch) of those, so the ranks'
 * batches are disjoint and every rank does the same number of full steps.
 * The tail (fewer than G positions left):
 *   drop_last:  dropped, so every rank has exactly batches_per_epoch full
 *               batches (use this for training: equal step counts);
 *   !drop_last: split as evenly as possible between ranks (sizes differ by
 *               at most one), so across ranks every example is seen exactly
 *               once per epoch; a rank whose share is 0 has one batch fewer
 *               (use this for evaluation, summing counts across ranks).
 *
 * Augmentation.  Example i in epoch e draws its random crop offsets and flip
 * from pbx_rng_seed(&r, seed, (e << 32) | i), so batches are bit-identical
 * whatever nthreads is and however threads are scheduled.  Random crop pads
 * with zeros by crop_pad on each side and crops back to H x W; the flip is
 * horizontal with probability 1/2.
 *
 * Threads and memory.  nthreads = 0 fills each batch inside pbx_loader_next;
 * nthreads > 0 starts that many pthreads that fill a ring of nthreads + 2
 * batch buffers ahead of the consumer.  The loader keeps a pointer to `ds`
 * (which must outlive it and not change) and owns everything else.  All
 * pbx_loader_* calls must come from one thread.
 */
#ifndef PBX_RUNTIME_LOADER_H
#define PBX_RUNTIME_LOADER_H

#include <stdint.h>

#include "runtime/dataset.h"

struct pbx_augment {
	int crop_pad; /* 0 = no random crop; else pad by this and crop back */
	int hflip;    /* random horizontal flip */
};

/* Everything needed to resume exactly; plain data, saved in checkpoints.
 * cursor counts positions of the epoch's order consumed by all ranks
 * together (a multiple of world*batch except at the epoch's end), so it is
 * the same on every rank. */
struct pbx_loader_state {
	uint64_t seed;
	int64_t epoch;
	int64_t cursor; /* next position in this epoch's order, 0..N */
};

struct pbx_loader;

/* Returns a loader positioned at (seed, epoch 0, cursor 0), or NULL for bad
 * arguments (ds empty, batch < 1, world < 1, rank outside 0..world-1,
 * nthreads outside 0..64, crop_pad < 0) or if threads cannot be started.
 * aug may be NULL (no augmentation). */
struct pbx_loader *pbx_loader_new(const struct pbx_dataset *ds, int batch, int shuffle,
				  const struct pbx_augment *aug, uint64_t seed, int rank, int world,
				  int nthreads, int drop_last);

/* Fills x: (batch, C, H, W) and y: (batch,) with the next batch and returns
 * its size n (< batch only for a tail batch when !drop_last; only the first
 * n rows are written).  Returns 0 at the end of the epoch; the next call
 * then starts the next epoch. */
int pbx_loader_next(struct pbx_loader *l, float *x, int32_t *y);

/* The state to save after the batches handed out so far. */
void pbx_loader_get_state(const struct pbx_loader *l, struct pbx_loader_state *st);
/* Repositions the loader (discarding prefetched batches): the following
 * batches are bit-identical to those a loader that had run uninterrupted to
 * `st` would produce.  -1 (loader unchanged) if epoch < 0 or cursor is not
 * in 0..N. */
int pbx_loader_set_state(struct pbx_loader *l, const struct pbx_loader_state *st);

/* This rank's number of batches in a whole epoch (from cursor 0). */
int64_t pbx_loader_batches_per_epoch(const struct pbx_loader *l);

/* Stops and joins the threads (also mid-epoch) and frees; l may be NULL. */
void pbx_loader_free(struct pbx_loader *l);

#endif
