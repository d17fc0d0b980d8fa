/*
 * pull.c - `pbx pull`: one listing of the pool, then every task object not
 * pulled yet (or changed since) downloaded in parallel, its CRC32C checked
 * (objstore), unpacked safely (archive.c) into
 * $PBX_HOME/pool/SCHEME/BUCKET/PREFIX/PUBLISHER/PKG/TASK/ and its record
 * checked against its name (record.c) before the store records it.  A bad
 * object is counted and skipped; the others still arrive.
 */
#include "pool/pool_internal.h"
#include "util/fanout.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One object to pull and what became of it. */
struct pull_item {
	const struct pbx_object *obj;
	char publisher[65], short_id[13];
	int64_t idx;
	int ok;
	struct pool_record rec;
	char *record_text;
};

struct pull {
	const struct pbx_pull_opts *o;
	char *pool; /* normal URL */
	char *root; /* $PBX_HOME/pool/SCHEME/BUCKET/PREFIX */
	struct pool_stores *stores;
	struct pull_item *items;
	size_t nitems;
	uint64_t bytes;
};

static char *item_dir(const struct pull *p, const struct pull_item *it)
{
	return xasprintf("%s/%s/%s/%" PRId64, p->root, it->publisher, it->short_id, it->idx);
}

/* The record must say what the object's name says. */
static int item_check(const struct pull_item *it, struct pbx_err *err)
{
	const struct pool_record *r = &it->rec;
	if (strcmp(r->publisher, it->publisher) != 0)
		return pbx_err_setc(err, PBX_EXIT_SECURITY,
				    "its record names publisher '%s', its place '%s'", r->publisher,
				    it->publisher);
	if (strncmp(r->package_id, it->short_id, 12) != 0 || r->idx != it->idx)
		return pbx_err_setc(err, PBX_EXIT_SECURITY,
				    "its record is of another package or task (%.12s:%" PRId64 ")",
				    r->package_id, r->idx);
	return 0;
}

/* Unpacks into DIR.partial, reads and checks the record, then renames. */
static int item_unpack(struct pull *p, struct pull_item *it, const struct pbx_buf *gz,
		       struct pbx_err *err)
{
	char *dir = item_dir(p, it), *tmp = xasprintf("%s.partial", dir), *rec;
	struct pbx_buf text = PBX_BUF_INIT;
	int rc = -1;
	if (access(tmp, F_OK) == 0 && pbx_rm_rf(tmp, err) < 0)
		goto out;
	if (pbx_mkdir_p(tmp, 0755, err) < 0 || pool_archive_extract(gz->buf, gz->len, tmp, err) < 0)
		goto out;
	rec = xasprintf("%s/%s", tmp, POOL_RECORD_NAME);
	rc = pbx_read_regular(rec, POOL_RECORD_MAX, &text, NULL, err);
	free(rec);
	if (rc == 0)
		rc = pool_record_parse(text.buf, text.len, &it->rec, err);
	if (rc == 0 && (rc = item_check(it, err)) < 0)
		pool_record_free(&it->rec);
	if (rc == 0 && access(dir, F_OK) == 0)
		rc = pbx_rm_rf(dir, err);
	if (rc == 0 && rename(tmp, dir) != 0)
		rc = pbx_err_set(err, "cannot rename %s: %s", tmp, strerror(errno));
	if (rc == 0)
		it->record_text = pbx_buf_detach(&text, NULL);
out:
	if (rc < 0 && access(tmp, F_OK) == 0) {
		struct pbx_err ignored = PBX_ERR_INIT;
		pbx_rm_rf(tmp, &ignored);
	}
	pbx_buf_release(&text);
	free(tmp);
	free(dir);
	return rc;
}

static int pull_one(void *ctx, size_t i, struct pbx_err *err)
{
	struct pull *p = ctx;
	struct pull_item *it = &p->items[i];
	struct pbx_buf gz = PBX_BUF_INIT;
	struct pbx_objstore *s = pool_stores_take(p->stores);
	int rc = pbx_objstore_get(s, it->obj->name, POOL_OBJECT_MAX, &gz, NULL, err);
	pool_stores_give(p->stores, s);
	if (rc == 0)
		rc = item_unpack(p, it, &gz, err);
	if (rc < 0)
		pbx_err_prefix(err, "%s", it->obj->name);
	it->ok = rc == 0;
	pool_stores_progress(p->stores, p->nitems, gz.len, p->o->progress, p->o->progress_ctx);
	pbx_buf_release(&gz);
	return 0; /* a bad object is counted, not fatal */
}

/* The task objects of the listing that this store has not pulled at their
 * version. */
static void pull_plan(struct pull *p, const struct pbx_object *v, size_t n,
		      const struct pbx_pool_task *have, size_t nhave, struct pbx_pull_stats *stats)
{
	const char *prefix = pbx_objstore_where(pool_stores_first(p->stores))->prefix;
	size_t i, j;
	p->items = xcalloc(n + 1, sizeof(*p->items));
	for (i = 0; i < n; i++) {
		struct pull_item *it = &p->items[p->nitems];
		int same = 0;
		if (pool_object_parse(prefix, v[i].name, it->publisher, it->short_id, &it->idx) <
		    0) {
			stats->other++;
			continue;
		}
		stats->objects++;
		for (j = 0; j < nhave && !same; j++)
			same = !strcmp(have[j].object, v[i].name) &&
			       !strcmp(have[j].version, v[i].version ? v[i].version : "");
		if (same) {
			stats->already++;
			continue;
		}
		it->obj = &v[i];
		p->nitems++;
	}
}

static void metrics_of(const struct pool_record *r, const char *object)
{
	size_t i;
	for (i = 0; i < r->nmetrics; i++)
		r->metrics[i].object = (char *)object;
}

/* Records the pulled items in one transaction. */
static int pull_record(struct pbx_store *st, struct pull *p, struct pbx_pull_stats *stats,
		       struct pbx_err *err)
{
	int64_t now = (int64_t)time(NULL);
	size_t i;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	for (i = 0; i < p->nitems; i++) {
		struct pull_item *it = &p->items[i];
		struct pbx_pool_task t;
		if (!it->ok)
			continue;
		memset(&t, 0, sizeof(t));
		t.pool = p->pool;
		t.object = it->obj->name;
		t.version = it->obj->version ? it->obj->version : "";
		t.publisher = it->publisher;
		t.package_id = it->rec.package_id;
		t.experiment = it->rec.experiment;
		t.idx = it->idx;
		t.params_json = it->rec.params_json;
		t.state = it->rec.state;
		t.start_time = it->rec.start_time;
		t.end_time = it->rec.end_time;
		t.record_json = it->record_text;
		t.pulled = now;
		metrics_of(&it->rec, it->obj->name);
		if (pbx_store_pool_put(st, &t, it->rec.metrics, it->rec.nmetrics, err) < 0) {
			pbx_store_rollback(st);
			return -1;
		}
		stats->pulled++;
	}
	return pbx_store_commit(st, err);
}

static void pull_free(struct pull *p)
{
	size_t i;
	for (i = 0; i < p->nitems; i++) {
		pool_record_free(&p->items[i].rec);
		free(p->items[i].record_text);
	}
	free(p->items);
	free(p->pool);
	free(p->root);
	pool_stores_close(p->stores);
}

static int pull_fetch(struct pull *p, int jobs, struct pbx_pull_stats *stats)
{
	struct pbx_err *errs = xcalloc(p->nitems + 1, sizeof(*errs));
	size_t i;
	pbx_fanout(p->nitems, jobs, pull_one, p, errs);
	for (i = 0; i < p->nitems; i++) {
		if (p->items[i].ok) {
			stats->bytes += p->items[i].obj->size;
			continue;
		}
		stats->refused++;
		if (!stats->first_refusal)
			stats->first_refusal = xstrdup(errs[i].msg);
	}
	free(errs);
	return 0;
}

int pbx_pool_pull(struct pbx_store *st, const struct pbx_config *cfg, const struct pbx_pull_opts *o,
		  struct pbx_pull_stats *stats, struct pbx_err *err)
{
	struct pull p;
	struct pbx_object *v = NULL;
	struct pbx_pool_task *have = NULL;
	size_t n = 0, nhave = 0;
	int jobs = o->jobs > 0 ? o->jobs : 8, rc = -1;
	const struct pbx_objstore_url *u;
	memset(&p, 0, sizeof(p));
	memset(stats, 0, sizeof(*stats));
	p.o = o;
	if (!(p.pool = pbx_pool_url_normal(o->url, err)) ||
	    pool_stores_open(o->url, cfg, jobs, &p.stores, stats->identity, sizeof(stats->identity),
			     err) < 0)
		goto out;
	u = pbx_objstore_where(pool_stores_first(p.stores));
	p.root = xasprintf("%s/pool/%s/%s/%s", pbx_home(), u->scheme, u->bucket, u->prefix);
	if (pbx_objstore_list(pool_stores_first(p.stores), u->prefix, &v, &n, err) < 0 ||
	    pbx_store_pool_tasks(st, p.pool, &have, &nhave, err) < 0)
		goto out;
	pull_plan(&p, v, n, have, nhave, stats);
	if (p.nitems && pbx_mkdir_p(p.root, 0755, err) < 0)
		goto out;
	pull_fetch(&p, jobs, stats);
	rc = pull_record(st, &p, stats, err);
out:
	pbx_pool_tasks_free(have, nhave);
	pull_free(&p);
	pbx_objects_free(v, n);
	return rc;
}

void pbx_pull_stats_release(struct pbx_pull_stats *s)
{
	free(s->first_refusal);
	s->first_refusal = NULL;
}
