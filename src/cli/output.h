/*
 * output.h - everything pbx prints: errors, JSON, tables and the per-node
 * progress display.
 *
 * Rules: results go to stdout, progress and diagnostics to stderr.
 * Progress is a live table when stderr is a terminal, one plain line per
 * change otherwise, and nothing with -q.  Colour only on a terminal and
 * never when NO_COLOR is set.  Messages, table cells and progress names
 * and states are made visible (util/visible.h: control characters as
 * \xHH) whatever they quote; so are a task's or node's bytes that
 * `pbx log` and `pbx cluster exec` pass through, when they go to a
 * terminal (pbx_cli_passthrough).
 */
#ifndef PBX_CLI_OUTPUT_H
#define PBX_CLI_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Set once by main from the environment and the terminal. */
void pbx_output_init(bool quiet);
bool pbx_output_color(void);

/* "pbx: error: ..." on stderr. */
void pbx_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "pbx: warning: ..." on stderr. */
void pbx_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Informational line on stderr unless quiet. */
void pbx_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints err->msg as an error and returns its exit code (FAIL if unset). */
int pbx_report(const struct pbx_err *err);
/* Writes bytes of a task or node (stream 1 = stdout, 2 = stderr) as they
 * are when that stream is not a terminal (they are data), made visible
 * when it is.  For exec callbacks; ctx is NULL. */
void pbx_cli_passthrough(void *ctx, int stream, const char *data, size_t len);
/* After the last pbx_cli_passthrough: shows a sequence cut at the end. */
void pbx_cli_passthrough_end(void);
/* Prints `j` (consumed: its reference is dropped) to stdout, indented. */
void pbx_print_json(json_t *j);
/* n bytes as people read them ("512 B", "12.3 KiB", "1.5 GiB") into out. */
void pbx_format_bytes(unsigned long long n, char *out, size_t len);
/* Unix time t as local "YYYY-MM-DD HH:MM" into out (17 bytes or more). */
void pbx_format_time(int64_t t, char *out, size_t len);

/*
 * Per-item progress (items are nodes, files ...).  Thread-safe.
 * pbx_progress_new copies the names; the display is finished by
 * pbx_progress_free, which prints a final state on a terminal.
 */
struct pbx_progress;
struct pbx_progress *pbx_progress_new(const char *title, size_t n, const char *const *names);
void pbx_progress_set(struct pbx_progress *p, size_t i, const char *state);
void pbx_progress_free(struct pbx_progress *p);

/* One line of a transfer's progress on a terminal ("WHAT: 12/40 objects,
 * 3.1 MB, 45.2 MB/s", rewritten in place; the rate since the first call
 * for WHAT, once half a second has passed; a newline once done == total);
 * nothing when quiet or stderr is not a terminal.  Not thread-safe. */
void pbx_transfer_progress(const char *what, size_t done, size_t total, uint64_t bytes);
/* The same with `note` (not NULL) after the rate: "..., 45.2 MB/s, NOTE". */
void pbx_transfer_progress_note(const char *what, size_t done, size_t total, uint64_t bytes,
				const char *note);

/* A text table: add rows of `ncols` strings, then print aligned to stdout. */
struct pbx_table;
struct pbx_table *pbx_table_new(size_t ncols, const char *const *headers);
void pbx_table_add(struct pbx_table *t, const char *const *cells);
void pbx_table_print(struct pbx_table *t); /* prints and frees */

#endif
