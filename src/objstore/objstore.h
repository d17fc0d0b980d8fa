/*
 * objstore.h - one client for the two object stores pbx reads and writes:
 * Cloud Storage (its JSON API, gcs.c) and S3 (its REST API, s3.c), over
 * src/http with the credentials the compute providers use (gce: key file,
 * ADC or the metadata server; aws: environment, profiles, IMDSv2).
 *
 * A store is named by a URL: gs://BUCKET/PREFIX or s3://BUCKET/PREFIX
 * (url.c).  What pbx relies on (docs/objstore.md):
 *   - listing by prefix, every page;
 *   - reading an object whole, its CRC32C checked against the one the store
 *     keeps (x-goog-hash, x-amz-checksum-crc32c): a mismatch is an error
 *     naming the object, and nothing is returned;
 *   - reading a large object (64 MiB or more, PBX_OBJSTORE_RANGE_MIN) in
 *     ranges, 4 at once, each on its own connection and pinned to one
 *     version (GCS generation=, S3 If-Match), each range's CRC32C
 *     computed as it comes and combined into the whole object's, checked
 *     against the store's (GCS objects.get, S3 HeadObject); into memory
 *     or, of any size, into a file as it comes;
 *   - creating an object only when no object of that name exists (GCS
 *     ifGenerationMatch=0, S3 If-None-Match: *), its CRC32C sent for the
 *     store to check; above the part size (64 MiB) in parts, each retried
 *     alone (S3 multipart, GCS resumable);
 *   - 429, 5xx and SlowDown retried with backoff (src/http).
 * Endpoints: clouds.gce.storage_endpoint and clouds.aws.s3_endpoint
 * (https, or http to loopback: the emulators), else the real services.
 *
 * Object names come from other people's buckets: callers treat them as
 * untrusted (see pbx_objstore_name_safe).
 * Library code: never prints, fills struct pbx_err.
 */
#ifndef PBX_OBJSTORE_OBJSTORE_H
#define PBX_OBJSTORE_OBJSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

struct pbx_config;

/* ------------------------------------------------------------ url.c */

/* A parsed store URL.  prefix is "" or ends with '/' (a "directory"). */
struct pbx_objstore_url {
	char scheme[3]; /* "gs" or "s3" */
	char *bucket;
	char *prefix;
};
/* Parses gs://BUCKET[/PREFIX] or s3://BUCKET[/PREFIX]; a prefix without a
 * trailing '/' gets one.  Bucket names follow the stores' rules (3 to 63
 * of a-z 0-9 - _ ., beginning and ending with a letter or digit); a prefix
 * with "." or ".." components, "//" or control bytes is refused.  -1 with
 * err (PBX_EXIT_USAGE) naming the URL.  *out owned by the caller
 * (pbx_objstore_url_free). */
int pbx_objstore_url_parse(const char *url, struct pbx_objstore_url *out, struct pbx_err *err);
void pbx_objstore_url_free(struct pbx_objstore_url *u);
/* Whether an object name (relative to the prefix it was listed under) is
 * safe to turn into a local path: not empty, no leading '/', no "." or
 * ".." components, no empty component, no byte below 0x20 or 0x7f, at
 * most 1024 bytes. */
int pbx_objstore_name_safe(const char *rel);

/* ------------------------------------------------------- objstore.c */

/* One object as listed. */
struct pbx_object {
	char *name;    /* the whole object name (prefix included) */
	uint64_t size; /* bytes */
	char *version; /* GCS generation, S3 ETag (quotes removed) */
	int has_crc32c;
	uint32_t crc32c; /* when the store gave it */
};
/* Frees the n objects' strings and the array v. */
void pbx_objects_free(struct pbx_object *v, size_t n);
/* Frees one object's strings (not o itself: a struct the caller holds). */
void pbx_object_release(struct pbx_object *o);

struct pbx_objstore;

/* Opens the store of `url` (parsed with pbx_objstore_url_parse) with the
 * credentials and endpoint of cfg's clouds.gce or clouds.aws (cfg may be
 * NULL: the defaults).  *out owned by the caller (pbx_objstore_close).
 * Credentials are read now; nothing is sent yet. */
int pbx_objstore_open(const char *url, const struct pbx_config *cfg, struct pbx_objstore **out,
		      struct pbx_err *err);
void pbx_objstore_close(struct pbx_objstore *s);
/* The URL's parts; borrowed from s. */
const struct pbx_objstore_url *pbx_objstore_where(const struct pbx_objstore *s);
/* Where the credentials came from, for messages (never a secret); borrowed. */
const char *pbx_objstore_identity(const struct pbx_objstore *s);

/* Every object whose name begins with `prefix` (a whole name prefix, may
 * be ""), every page, in the store's order (by name).  *v owned by the
 * caller (pbx_objects_free). */
int pbx_objstore_list(struct pbx_objstore *s, const char *prefix, struct pbx_object **v, size_t *n,
		      struct pbx_err *err);
/* One page of that listing (up to 1,000 objects), for a caller that works
 * on each page as it comes: *token NULL asks for the first page; after
 * the call it holds the next page's token (owned by the caller, passed
 * back in for that page; freed and replaced here) or NULL after the
 * last.  *v (this page's objects only) owned by the caller
 * (pbx_objects_free); on error *v is NULL, *n 0 and *token freed and
 * NULL. */
int pbx_objstore_list_page(struct pbx_objstore *s, const char *prefix, char **token,
			   struct pbx_object **v, size_t *n, struct pbx_err *err);
/* Reads object `name` whole into *body (reset first; the caller releases
 * it), at most `max` bytes (0 = 1 GiB): larger is an error.  Its CRC32C
 * is checked when the store gives one: a mismatch is -1 with
 * PBX_EXIT_SECURITY, naming the object, and body emptied.  *meta (may be
 * NULL) gets its size, version and checksum; the caller frees its strings
 * (pbx_object_release(meta)). */
int pbx_objstore_get(struct pbx_objstore *s, const char *name, size_t max, struct pbx_buf *body,
		     struct pbx_object *meta, struct pbx_err *err);

/* Objects of this many bytes or more are read in ranges by
 * pbx_objstore_get_listed: PBX_OBJSTORE_RANGE_MIN (bytes, decimal; for
 * tests and benchmarks) when set to a positive number, else 64 MiB. */
#define PBX_OBJSTORE_RANGE_MIN_DEFAULT ((uint64_t)64 << 20)
uint64_t pbx_objstore_range_min(void);

/* Reads object o->name as a listing gave it (o->size), as
 * pbx_objstore_get does (max, body, meta, the CRC32C check and its
 * error), but an object of pbx_objstore_range_min() bytes or more in
 * ranges read at once, each on its own connection (the store keeps them
 * for its next read): first what the store says of the object now (its
 * size, version and CRC32C), then every range pinned to that version, the
 * whole object's CRC32C checked once all are in.  An object rewritten
 * between the listing and the read is read as its new version (meta says
 * which); one rewritten during the read is started again once, then -1
 * (PBX_EXIT_FAIL) "changed while it was read".  Not thread-safe on one
 * store (a store per thread, as for every call). */
int pbx_objstore_get_listed(struct pbx_objstore *s, const struct pbx_object *o, size_t max,
			    struct pbx_buf *body, struct pbx_object *meta, struct pbx_err *err);
/* Reads object o->name as a listing gave it into file descriptor fd (a
 * regular file opened for writing), of any size, without holding it in
 * memory: what the store says of it now (size, version, CRC32C), the
 * file cut to that size, then its bytes written at their offsets as they
 * come - in ranges at once as pbx_objstore_get_listed reads them (of at
 * most 256 MiB each, PBX_OBJSTORE_RANGE_PART), in one request when under
 * pbx_objstore_range_min() - each range's CRC32C computed as it comes
 * and combined, the whole checked against the store's as
 * pbx_objstore_get does (PBX_EXIT_SECURITY naming the object).  *meta
 * (may be NULL) as there, but its crc32c set in every case: the store's,
 * or when it gave none (has_crc32c 0) that of the bytes read.  On -1 the file holds a partial or refused
 * object: the caller removes it (write to a temporary file, rename when
 * 0).  Not thread-safe on one store. */
int pbx_objstore_get_listed_fd(struct pbx_objstore *s, const struct pbx_object *o, int fd,
			       struct pbx_object *meta, struct pbx_err *err);
/* Has fn(ctx, n) called as each n bytes of a ranged read
 * (pbx_objstore_get_listed of a large object, pbx_objstore_get_listed_fd)
 * arrive, for a progress display: from up to 4 threads at once (fn is
 * thread-safe), a range read again counting only the bytes past those its
 * earlier attempts brought.  fn NULL: none.  ctx is the caller's. */
void pbx_objstore_on_bytes(struct pbx_objstore *s, void (*fn)(void *ctx, uint64_t n), void *ctx);
/* Has fn(ctx, n) called as the first n bytes of the object a ranged read
 * (pbx_objstore_get_listed_fd) is reading are in place - written to its
 * file, each range's bytes once an attempt brought them - for a reader
 * that sends the object on while it comes: n grows, called from the
 * read's threads one call at a time.  A read started again (the object
 * changed during it) first calls fn(ctx, 0): what was reported is void,
 * the bytes to come are another version's.  A range read again (a cut
 * connection) writes the same version's bytes again, so bytes reported
 * stay what they were unless a reply was corrupt: a reader checks what it
 * took against the object's CRC32C (meta's, once the read is over).  fn
 * NULL: none.  ctx is the caller's. */
void pbx_objstore_on_ready(struct pbx_objstore *s, void (*fn)(void *ctx, uint64_t n), void *ctx);
/* Bytes [off, off + len) of version `version` of object `name` (a
 * listing's or meta's: GCS generation, S3 ETag) into dst[0, len), on the
 * store's own connection.  -1 with err naming the object when the store
 * no longer has that version ("changed while it was read"), the range is
 * past its end, or the reply is not that range.  No CRC32C is checked
 * (the store gives only the whole object's). */
int pbx_objstore_read_range(struct pbx_objstore *s, const char *name, const char *version,
			    uint64_t off, uint64_t len, void *dst, struct pbx_err *err);

/* What pbx_objstore_put_new returns besides 0 and -1. */
#define PBX_OBJSTORE_EXISTS 1

/* Creates object `name` holding data[0, len) only when no object of that
 * name exists: PBX_OBJSTORE_EXISTS (nothing written) when one does.  The
 * CRC32C of the data is sent for the store to check.  content_type may be
 * NULL (application/octet-stream).  Above the part size (64 MiB, or
 * PBX_OBJSTORE_PART_SIZE bytes) the data goes in parts: an S3 multipart
 * upload (aborted unless completed) or a GCS resumable session (resumed
 * from what the store holds after a failed chunk). */
int pbx_objstore_put_new(struct pbx_objstore *s, const char *name, const void *data, size_t len,
			 const char *content_type, struct pbx_err *err);

/* Requests sent so far (each retry counts), for tests and PBX_STATS. */
unsigned long pbx_objstore_requests(const struct pbx_objstore *s);

#endif
