/*
 * datacache.h - this machine's download cache of staged data
 * (docs/data.md, "The download cache"): $PBX_HOME/data/ID/ per source,
 * its downloaded objects in files/, their manifest, a local source's
 * remembered hashes, and .pbx-source (the source's key, written and
 * stamped each time a staging takes the source: its last use).
 *
 * One staging of a source at a time on this machine: its lock
 * $PBX_HOME/data/ID.lock (flock) is held while a staging reads and writes
 * the cache, so two stagings of one source (to two clusters, or twice to
 * one) take turns, the second one finding the first one's downloads; and
 * `pbx cache rm` removes only what no staging holds.  A lock file is
 * removed with its cache; a staging that waited on it finds it gone and
 * takes the new one (the path and its descriptor are compared).
 * Library code: never prints.
 */
#ifndef PBX_JOBS_DATACACHE_H
#define PBX_JOBS_DATACACHE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/err.h"

/* One source's cache. */
struct pbx_data_cache {
	char id[17];
	char *key;       /* from .pbx-source; NULL when an older pbx made it (owned) */
	size_t files;    /* objects kept in files/ */
	uint64_t bytes;  /* disk used by the whole directory (its blocks) */
	uint64_t shared; /* of bytes, files linked elsewhere too (a local cluster's
			    copy of the data): removing the cache does not free them */
	time_t used;     /* last taken by a staging (.pbx-source, else the directory) */
	long used_nsec;  /* and its nanoseconds */
	int busy;        /* a staging holds it now */
};

/* Every source's cache on this machine, the last used first.  *v owned
 * by the caller (pbx_data_cache_list_free).  0, or -1 with err when the
 * directory cannot be read (none is an empty list). */
int pbx_data_cache_list(struct pbx_data_cache **v, size_t *n, struct pbx_err *err);
void pbx_data_cache_list_free(struct pbx_data_cache *v, size_t n);

/* Takes source id's lock for a staging of `key`: when another staging
 * holds it, calls waiting(ctx) once (may be NULL) and waits for it.  Then
 * records key and the time in .pbx-source.  Returns the lock (for
 * pbx_data_cache_unlock), or -1 with err. */
int pbx_data_cache_lock(const char *id, const char *key, void (*waiting)(void *ctx), void *ctx,
			struct pbx_err *err);
void pbx_data_cache_unlock(int lock);

/* Removes source id's cache and its lock unless a staging holds it: 0
 * (removed, or there was none), 1 (busy: left), or -1 with err. */
int pbx_data_cache_remove(const char *id, struct pbx_err *err);

/* Keeps the cache within `max` bytes (the configuration's
 * data_cache_max), counting what removing would free (bytes less
 * shared): removes the least recently used caches no staging holds until
 * the rest is within it, calling removed(ctx, e) (may be NULL) after each
 * one.  0, or -1 with err. */
int pbx_data_cache_trim(uint64_t max, void (*removed)(void *ctx, const struct pbx_data_cache *e),
			void *ctx, struct pbx_err *err);

/* The id that `arg` names: a gs:// or s3:// URL (normalised as staging
 * does), a local directory (its real path; "local:" before it, as `pbx
 * cache ls` shows it, is allowed), or an id of v[0, n) or a unique prefix
 * of one (4 hex digits at least).  0, or -1 with err. */
int pbx_data_cache_resolve(const char *arg, const struct pbx_data_cache *v, size_t n, char id[17],
			   struct pbx_err *err);

#endif
