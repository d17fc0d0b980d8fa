/*
 * tfrecord.h - TFRecord shards of tf.train.Example image records: the
 * framed-record reader (with CRC checks), the Example codec (protobuf-c,
 * from proto/example.proto) and loading a sharded data set.
 *
 * A record is u64 length, masked CRC-32C of those 8 bytes, data, masked
 * CRC-32C of the data (little-endian; docs/formats.md, "TFRecord
 * framing"); tfevents.h's pbx_tfrecord_write() writes one.  An image record is
 * a tf.train.Example with the features
 *   image:    bytes, the raw uint8 pixels, HWC, h*w*c of them
 *   label:    int64, 0..65535
 *   height, width, channels: int64, 1..4096 (channels 1..16)
 * which is what TensorFlow's tf.train.Example parser reads back.
 *
 * Library code: errors come back as -1 + struct pbx_err; nothing is
 * printed.  Every error about a file names it and the byte offset of the
 * record at fault.
 */
#ifndef PBX_RUNTIME_TFRECORD_H
#define PBX_RUNTIME_TFRECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/dataset.h"
#include "util/buf.h"
#include "util/err.h"

/* Largest record the reader accepts (a length beyond it is corruption). */
#define PBX_TFRECORD_MAX_LEN ((uint64_t)1 << 28)

/* --- framed records --- */

struct pbx_tfrecord_reader;

/* Reads records from f (not closed by the reader), calling the stream
 * `name` in errors.  Caller frees with pbx_tfrecord_reader_free. */
struct pbx_tfrecord_reader *pbx_tfrecord_reader_new(FILE *f, const char *name);
/* The next record: 1 with *data (valid until the next call; owned by the
 * reader) and *len, 0 at a clean end of file, -1 with err naming the file
 * and offset (bad length CRC, length over the limit, truncated record, bad
 * data CRC, read error). */
int pbx_tfrecord_next(struct pbx_tfrecord_reader *r, const unsigned char **data, size_t *len,
		      struct pbx_err *err);
/* Byte offset of the record last returned (or failed on). */
uint64_t pbx_tfrecord_offset(const struct pbx_tfrecord_reader *r);
void pbx_tfrecord_reader_free(struct pbx_tfrecord_reader *r);

/* --- tf.train.Example image records --- */

struct pbx_example {
	int h, w, c;
	int32_t label;
	const unsigned char *pixels; /* h*w*c bytes, HWC; owned by msg */
	void *msg;                   /* the unpacked message (internal) */
};

/* Appends the serialized Example of one image (HWC bytes) to out. */
void pbx_example_encode(struct pbx_buf *out, const unsigned char *hwc, int h, int w, int c,
			int32_t label);
/* Decodes and checks one record (features present with the right kinds
 * and ranges, image of exactly h*w*c bytes).  On success ex holds the
 * message: release it with pbx_example_release.  -1 + err (a message
 * without file or offset: the caller adds them) leaves nothing to free. */
int pbx_example_decode(const void *data, size_t len, struct pbx_example *ex, struct pbx_err *err);
void pbx_example_release(struct pbx_example *ex);

/* --- data sets --- */

/* Loads the files matching the glob `pattern` (sorted by name), this
 * rank's share of them:
 *   file level   (at least `world` files): files k with k % world == rank;
 *   record level (fewer files): record j of every file, j % world == rank.
 * world = 1 reads everything in file order, so shards written by
 * pbx_tfrecord_pack give the original order.  nthreads (>= 1) threads
 * decode files in parallel.  All records must have the same h, w, c;
 * nclasses = max label + 1; name = pattern.  -1 + err naming the file
 * and offset of a bad record (the struct is left zeroed). */
int pbx_dataset_load_tfrecord(const char *pattern, int rank, int world, int nthreads,
			      struct pbx_dataset *out, struct pbx_err *err);

/* Writes ds as `nshards` files OUT_DIR/PREFIX-0000i-of-0000N.tfrecord
 * (PREFIX e.g. "fashion-mnist-train"), shard i holding examples
 * [i*n/N, (i+1)*n/N) in order, pixels as round(x*255) (the inverse of the
 * loaders' /255; ds must not be normalised).  Each file is written under a
 * temporary name and renamed when complete.  nshards 1..99999. */
int pbx_tfrecord_pack(const struct pbx_dataset *ds, const char *out_dir, const char *prefix,
		      int nshards, struct pbx_err *err);

#endif
