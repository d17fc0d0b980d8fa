/*
 * pool.c - pooled results: the tasks `pbx pull` brought from a pool and
 * their metric points (see pool.h).
 */
#include "store/pool.h"
#include "store/store_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>

static int pool_put_task(struct pbx_store *st, const struct pbx_pool_task *t, struct pbx_err *err)
{
	sqlite3_stmt *s;
	if (pbx_store_prepare(st,
			      "INSERT OR REPLACE INTO pool_tasks (pool, object, version, publisher,"
			      " package_id, experiment, idx, params_json, state, start_time,"
			      " end_time, record_json, pulled)"
			      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			      &s, err) < 0)
		return -1;
	sqlite3_bind_text(s, 1, t->pool, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, t->object, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, t->version, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, t->publisher, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, t->package_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 6, t->experiment, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 7, t->idx);
	sqlite3_bind_text(s, 8, t->params_json, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 9, t->state, -1, SQLITE_STATIC);
	if (t->start_time)
		sqlite3_bind_int64(s, 10, t->start_time);
	if (t->end_time)
		sqlite3_bind_int64(s, 11, t->end_time);
	sqlite3_bind_text(s, 12, t->record_json, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 13, t->pulled);
	return pbx_store_step_done(st, s, err);
}

static int pool_put_metrics(struct pbx_store *st, const struct pbx_pool_task *t,
			    const struct pbx_pool_metric *m, size_t n, struct pbx_err *err)
{
	sqlite3_stmt *s;
	size_t i;
	int rc = 0;
	if (pbx_store_prepare(st, "DELETE FROM pool_metrics WHERE pool = ? AND object = ?", &s,
			      err) < 0)
		return -1;
	sqlite3_bind_text(s, 1, t->pool, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, t->object, -1, SQLITE_STATIC);
	if (pbx_store_step_done(st, s, err) < 0)
		return -1;
	if (pbx_store_prepare(st,
			      "INSERT OR IGNORE INTO pool_metrics (pool, object, name, step, value)"
			      " VALUES (?, ?, ?, ?, ?)",
			      &s, err) < 0)
		return -1;
	for (i = 0; i < n && rc == 0; i++) {
		sqlite3_reset(s);
		sqlite3_bind_text(s, 1, t->pool, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, t->object, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 3, m[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 4, m[i].step);
		if (m[i].is_null)
			sqlite3_bind_null(s, 5);
		else
			sqlite3_bind_double(s, 5, m[i].value);
		if (sqlite3_step(s) != SQLITE_DONE)
			rc = -1;
	}
	sqlite3_finalize(s);
	return rc < 0 ? pbx_store_fail(st, err, "record pooled metrics") : 0;
}

int pbx_store_pool_put(struct pbx_store *st, const struct pbx_pool_task *t,
		       const struct pbx_pool_metric *m, size_t n, struct pbx_err *err)
{
	if (pool_put_task(st, t, err) < 0)
		return -1;
	return pool_put_metrics(st, t, m, n, err);
}

static void pool_task_read(sqlite3_stmt *s, void *row)
{
	struct pbx_pool_task *t = row;
	t->pool = pbx_store_col_text(s, 0);
	t->object = pbx_store_col_text(s, 1);
	t->version = pbx_store_col_text(s, 2);
	t->publisher = pbx_store_col_text(s, 3);
	t->package_id = pbx_store_col_text(s, 4);
	t->experiment = pbx_store_col_text(s, 5);
	t->idx = sqlite3_column_int64(s, 6);
	t->params_json = pbx_store_col_text(s, 7);
	t->state = pbx_store_col_text(s, 8);
	t->start_time = sqlite3_column_int64(s, 9);
	t->end_time = sqlite3_column_int64(s, 10);
	t->record_json = pbx_store_col_text(s, 11);
	t->pulled = sqlite3_column_int64(s, 12);
}

static void pool_tasks_release(void *rows, size_t n)
{
	pbx_pool_tasks_free(rows, n);
}

static const struct row_kind pool_task_rows = { sizeof(struct pbx_pool_task), pool_task_read,
						pool_tasks_release, "read pooled tasks" };

int pbx_store_pool_tasks(struct pbx_store *st, const char *pool, struct pbx_pool_task **rows,
			 size_t *n, struct pbx_err *err)
{
	return pbx_store_rows_read(
		st,
		pool ? "SELECT pool, object, version, publisher, package_id, experiment, idx,"
		       " params_json, state, start_time, end_time, record_json, pulled"
		       " FROM pool_tasks WHERE pool = ? ORDER BY publisher, package_id, idx, object"
		     : "SELECT pool, object, version, publisher, package_id, experiment, idx,"
		       " params_json, state, start_time, end_time, record_json, pulled"
		       " FROM pool_tasks ORDER BY pool, publisher, package_id, idx, object",
		pool ? ROW_TEXT(pool) : ROW_ALL, &pool_task_rows, (void **)rows, n, err);
}

static void pool_metric_read(sqlite3_stmt *s, void *row)
{
	struct pbx_pool_metric *m = row;
	m->object = pbx_store_col_text(s, 0);
	m->name = pbx_store_col_text(s, 1);
	m->step = sqlite3_column_int64(s, 2);
	m->is_null = sqlite3_column_type(s, 3) == SQLITE_NULL;
	m->value = m->is_null ? 0 : sqlite3_column_double(s, 3);
}

static void pool_metrics_release(void *rows, size_t n)
{
	pbx_pool_metrics_free(rows, n);
}

static const struct row_kind pool_metric_rows = { sizeof(struct pbx_pool_metric), pool_metric_read,
						  pool_metrics_release, "read pooled metrics" };

int pbx_store_pool_metrics(struct pbx_store *st, const char *pool, struct pbx_pool_metric **rows,
			   size_t *n, struct pbx_err *err)
{
	return pbx_store_rows_read(
		st,
		"SELECT object, name, step, value FROM pool_metrics WHERE pool = ?"
		" ORDER BY object, name, step",
		ROW_TEXT(pool), &pool_metric_rows, (void **)rows, n, err);
}

void pbx_pool_tasks_free(struct pbx_pool_task *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		struct pbx_pool_task *t = &rows[i];
		free(t->pool);
		free(t->object);
		free(t->version);
		free(t->publisher);
		free(t->package_id);
		free(t->experiment);
		free(t->params_json);
		free(t->state);
		free(t->record_json);
	}
	free(rows);
}

void pbx_pool_metrics_free(struct pbx_pool_metric *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(rows[i].object);
		free(rows[i].name);
	}
	free(rows);
}
