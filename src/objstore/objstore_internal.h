/*
 * objstore_internal.h - what the store's front (objstore.c) shares with
 * its two backends:
 *
 *   objstore.c  open/close, the checks every backend shares (CRC32C of
 *               what was read and sent, size caps), dispatch
 *   gcs.c       Cloud Storage JSON API: objects.list, objects.get
 *               (alt=media), objects.insert (uploadType=media,
 *               ifGenerationMatch=0); bearer tokens from cloud/gce/auth
 *   s3.c        S3 REST: ListObjectsV2, GetObject, PutObject with
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

struct objstore_ops {
	/* every object under `prefix` (a whole-name prefix), every page */
	int (*list)(struct pbx_objstore *s, const char *prefix, struct pbx_object **v, size_t *n,
		    struct pbx_err *err);
	/* the object's bytes into body (at most max: more is an error) and
	 * what the store says of it into meta (name, size, version, crc32c
	 * when given) */
	int (*get)(struct pbx_objstore *s, const char *name, size_t max, struct pbx_buf *body,
		   struct pbx_object *meta, struct pbx_err *err);
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
	void *backend;          /* the backend's own state, freed by ops->close */
};

/* Each sets s->ops, s->backend and s->identity; s->url and s->http are
 * set.  cfg may be NULL. */
int objstore_gcs_open(struct pbx_objstore *s, const struct pbx_config *cfg, struct pbx_err *err);
int objstore_s3_open(struct pbx_objstore *s, const struct pbx_config *cfg, struct pbx_err *err);

/* A store error's message: "gs://BUCKET/NAME: WHAT (HTTP STATUS: BODY
 * excerpt, secrets removed)", with the exit class that fits the status
 * (401/403 PBX_EXIT_CONFIG, 404 PBX_EXIT_NOTFOUND, else PBX_EXIT_CLOUD). */
void objstore_http_error(struct pbx_objstore *s, const char *name, const char *what, long status,
			 const struct pbx_buf *body, struct pbx_err *err);

#endif
