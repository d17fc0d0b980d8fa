/*
 * pool.h - the store's rows for pooled results (`pbx pull`, src/pool):
 * one row per task object pulled from a pool (a bucket prefix that many
 * users publish to), with its provenance record, and the task's metric
 * points.  A pulled task is read-only: nothing of the user's own packages
 * refers to it.
 *
 * Memory: rows filled by these functions own their strings; release them
 * with the matching *_free function.
 */
#ifndef PBX_STORE_POOL_H
#define PBX_STORE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct pbx_pool_task {
	char *pool;       /* the pool's URL, "gs://BUCKET/PREFIX/" */
	char *object;     /* the object's name */
	char *version;    /* its generation (GCS) or ETag (S3) when pulled */
	char *publisher;  /* who published it (the name in its path) */
	char *package_id; /* the publisher's package's full id */
	char *experiment; /* the experiment's name */
	int64_t idx;      /* the task's index in that package */
	char *params_json;
	char *state;
	int64_t start_time, end_time; /* 0 when unknown */
	char *record_json;            /* the whole provenance record (pbx-task.json) */
	int64_t pulled;               /* when pbx pulled it */
};

struct pbx_pool_metric {
	char *object; /* the task's object */
	char *name;
	int64_t step;
	double value;
	int is_null;
};

/* Records a pulled task and its n metric points (replacing what an
 * earlier pull of the same object recorded).  Call inside a
 * transaction. */
int pbx_store_pool_put(struct pbx_store *st, const struct pbx_pool_task *t,
		       const struct pbx_pool_metric *m, size_t n, struct pbx_err *err);
/* The tasks pulled from `pool`, by publisher, package and index (every
 * pool's when pool is NULL). */
int pbx_store_pool_tasks(struct pbx_store *st, const char *pool, struct pbx_pool_task **rows,
			 size_t *n, struct pbx_err *err);
/* The metric points of the tasks pulled from `pool`, by object, name and
 * step. */
int pbx_store_pool_metrics(struct pbx_store *st, const char *pool, struct pbx_pool_metric **rows,
			   size_t *n, struct pbx_err *err);
void pbx_pool_tasks_free(struct pbx_pool_task *rows, size_t n);
void pbx_pool_metrics_free(struct pbx_pool_metric *rows, size_t n);

#endif
