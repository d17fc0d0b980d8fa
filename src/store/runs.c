/*
 * runs.c - each node's running intervals (see store.h, "node runs"): the
 * rows spend is computed from.  src/cluster/spend.c decides when a run
 * begins and ends; this file only keeps the rows.
 */
#include "store/store_internal.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pbx_node_runs_free(struct pbx_node_run *v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(v[i].node);
	free(v);
}

static void runs_read_row(sqlite3_stmt *stmt, struct pbx_node_run *r)
{
	const unsigned char *cur = sqlite3_column_text(stmt, 5);
	memset(r, 0, sizeof(*r));
	r->id = sqlite3_column_int64(stmt, 0);
	r->node = pbx_store_col_text(stmt, 1);
	r->started = sqlite3_column_int64(stmt, 2);
	r->ended = sqlite3_column_type(stmt, 3) == SQLITE_NULL ? 0 : sqlite3_column_int64(stmt, 3);
	r->nanos = sqlite3_column_type(stmt, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(stmt, 4);
	snprintf(r->currency, sizeof(r->currency), "%s", cur ? (const char *)cur : "");
}

int pbx_store_runs_list(struct pbx_store *st, int64_t cluster_id, struct pbx_node_run **v,
			size_t *n, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int rc;
	*v = NULL;
	*n = 0;
	if (pbx_store_prepare(st,
			      "SELECT id, node, started, ended, nanos, currency FROM node_runs"
			      " WHERE cluster_id = ? ORDER BY started, id",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_int64(stmt, 1, cluster_id);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		*v = xreallocarray(*v, *n + 1, sizeof(**v));
		runs_read_row(stmt, &(*v)[(*n)++]);
	}
	sqlite3_finalize(stmt);
	if (rc != SQLITE_DONE) {
		pbx_node_runs_free(*v, *n);
		*v = NULL;
		*n = 0;
		return pbx_store_fail(st, err, "reading node runs");
	}
	return 0;
}

int pbx_store_run_add(struct pbx_store *st, int64_t cluster_id, const char *node, int64_t started,
		      int64_t ended, int64_t nanos, const char *currency, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(
		    st,
		    "INSERT INTO node_runs(cluster_id, node, started, ended, nanos, currency)"
		    " VALUES (?, ?, ?, ?, ?, ?)",
		    &stmt, err) < 0)
		return -1;
	sqlite3_bind_int64(stmt, 1, cluster_id);
	sqlite3_bind_text(stmt, 2, node, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 3, started);
	if (ended)
		sqlite3_bind_int64(stmt, 4, ended > started ? ended : started);
	else
		sqlite3_bind_null(stmt, 4);
	if (nanos >= 0)
		sqlite3_bind_int64(stmt, 5, nanos);
	else
		sqlite3_bind_null(stmt, 5);
	sqlite3_bind_text(stmt, 6, currency && nanos >= 0 ? currency : "", -1, SQLITE_STATIC);
	return pbx_store_step_done(st, stmt, err);
}

int pbx_store_run_open(struct pbx_store *st, int64_t cluster_id, const char *node, int64_t started,
		       int64_t nanos, const char *currency, struct pbx_err *err)
{
	return pbx_store_run_add(st, cluster_id, node, started, 0, nanos, currency, err);
}

int pbx_store_run_close(struct pbx_store *st, int64_t id, int64_t ended, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st,
			      "UPDATE node_runs SET ended = max(started, ?) WHERE id = ?"
			      " AND ended IS NULL",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_int64(stmt, 1, ended);
	sqlite3_bind_int64(stmt, 2, id);
	return pbx_store_step_done(st, stmt, err);
}

int pbx_store_run_set(struct pbx_store *st, int64_t id, int64_t started, int64_t ended,
		      struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st, "UPDATE node_runs SET started = ?, ended = ? WHERE id = ?", &stmt,
			      err) < 0)
		return -1;
	sqlite3_bind_int64(stmt, 1, started);
	if (ended)
		sqlite3_bind_int64(stmt, 2, ended > started ? ended : started);
	else
		sqlite3_bind_null(stmt, 2);
	sqlite3_bind_int64(stmt, 3, id);
	return pbx_store_step_done(st, stmt, err);
}

int pbx_store_run_delete(struct pbx_store *st, int64_t id, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st, "DELETE FROM node_runs WHERE id = ?", &stmt, err) < 0)
		return -1;
	sqlite3_bind_int64(stmt, 1, id);
	return pbx_store_step_done(st, stmt, err);
}
