/*
 * images.c - the rows of prebaked images (`pbx image build|list|delete`,
 * see store.h and src/cluster/image.c).  An image name is unique among
 * live rows; a deleted image keeps its row with state "deleted".
 */
#include "store/store_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IMAGE_COLS                                                                  \
	"id, name, uid, cloud, project, zone, source_image, template, link, state," \
	" detail, created, updated"

static void image_row_read(sqlite3_stmt *stmt, struct pbx_image_row *r)
{
	r->id = sqlite3_column_int64(stmt, 0);
	r->name = pbx_store_col_text(stmt, 1);
	r->uid = pbx_store_col_text(stmt, 2);
	r->cloud = pbx_store_col_text(stmt, 3);
	r->project = pbx_store_col_text(stmt, 4);
	r->zone = pbx_store_col_text(stmt, 5);
	r->source_image = pbx_store_col_text(stmt, 6);
	r->template_name = pbx_store_col_text(stmt, 7);
	r->link = pbx_store_col_text(stmt, 8);
	r->state = pbx_store_col_text(stmt, 9);
	r->detail = pbx_store_col_text(stmt, 10);
	r->created = sqlite3_column_int64(stmt, 11);
	r->updated = sqlite3_column_int64(stmt, 12);
}

int pbx_store_image_create(struct pbx_store *st, const struct pbx_image_row *row, int64_t *id,
			   struct pbx_err *err)
{
	struct pbx_image_row old;
	sqlite3_stmt *stmt;
	int64_t now = (int64_t)time(NULL);
	if (pbx_store_image_get(st, row->name, &old, err) == 0) {
		pbx_image_row_free(&old);
		return pbx_err_setc(err, PBX_EXIT_USAGE, "an image named '%s' is recorded already",
				    row->name);
	}
	if (err->code != PBX_EXIT_NOTFOUND)
		return -1;
	pbx_err_clear(err);
	if (pbx_store_prepare(st,
			      "INSERT INTO images(name, uid, cloud, project, zone, source_image,"
			      " template, state, created, updated)"
			      " VALUES (?, ?, ?, ?, ?, ?, ?, 'building', ?, ?)",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, row->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, row->uid, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, row->cloud, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 4, row->project, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 5, row->zone ? row->zone : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 6, row->source_image, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 7, row->template_name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 8, now);
	sqlite3_bind_int64(stmt, 9, now);
	if (pbx_store_step_done(st, stmt, err) < 0)
		return -1;
	*id = sqlite3_last_insert_rowid(st->db);
	pbx_store_event(st, 0, "image.create", "image %s (%s %s) id %s from %s", row->name,
			row->cloud, row->project, row->uid, row->source_image);
	return 0;
}

int pbx_store_image_get(struct pbx_store *st, const char *name, struct pbx_image_row *row,
			struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int rc;
	memset(row, 0, sizeof(*row));
	if (pbx_store_prepare(st,
			      "SELECT " IMAGE_COLS " FROM images"
			      " WHERE name = ? AND state != 'deleted' ORDER BY id DESC LIMIT 1",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW)
		image_row_read(stmt, row);
	sqlite3_finalize(stmt);
	if (rc == SQLITE_ROW)
		return 0;
	if (rc == SQLITE_DONE)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no image named '%s'", name);
	return pbx_store_fail(st, err, "read image");
}

int pbx_store_image_set(struct pbx_store *st, int64_t id, const char *state, const char *detail,
			const char *link, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st,
			      "UPDATE images SET state = ?, detail = coalesce(?, detail),"
			      " link = coalesce(?, link), updated = ? WHERE id = ?",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, state, -1, SQLITE_STATIC);
	if (detail)
		sqlite3_bind_text(stmt, 2, detail, -1, SQLITE_STATIC);
	if (link)
		sqlite3_bind_text(stmt, 3, link, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 4, (int64_t)time(NULL));
	sqlite3_bind_int64(stmt, 5, id);
	if (pbx_store_step_done(st, stmt, err) < 0)
		return -1;
	pbx_store_event(st, 0, "image.state", "image row %lld: %s%s%s", (long long)id, state,
			detail && *detail ? ": " : "", detail ? detail : "");
	return 0;
}

int pbx_store_image_list(struct pbx_store *st, int include_deleted, struct pbx_image_row **rows,
			 size_t *n, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	size_t cap = 0;
	int rc;
	*rows = NULL;
	*n = 0;
	if (pbx_store_prepare(st,
			      include_deleted
				      ? "SELECT " IMAGE_COLS " FROM images ORDER BY name, id"
				      : "SELECT " IMAGE_COLS " FROM images WHERE state != 'deleted'"
					" ORDER BY name, id",
			      &stmt, err) < 0)
		return -1;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 8;
			*rows = xrealloc(*rows, cap * sizeof(**rows));
		}
		image_row_read(stmt, &(*rows)[(*n)++]);
	}
	sqlite3_finalize(stmt);
	if (rc != SQLITE_DONE) {
		pbx_image_rows_free(*rows, *n);
		*rows = NULL;
		*n = 0;
		return pbx_store_fail(st, err, "list images");
	}
	return 0;
}

void pbx_image_row_free(struct pbx_image_row *r)
{
	if (!r)
		return;
	free(r->name);
	free(r->uid);
	free(r->cloud);
	free(r->project);
	free(r->zone);
	free(r->source_image);
	free(r->template_name);
	free(r->link);
	free(r->state);
	free(r->detail);
	memset(r, 0, sizeof(*r));
}

void pbx_image_rows_free(struct pbx_image_row *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		pbx_image_row_free(&rows[i]);
	free(rows);
}
