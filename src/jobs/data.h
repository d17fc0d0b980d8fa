/*
 * data.h - staging an experiment's `data:` sources (gs://, s3:// or a local
 * directory) on a cluster, once, reused by every package that names them
 * (docs/data.md).
 *
 * Source ID (pbx_experiment_data_key) lives in $PBX_SHARED/pbx/data/ID/,
 * files 0444 and directories 0555, with ID/.pbx-data-manifest: one JSON
 * object per line, {"name", "size", "version"} (a store's generation or
 * ETag; a local file's sha256), sorted by name, written last and
 * atomically.  Per source: one round trip reads the manifest, the source
 * is listed page by page, and from the first new or changed object (size
 * or version) on, the rest of the listing is read while those objects are
 * downloaded by this pbx with the user's credentials into
 * $PBX_HOME/data/ID/ (checked: CRC32C) - or read from a local source -
 * and streamed, as they arrive, in one tar to the head (one more round
 * trip), which removes what the source no longer has, puts the files in
 * place (a rename or hard links: no copy), fixes the modes and writes the
 * manifest; a stream that ends before its manifest (the last member,
 * sent once the listing is whole and checked and every object came)
 * changes nothing there.  A source that did not change costs one listing
 * and the manifest read: nothing is downloaded or pushed.
 *
 * Object names are untrusted: each must pass pbx_objstore_name_safe, and
 * no name may be both a file and a directory of another; nothing is
 * written outside ID/.  Library code: never prints (progress goes to a
 * callback), fills struct pbx_err.
 */
#ifndef PBX_JOBS_DATA_H
#define PBX_JOBS_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "experiment/experiment.h"

#define PBX_DATA_MAX_OBJECTS 1000000

/* What staging one source did (or, dry run, would do). */
struct pbx_data_result {
	char id[17];
	char *key;               /* the normalised source (owned) */
	const char *to;          /* borrowed from the experiment */
	size_t objects;          /* in the source */
	uint64_t bytes;          /* their sizes */
	size_t changed, removed; /* new or changed; gone from the source */
	uint64_t bytes_moved;    /* sizes of the changed ones */
	unsigned long downloads; /* objects read from the store by this call */
	int staged_before;       /* the cluster had a manifest (-1: not asked) */
	double seconds;
};

struct pbx_data_opts {
	const struct pbx_config *cfg; /* clouds.gce / clouds.aws: credentials, endpoints */
	int dry_run;                  /* list and compare only: nothing is read or sent */
	/* Called as objects arrive (may be NULL): `done` of `total` changed
	 * objects of source `key`, `bytes` of them so far; `sending`: the
	 * bytes sent to the cluster so far of an object whose download they
	 * already counted (a large one, from the download cache through the
	 * stream), 0 when none is being sent. */
	void (*progress)(void *ctx, const char *key, size_t done, size_t total, uint64_t bytes,
			 uint64_t sending);
	/* Called (may be NULL) before waiting for another staging of source
	 * `key` on this machine to end (datacache.h: they take turns). */
	void (*waiting)(void *ctx, const char *key);
	void *ctx;
};

/* Stages every data: source of e on cluster c (c may be NULL in a dry run:
 * staged_before is then -1).  *res (one per source, in file order) owned
 * by the caller: pbx_data_results_free.  On error nothing later is staged
 * and err names the source and the object or file. */
int pbx_data_stage(struct pbx_cluster *c, const struct pbx_experiment *e,
		   const struct pbx_data_opts *o, struct pbx_data_result **res, size_t *nres,
		   struct pbx_err *err);
void pbx_data_results_free(struct pbx_data_result *res, size_t n);

/* The cluster's reply to staging's manifest read ("PBX-DATA ID", that
 * source's manifest lines - JSON {name, size, version} - or
 * "PBX-DATA-NONE", then "P NAME" for each name a staging cut before its
 * manifest put in place; text from the cluster, untrusted) for the
 * sources res[0..n) (their ids): staged_before set for each source named,
 * then fn(ctx, i, name, size, version) for each entry of source i by name
 * order, a placed name no manifest line names as size 0, version "" (an
 * unknown version: sent again, or removed); names that are not safe paths
 * (pbx_objstore_name_safe) and lines that do not read are left out.  The
 * strings are valid during the call. */
typedef void (*pbx_data_entry_fn)(void *ctx, size_t i, const char *name, uint64_t size,
				  const char *version);
void pbx_data_manifests_parse(const char *text, size_t len, struct pbx_data_result *res, size_t n,
			      pbx_data_entry_fn fn, void *ctx);

/* A head with its own identity (pbx_head_stages_data) stages its cloud's
 * buckets itself: pbx_data_stage runs `pbx-head -q cluster data NAME KEY`
 * there, which stages with the head's credentials and prints r as one
 * line of JSON (pbx_data_result_json: id, key and the counts; caller
 * frees), read back into r, whose id and key are set, by
 * pbx_data_result_parse (-1 with err when text is not one, or is another
 * source's). */
char *pbx_data_result_json(const struct pbx_data_result *r);
int pbx_data_result_parse(const char *text, size_t len, struct pbx_data_result *r,
			  struct pbx_err *err);

#endif
