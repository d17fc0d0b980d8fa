/*
 * metrics.h - the trainer's metric log: DIR/metrics.jsonl for `pbx harvest`
 * and a TensorBoard event file beside it, plus DIR/summary.json at the end.
 *
 * metrics.jsonl holds one JSON object per line, "step" first:
 *   {"step":100,"epoch":1,"loss":0.43,"acc":0.86,"lr":0.01,"step_ms":12.5}
 * Values that are whole numbers (|v| < 2^53) are written as JSON integers,
 * others with 15 significant digits; NaN and infinities, which JSON cannot
 * hold, are written as null (TensorBoard still gets the float).  Every line
 * and every event record is flushed as soon as it is written, so a harvester
 * reading during training sees whole records (it should ignore a trailing
 * line with no newline).
 *
 * Single-threaded: one pbx_metrics per process, used by one thread (rank 0).
 */
#ifndef PBX_RUNTIME_METRICS_H
#define PBX_RUNTIME_METRICS_H

#include <stdint.h>

#include "util/err.h"

struct pbx_metrics;

/* Creates DIR (mkdir -p) and opens DIR/metrics.jsonl (truncated, or with
 * `append` continued; a partial last line left by a crash is cut off first)
 * and a new DIR/events.out.tfevents.<time>.<host>.<pid>.<n> (TensorBoard
 * reads every event file in a directory, so resuming adds a file).
 * Returns a handle owned by the caller (pbx_metrics_close), or NULL + err. */
struct pbx_metrics *pbx_metrics_open(const char *dir, int append, struct pbx_err *err);

/* Writes {"step":step, names[0]:values[0], ...} as one line and one scalar
 * Event per value (tag = name).  Names must be non-empty and not "step".
 * Returns 0, or -1 with the reason in pbx_metrics_error(m). */
int pbx_metrics_log(struct pbx_metrics *m, int64_t step, int n, const char *const *names,
		    const double *values);

/* Checks that json_text is valid JSON and writes it to DIR/summary.json
 * atomically (temporary file, fsync, rename).  0, or -1 + pbx_metrics_error. */
int pbx_metrics_summary(struct pbx_metrics *m, const char *json_text);

/* The message of the last failure; owned by m, "" if none. */
const char *pbx_metrics_error(const struct pbx_metrics *m);
/* Path of the event file this handle writes; owned by m. */
const char *pbx_metrics_event_path(const struct pbx_metrics *m);

/* Flushes and closes; m may be NULL. */
void pbx_metrics_close(struct pbx_metrics *m);

/* For exact resume: rewrites DIR/metrics.jsonl (atomically) keeping only the
 * lines whose "step" is <= `step`, i.e. drops what was logged after the
 * checkpoint being resumed from; malformed or partial lines are dropped too.
 * A missing file is not an error.  Call before pbx_metrics_open(dir, 1). */
int pbx_metrics_truncate_after(const char *dir, int64_t step, struct pbx_err *err);

#endif
