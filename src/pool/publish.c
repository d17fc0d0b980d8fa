/*
 * publish.c - `pbx publish`: each ended task of a package whose results
 * are home becomes one object in the pool (archive.c), created only when
 * absent; a publisher name is claimed first (publisher.c).  One listing
 * says what is there already, so publishing again uploads nothing.
 */
#include "config/config.h"
#include "jobs/jobs.h"
#include "pool/pool_internal.h"
#include "util/fanout.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What publishing one package reads once and every upload shares. */
struct publish {
	const struct pbx_publish_opts *o;
	struct pbx_package_row pkg;
	struct pbx_submission_row sub;
	char *cloud;
	struct pbx_task_row *tasks;
	size_t ntasks;
	struct pbx_metric *pts;
	size_t npts;
	struct pbx_harvested *files;
	size_t nfiles;
	struct pbx_cost cost;
	struct pool_stores *stores;
	size_t *todo; /* indexes into tasks */
	size_t ntodo;
	size_t uploaded, already;
	uint64_t bytes;
	int64_t now;
};

static int publish_read(struct pbx_store *st, const char *ref, struct publish *p,
			struct pbx_err *err)
{
	struct pbx_submission_row *subs = NULL;
	struct pbx_cluster_row cl;
	struct pbx_err ignored = PBX_ERR_INIT; /* a deleted cluster: its cloud is not known */
	size_t nsubs = 0;
	if (pbx_store_package_find(st, ref, &p->pkg, err) < 0 ||
	    pbx_store_submissions_of(st, p->pkg.id, &subs, &nsubs, err) < 0)
		return -1;
	if (!nsubs)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "package %s was never submitted",
				    p->pkg.short_id);
	p->sub = subs[nsubs - 1];
	memset(&subs[nsubs - 1], 0, sizeof(subs[0]));
	pbx_submission_rows_free(subs, nsubs);
	memset(&cl, 0, sizeof(cl));
	if (pbx_store_cluster_get(st, p->sub.cluster_name, &cl, &ignored) == 0) {
		p->cloud = xstrdup(cl.cloud);
		pbx_cluster_row_free(&cl);
	}
	if (pbx_store_tasks_list(st, p->sub.id, &p->tasks, &p->ntasks, err) < 0 ||
	    pbx_store_metrics_list(st, p->sub.id, &p->pts, &p->npts, err) < 0 ||
	    pbx_store_harvested_list(st, p->sub.id, &p->files, &p->nfiles, err) < 0)
		return -1;
	return pbx_cost_of(st, &p->sub, p->tasks, p->ntasks, p->now, &p->cost, err);
}

static void publish_free(struct publish *p)
{
	pbx_package_row_free(&p->pkg);
	pbx_submission_row_free(&p->sub);
	free(p->cloud);
	pbx_task_rows_free(p->tasks, p->ntasks);
	pbx_metrics_free(p->pts, p->npts);
	pbx_harvested_free(p->files, p->nfiles);
	pbx_cost_free(&p->cost);
	pool_stores_close(p->stores);
	free(p->todo);
}

static char *task_dir(const struct publish *p, int64_t idx)
{
	return xasprintf("%s/results/%s/%" PRId64, pbx_home(), p->pkg.short_id, idx);
}

/* The range [*first, *first + *n) of rows of `idx` in an array sorted by
 * task index, found by scanning (rows of one submission, in idx order). */
static void rows_of(int64_t idx, const void *rows, size_t nrows, size_t size, size_t idx_offset,
		    size_t *first, size_t *n)
{
	size_t i;
	*first = 0;
	*n = 0;
	for (i = 0; i < nrows; i++) {
		int64_t v;
		memcpy(&v, (const char *)rows + i * size + idx_offset, sizeof(v));
		if (v == idx) {
			if (!*n)
				*first = i;
			(*n)++;
		}
	}
}

/* Sorts tasks into not ended, not home, already there, and to do. */
static void publish_plan(struct publish *p, const struct pbx_object *have, size_t nhave,
			 struct pbx_publish_stats *stats)
{
	const char *prefix = pbx_objstore_where(pool_stores_first(p->stores))->prefix;
	size_t i, j;
	p->todo = xcalloc(p->ntasks + 1, sizeof(*p->todo));
	for (i = 0; i < p->ntasks; i++) {
		char *name, *dir;
		int there = 0;
		if (!pbx_task_state_final(p->tasks[i].state)) {
			stats->not_ended++;
			continue;
		}
		dir = task_dir(p, p->tasks[i].idx);
		if (access(dir, F_OK) != 0 ||
		    !pbx_harvested_final_status(p->files, p->nfiles, p->tasks[i].idx,
						p->tasks[i].end_time)) {
			stats->not_home++;
			free(dir);
			continue;
		}
		free(dir);
		name = pool_object_name(prefix, p->o->publisher, p->pkg.short_id, p->tasks[i].idx);
		for (j = 0; j < nhave && !there; j++)
			there = strcmp(have[j].name, name) == 0;
		free(name);
		if (there)
			p->already++;
		else
			p->todo[p->ntodo++] = i;
	}
}

/* The record and object of task tasks[ti] into *obj. */
static int publish_object(struct publish *p, size_t ti, struct pbx_buf *obj, struct pbx_err *err)
{
	const struct pbx_task_row *t = &p->tasks[ti];
	struct pool_record_in in;
	size_t fp, nf, mp, nm, missing;
	char *record, *dir;
	int rc;
	rows_of(t->idx, p->files, p->nfiles, sizeof(*p->files), offsetof(struct pbx_harvested, idx),
		&fp, &nf);
	rows_of(t->idx, p->pts, p->npts, sizeof(*p->pts), offsetof(struct pbx_metric, idx), &mp,
		&nm);
	memset(&in, 0, sizeof(in));
	in.publisher = p->o->publisher;
	in.pkg = &p->pkg;
	in.sub = &p->sub;
	in.cloud = p->cloud;
	in.task = t;
	in.pts = p->pts + mp;
	in.npts = nm;
	in.files = p->files + fp;
	in.nfiles = nf;
	in.cost = p->cost.tracked && ti < p->cost.n ? &p->cost.tasks[ti] : NULL;
	in.now = p->now;
	record = pool_record_make(&in);
	dir = task_dir(p, t->idx);
	rc = pool_archive_make(record, dir, in.files, in.nfiles, t->end_time ? t->end_time : p->now,
			       obj, &missing, err);
	free(dir);
	free(record);
	return rc;
}

static int publish_one(void *ctx, size_t i, struct pbx_err *err)
{
	struct publish *p = ctx;
	size_t ti = p->todo[i];
	struct pbx_buf obj = PBX_BUF_INIT;
	struct pbx_objstore *s;
	char *name;
	int rc;
	if (publish_object(p, ti, &obj, err) < 0) {
		pbx_buf_release(&obj);
		return pbx_err_prefix(err, "task %" PRId64, p->tasks[ti].idx);
	}
	s = pool_stores_take(p->stores);
	name = pool_object_name(pbx_objstore_where(s)->prefix, p->o->publisher, p->pkg.short_id,
				p->tasks[ti].idx);
	rc = pbx_objstore_put_new(s, name, obj.buf, obj.len, "application/gzip", err);
	pool_stores_give(p->stores, s);
	__atomic_add_fetch(rc == PBX_OBJSTORE_EXISTS ? &p->already : &p->uploaded, rc >= 0 ? 1 : 0,
			   __ATOMIC_RELAXED);
	if (rc == 0)
		__atomic_add_fetch(&p->bytes, obj.len, __ATOMIC_RELAXED);
	pool_stores_progress(p->stores, p->ntodo, rc == 0 ? obj.len : 0, p->o->progress,
			     p->o->progress_ctx);
	free(name);
	pbx_buf_release(&obj);
	return rc < 0 ? -1 : 0;
}

/* Uploads the planned objects; the first failure's error in err. */
static int publish_upload(struct publish *p, int jobs, struct pbx_err *err)
{
	struct pbx_err *errs = xcalloc(p->ntodo + 1, sizeof(*errs));
	size_t i;
	int failed = pbx_fanout(p->ntodo, jobs, publish_one, p, errs);
	for (i = 0; i < p->ntodo && failed; i++)
		if (errs[i].msg[0]) {
			*err = errs[i];
			pbx_err_prefix(err, "%d of %zu uploads failed; the first", failed,
				       p->ntodo);
			break;
		}
	free(errs);
	return failed ? -1 : 0;
}

int pbx_pool_publish(struct pbx_store *st, const struct pbx_config *cfg, const char *ref,
		     const struct pbx_publish_opts *o, struct pbx_publish_stats *stats,
		     struct pbx_err *err)
{
	struct publish p;
	struct pbx_object *have = NULL;
	size_t nhave = 0;
	int jobs = o->jobs > 0 ? o->jobs : 8, rc = -1;
	char *prefix = NULL;
	memset(&p, 0, sizeof(p));
	memset(stats, 0, sizeof(*stats));
	p.o = o;
	p.now = (int64_t)time(NULL);
	if (!pbx_publisher_name_valid(o->publisher))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "publisher name '%s': use 1 to 64 letters, digits, '.', '_' "
				    "or '-', not beginning with '.' or '-'",
				    o->publisher);
	if (publish_read(st, ref, &p, err) < 0)
		goto out;
	stats->tasks = p.ntasks;
	if (pool_stores_open(o->url, cfg, jobs, &p.stores, stats->identity, sizeof(stats->identity),
			     err) < 0 ||
	    pool_publisher_claim(pool_stores_first(p.stores), o->publisher, err) < 0)
		goto out;
	prefix = xasprintf("%s%s/%s/", pbx_objstore_where(pool_stores_first(p.stores))->prefix,
			   o->publisher, p.pkg.short_id);
	if (pbx_objstore_list(pool_stores_first(p.stores), prefix, &have, &nhave, err) < 0)
		goto out;
	publish_plan(&p, have, nhave, stats);
	rc = publish_upload(&p, jobs, err);
out:
	stats->uploaded = p.uploaded;
	stats->already = p.already;
	stats->bytes = p.bytes;
	pbx_objects_free(have, nhave);
	free(prefix);
	publish_free(&p);
	return rc;
}
