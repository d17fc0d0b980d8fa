/*
 * tfevents.h - a TensorBoard event-file writer with no protobuf library.
 *
 * An event file is a TFRecord stream (u64 length, masked CRC-32C of the
 * length, data, masked CRC-32C of the data; little-endian) of serialized
 * tensorboard.Event protos.  The first record is Event{wall_time,
 * file_version: "brain.Event:2"}; each scalar is Event{wall_time, step,
 * summary{value{tag, simple_value}}}, which TensorBoard still reads (it
 * migrates simple_value to a scalar tensor).  Layout details:
 * docs/formats.md, "TFRecord framing" and "TensorBoard event files".
 *
 * metrics.c uses this to mirror metrics.jsonl for TensorBoard; the pieces
 * (record framing, proto encoding) are public so tests and tools can reuse
 * them.  A writer is not thread-safe: one thread per writer.
 */
#ifndef PBX_RUNTIME_TFEVENTS_H
#define PBX_RUNTIME_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/buf.h"
#include "util/err.h"

struct pbx_tfevents;

/* "DIR/events.out.tfevents.<%010d unix time>.<hostname>.<pid>.<n>", where n
 * counts the files this process has named (as TensorBoard's own writer
 * does), so two names from one process never collide.  Caller frees. */
char *pbx_tfevents_filename(const char *dir);

/* Creates `path` (which must not exist yet) and writes the file_version
 * record.  Returns a writer owned by the caller (pbx_tfevents_close), or
 * NULL with `err` naming the path. */
struct pbx_tfevents *pbx_tfevents_open(const char *path, struct pbx_err *err);
/* Appends one scalar Event, stamped with the current time, and fflushes, so a
 * reader never sees more than one short trailing record. */
int pbx_tfevents_scalar(struct pbx_tfevents *w, int64_t step, const char *tag, float value,
			struct pbx_err *err);
/* Same with an explicit wall time (seconds since the epoch). */
int pbx_tfevents_scalar_at(struct pbx_tfevents *w, double wall_time, int64_t step, const char *tag,
			   float value, struct pbx_err *err);
/* The file name given to pbx_tfevents_open; owned by the writer. */
const char *pbx_tfevents_path(const struct pbx_tfevents *w);
/* Closes the file; returns -1 (with err) if the final close failed.
 * w may be NULL; err may be NULL. */
int pbx_tfevents_close(struct pbx_tfevents *w, struct pbx_err *err);

/* --- building blocks --- */

/* Writes one TFRecord (12-byte header, data, 4-byte footer); 0 or -1. */
int pbx_tfrecord_write(FILE *f, const void *data, size_t len);
/* Appends a serialized Event{wall_time, file_version} to out. */
void pbx_tfevent_encode_version(struct pbx_buf *out, double wall_time, const char *version);
/* Appends a serialized Event{wall_time, step, summary{value{tag,
 * simple_value}}} to out. */
void pbx_tfevent_encode_scalar(struct pbx_buf *out, double wall_time, int64_t step, const char *tag,
			       float value);
/* Seconds since the Unix epoch (CLOCK_REALTIME) as a double. */
double pbx_wall_time(void);

#endif
