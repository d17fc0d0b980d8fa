/*
 * prices.c - the price cache (see store.h, "prices"): what each fetch of
 * a cloud's price catalogue brought and when.  src/cloud/price decides
 * when to fetch; this file only keeps the rows.
 */
#include "store/store_internal.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void pbx_price_items_free(struct pbx_price_item *v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(v[i].item);
	free(v);
}

static int prices_clear(struct pbx_store *st, const char *cloud, const char *region,
			const char *scope, struct pbx_err *err)
{
	static const char *const sql[] = {
		"DELETE FROM prices WHERE cloud = ? AND region = ? AND scope = ?",
		"DELETE FROM price_fetches WHERE cloud = ? AND region = ? AND scope = ?",
	};
	sqlite3_stmt *stmt;
	size_t i;
	for (i = 0; i < 2; i++) {
		if (pbx_store_prepare(st, sql[i], &stmt, err) < 0)
			return -1;
		sqlite3_bind_text(stmt, 1, cloud, -1, SQLITE_STATIC);
		sqlite3_bind_text(stmt, 2, region, -1, SQLITE_STATIC);
		sqlite3_bind_text(stmt, 3, scope, -1, SQLITE_STATIC);
		if (pbx_store_step_done(st, stmt, err) < 0)
			return -1;
	}
	return 0;
}

static int prices_insert(struct pbx_store *st, const char *cloud, const char *region,
			 const char *scope, const struct pbx_price_item *p, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st,
			      "INSERT OR REPLACE INTO prices(cloud, region, scope, item, spot,"
			      " nanos, currency) VALUES (?, ?, ?, ?, ?, ?, ?)",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, cloud, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, region, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, scope, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 4, p->item, -1, SQLITE_STATIC);
	sqlite3_bind_int(stmt, 5, p->spot);
	sqlite3_bind_int64(stmt, 6, p->nanos);
	sqlite3_bind_text(stmt, 7, p->currency, -1, SQLITE_STATIC);
	return pbx_store_step_done(st, stmt, err);
}

static int fetch_record(struct pbx_store *st, const char *cloud, const char *region,
			const char *scope, int64_t fetched, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	if (pbx_store_prepare(st,
			      "INSERT INTO price_fetches(cloud, region, scope, fetched)"
			      " VALUES (?, ?, ?, ?)",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, cloud, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, region, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, scope, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 4, fetched);
	return pbx_store_step_done(st, stmt, err);
}

int pbx_store_prices_put(struct pbx_store *st, const char *cloud, const char *region,
			 const char *scope, int64_t fetched, const struct pbx_price_item *v,
			 size_t n, struct pbx_err *err)
{
	size_t i;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	if (prices_clear(st, cloud, region, scope, err) < 0)
		goto fail;
	for (i = 0; i < n; i++)
		if (prices_insert(st, cloud, region, scope, &v[i], err) < 0)
			goto fail;
	if (fetch_record(st, cloud, region, scope, fetched, err) < 0)
		goto fail;
	return pbx_store_commit(st, err);
fail:
	pbx_store_rollback(st);
	return -1;
}

int pbx_store_prices_fetched(struct pbx_store *st, const char *cloud, const char *region,
			     const char *scope, int64_t *fetched, struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int rc;
	*fetched = 0;
	if (pbx_store_prepare(st,
			      "SELECT fetched FROM price_fetches WHERE cloud = ? AND"
			      " region = ? AND scope = ?",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, cloud, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, region, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, scope, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW)
		*fetched = sqlite3_column_int64(stmt, 0);
	sqlite3_finalize(stmt);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return pbx_store_fail(st, err, "read price fetches");
	return 0;
}

int pbx_store_price_get(struct pbx_store *st, const char *cloud, const char *region,
			const char *item, int spot, int64_t *nanos, char currency[8],
			struct pbx_err *err)
{
	sqlite3_stmt *stmt;
	int rc;
	if (pbx_store_prepare(st,
			      "SELECT nanos, currency FROM prices WHERE cloud = ? AND"
			      " region = ? AND item = ? AND spot = ? LIMIT 1",
			      &stmt, err) < 0)
		return -1;
	sqlite3_bind_text(stmt, 1, cloud, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, region, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, item, -1, SQLITE_STATIC);
	sqlite3_bind_int(stmt, 4, spot);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW) {
		const unsigned char *c = sqlite3_column_text(stmt, 1);
		*nanos = sqlite3_column_int64(stmt, 0);
		snprintf(currency, 8, "%s", c ? (const char *)c : "");
	}
	sqlite3_finalize(stmt);
	if (rc == SQLITE_ROW)
		return 0;
	if (rc == SQLITE_DONE)
		return 1;
	return pbx_store_fail(st, err, "read prices");
}
