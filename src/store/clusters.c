/*
 * clusters.c - cluster and node rows (see store.h).
 *
 * A cluster name is unique among live clusters; a stopped cluster keeps its
 * row with state "deleted" so the audit log stays meaningful.
 */
#include "store/store_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLUSTER_COLS                                                               \
	"id, name, cloud, state, template_json, slot, created, updated, template," \
	" uid"

static void cluster_row_read(sqlite3_stmt *stmt, struct pbx_cluster_row *row)
{
	row->id = sqlite3_column_int64(stmt, 0);
	row->name = pbx_store_col_text(stmt, 1);
	row->cloud = pbx_store_col_text(stmt, 2);
	row->state = pbx_store_col_text(stmt, 3);
	row->template_json = pbx_store_col_text(stmt, 4);
	row->slot = sqlite3_column_int(stmt, 5);
	row->created = sqlite3_column_int64(stmt, 6);
	row->updated = sqlite3_column_int64(stmt, 7);
	row->template_name = pbx_store_col_text(stmt, 8);
	row->uid = pbx_store_col_text(stmt, 9);
}

static unsigned long cluster_gets; /* pbx_store_cluster_reads */

unsigned long pbx_store_cluster_reads(void)
{
	return cluster_gets;
}

/* The one row `sql` (one text parameter, `key`) selects into *row; with
 * `what` ("named", "with id") in the not-found error. */
static int cluster_get_one(struct pbx_store *st, const char *sql, const char *key, const char *what,
			   struct pbx_cluster_row *row, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int rc;
	memset(row, 0, sizeof(*row));
	if (pbx_store_prepare(st, sql, &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW)
		cluster_row_read(stmt, row);
	sqlite3_finalize(stmt);
	if (rc == SQLITE_ROW)
		return 0;
	if (rc == SQLITE_DONE)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no cluster %s '%s'", what, key);
	return pbx_store_fail(st, err, "read cluster");
}

int pbx_store_cluster_get(struct pbx_store *st, const char *name, struct pbx_cluster_row *row,
			  struct pbx_err *err)
{
	cluster_gets++;
	return cluster_get_one(st,
			       "SELECT " CLUSTER_COLS " FROM clusters"
			       " WHERE name = ? AND state != 'deleted'",
			       name, "named", row, err);
}

int pbx_store_cluster_create(struct pbx_store *st, const char *name, const char *uid,
			     const char *cloud, const char *template_json, int slot, int64_t *id,
			     struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int64_t now = (int64_t)time(NULL);
	if (pbx_store_prepare(st,
			      "INSERT INTO clusters(name, cloud, state, template_json, slot,"
			      " created, updated, uid) VALUES (?, ?, 'starting', ?, ?, ?, ?, ?)",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 7, uid, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, cloud, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, template_json, -1, SQLITE_STATIC);
	sqlite3_bind_int(stmt, 4, slot);
	sqlite3_bind_int64(stmt, 5, now);
	sqlite3_bind_int64(stmt, 6, now);
	if (pbx_store_step_done(st, stmt, err) < 0)
		return -1;
	*id = sqlite3_last_insert_rowid(st->db);
	pbx_store_event(st, *id, "cluster.create", "cluster %s (%s) id %s slot %d", name, cloud,
			uid, slot);
	return 0;
}

int pbx_store_cluster_get_uid(struct pbx_store *st, const char *uid, struct pbx_cluster_row *row,
			      struct pbx_err *err)
{
	return cluster_get_one(st, "SELECT " CLUSTER_COLS " FROM clusters WHERE uid = ?", uid,
			       "with id", row, err);
}

/* *id: the store number of the row with cluster id `uid`. */
static int cluster_id_of(struct pbx_store *st, const char *uid, int64_t *id, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int rc;
	if (pbx_store_prepare(st, "SELECT id FROM clusters WHERE uid = ?", &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, uid, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW)
		*id = sqlite3_column_int64(stmt, 0);
	sqlite3_finalize(stmt);
	return rc == SQLITE_ROW ? 0 : pbx_store_fail(st, err, "read cluster id");
}

int pbx_store_cluster_put(struct pbx_store *st, const struct pbx_cluster_row *row, int64_t *id,
			  struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st,
			      "INSERT INTO clusters(name, cloud, state, template_json, slot,"
			      " created, updated, template, uid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
			      " ON CONFLICT(uid) DO UPDATE SET name = excluded.name,"
			      " cloud = excluded.cloud, state = excluded.state,"
			      " template_json = excluded.template_json, slot = excluded.slot,"
			      " created = excluded.created, updated = excluded.updated,"
			      " template = excluded.template",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, row->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, row->cloud, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, row->state, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 4, row->template_json, -1, SQLITE_STATIC);
	sqlite3_bind_int(stmt, 5, row->slot);
	sqlite3_bind_int64(stmt, 6, row->created);
	sqlite3_bind_int64(stmt, 7, (int64_t)time(NULL));
	sqlite3_bind_text(stmt, 8, row->template_name, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 9, row->uid, -1, SQLITE_STATIC);
	if (pbx_store_step_done(st, stmt, err) < 0 || cluster_id_of(st, row->uid, id, err) < 0)
		return -1;
	pbx_store_event(st, *id, "cluster.adopt", "cluster %s (%s) id %s slot %d", row->name,
			row->cloud, row->uid, row->slot);
	return 0;
}

int pbx_store_cluster_set_state(struct pbx_store *st, int64_t id, const char *state,
				struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st, "UPDATE clusters SET state = ?, updated = ? WHERE id = ?", &stmt,
			      err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 2, (int64_t)time(NULL));
	sqlite3_bind_int64(stmt, 3, id);
	if (pbx_store_step_done(st, stmt, err) < 0)
		return -1;
	pbx_store_event(st, id, "cluster.state", "%s", state);
	return 0;
}

int pbx_store_cluster_set_template(struct pbx_store *st, int64_t id, const char *tmpl,
				   struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st, "UPDATE clusters SET template = ? WHERE id = ?", &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, tmpl, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 2, id);
	return pbx_store_step_done(st, stmt, err);
}

int pbx_store_cluster_set_template_json(struct pbx_store *st, int64_t id, const char *json,
					struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st, "UPDATE clusters SET template_json = ?, updated = ? WHERE id = ?",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, json, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 2, (int64_t)time(NULL));
	sqlite3_bind_int64(stmt, 3, id);
	return pbx_store_step_done(st, stmt, err);
}

int pbx_store_cluster_list(struct pbx_store *st, int include_deleted, struct pbx_cluster_row **rows,
			   size_t *n, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	size_t cap = 0;
	int rc;
	*rows = NULL;
	*n = 0;
	if (pbx_store_prepare(st,
			      include_deleted ? "SELECT " CLUSTER_COLS
						" FROM clusters ORDER BY name, id"
					      : "SELECT " CLUSTER_COLS
						" FROM clusters WHERE state != 'deleted'"
						" ORDER BY name",
			      &stmt, err) < 0)
		return -1;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 8;
			*rows = xreallocarray(*rows, cap, sizeof(**rows));
		}
		cluster_row_read(stmt, &(*rows)[(*n)++]);
	}
	sqlite3_finalize(stmt);
	if (rc != SQLITE_DONE) {
		pbx_cluster_rows_free(*rows, *n);
		*rows = NULL;
		*n = 0;
		return pbx_store_fail(st, err, "list clusters");
	}
	return 0;
}

int pbx_store_free_slot(struct pbx_store *st, const char *cloud, int from, int *slot,
			struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int rc, want = from;
	if (pbx_store_prepare(st,
			      "SELECT slot FROM clusters WHERE cloud = ? AND state != 'deleted'"
			      " ORDER BY slot",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, cloud, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		int used = sqlite3_column_int(stmt, 0);
		if (used < want)
			continue;
		if (used == want)
			want++;
		else if (used > want)
			break;
	}
	sqlite3_finalize(stmt);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return pbx_store_fail(st, err, "find free slot");
	*slot = want;
	return 0;
}

void pbx_cluster_row_free(struct pbx_cluster_row *row)
{
	free(row->name);
	free(row->uid);
	free(row->cloud);
	free(row->state);
	free(row->template_json);
	free(row->template_name);
	memset(row, 0, sizeof(*row));
}

void pbx_cluster_rows_free(struct pbx_cluster_row *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		pbx_cluster_row_free(&rows[i]);
	free(rows);
}

/* ------------------------------------------------------------------- nodes */

int pbx_store_node_put(struct pbx_store *st, const struct pbx_node_row *node, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(
		    st,
		    "INSERT INTO nodes(cluster_id, name, role, address, ssh_port,"
		    " gpus, instance_id, state, root, zone, public_address, operation,"
		    " instance_uid)"
		    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
		    " ON CONFLICT(cluster_id, name) DO UPDATE SET role = excluded.role,"
		    " address = excluded.address, ssh_port = excluded.ssh_port,"
		    " gpus = excluded.gpus, instance_id = excluded.instance_id,"
		    " state = excluded.state, root = excluded.root, zone = excluded.zone,"
		    " public_address = excluded.public_address,"
		    " operation = excluded.operation, instance_uid = excluded.instance_uid",
		    &stmt, err) < 0)
		return -1;
	sqlite3_bind_int64(stmt, 1, node->cluster_id);
	sqlite3_bind_text(stmt, 2, node->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, node->role, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 4, node->address ? node->address : "", -1, SQLITE_STATIC);
	sqlite3_bind_int(stmt, 5, node->ssh_port);
	sqlite3_bind_int(stmt, 6, node->gpus);
	sqlite3_bind_text(stmt, 7, node->instance_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 8, node->state ? node->state : "creating", -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 9, node->root ? node->root : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 10, node->zone, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 11, node->public_address, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 12, node->operation, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 13, node->instance_uid, -1, SQLITE_STATIC);
	return pbx_store_step_done(st, stmt, err);
}

int pbx_store_node_set_state(struct pbx_store *st, int64_t cluster_id, const char *name,
			     const char *state, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st, "UPDATE nodes SET state = ? WHERE cluster_id = ? AND name = ?",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 2, cluster_id);
	sqlite3_bind_text(stmt, 3, name, -1, SQLITE_STATIC);
	return pbx_store_step_done(st, stmt, err);
}

int pbx_store_node_delete(struct pbx_store *st, int64_t cluster_id, const char *name,
			  struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st, "DELETE FROM nodes WHERE cluster_id = ? AND name = ?", &stmt,
			      err) < 0)
		return -1;
	sqlite3_bind_int64(stmt, 1, cluster_id);
	sqlite3_bind_text(stmt, 2, name, -1, SQLITE_STATIC);
	return pbx_store_step_done(st, stmt, err);
}

int pbx_store_node_list(struct pbx_store *st, int64_t cluster_id, struct pbx_node_row **rows,
			size_t *n, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	size_t cap = 0;
	int rc;
	*rows = NULL;
	*n = 0;
	if (pbx_store_prepare(st,
			      "SELECT id, cluster_id, name, role, address, ssh_port, gpus,"
			      " instance_id, state, root, zone, public_address, operation,"
			      " instance_uid FROM nodes WHERE cluster_id = ?"
			      " ORDER BY role = 'compute', length(name), name",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_int64(stmt, 1, cluster_id);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		struct pbx_node_row *r;
		if (*n == cap) {
			cap = cap ? 2 * cap : 8;
			*rows = xreallocarray(*rows, cap, sizeof(**rows));
		}
		r = &(*rows)[(*n)++];
		r->id = sqlite3_column_int64(stmt, 0);
		r->cluster_id = sqlite3_column_int64(stmt, 1);
		r->name = pbx_store_col_text(stmt, 2);
		r->role = pbx_store_col_text(stmt, 3);
		r->address = pbx_store_col_text(stmt, 4);
		r->ssh_port = sqlite3_column_int(stmt, 5);
		r->gpus = sqlite3_column_int(stmt, 6);
		r->instance_id = pbx_store_col_text(stmt, 7);
		r->state = pbx_store_col_text(stmt, 8);
		r->root = pbx_store_col_text(stmt, 9);
		r->zone = pbx_store_col_text(stmt, 10);
		r->public_address = pbx_store_col_text(stmt, 11);
		r->operation = pbx_store_col_text(stmt, 12);
		r->instance_uid = pbx_store_col_text(stmt, 13);
	}
	sqlite3_finalize(stmt);
	if (rc != SQLITE_DONE) {
		pbx_node_rows_free(*rows, *n);
		*rows = NULL;
		*n = 0;
		return pbx_store_fail(st, err, "list nodes");
	}
	return 0;
}

void pbx_node_row_release(struct pbx_node_row *r)
{
	free(r->name);
	free(r->role);
	free(r->address);
	free(r->instance_id);
	free(r->state);
	free(r->root);
	free(r->zone);
	free(r->public_address);
	free(r->operation);
	free(r->instance_uid);
	memset(r, 0, sizeof(*r));
}

void pbx_node_rows_free(struct pbx_node_row *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		pbx_node_row_release(&rows[i]);
	free(rows);
}
