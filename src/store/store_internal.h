/*
 * store_internal.h - what the store's own files share (not for other
 * modules: they use store.h).
 */
#ifndef PBX_STORE_INTERNAL_H
#define PBX_STORE_INTERNAL_H

#include <stdint.h>

#include "store/store.h"

struct pbx_store {
	sqlite3 *db;
	char *path;
};

int pbx_store_migrate(struct pbx_store *st, struct pbx_err *err);
/* Fills err with "store PATH: WHAT: sqlite message"; returns -1. */
int pbx_store_fail(struct pbx_store *st, struct pbx_err *err, const char *what);
int pbx_store_prepare(struct pbx_store *st, const char *sql, sqlite3_stmt **stmt,
		      struct pbx_err *err);
/* Steps a write statement once and finalizes it. */
int pbx_store_step_done(struct pbx_store *st, sqlite3_stmt *stmt, struct pbx_err *err);
/* A fresh copy of a text column, or NULL; caller frees. */
char *pbx_store_col_text(sqlite3_stmt *stmt, int col);
/* Binds a string, or NULL when s is NULL (s must outlive the step). */
void pbx_store_bind_text(sqlite3_stmt *stmt, int col, const char *s);

/* rows.c: how pbx_store_rows_read reads one kind of row: `read` fills one
 * element of `size` bytes from the statement's current row; `release`
 * frees n of them (and the array); `what` says what failed ("read
 * tasks"). */
struct row_kind {
	size_t size;
	void (*read)(sqlite3_stmt *s, void *row);
	void (*release)(void *rows, size_t n);
	const char *what;
};

/* The key bound to the query's ?1: text when `text` is set, else `id`
 * when it is >= 0, else nothing; and text2 to ?2 when set. */
struct row_key {
	const char *text;
	int64_t id;
	const char *text2;
};

/* Runs `sql` with `key` and reads every row into *rows (*n of them; caller
 * frees with the kind's release, or its public pbx_*_free).  On an error
 * nothing is returned (*rows NULL, *n 0). */
int pbx_store_rows_read(struct pbx_store *st, const char *sql, struct row_key key,
			const struct row_kind *kind, void **rows, size_t *n, struct pbx_err *err);
#define ROW_TEXT(t) ((struct row_key){ .text = (t), .id = -1, .text2 = NULL })
#define ROW_ID(i)   ((struct row_key){ .text = NULL, .id = (i), .text2 = NULL })
#define ROW_ALL     ((struct row_key){ .text = NULL, .id = -1, .text2 = NULL })

#endif
