/*
 * store.c - opening the SQLite store, transactions and the audit log.
 *
 * The connection is opened in serialized (FULLMUTEX) mode so threads of the
 * SSH fan-out can log events.  WAL lets `pbx state` read while another pbx
 * writes; the busy timeout plus BEGIN IMMEDIATE make concurrent writers
 * queue instead of failing with "database is locked".
 */
#define _GNU_SOURCE
#include "store/store_internal.h"
#include "util/xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PBX_STORE_BUSY_MS 30000

int pbx_store_fail(struct pbx_store *st, struct pbx_err *err, const char *what)
{
	return pbx_err_set(err, "store %s: %s: %s", st->path, what, sqlite3_errmsg(st->db));
}

static int store_pragmas(struct pbx_store *st, struct pbx_err *err)
{
	sqlite3_busy_timeout(st->db, PBX_STORE_BUSY_MS);
	if (pbx_store_exec(st, "PRAGMA journal_mode=WAL", err) < 0 ||
	    pbx_store_exec(st, "PRAGMA synchronous=NORMAL", err) < 0 ||
	    pbx_store_exec(st, "PRAGMA foreign_keys=ON", err) < 0)
		return -1;
	return 0;
}

int pbx_store_open(const char *path, struct pbx_store **out, struct pbx_err *err)
{
	struct pbx_store *st = xcalloc(1, sizeof(*st));
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;

	*out = NULL;
	st->path = xstrdup(path);
	if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
		pbx_err_set(err, "cannot open store %s: %s", path,
			    st->db ? sqlite3_errmsg(st->db) : "out of memory");
		pbx_store_close(st);
		return -1;
	}
	if (store_pragmas(st, err) < 0 || pbx_store_migrate(st, err) < 0) {
		pbx_store_close(st);
		return -1;
	}
	*out = st;
	return 0;
}

void pbx_store_close(struct pbx_store *st)
{
	if (!st)
		return;
	sqlite3_close_v2(st->db);
	free(st->path);
	free(st);
}

sqlite3 *pbx_store_db(struct pbx_store *st)
{
	return st->db;
}

int pbx_store_exec(struct pbx_store *st, const char *sql, struct pbx_err *err)
{
	char *msg = NULL;
	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		pbx_err_set(err, "store %s: %s", st->path, msg ? msg : sqlite3_errmsg(st->db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

int pbx_store_begin(struct pbx_store *st, struct pbx_err *err)
{
	return pbx_store_exec(st, "BEGIN IMMEDIATE", err);
}

int pbx_store_commit(struct pbx_store *st, struct pbx_err *err)
{
	if (pbx_store_exec(st, "COMMIT", err) < 0) {
		pbx_store_rollback(st);
		return -1;
	}
	return 0;
}

void pbx_store_rollback(struct pbx_store *st)
{
	if (!sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

int pbx_store_prepare(struct pbx_store *st, const char *sql, sqlite3_stmt **stmt,
		      struct pbx_err *err)
{
	if (sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL) != SQLITE_OK)
		return pbx_store_fail(st, err, "prepare");
	return 0;
}

int pbx_store_step_done(struct pbx_store *st, sqlite3_stmt *stmt, struct pbx_err *err)
{
	int rc = sqlite3_step(stmt);
	sqlite3_finalize(stmt);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return pbx_store_fail(st, err, "write");
	return 0;
}

char *pbx_store_col_text(sqlite3_stmt *stmt, int col)
{
	const unsigned char *t = sqlite3_column_text(stmt, col);
	return t ? xstrdup((const char *)t) : NULL;
}

void pbx_store_event(struct pbx_store *st, int64_t cluster_id, const char *kind, const char *fmt,
		     ...)
{
	sqlite3_stmt *stmt = NULL;
	char *detail;
	va_list ap;
	int rc;

	if (!st)
		return; /* no store (a dry run, a provider driven by a test) */
	va_start(ap, fmt);
	rc = vasprintf(&detail, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return;
	if (sqlite3_prepare_v2(
		    st->db, "INSERT INTO events(time, cluster_id, kind, detail) VALUES (?,?,?,?)",
		    -1, &stmt, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(stmt, 1, (int64_t)time(NULL));
		if (cluster_id)
			sqlite3_bind_int64(stmt, 2, cluster_id);
		else
			sqlite3_bind_null(stmt, 2);
		sqlite3_bind_text(stmt, 3, kind, -1, SQLITE_STATIC);
		sqlite3_bind_text(stmt, 4, detail, -1, SQLITE_STATIC);
		sqlite3_step(stmt);
	}
	sqlite3_finalize(stmt);
	free(detail);
}
