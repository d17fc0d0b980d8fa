/*
 * experiments.c - packages, submissions, arrays and tasks (see
 * experiments.h).
 */
#include "store/experiments.h"
#include "store/store_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- packages */

#define PACKAGE_COLS                                                        \
	"id, short_id, name, experiment_path, experiment_text, git_commit," \
	" git_diff, user, host, ntasks, created"

static void package_read(sqlite3_stmt *s, void *row)
{
	struct pbx_package_row *p = row;
	p->id = pbx_store_col_text(s, 0);
	p->short_id = pbx_store_col_text(s, 1);
	p->name = pbx_store_col_text(s, 2);
	p->experiment_path = pbx_store_col_text(s, 3);
	p->experiment_text = pbx_store_col_text(s, 4);
	p->git_commit = pbx_store_col_text(s, 5);
	p->git_diff = pbx_store_col_text(s, 6);
	p->user = pbx_store_col_text(s, 7);
	p->host = pbx_store_col_text(s, 8);
	p->ntasks = sqlite3_column_int64(s, 9);
	p->created = sqlite3_column_int64(s, 10);
}

int pbx_store_package_put(struct pbx_store *st, const struct pbx_package_row *p,
			  struct pbx_err *err)
{
	sqlite3_stmt *s;
	if (pbx_store_prepare(st,
			      "INSERT INTO packages(" PACKAGE_COLS ") VALUES"
			      " (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO NOTHING",
			      &s, err) < 0)
		return -1;
	pbx_store_bind_text(s, 1, p->id);
	pbx_store_bind_text(s, 2, p->short_id);
	pbx_store_bind_text(s, 3, p->name);
	pbx_store_bind_text(s, 4, p->experiment_path);
	pbx_store_bind_text(s, 5, p->experiment_text);
	pbx_store_bind_text(s, 6, p->git_commit);
	pbx_store_bind_text(s, 7, p->git_diff);
	pbx_store_bind_text(s, 8, p->user);
	pbx_store_bind_text(s, 9, p->host);
	sqlite3_bind_int64(s, 10, p->ntasks);
	sqlite3_bind_int64(s, 11, p->created ? p->created : (int64_t)time(NULL));
	return pbx_store_step_done(st, s, err);
}

static void packages_release(void *rows, size_t n)
{
	pbx_package_rows_free(rows, n);
}

static const struct row_kind package_rows = { sizeof(struct pbx_package_row), package_read,
					      packages_release, "read packages" };

static int package_query(struct pbx_store *st, const char *sql, const char *arg,
			 struct pbx_package_row **rows, size_t *n, struct pbx_err *err)
{
	return pbx_store_rows_read(st, sql, arg ? ROW_TEXT(arg) : ROW_ALL, &package_rows,
				   (void **)rows, n, err);
}

static int is_hex_prefix(const char *s)
{
	size_t i;
	for (i = 0; s[i]; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return 0;
	return i >= 4 && i <= 64;
}

int pbx_store_package_find(struct pbx_store *st, const char *ref, struct pbx_package_row *out,
			   struct pbx_err *err)
{
	struct pbx_package_row *rows;
	size_t n = 0;
	memset(out, 0, sizeof(*out));
	if (is_hex_prefix(ref)) {
		char *like = xasprintf("%s%%", ref);
		int rc = package_query(st,
				       "SELECT " PACKAGE_COLS " FROM packages WHERE id LIKE ?"
				       " ORDER BY created DESC LIMIT 2",
				       like, &rows, &n, err);
		free(like);
		if (rc < 0)
			return -1;
		if (n > 1) {
			pbx_package_rows_free(rows, n);
			return pbx_err_setc(err, PBX_EXIT_USAGE,
					    "package id '%s' is ambiguous: use more digits", ref);
		}
		if (n == 1) {
			*out = rows[0];
			free(rows);
			return 0;
		}
		free(rows);
	}
	if (package_query(st,
			  "SELECT " PACKAGE_COLS " FROM packages WHERE name = ?"
			  " ORDER BY created DESC, rowid DESC LIMIT 1",
			  ref, &rows, &n, err) < 0)
		return -1;
	if (n == 0) {
		free(rows);
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no package or experiment named '%s'",
				    ref);
	}
	*out = rows[0];
	free(rows);
	return 0;
}

int pbx_store_package_list(struct pbx_store *st, struct pbx_package_row **rows, size_t *n,
			   struct pbx_err *err)
{
	return package_query(st,
			     "SELECT " PACKAGE_COLS " FROM packages ORDER BY created DESC,"
			     " rowid DESC",
			     NULL, rows, n, err);
}

void pbx_package_row_free(struct pbx_package_row *p)
{
	free(p->id);
	free(p->short_id);
	free(p->name);
	free(p->experiment_path);
	free(p->experiment_text);
	free(p->git_commit);
	free(p->git_diff);
	free(p->user);
	free(p->host);
	memset(p, 0, sizeof(*p));
}

void pbx_package_rows_free(struct pbx_package_row *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		pbx_package_row_free(&rows[i]);
	free(rows);
}

/* ---------------------------------------------------------- submissions */

#define SUBMISSION_COLS                                                    \
	"s.id, s.package_id, s.cluster_id, c.name, c.state, s.remote_dir," \
	" s.resources_json, s.pushed, s.state, s.created, s.environment"

static void submission_read(sqlite3_stmt *s, void *row)
{
	struct pbx_submission_row *r = row;
	r->id = sqlite3_column_int64(s, 0);
	r->package_id = pbx_store_col_text(s, 1);
	r->cluster_id = sqlite3_column_int64(s, 2);
	r->cluster_name = pbx_store_col_text(s, 3);
	r->cluster_state = pbx_store_col_text(s, 4);
	r->remote_dir = pbx_store_col_text(s, 5);
	r->resources_json = pbx_store_col_text(s, 6);
	r->pushed = sqlite3_column_int(s, 7);
	r->state = pbx_store_col_text(s, 8);
	r->created = sqlite3_column_int64(s, 9);
	r->environment = pbx_store_col_text(s, 10);
}

int pbx_store_submission_get(struct pbx_store *st, const char *package_id, int64_t cluster_id,
			     struct pbx_submission_row *out, struct pbx_err *err)
{
	sqlite3_stmt *s;
	int rc;
	memset(out, 0, sizeof(*out));
	if (pbx_store_prepare(st,
			      "SELECT " SUBMISSION_COLS " FROM submissions s JOIN clusters c"
			      " ON c.id = s.cluster_id WHERE s.package_id = ? AND s.cluster_id = ?",
			      &s, err) < 0)
		return -1;
	sqlite3_bind_text(s, 1, package_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, cluster_id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		submission_read(s, out);
	sqlite3_finalize(s);
	if (rc == SQLITE_ROW)
		return 0;
	if (rc == SQLITE_DONE)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND,
				    "package not submitted to this cluster");
	return pbx_store_fail(st, err, "read submission");
}

int pbx_store_submission_create(struct pbx_store *st, const struct pbx_submission_row *r,
				const char *const *params_json, size_t ntasks, int64_t *id,
				struct pbx_err *err)
{
	sqlite3_stmt *s;
	int64_t now = (int64_t)time(NULL);
	size_t i;
	if (pbx_store_prepare(st,
			      "INSERT INTO submissions(package_id, cluster_id, remote_dir,"
			      " resources_json, pushed, state, created) VALUES (?,?,?,?,?,?,?)",
			      &s, err) < 0)
		return -1;
	pbx_store_bind_text(s, 1, r->package_id);
	sqlite3_bind_int64(s, 2, r->cluster_id);
	pbx_store_bind_text(s, 3, r->remote_dir);
	pbx_store_bind_text(s, 4, r->resources_json);
	sqlite3_bind_int(s, 5, r->pushed);
	pbx_store_bind_text(s, 6, r->state ? r->state : "submitting");
	sqlite3_bind_int64(s, 7, now);
	if (pbx_store_step_done(st, s, err) < 0)
		return -1;
	*id = sqlite3_last_insert_rowid(st->db);
	if (pbx_store_prepare(st,
			      "INSERT INTO tasks(submission_id, idx, params_json, state,"
			      " updated) VALUES (?, ?, ?, 'NEW', ?)",
			      &s, err) < 0)
		return -1;
	for (i = 0; i < ntasks; i++) {
		sqlite3_bind_int64(s, 1, *id);
		sqlite3_bind_int64(s, 2, (int64_t)i);
		sqlite3_bind_text(s, 3, params_json[i], -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 4, now);
		if (sqlite3_step(s) != SQLITE_DONE) {
			sqlite3_finalize(s);
			return pbx_store_fail(st, err, "insert tasks");
		}
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	return 0;
}

static void submissions_release(void *rows, size_t n)
{
	pbx_submission_rows_free(rows, n);
}

static const struct row_kind submission_rows = { sizeof(struct pbx_submission_row), submission_read,
						 submissions_release, "read submissions" };

int pbx_store_submissions_of(struct pbx_store *st, const char *package_id,
			     struct pbx_submission_row **rows, size_t *n, struct pbx_err *err)
{
	return pbx_store_rows_read(st,
				   "SELECT " SUBMISSION_COLS " FROM submissions s JOIN clusters c"
				   " ON c.id = s.cluster_id WHERE s.package_id = ? ORDER BY s.id",
				   ROW_TEXT(package_id), &submission_rows, (void **)rows, n, err);
}

int pbx_store_submission_set(struct pbx_store *st, int64_t id, int pushed, const char *state,
			     struct pbx_err *err)
{
	sqlite3_stmt *s;
	if (pbx_store_prepare(st, "UPDATE submissions SET pushed = ?, state = ? WHERE id = ?", &s,
			      err) < 0)
		return -1;
	sqlite3_bind_int(s, 1, pushed);
	sqlite3_bind_text(s, 2, state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, id);
	return pbx_store_step_done(st, s, err);
}

int pbx_store_submission_set_environment(struct pbx_store *st, int64_t id, const char *status,
					 struct pbx_err *err)
{
	sqlite3_stmt *s;
	if (pbx_store_prepare(st, "UPDATE submissions SET environment = ? WHERE id = ?", &s, err) <
	    0)
		return -1;
	pbx_store_bind_text(s, 1, status);
	sqlite3_bind_int64(s, 2, id);
	return pbx_store_step_done(st, s, err);
}

int pbx_store_submission_set_resources(struct pbx_store *st, int64_t id, const char *json,
				       struct pbx_err *err)
{
	sqlite3_stmt *s;
	if (pbx_store_prepare(st, "UPDATE submissions SET resources_json = ? WHERE id = ?", &s,
			      err) < 0)
		return -1;
	sqlite3_bind_text(s, 1, json, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, id);
	return pbx_store_step_done(st, s, err);
}

void pbx_submission_row_free(struct pbx_submission_row *r)
{
	free(r->package_id);
	free(r->cluster_name);
	free(r->cluster_state);
	free(r->remote_dir);
	free(r->resources_json);
	free(r->state);
	free(r->environment);
	memset(r, 0, sizeof(*r));
}

void pbx_submission_rows_free(struct pbx_submission_row *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		pbx_submission_row_free(&rows[i]);
	free(rows);
}

/* --------------------------------------------------------------- arrays */

int pbx_store_array_add(struct pbx_store *st, const struct pbx_array_row *a, int64_t *id,
			struct pbx_err *err)
{
	sqlite3_stmt *s;
	if (pbx_store_prepare(st,
			      "INSERT INTO arrays(submission_id, first_task, ntasks, spec,"
			      " job_id, state, created) VALUES (?,?,?,?,?,?,?)",
			      &s, err) < 0)
		return -1;
	sqlite3_bind_int64(s, 1, a->submission_id);
	sqlite3_bind_int64(s, 2, a->first_task);
	sqlite3_bind_int64(s, 3, a->ntasks);
	pbx_store_bind_text(s, 4, a->spec);
	pbx_store_bind_text(s, 5, a->job_id);
	pbx_store_bind_text(s, 6, a->state ? a->state : "planned");
	sqlite3_bind_int64(s, 7, (int64_t)time(NULL));
	if (pbx_store_step_done(st, s, err) < 0)
		return -1;
	*id = sqlite3_last_insert_rowid(st->db);
	return 0;
}

int pbx_store_array_set(struct pbx_store *st, int64_t id, const char *job_id, const char *state,
			struct pbx_err *err)
{
	sqlite3_stmt *s;
	if (pbx_store_prepare(st, "UPDATE arrays SET job_id = ?, state = ? WHERE id = ?", &s, err) <
	    0)
		return -1;
	pbx_store_bind_text(s, 1, job_id);
	pbx_store_bind_text(s, 2, state);
	sqlite3_bind_int64(s, 3, id);
	return pbx_store_step_done(st, s, err);
}

static void array_read(sqlite3_stmt *s, void *row)
{
	struct pbx_array_row *a = row;
	a->id = sqlite3_column_int64(s, 0);
	a->submission_id = sqlite3_column_int64(s, 1);
	a->first_task = sqlite3_column_int64(s, 2);
	a->ntasks = sqlite3_column_int64(s, 3);
	a->spec = pbx_store_col_text(s, 4);
	a->job_id = pbx_store_col_text(s, 5);
	a->state = pbx_store_col_text(s, 6);
}

static void array_release(void *rows, size_t n)
{
	pbx_array_rows_free(rows, n);
}

static const struct row_kind array_rows = { sizeof(struct pbx_array_row), array_read, array_release,
					    "read arrays" };

int pbx_store_arrays_list(struct pbx_store *st, int64_t submission_id, struct pbx_array_row **rows,
			  size_t *n, struct pbx_err *err)
{
	return pbx_store_rows_read(
		st,
		"SELECT id, submission_id, first_task, ntasks, spec, job_id, state"
		" FROM arrays WHERE submission_id = ? ORDER BY id",
		ROW_ID(submission_id), &array_rows, (void **)rows, n, err);
}

void pbx_array_rows_free(struct pbx_array_row *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(rows[i].spec);
		free(rows[i].job_id);
		free(rows[i].state);
	}
	free(rows);
}

/* ---------------------------------------------------------------- tasks */

static void task_read(sqlite3_stmt *s, void *row)
{
	struct pbx_task_row *t = row;
	t->idx = sqlite3_column_int64(s, 0);
	t->params_json = pbx_store_col_text(s, 1);
	t->state = pbx_store_col_text(s, 2);
	t->exit_code = sqlite3_column_type(s, 3) == SQLITE_NULL ? -1 : sqlite3_column_int(s, 3);
	t->node = pbx_store_col_text(s, 4);
	t->attempt = sqlite3_column_int(s, 5);
	t->start_time = sqlite3_column_int64(s, 6);
	t->end_time = sqlite3_column_int64(s, 7);
	t->job_id = pbx_store_col_text(s, 8);
	t->submits = sqlite3_column_int(s, 9);
	t->cancel_requested = sqlite3_column_int64(s, 10);
}

static void task_release(void *rows, size_t n)
{
	pbx_task_rows_free(rows, n);
}

static const struct row_kind task_rows = { sizeof(struct pbx_task_row), task_read, task_release,
					   "read tasks" };

int pbx_store_tasks_list(struct pbx_store *st, int64_t submission_id, struct pbx_task_row **rows,
			 size_t *n, struct pbx_err *err)
{
	return pbx_store_rows_read(
		st,
		"SELECT idx, params_json, state, exit_code, node, attempt,"
		" start_time, end_time, job_id, submits, cancel_requested FROM tasks"
		" WHERE submission_id = ? ORDER BY idx",
		ROW_ID(submission_id), &task_rows, (void **)rows, n, err);
}

int pbx_store_tasks_update(struct pbx_store *st, int64_t submission_id,
			   const struct pbx_task_row *rows, size_t n, struct pbx_err *err)
{
	sqlite3_stmt *s;
	int64_t now = (int64_t)time(NULL);
	size_t i;
	if (pbx_store_prepare(st,
			      "UPDATE tasks SET state = ?, exit_code = ?, node = ?, attempt = ?,"
			      " start_time = ?, end_time = ?, job_id = ?, updated = ?"
			      " WHERE submission_id = ? AND idx = ?",
			      &s, err) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		const struct pbx_task_row *t = &rows[i];
		pbx_store_bind_text(s, 1, t->state);
		if (t->exit_code >= 0)
			sqlite3_bind_int(s, 2, t->exit_code);
		else
			sqlite3_bind_null(s, 2);
		pbx_store_bind_text(s, 3, t->node);
		sqlite3_bind_int(s, 4, t->attempt);
		sqlite3_bind_int64(s, 5, t->start_time);
		sqlite3_bind_int64(s, 6, t->end_time);
		pbx_store_bind_text(s, 7, t->job_id);
		sqlite3_bind_int64(s, 8, now);
		sqlite3_bind_int64(s, 9, submission_id);
		sqlite3_bind_int64(s, 10, t->idx);
		if (sqlite3_step(s) != SQLITE_DONE) {
			sqlite3_finalize(s);
			return pbx_store_fail(st, err, "update tasks");
		}
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	return 0;
}

static int tasks_mark(struct pbx_store *st, const char *sql, int64_t submission_id,
		      const int64_t *idx, size_t n, struct pbx_err *err)
{
	sqlite3_stmt *s;
	size_t i;
	if (pbx_store_prepare(st, sql, &s, err) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(s, 1, (int64_t)time(NULL));
		sqlite3_bind_int64(s, 2, submission_id);
		sqlite3_bind_int64(s, 3, idx[i]);
		if (sqlite3_step(s) != SQLITE_DONE) {
			sqlite3_finalize(s);
			return pbx_store_fail(st, err, "mark tasks");
		}
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	return 0;
}

int pbx_store_tasks_submitted(struct pbx_store *st, int64_t submission_id, const int64_t *idx,
			      size_t n, struct pbx_err *err)
{
	return tasks_mark(st,
			  "UPDATE tasks SET state = 'PENDING', submits = submits + 1,"
			  " exit_code = NULL, cancel_requested = 0, updated = ?"
			  " WHERE submission_id = ? AND idx = ?",
			  submission_id, idx, n, err);
}

int pbx_store_tasks_unsubmit(struct pbx_store *st, int64_t submission_id, const int64_t *idx,
			     size_t n, struct pbx_err *err)
{
	return tasks_mark(st,
			  "UPDATE tasks SET state = 'NEW', submits = max(submits - 1, 0),"
			  " updated = ? WHERE submission_id = ? AND idx = ?",
			  submission_id, idx, n, err);
}

int pbx_store_tasks_cancelled(struct pbx_store *st, int64_t submission_id, const int64_t *idx,
			      size_t n, struct pbx_err *err)
{
	/* the time of the cancel: a task that ends after it was cancelled */
	return tasks_mark(st,
			  "UPDATE tasks SET cancel_requested = ?1, updated = ?1"
			  " WHERE submission_id = ?2 AND idx = ?3",
			  submission_id, idx, n, err);
}

void pbx_task_rows_free(struct pbx_task_row *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(rows[i].params_json);
		free(rows[i].state);
		free(rows[i].node);
		free(rows[i].job_id);
	}
	free(rows);
}

/* -------------------------------------------------------------- metrics */

int pbx_store_metrics_put(struct pbx_store *st, int64_t submission_id, const struct pbx_metric *m,
			  size_t n, size_t *added, struct pbx_err *err)
{
	sqlite3_stmt *s;
	size_t i;
	*added = 0;
	if (pbx_store_prepare(st,
			      "INSERT INTO metrics(submission_id, idx, name, step, value)"
			      " VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
			      &s, err) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(s, 1, submission_id);
		sqlite3_bind_int64(s, 2, m[i].idx);
		sqlite3_bind_text(s, 3, m[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 4, m[i].step);
		if (m[i].is_null)
			sqlite3_bind_null(s, 5);
		else
			sqlite3_bind_double(s, 5, m[i].value);
		if (sqlite3_step(s) != SQLITE_DONE) {
			sqlite3_finalize(s);
			return pbx_store_fail(st, err, "insert metrics");
		}
		*added += (size_t)sqlite3_changes(st->db);
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	return 0;
}

static void metric_read(sqlite3_stmt *s, void *row)
{
	struct pbx_metric *m = row;
	m->idx = sqlite3_column_int64(s, 0);
	m->name = pbx_store_col_text(s, 1);
	m->step = sqlite3_column_int64(s, 2);
	m->is_null = sqlite3_column_type(s, 3) == SQLITE_NULL;
	m->value = m->is_null ? 0 : sqlite3_column_double(s, 3);
}

static void metric_release(void *rows, size_t n)
{
	pbx_metrics_free(rows, n);
}

static const struct row_kind metric_rows = { sizeof(struct pbx_metric), metric_read, metric_release,
					     "read metrics" };

int pbx_store_metrics_list(struct pbx_store *st, int64_t submission_id, struct pbx_metric **rows,
			   size_t *n, struct pbx_err *err)
{
	return pbx_store_rows_read(
		st,
		"SELECT idx, name, step, value FROM metrics WHERE submission_id = ?"
		" ORDER BY idx, name, step",
		ROW_ID(submission_id), &metric_rows, (void **)rows, n, err);
}

void pbx_metrics_free(struct pbx_metric *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free((char *)rows[i].name);
	free(rows);
}

/* ------------------------------------------------------------ harvested */

static void harvested_read(sqlite3_stmt *s, void *row)
{
	struct pbx_harvested *h = row;
	h->idx = sqlite3_column_int64(s, 0);
	h->path = pbx_store_col_text(s, 1);
	h->size = sqlite3_column_int64(s, 2);
	h->mtime = sqlite3_column_int64(s, 3);
}

static void harvested_release(void *rows, size_t n)
{
	pbx_harvested_free(rows, n);
}

static const struct row_kind harvested_rows = { sizeof(struct pbx_harvested), harvested_read,
						harvested_release, "read harvested files" };

int pbx_store_harvested_list(struct pbx_store *st, int64_t submission_id,
			     struct pbx_harvested **rows, size_t *n, struct pbx_err *err)
{
	return pbx_store_rows_read(st,
				   "SELECT idx, path, size, mtime FROM harvested"
				   " WHERE submission_id = ? ORDER BY idx, path",
				   ROW_ID(submission_id), &harvested_rows, (void **)rows, n, err);
}

static void idx_read(sqlite3_stmt *s, void *row)
{
	*(int64_t *)row = sqlite3_column_int64(s, 0);
}

static void idx_release(void *rows, size_t n)
{
	(void)n;
	free(rows);
}

static const struct row_kind idx_rows = { sizeof(int64_t), idx_read, idx_release,
					  "read harvested metrics" };

int pbx_store_metrics_unmatched(struct pbx_store *st, int64_t submission_id, int64_t **idx,
				size_t *n, struct pbx_err *err)
{
	return pbx_store_rows_read(
		st,
		"SELECT h.idx FROM harvested h WHERE h.submission_id = ?1"
		" AND h.path = 'metrics.jsonl' AND NOT EXISTS (SELECT 1 FROM metrics m"
		" WHERE m.submission_id = ?1 AND m.idx = h.idx) ORDER BY h.idx",
		ROW_ID(submission_id), &idx_rows, (void **)idx, n, err);
}

int pbx_store_harvested_put(struct pbx_store *st, int64_t submission_id,
			    const struct pbx_harvested *rows, size_t n, struct pbx_err *err)
{
	sqlite3_stmt *s;
	size_t i;
	if (pbx_store_prepare(st,
			      "INSERT INTO harvested(submission_id, idx, path, size, mtime)"
			      " VALUES (?,?,?,?,?) ON CONFLICT(submission_id, idx, path) DO UPDATE"
			      " SET size = excluded.size, mtime = excluded.mtime",
			      &s, err) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		sqlite3_bind_int64(s, 1, submission_id);
		sqlite3_bind_int64(s, 2, rows[i].idx);
		sqlite3_bind_text(s, 3, rows[i].path, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 4, rows[i].size);
		sqlite3_bind_int64(s, 5, rows[i].mtime);
		if (sqlite3_step(s) != SQLITE_DONE) {
			sqlite3_finalize(s);
			return pbx_store_fail(st, err, "record harvested files");
		}
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	return 0;
}

/* ---------------------------------------------------------- unharvested */

static void unharvested_read(sqlite3_stmt *s, void *row)
{
	struct pbx_unharvested *u = row;
	u->package_id = pbx_store_col_text(s, 0);
	u->short_id = pbx_store_col_text(s, 1);
	u->name = pbx_store_col_text(s, 2);
	u->submission_id = sqlite3_column_int64(s, 3);
	u->live = (long)sqlite3_column_int64(s, 4);
	u->ended = (long)sqlite3_column_int64(s, 5);
}

static void unharvested_release(void *rows, size_t n)
{
	pbx_unharvested_free(rows, n);
}

static const struct row_kind unharvested_rows = { sizeof(struct pbx_unharvested), unharvested_read,
						  unharvested_release, "read unharvested tasks" };

int pbx_store_unharvested(struct pbx_store *st, int64_t cluster_id, struct pbx_unharvested **rows,
			  size_t *n, struct pbx_err *err)
{
	/* ended: ran (a start time), and its status file, which the
	 * wrapper writes last, is not home as it was at the end: no older
	 * than END, which the wrapper takes from the file system's clock
	 * (templates/pbx-task.sh), so the final status never is; a status
	 * harvested while the task ran is recorded with mtime -1 (harvest.c,
	 * harvest_recorded_mtime), so it never passes for the final one */
	return pbx_store_rows_read(
		st,
		"SELECT p.id, p.short_id, p.name, s.id,"
		" SUM(t.state IN ('PENDING', 'RUNNING', 'UNKNOWN')) AS live,"
		" SUM(t.state NOT IN ('NEW', 'PENDING', 'RUNNING', 'UNKNOWN')"
		"  AND t.start_time IS NOT NULL AND NOT EXISTS (SELECT 1 FROM harvested h"
		"  WHERE h.submission_id = t.submission_id AND h.idx = t.idx"
		"  AND h.path = 'status' AND h.mtime >= COALESCE(t.end_time, 0))) AS ended"
		" FROM tasks t JOIN submissions s ON s.id = t.submission_id"
		" JOIN packages p ON p.id = s.package_id WHERE s.cluster_id = ?"
		" GROUP BY s.id HAVING live + ended > 0 ORDER BY s.id",
		ROW_ID(cluster_id), &unharvested_rows, (void **)rows, n, err);
}

void pbx_unharvested_free(struct pbx_unharvested *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(rows[i].package_id);
		free(rows[i].short_id);
		free(rows[i].name);
	}
	free(rows);
}

void pbx_harvested_free(struct pbx_harvested *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(rows[i].path);
	free(rows);
}

int pbx_harvested_final_status(const struct pbx_harvested *rows, size_t n, int64_t idx,
			       int64_t end_time)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (rows[i].idx == idx && !strcmp(rows[i].path, "status"))
			return rows[i].mtime >= 0 && rows[i].mtime >= end_time;
	return 0;
}

int pbx_store_package_forget(struct pbx_store *st, const char *package_id, struct pbx_err *err)
{
	static const char *const sql[] = {
		"DELETE FROM metrics WHERE submission_id IN"
		" (SELECT id FROM submissions WHERE package_id = ?)",
		"DELETE FROM harvested WHERE submission_id IN"
		" (SELECT id FROM submissions WHERE package_id = ?)",
		"DELETE FROM tasks WHERE submission_id IN"
		" (SELECT id FROM submissions WHERE package_id = ?)",
		"DELETE FROM arrays WHERE submission_id IN"
		" (SELECT id FROM submissions WHERE package_id = ?)",
		"DELETE FROM submissions WHERE package_id = ?",
		"DELETE FROM packages WHERE id = ?",
	};
	sqlite3_stmt *stmt;
	size_t i;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	for (i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
		if (pbx_store_prepare(st, sql[i], &stmt, err) < 0)
			goto fail;
		sqlite3_bind_text(stmt, 1, package_id, -1, SQLITE_STATIC);
		if (pbx_store_step_done(st, stmt, err) < 0)
			goto fail;
	}
	return pbx_store_commit(st, err);
fail:
	pbx_store_rollback(st);
	return -1;
}

/* The text of the first column of each row of `sql` (its one parameter,
 * when has_id, bound to id), in order, into *v (the caller's); `what`
 * names it in an error. */
static int store_texts(struct pbx_store *st, const char *sql, int has_id, int64_t id,
		       const char *what, char ***v, size_t *n, struct pbx_err *err)
{
	sqlite3_stmt *s;
	int rc;
	*v = NULL;
	*n = 0;
	if (pbx_store_prepare(st, sql, &s, err) < 0)
		return -1;
	if (has_id)
		sqlite3_bind_int64(s, 1, id);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		*v = xreallocarray(*v, *n + 1, sizeof(**v));
		(*v)[(*n)++] = pbx_store_col_text(s, 0);
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		while (*n)
			free((*v)[--*n]);
		free(*v);
		*v = NULL;
		return pbx_store_fail(st, err, what);
	}
	return 0;
}

int pbx_store_cluster_package_ids(struct pbx_store *st, int64_t cluster_id, char ***ids, size_t *n,
				  struct pbx_err *err)
{
	return store_texts(st,
			   "SELECT DISTINCT p.short_id FROM packages p JOIN submissions s"
			   " ON s.package_id = p.id WHERE s.cluster_id = ? ORDER BY p.short_id",
			   1, cluster_id, "the cluster's packages", ids, n, err);
}

int pbx_store_param_names(struct pbx_store *st, char ***names, size_t *n, struct pbx_err *err)
{
	return store_texts(st,
			   "SELECT DISTINCT j.key FROM tasks t, json_each(t.params_json) j"
			   " WHERE json_valid(t.params_json) ORDER BY j.key",
			   0, 0, "parameter names", names, n, err);
}
