/*
 * hostkeys.c - pinned SSH host keys (trust on first use, then refuse a
 * change).  The policy that uses these lives in src/ssh/hostkeys.c.
 */
#include "store/store_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <time.h>

int pbx_store_hostkey_get(struct pbx_store *st, const char *hostport, char **type, char **key_b64,
			  struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int rc;
	*type = *key_b64 = NULL;
	if (pbx_store_prepare(st, "SELECT key_type, key_b64 FROM host_keys WHERE hostport = ?",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, hostport, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW) {
		*type = pbx_store_col_text(stmt, 0);
		*key_b64 = pbx_store_col_text(stmt, 1);
	}
	sqlite3_finalize(stmt);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return pbx_store_fail(st, err, "read host key");
}

int pbx_store_hostkey_put(struct pbx_store *st, const char *hostport, const char *type,
			  const char *key_b64, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st,
			      "INSERT INTO host_keys(hostport, key_type, key_b64, first_seen)"
			      " VALUES (?, ?, ?, ?) ON CONFLICT(hostport) DO NOTHING",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, hostport, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, type, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, key_b64, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 4, (int64_t)time(NULL));
	if (pbx_store_step_done(st, stmt, err) < 0)
		return -1;
	pbx_store_event(st, 0, "hostkey.pin", "%s %s", hostport, type);
	return 0;
}

int pbx_store_hostkey_forget(struct pbx_store *st, const char *hostport, int *removed,
			     struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st, "DELETE FROM host_keys WHERE hostport = ?", &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, hostport, -1, SQLITE_STATIC);
	if (pbx_store_step_done(st, stmt, err) < 0)
		return -1;
	*removed = sqlite3_changes(st->db);
	if (*removed)
		pbx_store_event(st, 0, "hostkey.forget", "%s", hostport);
	return 0;
}

int pbx_store_hostkey_forget_prefix(struct pbx_store *st, const char *prefix, int *removed,
				    struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st,
			      "DELETE FROM host_keys WHERE substr(hostport, 1, length(?1)) = ?1",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, prefix, -1, SQLITE_STATIC);
	if (pbx_store_step_done(st, stmt, err) < 0)
		return -1;
	*removed = sqlite3_changes(st->db);
	if (*removed)
		pbx_store_event(st, 0, "hostkey.forget", "%d keys under %s", *removed, prefix);
	return 0;
}

int pbx_store_hostkey_list_prefix(struct pbx_store *st, const char *prefix,
				  struct pbx_hostkey_row **rows, size_t *n, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int rc;
	*rows = NULL;
	*n = 0;
	if (pbx_store_prepare(st,
			      "SELECT hostport, key_type, key_b64 FROM host_keys"
			      " WHERE substr(hostport, 1, length(?1)) = ?1 ORDER BY hostport",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, prefix, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		struct pbx_hostkey_row *r;
		*rows = xreallocarray(*rows, *n + 1, sizeof(**rows));
		r = &(*rows)[(*n)++];
		r->hostport = pbx_store_col_text(stmt, 0);
		r->type = pbx_store_col_text(stmt, 1);
		r->key_b64 = pbx_store_col_text(stmt, 2);
	}
	sqlite3_finalize(stmt);
	if (rc == SQLITE_DONE)
		return 0;
	pbx_hostkey_rows_free(*rows, *n);
	*rows = NULL;
	*n = 0;
	return pbx_store_fail(st, err, "list host keys");
}

void pbx_hostkey_rows_free(struct pbx_hostkey_row *rows, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(rows[i].hostport);
		free(rows[i].type);
		free(rows[i].key_b64);
	}
	free(rows);
}
