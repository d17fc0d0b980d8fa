/*
 * pool_internal.h - what the files of src/pool share:
 *
 *   record.c     a task's provenance record (pbx-task.json): made from
 *                the store's rows, read back from a pulled object
 *   archive.c    a task's object: gzip of a tar holding pbx-task.json and
 *                results/...; made in memory, extracted with the tar
 *                checker (no links, nothing outside the directory)
 *   publisher.c  who holds a publisher name: PREFIX/PUBLISHER/publisher.json
 *                and this $PBX_HOME's publisher key
 *   publish.c, pull.c, report.c  the three operations of pool.h
 *   done.c       the points of an experiment a pool holds done
 *   disagree.c   the pooled report's flag on publishers that disagree
 */
#ifndef PBX_POOL_POOL_INTERNAL_H
#define PBX_POOL_POOL_INTERNAL_H

#include "objstore/objstore.h"
#include "pool/pool.h"
#include "results/cost.h"
#include "util/buf.h"

#define POOL_RECORD_NAME   "pbx-task.json"
#define POOL_RECORD_FORMAT "pbx-task/1"
#define POOL_OBJECT_SUFFIX ".tar.gz"
/* The largest task object published or pulled, compressed and not. */
#define POOL_OBJECT_MAX    ((size_t)1 << 30)
#define POOL_RECORD_MAX    ((size_t)64 << 20)

/* ------------------------------------------------------------ record.c */

/* What a record says (parsed); strings owned (pool_record_free). */
struct pool_record {
	char *publisher, *package_id, *experiment, *state;
	int64_t idx, start_time, end_time;
	char *params_json;               /* the task's parameters, a compact JSON object */
	struct pbx_pool_metric *metrics; /* object NULL in each */
	size_t nmetrics;
};

/* The task's rows that a record is made of (borrowed). */
struct pool_record_in {
	const char *publisher;
	const struct pbx_package_row *pkg;
	const struct pbx_submission_row *sub;
	const char *cloud; /* the cluster's cloud ("" when unknown) */
	const struct pbx_task_row *task;
	const struct pbx_metric *pts; /* this task's points */
	size_t npts;
	const struct pbx_harvested *files; /* this task's files at home */
	size_t nfiles;
	const struct pbx_task_cost *cost; /* may be NULL */
	int64_t now;
};

/* The record's JSON text (caller frees). */
char *pool_record_make(const struct pool_record_in *in);
/* Parses and checks a record: -1 with err naming what is wrong. */
int pool_record_parse(const char *text, size_t len, struct pool_record *out, struct pbx_err *err);
void pool_record_free(struct pool_record *r);

/* ----------------------------------------------------------- archive.c */

/* gzip(tar) of the record and the task's files (paths relative to
 * task_dir, stored under results/) into *out (reset first).  A file that
 * is gone or changed size is left out (*missing counts them). */
int pool_archive_make(const char *record, const char *task_dir, const struct pbx_harvested *files,
		      size_t n, int64_t mtime, struct pbx_buf *out, size_t *missing,
		      struct pbx_err *err);
/* Extracts a task object into `dir` (an existing empty directory):
 * regular files and directories only, nothing outside dir, at most
 * POOL_OBJECT_MAX bytes unpacked.  -1 with err (PBX_EXIT_SECURITY for a
 * refused member). */
int pool_archive_extract(const void *gz, size_t len, const char *dir, struct pbx_err *err);

/* --------------------------------------------------------- publisher.c */

/* This $PBX_HOME's publisher key ($PBX_HOME/publisher.key, made 0600 with
 * 32 random hex digits the first time).  Caller frees. */
char *pool_publisher_key(struct pbx_err *err);
/* Claims name `publisher` in the pool (s's prefix): creates
 * PREFIX/PUBLISHER/publisher.json with the SHA-256 of this key, or finds
 * it there already with the same; another key's is PBX_EXIT_SECURITY. */
int pool_publisher_claim(struct pbx_objstore *s, const char *publisher, struct pbx_err *err);

/* ------------------------------------------------------------ stores.c */

/* Stores opened on one pool for parallel transfers: one HTTP handle each
 * (a handle serialises its requests).  Threads take one, use it and give
 * it back. */
struct pool_stores;
/* Opens n (>= 1) stores on url; *out owned by the caller
 * (pool_stores_close).  The first one's identity goes to identity[size]. */
int pool_stores_open(const char *url, const struct pbx_config *cfg, int n, struct pool_stores **out,
		     char *identity, size_t size, struct pbx_err *err);
void pool_stores_close(struct pool_stores *p);
/* The first store (for the calls made before fanning out). */
struct pbx_objstore *pool_stores_first(struct pool_stores *p);
/* A store no other thread uses until pool_stores_give (waits for one). */
struct pbx_objstore *pool_stores_take(struct pool_stores *p);
void pool_stores_give(struct pool_stores *p, struct pbx_objstore *s);
/* Serialises progress calls: counts one object done of total with
 * `bytes` more, and calls fn (may be NULL). */
void pool_stores_progress(struct pool_stores *p, size_t total, uint64_t bytes,
			  pbx_pool_progress_fn fn, void *ctx);

/* -------------------------------------------------------------- names */

/* PREFIX/PUBLISHER/PKG/TASK.tar.gz (caller frees). */
char *pool_object_name(const char *prefix, const char *publisher, const char *short_id,
		       int64_t idx);
/* Splits a listed name under `prefix` into publisher, short id and task:
 * 0 when it is a task object's name, -1 otherwise. */
int pool_object_parse(const char *prefix, const char *name, char publisher[65], char short_id[13],
		      int64_t *idx);

/* ----------------------------------------------------------- disagree.c */

/* One publisher's non-null final values of a metric in one group. */
struct pool_side {
	const char *publisher; /* borrowed */
	size_t n;
	double mean, m2; /* m2: the sum of squared deviations from the mean */
};
/* Whether two of the ns sides disagree beyond the group's spread (the
 * rule atop disagree.c). */
int pool_sides_disagree(const struct pool_side *s, size_t ns);
/* Sets each group's `disagree` (and r->disagree_shown) when r is grouped
 * and has a "publisher" parameter. */
void pool_mark_disagreements(struct pbx_report *r);

#endif
