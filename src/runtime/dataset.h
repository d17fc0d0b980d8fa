/*
 * dataset.h - in-memory image classification data sets for pbx-train.
 *
 * A data set is two flat arrays, loaded whole (Fashion-MNIST train is 188 MB
 * of floats):
 *   x: (N, C, H, W) float, pixels scaled to [0,1] by the loaders (then
 *      optionally standardised per channel by pbx_dataset_normalize)
 *   y: (N,) int32 labels in [0, nclasses)
 * Loaders fill a caller-provided struct; its arrays and name belong to the
 * struct and are released by pbx_dataset_free.  On failure the struct is
 * left zeroed (freeing it is harmless).  loader.c turns a data set into
 * batches; the experiments' "corrupted data" arms come from
 * pbx_dataset_corrupt.
 *
 * Library code: errors come back as -1 + struct pbx_err; nothing is printed.
 */
#ifndef PBX_RUNTIME_DATASET_H
#define PBX_RUNTIME_DATASET_H

#include <stdint.h>

#include "util/err.h"

struct pbx_dataset {
	int n, c, h, w, nclasses;
	float *x;   /* (n, c, h, w), owned */
	int32_t *y; /* (n,), owned */
	char *name; /* owned; e.g. "fashion-mnist", "cifar10", a path */
};

/* Default directories of pbx_dataset_load_named. */
#define PBX_DATASET_DIR_FASHION "/usr/share/datasets/fashion-mnist"
#define PBX_DATASET_DIR_MNIST   "/usr/share/datasets/mnist"
#define PBX_DATASET_DIR_CIFAR10 "/usr/share/datasets/cifar10"

/* IDX files (MNIST layout): images magic 0x00000803 (ubyte, 3 dims: n, rows,
 * cols), labels magic 0x00000801 (ubyte, 1 dim: n); big-endian header.
 * Either file may be gzip'd.  Checks magic, dimensions (1..4096), that the
 * counts agree, that data is neither short nor followed by extra bytes.
 * c = 1, nclasses = max label + 1, name = images_path. */
int pbx_dataset_load_idx(const char *images_path, const char *labels_path, struct pbx_dataset *out,
			 struct pbx_err *err);

/* CIFAR-10 binary batches (gzip'd or not): records of 1 label byte (0..9)
 * + 3072 pixel bytes (1024 R, 1024 G, 1024 B, rows of 32), concatenated
 * over the files in order.  c = 3, h = w = 32, nclasses = 10. */
int pbx_dataset_load_cifar10(const char *const *batch_files, int nfiles, struct pbx_dataset *out,
			     struct pbx_err *err);

/* "fashion-mnist" / "mnist": DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte
 * with ".gz" preferred when both exist; "cifar10": DIR/data_batch_{1..5}.bin
 * (train) or DIR/test_batch.bin, also looked for in DIR/cifar-10-batches-bin.
 * dir NULL or "" = the PBX_DATASET_DIR_* default.  name = the data set name. */
int pbx_dataset_load_named(const char *name, const char *dir, int train, struct pbx_dataset *out,
			   struct pbx_err *err);

/* A learnable synthetic set: each class k has a fixed mean image m_k with
 * pixels uniform in [0,1] (drawn from seed), and example i has label
 * y_i ~ U{0..nclasses-1} and x_i = m_{y_i} + N(0, 0.5^2) noise per pixel.
 * Example i depends only on (seed, i), so
 * pbx_dataset_synthetic_at(.., first, ..) gives examples first..first+n-1
 * of the same stream: use the same seed and a disjoint range for a test set
 * (same class means).  pbx_dataset_synthetic is first = 0.  Invalid sizes
 * give an empty set.  name = "synthetic". */
void pbx_dataset_synthetic(struct pbx_dataset *out, int n, int c, int h, int w, int nclasses,
			   uint64_t seed);
void pbx_dataset_synthetic_at(struct pbx_dataset *out, int64_t first, int n, int c, int h, int w,
			      int nclasses, uint64_t seed);

/* Keeps the first n examples (no-op if n < 0 or n >= ds->n). */
void pbx_dataset_subset(struct pbx_dataset *ds, int n);

/* Per-channel mean and (population) standard deviation over all examples
 * and pixels; mean and std have ds->c entries each, caller-owned. */
void pbx_dataset_channel_stats(const struct pbx_dataset *ds, float *mean, float *std);
/* x = (x - mean[c]) / std[c] per channel.  A NULL mean or std is computed
 * from ds itself (use the training set's stats for the test set).  A std of
 * 0 is treated as 1. */
void pbx_dataset_normalize(struct pbx_dataset *ds, const float *mean, const float *std);

/* Corruptions from "Understanding deep learning requires rethinking
 * generalization".  All randomness comes from (seed, example index), so the
 * result does not depend on ds->n or on call order. */
enum pbx_corruption {
	PBX_CORRUPT_NONE,
	PBX_CORRUPT_LABELS,          /* each label, with prob p, replaced by a
	                                uniform random class (which may equal the
	                                old one: ~p*(K-1)/K change); fixed per
	                                (seed, example) */
	PBX_CORRUPT_RANDOM_LABELS,   /* the same with p = 1 */
	PBX_CORRUPT_SHUFFLED_PIXELS, /* one fixed permutation of the h*w pixel
	                                positions (channels move together), the
	                                same for all images */
	PBX_CORRUPT_RANDOM_PIXELS,   /* a different permutation per image */
	PBX_CORRUPT_GAUSSIAN,        /* images replaced by Gaussian noise with the
	                                data set's per-channel mean/std */
};
/* "none", "labels", "random_labels", "shuffled_pixels", "random_pixels",
 * "gaussian" (also with '-' for '_'); 0, or -1 for an unknown name. */
int pbx_corruption_parse(const char *name, enum pbx_corruption *out);
/* The canonical name; "?" for a bad value.  Static string. */
const char *pbx_corruption_name(enum pbx_corruption kind);
/* Applies `kind` in place; p (clamped to [0,1]) is used by LABELS only. */
void pbx_dataset_corrupt(struct pbx_dataset *ds, enum pbx_corruption kind, float p, uint64_t seed);

/* Frees the arrays and name and zeroes the struct; ds may be NULL. */
void pbx_dataset_free(struct pbx_dataset *ds);

#endif
