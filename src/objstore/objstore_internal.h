/*
 * objstore_internal.h - what the store's front (objstore.c) shares with
 * its two backends:
 *
 *   objstore.c  open/close, the checks every backend shares (CRC32C of
 *               what was read and sent, size caps), the part plan of a
 *               large upload, the range plan of a large read and its
 *               parallel readers, dispatch
 *   gcs.c       Cloud Storage JSON API: objects.list, objects.get
 *               (alt=media, whole or a Range pinned to a generation;
 *               without alt=media: the metadata), objects.insert
 *               (uploadType=media, or
 *               resumable in chunks above the part size;
 *               ifGenerationMatch=0); bearer tokens from cloud/gce/auth
 *   s3.c        S3 REST: ListObjectsV2, GetObject (whole, or a Range with
 *               If-Match: the ETag), HeadObject, PutObject (or a
 *               multipart upload above the part size) with
 *               If-None-Match: *; SigV4 (cloud/aws/sigv4.c) with the
 *               payload's SHA-256 and x-amz-checksum-crc32c
 *
 * A backend fills struct pbx_object from what the store says; objstore.c
 * compares the checksums.
 */
#ifndef PBX_OBJSTORE_OBJSTORE_INTERNAL_H
#define PBX_OBJSTORE_OBJSTORE_INTERNAL_H

#include "http/http.h"
#include "objstore/objstore.h"

/* What read_range returns when the version it was pinned to is gone. */
#define OBJSTORE_CHANGED 2

/* Ranges of one large read that run at once, each on its own connection
 * (rclone's --multi-thread-streams default is 4 too). */
#define OBJSTORE_STREAMS 4

/* Where one range's bytes go as they come: mem[0, len) when mem is set,
 * else file fd at fd_off + k; crc is their CRC32C so far (started again
 * with each attempt of the request). */
struct objstore_into {
	char *mem;
	int fd;
	uint64_t fd_off;
	uint32_t crc;
	uint64_t seen;                           /* the most bytes of the range any attempt brought
			  (written in place: atomic, read by the others) */
	void (*on_bytes)(void *ctx, uint64_t n); /* the store's (NULL: none) */
	void *on_bytes_ctx;
	/* called after seen grew (NULL: none): the read's prefix in place */
	void (*grew)(void *owner);
	void *owner;
};
/* pbx_http_req's into_fn for a struct objstore_into (ctx). */
int objstore_into_write(void *ctx, uint64_t at, const char *data, size_t n);

struct objstore_ops {
	/* one page of the objects under `prefix` (a whole-name prefix) from
	 * `token` (NULL: the first), appended to *v and *n; *next gets the
	 * next page's token (caller frees) or NULL after the last page */
	int (*list_page)(struct pbx_objstore *s, const char *prefix, const char *token,
			 struct pbx_object **v, size_t *n, char **next, struct pbx_err *err);
	/* the object's bytes into body (at most max: more is an error) and
	 * what the store says of it into meta (name, size, version, crc32c
	 * when given) */
	int (*get)(struct pbx_objstore *s, const char *name, size_t max, struct pbx_buf *body,
		   struct pbx_object *meta, struct pbx_err *err);
	/* what the store says of the object now, without its bytes: name,
	 * size, version, crc32c when given (GCS objects.get; S3 HeadObject
	 * with x-amz-checksum-mode: ENABLED) */
	int (*stat)(struct pbx_objstore *s, const char *name, struct pbx_object *meta,
		    struct pbx_err *err);
	/* bytes [off, off + len) of version `version` (as stat or a listing
	 * gave it) of object `name` into `into` (objstore_into_write as the
	 * request's into_fn), sent on `http` (the caller's: several ranges
	 * run at once, each on its own handle); *requests gets the attempts
	 * added.  0; OBJSTORE_CHANGED (err set) when the store no longer has
	 * that version (GCS 404 for the generation, S3 412
	 * PreconditionFailed); -1 */
	int (*read_range)(struct pbx_objstore *s, struct pbx_http *http, const char *name,
			  const char *version, uint64_t off, uint64_t len,
			  struct objstore_into *into, unsigned long *requests, struct pbx_err *err);
	/* create-only upload with the data's crc32c sent along; 0, -1, or
	 * PBX_OBJSTORE_EXISTS */
	int (*put_new)(struct pbx_objstore *s, const char *name, const void *data, size_t len,
		       const char *content_type, uint32_t crc32c, struct pbx_err *err);
	void (*close)(struct pbx_objstore *s);
};

struct pbx_objstore {
	const struct objstore_ops *ops;
	struct pbx_objstore_url url;
	struct pbx_http *http;  /* owned */
	char identity[320];     /* where the credentials came from */
	unsigned long requests; /* requests sent (pbx_http_resp.attempts summed) */
	int put_retried;        /* the last put_new was sent more than once: an
				   EXISTS may be its own earlier attempt's */
	void *backend;          /* the backend's own state, freed by ops->close */
	/* the range readers' own handles (range 0 goes on http), opened at
	 * the first ranged read and kept for the next (owned) */
	struct pbx_http *range_http[OBJSTORE_STREAMS - 1];
	/* pbx_objstore_on_bytes's callback (NULL: none) */
	void (*on_bytes)(void *ctx, uint64_t n);
	void *on_bytes_ctx;
	/* pbx_objstore_on_ready's callback (NULL: none) */
	void (*on_ready)(void *ctx, uint64_t n);
	void *on_ready_ctx;
};

/* Each sets s->ops, s->backend and s->identity; s->url and s->http are
 * set.  cfg may be NULL. */
int objstore_gcs_open(struct pbx_objstore *s, const struct pbx_config *cfg, struct pbx_err *err);
int objstore_s3_open(struct pbx_objstore *s, const struct pbx_config *cfg, struct pbx_err *err);

/* A store error's message: "gs://BUCKET/NAME: WHAT (HTTP STATUS: BODY
 * excerpt, secrets removed)", with the exit class that fits the status
 * (401/403 PBX_EXIT_USAGE: credentials or permissions to fix; 404
 * PBX_EXIT_NOTFOUND; else PBX_EXIT_FAIL). */
void objstore_http_error(struct pbx_objstore *s, const char *name, const char *what, long status,
			 const struct pbx_buf *body, struct pbx_err *err);

/* A read's error status: objstore_http_error with "no such object" for a
 * 404, else `what`.  Returns -1. */
int objstore_read_error(struct pbx_objstore *s, const char *name, const char *what, long status,
			const struct pbx_buf *body, struct pbx_err *err);

/* ------------------------------------------------ shared by the backends */

/* Appends s with every byte but A-Z a-z 0-9 - _ . ~ as %XX: a path
 * segment ('/' too) or a query value. */
void objstore_enc(struct pbx_buf *b, const char *s);
/* A CRC32C as the stores write it: base64 of its 4 bytes, big-endian
 * ("AAAAAA==").  out[9]. */
void objstore_crc32c_b64(uint32_t crc, char out[9]);
/* The reverse: 0 with *crc, -1 when s is not 8 base64 characters of 4
 * bytes. */
int objstore_crc32c_unb64(const char *s, size_t len, uint32_t *crc);
/* "SCHEME://BUCKET/NAME" for messages.  Caller frees. */
char *objstore_object_url(const struct pbx_objstore *s, const char *name);

/* ------------------------------------------------------ large uploads */

/* The part size pbx asks for: PBX_OBJSTORE_PART_SIZE (bytes, decimal; for
 * tests) when set to a positive number, else 64 MiB.  A backend raises it
 * to its own minimum (objstore_part_plan). */
#define OBJSTORE_PART_DEFAULT ((uint64_t)64 << 20)
uint64_t objstore_part_size(void);

/* How an upload of `len` bytes is cut: `count` requests of `part` bytes,
 * the last one the rest (count 1: a single request, part = len). */
struct objstore_plan {
	uint64_t part;
	uint64_t count;
};
/* Plans parts of `want` bytes, raised to `min`, rounded down to a multiple
 * of `align` (min a multiple of it; align >= 1), then grown (rounded up to
 * `align`) until at most max_parts (0: no limit) are needed.  len at most
 * the part: one request.  Pure; always succeeds. */
void objstore_part_plan(uint64_t len, uint64_t want, uint64_t min, uint64_t align,
			uint64_t max_parts, struct objstore_plan *out);

/* ------------------------------------------------------- large reads */

/* The most bytes one range request asks for: PBX_OBJSTORE_RANGE_PART
 * (bytes, decimal; for tests) when set to a positive number, else
 * 256 MiB: a failed request reads that much again at most, and a slow
 * link still ends each request within the handle's timeout. */
#define OBJSTORE_RANGE_PART_DEFAULT ((uint64_t)256 << 20)
uint64_t objstore_range_part(void);

/* The largest range of a read someone reads along as it comes
 * (pbx_objstore_on_ready): the prefix in place grows as the first range
 * not yet whole does, so with 4 ranges of a quarter each it would grow at
 * a quarter of the read's rate until the end; ranges of 16 MiB taken in
 * order keep it within 4 of them of the bytes that came (the AWS CLI
 * reads in 8 MiB parts, 10 at once). */
#define OBJSTORE_READ_ALONG_PART ((uint64_t)16 << 20)

/* How a read of `len` bytes is cut into ranges: OBJSTORE_STREAMS of
 * equal size (a multiple of 1 MiB, the last one the rest), or more when
 * that is above `cap` (0: objstore_range_part(), which also bounds any
 * other cap; then of that size, rounded down to 1 MiB); count 1 for len
 * up to 1 MiB.  Pure but for the variable. */
void objstore_range_plan(uint64_t len, uint64_t cap, struct objstore_plan *out);

/* A ranged reply's check, shared by the backends: status 206 with
 * Content-Range "bytes OFF-(OFF+LEN-1)/TOTAL" and LEN bytes got (or 200
 * with exactly LEN bytes when OFF is 0: the whole object).  body: another
 * status's body, for the error.  0, or -1 with err naming the object. */
int objstore_range_reply(struct pbx_objstore *s, const char *name, long status,
			 const struct pbx_buf *headers, const struct pbx_buf *body, size_t got,
			 uint64_t off, uint64_t len, struct pbx_err *err);
/* The "object changed while it was read" error: OBJSTORE_CHANGED. */
int objstore_changed(struct pbx_objstore *s, const char *name, struct pbx_err *err);

/* Sleeps the backoff before try `attempt` + 1 (full jitter, as src/http:
 * base 500 ms, cap 32 s) of a request the caller retries itself. */
void objstore_backoff(int attempt);

/* ------------------------------------------------------ parsers (fuzzed) */

/* One page of a GCS objects.list reply ({"items": [{"name", "size",
 * "generation", "crc32c"}], "nextPageToken"}), appended to *v and *n (owned
 * by the caller: pbx_objects_free, also after an error); *next gets the
 * page token (caller frees) or NULL.  -1 with err when the text is not
 * such a reply or an item lacks a name or has a bad size. */
int objstore_gcs_list_parse(const char *json, size_t len, struct pbx_object **v, size_t *n,
			    char **next, struct pbx_err *err);
/* One page of an S3 ListObjectsV2 reply (<ListBucketResult> with
 * <Contents><Key/><Size/><ETag/></Contents>, <IsTruncated>,
 * <NextContinuationToken>), appended to *v and *n as above (has_crc32c 0:
 * listings carry none); *next gets the continuation token when the reply
 * is truncated (caller frees), else NULL.  -1 with err when the text is
 * not such a reply, an entry lacks a key or has a bad size, or a
 * truncated reply has no token. */
int objstore_s3_list_parse(const char *xml, size_t len, struct pbx_object **v, size_t *n,
			   char **next, struct pbx_err *err);
/* The S3 error document's Code (<Error><Code>) into code[size]; 0, or -1
 * when the text is not one. */
int objstore_s3_error_code(const char *xml, size_t len, char *code, size_t size);
/* A CreateMultipartUpload reply's <InitiateMultipartUploadResult><UploadId>
 * into *id (caller frees); -1 with err when the text is not one or the id
 * is empty. */
int objstore_s3_upload_id_parse(const char *xml, size_t len, char **id, struct pbx_err *err);
/* A CompleteMultipartUpload reply (S3 may answer 200 with an <Error> in
 * the body): 0 for a <CompleteMultipartUploadResult> (or moto's
 * <CompleteMultipartUploadResponse>), its
 * <ChecksumCRC32C> into *crc with *has_crc 1 when it is a whole object's
 * (a composite "B64-N" is not); 1 for an <Error> with its Code in
 * code[size]; -1 for anything else. */
int objstore_s3_complete_parse(const char *xml, size_t len, uint32_t *crc, int *has_crc, char *code,
			       size_t size);
/* The bytes a GCS resumable session holds, from the Range header of its
 * 308 reply ("bytes=0-N": N + 1; range NULL, no header: 0) into *out; -1
 * when the value is not of that form. */
int objstore_gcs_range_parse(const char *range, uint64_t *out);
/* A Content-Range header's value "bytes FIRST-LAST/TOTAL" (TOTAL may be
 * "*") into *first, *last and *total (UINT64_MAX for "*"); -1 when the
 * value is not of that form or FIRST > LAST or LAST >= TOTAL. */
int objstore_content_range_parse(const char *v, uint64_t *first, uint64_t *last, uint64_t *total);

#endif
