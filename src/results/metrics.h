/*
 * metrics.h - reading a task's metrics.jsonl into metric points and
 * storing them (pbx_store_metrics_put).
 *
 * The format (also in pbx-report(1), METRICS FILES): one JSON object per
 * line, either
 *     {"step": 100, "loss": 0.31, "acc": 0.9}        (wide form)
 *     {"step": 100, "name": "loss", "value": 0.31}   (long form)
 * "step" is an integer >= 0; a line without one counts by "epoch", else
 * by "iteration" (that key is then not a metric).  In the wide form every other key whose value
 * is a number becomes a point of the metric of that name; null (and the
 * bare tokens NaN, Infinity, -Infinity that Python writes) is a null point;
 * a key with a string, boolean, array or object value is skipped with a
 * warning.  The long form is any object with both "name" (a non-empty
 * string) and "value" (a number or null); its other keys are ignored.
 * Blank lines are skipped; malformed lines are skipped with a warning
 * "FILE:LINE: problem"; a last line without its newline is a write still
 * in progress and is ignored silently.  Names are 1..256 bytes.
 */
#ifndef PBX_RESULTS_METRICS_H
#define PBX_RESULTS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "store/experiments.h"
#include "util/buf.h"
#include "util/err.h"

/* At most this many warning lines per file, then one "N more" line. */
#define PBX_METRICS_MAX_WARNINGS 20
#define PBX_METRICS_MAX_NAME     256

/* Parses `len` bytes of `text` (need not be NUL-terminated) into *out
 * (*n points, all with idx = task_idx, in file order).  Never fails:
 * problems are appended to `warnings` (may be NULL), one line each, as
 * "FILE_LABEL:LINE: problem\n".  *out is owned by the caller, names
 * included: free with pbx_metrics_free(*out, *n).  Returns 0. */
int pbx_metrics_parse(const char *file_label, const char *text, size_t len, int64_t task_idx,
		      struct pbx_metric **out, size_t *n, struct pbx_buf *warnings);

/* Reads the local file `path`, parses it (label: path) and stores its
 * points for task `task_idx` of the submission in one transaction.
 * Points already stored are left alone, so a second ingest adds nothing;
 * *added counts new points.  Returns 0, or -1 with err (unreadable file,
 * store error). */
int pbx_results_ingest(struct pbx_store *st, int64_t submission_id, int64_t task_idx,
		       const char *path, size_t *added, struct pbx_buf *warnings,
		       struct pbx_err *err);
/* The same inside the caller's transaction (so a file can count as
 * harvested only together with its metrics). */
int pbx_results_ingest_locked(struct pbx_store *st, int64_t submission_id, int64_t task_idx,
			      const char *path, size_t *added, struct pbx_buf *warnings,
			      struct pbx_err *err);

#endif
