/*
 * store_internal.h - what the store's own files share (not for other
 * modules: they use store.h).
 */
#ifndef PBX_STORE_INTERNAL_H
#define PBX_STORE_INTERNAL_H

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

#endif
