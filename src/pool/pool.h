/*
 * pool.h - results pooled across users in a bucket, with nothing but the
 * bucket (no server): `pbx publish` uploads each ended, harvested task of
 * a package as ONE object holding its results and its provenance;
 * `pbx pull` brings everyone's into the store (store/pool.h) and
 * $PBX_HOME/pool/; `pbx report --pool` reports over them.
 *
 * A pool is a URL, gs://BUCKET/PREFIX/ or s3://BUCKET/PREFIX/ (the
 * object store: objstore/objstore.h).  Its layout (docs/pooling.md):
 *   PREFIX/PUBLISHER/publisher.json        who holds the name: created
 *                                          once, never overwritten
 *   PREFIX/PUBLISHER/PKG/TASK.tar.gz       one task: pbx-task.json (the
 *                                          record, record.c) and results/
 * where PKG is the package's 12-hex short id and TASK its index.  Every
 * object is created only when absent: nobody's is ever overwritten, and
 * publishing again uploads only what is new.
 *
 * Library code: never prints except through the progress callback; fills
 * struct pbx_err.
 */
#ifndef PBX_POOL_POOL_H
#define PBX_POOL_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "results/report.h"
#include "store/experiments.h"
#include "store/pool.h"
#include "util/err.h"

struct pbx_config;

/* The pool's URL as the store keys it: "gs://BUCKET/PREFIX/" (the prefix
 * with its '/').  -1 with err for a URL objstore refuses.  Caller frees. */
char *pbx_pool_url_normal(const char *url, struct pbx_err *err);

/* Progress: called after each object with the counts so far (may be
 * NULL). */
typedef void (*pbx_pool_progress_fn)(void *ctx, size_t done, size_t total, uint64_t bytes);

struct pbx_publish_opts {
	const char *url;       /* the pool */
	const char *publisher; /* the name published under */
	int jobs;              /* parallel uploads; 0 = 8 */
	pbx_pool_progress_fn progress;
	void *progress_ctx;
};

struct pbx_publish_stats {
	size_t tasks;       /* tasks in the package's newest submission */
	size_t uploaded;    /* objects created by this call */
	size_t already;     /* tasks already in the pool */
	size_t not_ended;   /* tasks not ended (as last seen): not published */
	size_t not_home;    /* ended tasks with no results at home: not published */
	uint64_t bytes;     /* bytes uploaded */
	char identity[320]; /* whose credentials were used */
};

/* Publishes package `ref` (id prefix or experiment name: its newest
 * submission).  A publisher name held by another pbx (its
 * publisher.json's key differs from this $PBX_HOME's) is refused with
 * PBX_EXIT_SECURITY before anything is uploaded. */
int pbx_pool_publish(struct pbx_store *st, const struct pbx_config *cfg, const char *ref,
		     const struct pbx_publish_opts *o, struct pbx_publish_stats *stats,
		     struct pbx_err *err);

struct pbx_pull_opts {
	const char *url; /* the pool */
	int jobs;        /* parallel downloads; 0 = 8 */
	pbx_pool_progress_fn progress;
	void *progress_ctx;
};

struct pbx_pull_stats {
	size_t objects; /* task objects in the pool */
	size_t pulled;  /* brought by this call */
	size_t already; /* pulled before (same version) */
	size_t refused; /* refused: checksum, archive or record problems */
	size_t other;   /* objects that are not a task's (ignored) */
	uint64_t bytes; /* bytes downloaded */
	char identity[320];
	char *first_refusal; /* why the first refused object was refused; owned */
};

/* Pulls every task object of the pool not pulled yet (or changed), each
 * checked (CRC32C, a safe archive, a record that matches its name), into
 * $PBX_HOME/pool/SCHEME/BUCKET/PREFIX/PUBLISHER/PKG/TASK/ and the store.
 * Refused objects are counted, not fatal.  Free stats with
 * pbx_pull_stats_release. */
int pbx_pool_pull(struct pbx_store *st, const struct pbx_config *cfg, const struct pbx_pull_opts *o,
		  struct pbx_pull_stats *stats, struct pbx_err *err);
void pbx_pull_stats_release(struct pbx_pull_stats *s);

/* The report over the pulled tasks of pool `url` of experiment `ref` (an
 * experiment name or a package id prefix; NULL = the experiment of the
 * task pulled last): every publisher's tasks, "publisher" the first
 * parameter.  PBX_EXIT_NOTFOUND when nothing matches. */
int pbx_pool_report(struct pbx_store *st, const char *url, const char *ref,
		    const struct pbx_report_opts *o, struct pbx_report **out, struct pbx_err *err);

/* Marks done[i] = 1 for each point i of e that pool `url` holds done, as
 * last pulled (`pbx pull`; nothing is fetched here): a task of an
 * experiment of e's name, COMPLETED, with point i's parameters (repeat
 * included), whoever published it.  done holds e->npoints entries; others
 * are left as they are.  Returns how many points it holds done, or -1
 * with err (a URL objstore refuses, the store). */
struct pbx_experiment;
long pbx_pool_points_done(struct pbx_store *st, const char *url, const struct pbx_experiment *e,
			  unsigned char *done, struct pbx_err *err);

#endif
