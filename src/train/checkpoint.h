/*
 * checkpoint.h - save and restore everything a run needs to continue
 * exactly: parameters, BN running stats, optimiser state, RNG state,
 * epoch/step, the loader's position and the running epoch sums.
 *
 * File layout (little-endian, version 1):
 *   header  magic "PBXTCKPT", version, header size, architecture hash,
 *           element counts, the struct pbx_ckpt_state fields, the payload's
 *           CRC-32 and finally the header's own CRC-32
 *   payload params (nparams floats), buffers (nbuffers), optimiser state
 * Written with pbx_write_file_atomic (temporary file, fsync, rename, fsync
 * of the directory), so a crash leaves the old or the new file, never half.
 * A checkpoint whose architecture hash or sizes differ from the model's is
 * refused with a message naming both.  Word 21 is the world size of the run
 * that wrote it (0 in older files: one process); the parameters are the
 * same on every rank, so it only informs the resuming run.
 */
#ifndef PBX_TRAIN_CHECKPOINT_H
#define PBX_TRAIN_CHECKPOINT_H

#include <stdint.h>

#include "runtime/loader.h"
#include "runtime/rng.h"
#include "train/model.h"
#include "train/optim.h"
#include "util/err.h"

#define PBX_CKPT_VERSION 1

struct pbx_ckpt_state {
	int64_t epoch;                  /* epochs completed */
	int64_t step;                   /* optimiser steps taken */
	struct pbx_loader_state loader; /* position of the training loader */
	struct pbx_rng rng;             /* the model's dropout RNG */
	double epoch_loss_sum;          /* sums over the current epoch so far */
	int64_t epoch_correct;
	int64_t epoch_seen;
	double elapsed_s; /* training time before this checkpoint */
	int world;        /* ranks of the run that wrote it (1 for
					 * files from before data parallelism) */
};

int pbx_checkpoint_save(const char *path, const struct pbx_model *m, const struct pbx_optim *o,
			const struct pbx_ckpt_state *st, struct pbx_err *err);
/* Loads into an already-built model and initialised optimiser of the same
 * shape; on any error nothing is modified. */
int pbx_checkpoint_load(const char *path, struct pbx_model *m, struct pbx_optim *o,
			struct pbx_ckpt_state *st, struct pbx_err *err);

#endif
