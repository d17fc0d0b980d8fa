/*
 * rows.c - what the store's files share for reading rows: a statement's
 * every row into a growing array (rows_read), and binding a string that
 * may be NULL (see store_internal.h).
 */
#include "store/store_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>

void pbx_store_bind_text(sqlite3_stmt *stmt, int col, const char *s)
{
	if (s)
		sqlite3_bind_text(stmt, col, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(stmt, col);
}

/* Grows *rows (of `size`-byte elements) to hold one more; returns it. */
static void *row_next(void **rows, size_t *n, size_t *cap, size_t size)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 16;
		*rows = xreallocarray(*rows, *cap, size);
	}
	return (char *)*rows + (*n)++ * size;
}

int pbx_store_rows_read(struct pbx_store *st, const char *sql, struct row_key key,
			const struct row_kind *kind, void **rows, size_t *n, struct pbx_err *err)
{
	sqlite3_stmt *s;
	size_t cap = 0;
	int rc;
	*rows = NULL;
	*n = 0;
	if (pbx_store_prepare(st, sql, &s, err) < 0)
		return -1;
	if (key.text)
		sqlite3_bind_text(s, 1, key.text, -1, SQLITE_STATIC);
	else if (key.id >= 0)
		sqlite3_bind_int64(s, 1, key.id);
	if (key.text2)
		sqlite3_bind_text(s, 2, key.text2, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		kind->read(s, row_next(rows, n, &cap, kind->size));
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		kind->release(*rows, *n);
		*rows = NULL;
		*n = 0;
		return pbx_store_fail(st, err, kind->what);
	}
	return 0;
}
