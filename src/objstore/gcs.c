/*
 * gcs.c - Cloud Storage through its JSON API: objects.list (prefix, every
 * page), objects.get with alt=media (the CRC32C from x-goog-hash; or a
 * Range of one generation, generation=), objects.get without it (the
 * metadata: size, generation, crc32c),
 * objects.insert with uploadType=media and ifGenerationMatch=0 (create
 * only; x-goog-hash carries our CRC32C).  Bearer tokens from
 * cloud/gce/auth with the devstorage.read_write scope; a 401 forgets the
 * token and tries once more.  The base URL is the host root
 * (clouds.gce.storage_endpoint, else https://storage.googleapis.com/).
 *
 * An object larger than the part size (objstore_part_size: 64 MiB, a
 * multiple of 256 KiB here) goes up through a resumable session
 * (uploadType=resumable, ifGenerationMatch=0, the object's crc32c in its
 * metadata): chunks PUT with Content-Range, each answered 308 with the
 * bytes the session holds (Range).  A chunk that fails (cut, 429, 5xx) is
 * not resent blindly: after a backoff pbx asks the session how far it got
 * (PUT with Content-Range: bytes * / TOTAL) and goes on from there.  The
 * session URI is its own credential: it gets no Authorization header and
 * its upload_id is redacted from the request log.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cloud/gce/auth.h"
#include "config/config.h"
#include "objstore/objstore_internal.h"
#include "util/xalloc.h"

#define GCS_BASE  "https://storage.googleapis.com/"
#define GCS_SCOPE "https://www.googleapis.com/auth/devstorage.read_write"

struct gcs {
	struct pbx_gce_auth *auth;
	char *base; /* ends in '/' */
};

/* ------------------------------------------------------------ the parser */

static int item_parse(json_t *it, struct pbx_object *o, struct pbx_err *err)
{
	const char *name = json_string_value(json_object_get(it, "name"));
	const char *size = json_string_value(json_object_get(it, "size"));
	const char *gen = json_string_value(json_object_get(it, "generation"));
	const char *crc = json_string_value(json_object_get(it, "crc32c"));
	char *end = NULL;
	if (!name || !*name)
		return pbx_err_set(err, "objects.list: an item without a name");
	if (!size || !*size || *size == '-' || (o->size = strtoull(size, &end, 10), *end))
		return pbx_err_set(err, "objects.list: item has no size or a bad one");
	o->name = xstrdup(name);
	o->version = gen ? xstrdup(gen) : NULL;
	o->has_crc32c = crc && objstore_crc32c_unb64(crc, strlen(crc), &o->crc32c) == 0;
	return 0;
}

int objstore_gcs_list_parse(const char *json, size_t len, struct pbx_object **v, size_t *n,
			    char **next, struct pbx_err *err)
{
	json_t *root = json_loadb(json, len, 0, NULL), *items, *it;
	const char *tok;
	size_t i;
	int rc = 0;
	*next = NULL;
	if (!json_is_object(root)) {
		json_decref(root);
		return pbx_err_set(err, "objects.list: reply is not a JSON object");
	}
	items = json_object_get(root, "items");
	if (items && !json_is_array(items))
		rc = pbx_err_set(err, "objects.list: items is not an array");
	*v = xreallocarray(*v, *n + json_array_size(items) + 1, sizeof(**v));
	json_array_foreach(items, i, it)
	{
		memset(&(*v)[*n], 0, sizeof(**v));
		if (rc < 0 || item_parse(it, &(*v)[*n], err) < 0) {
			rc = -1;
			break;
		}
		(*n)++;
	}
	tok = json_string_value(json_object_get(root, "nextPageToken"));
	if (rc == 0 && tok && *tok)
		*next = xstrdup(tok);
	json_decref(root);
	return rc;
}

/* ------------------------------------------------------------- requests */

/* One authorized call on handle `http` (attempts added to *requests); a
 * 401 forgets the token and tries once more.  Thread-safe for calls on
 * different handles (the token is the auth's, under its lock). */
static int gcs_call_on(struct pbx_objstore *s, struct pbx_http *http, struct pbx_http_req *r,
		       const char *extra[4], struct pbx_http_resp *resp, unsigned long *requests,
		       struct pbx_err *err)
{
	struct gcs *g = s->backend;
	int tries, rc = -1;
	for (tries = 0; tries < 2; tries++) {
		const char *hdrs[6] = { NULL };
		char *auth = NULL;
		int i;
		if (pbx_gce_auth_header(g->auth, &auth, err) < 0)
			return -1;
		hdrs[0] = auth;
		for (i = 0; extra && i < 4 && extra[i]; i++)
			hdrs[i + 1] = extra[i];
		r->headers = hdrs;
		rc = pbx_http_do(http, r, resp, err);
		pbx_gce_auth_free_header(auth);
		r->headers = NULL;
		*requests += (unsigned long)resp->attempts;
		if (rc < 0 || resp->status != 401)
			break;
		pbx_gce_auth_invalidate(g->auth);
	}
	return rc;
}

/* One authorized call on the store's own handle. */
static int gcs_call(struct pbx_objstore *s, struct pbx_http_req *r, const char *extra[4],
		    struct pbx_http_resp *resp, struct pbx_err *err)
{
	return gcs_call_on(s, s->http, r, extra, resp, &s->requests, err);
}

/* BASE storage/v1/b/BUCKET/o */
static void objects_url(struct pbx_objstore *s, struct pbx_buf *u, const char *upload)
{
	struct gcs *g = s->backend;
	pbx_buf_addf(u, "%s%sstorage/v1/b/", g->base, upload);
	objstore_enc(u, s->url.bucket);
	pbx_buf_adds(u, "/o");
}

/* BASE storage/v1/b/BUCKET/o/NAME */
static void object_url(struct pbx_objstore *s, struct pbx_buf *u, const char *name)
{
	objects_url(s, u, "");
	pbx_buf_addc(u, '/');
	objstore_enc(u, name);
}

static int gcs_list_page(struct pbx_objstore *s, const char *prefix, const char *token,
			 struct pbx_object **v, size_t *n, char **next, struct pbx_err *err)
{
	struct pbx_buf u = PBX_BUF_INIT;
	struct pbx_http_req r = { .method = "GET" };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	objects_url(s, &u, "");
	pbx_buf_adds(&u, "?fields=items(name%2Csize%2Cgeneration%2Ccrc32c)%2CnextPageToken");
	pbx_buf_adds(&u, "&prefix=");
	objstore_enc(&u, prefix);
	if (token) {
		pbx_buf_adds(&u, "&pageToken=");
		objstore_enc(&u, token);
	}
	r.url = u.buf;
	rc = gcs_call(s, &r, NULL, &resp, err);
	if (rc == 0 && resp.status != 200) {
		objstore_http_error(s, prefix, "cannot list", resp.status, &resp.body, err);
		rc = -1;
	}
	if (rc == 0 && objstore_gcs_list_parse(resp.body.buf, resp.body.len, v, n, next, err) < 0)
		rc = pbx_err_prefix(err, "gs://%s/%s", s->url.bucket, prefix);
	pbx_buf_release(&u);
	pbx_buf_release(&resp.body);
	return rc;
}

/* x-goog-hash: crc32c=B64[, md5=B64] (one header or several). */
static void hash_header(const struct pbx_buf *h, struct pbx_object *m)
{
	char *v = pbx_http_header(h, "x-goog-hash"), *p;
	for (p = v; p && (p = strstr(p, "crc32c=")) != NULL; p += 7) {
		size_t len = strcspn(p + 7, ", ");
		if (objstore_crc32c_unb64(p + 7, len, &m->crc32c) == 0)
			m->has_crc32c = 1;
	}
	free(v);
}

static int gcs_get(struct pbx_objstore *s, const char *name, size_t max, struct pbx_buf *body,
		   struct pbx_object *meta, struct pbx_err *err)
{
	struct pbx_buf u = PBX_BUF_INIT, h = PBX_BUF_INIT;
	struct pbx_http_req r = { .method = "GET", .max_body = max, .resp_headers = &h };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	object_url(s, &u, name);
	pbx_buf_adds(&u, "?alt=media");
	r.url = u.buf;
	rc = gcs_call(s, &r, NULL, &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = objstore_read_error(s, name, "cannot read", resp.status, &resp.body, err);
	if (rc == 0) {
		meta->name = xstrdup(name);
		meta->size = resp.body.len;
		meta->version = pbx_http_header(&h, "x-goog-generation");
		hash_header(&h, meta);
		*body = resp.body;
		resp.body = (struct pbx_buf)PBX_BUF_INIT;
	}
	pbx_buf_release(&resp.body);
	pbx_buf_release(&u);
	pbx_buf_release(&h);
	return rc;
}

/* objects.get without alt=media: the object's resource (name, size,
 * generation, crc32c) into meta. */
static int gcs_stat(struct pbx_objstore *s, const char *name, struct pbx_object *meta,
		    struct pbx_err *err)
{
	struct pbx_buf u = PBX_BUF_INIT;
	struct pbx_http_req r = { .method = "GET" };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	json_t *o = NULL;
	int rc;
	object_url(s, &u, name);
	pbx_buf_adds(&u, "?fields=name%2Csize%2Cgeneration%2Ccrc32c");
	r.url = u.buf;
	rc = gcs_call(s, &r, NULL, &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = objstore_read_error(s, name, "cannot read its metadata", resp.status,
					 &resp.body, err);
	/* (json_is_object is a macro that reads its argument twice: the
	 * load stays outside it) */
	if (rc == 0)
		o = json_loadb(resp.body.buf, resp.body.len, 0, NULL);
	if (rc == 0 && !json_is_object(o))
		rc = pbx_err_set(err, "gs://%s/%s: objects.get: reply is not a JSON object",
				 s->url.bucket, name);
	else if (rc == 0 && item_parse(o, meta, err) < 0)
		rc = pbx_err_prefix(err, "gs://%s/%s", s->url.bucket, name);
	json_decref(o);
	pbx_buf_release(&u);
	pbx_buf_release(&resp.body);
	return rc;
}

/* objects.get alt=media of generation `version` ("" none) with a Range:
 * bytes [off, off + len) into `into`.  A generation GCS no longer has is a
 * 404 (a 412 for a precondition): OBJSTORE_CHANGED. */
static int gcs_read_range(struct pbx_objstore *s, struct pbx_http *http, const char *name,
			  const char *version, uint64_t off, uint64_t len,
			  struct objstore_into *into, unsigned long *requests, struct pbx_err *err)
{
	struct pbx_buf u = PBX_BUF_INIT, h = PBX_BUF_INIT;
	char range[64];
	const char *extra[4] = { range, NULL, NULL, NULL };
	struct pbx_http_req r = { .method = "GET",
				  .resp_headers = &h,
				  .into_fn = objstore_into_write,
				  .into_ctx = into,
				  .into_len = (size_t)len };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	snprintf(range, sizeof(range), "Range: bytes=%llu-%llu", (unsigned long long)off,
		 (unsigned long long)(off + len - 1));
	object_url(s, &u, name);
	pbx_buf_adds(&u, "?alt=media");
	if (*version) {
		pbx_buf_adds(&u, "&generation=");
		objstore_enc(&u, version);
	}
	r.url = u.buf;
	rc = gcs_call_on(s, http, &r, extra, &resp, requests, err);
	if (rc == 0 && *version && (resp.status == 404 || resp.status == 412))
		rc = objstore_changed(s, name, err);
	else if (rc == 0)
		rc = objstore_range_reply(s, name, resp.status, &h, &resp.body, resp.into_got, off,
					  len, err);
	pbx_buf_release(&resp.body);
	pbx_buf_release(&u);
	pbx_buf_release(&h);
	return rc;
}

/* The object resource an upload returns: its crc32c must be ours. */
static int check_stored(struct pbx_objstore *s, const char *name, const struct pbx_buf *body,
			uint32_t crc, struct pbx_err *err)
{
	json_t *o = json_loadb(body->buf, body->len, 0, NULL);
	const char *c = json_string_value(json_object_get(o, "crc32c"));
	uint32_t got;
	int rc = 0;
	if (c && (objstore_crc32c_unb64(c, strlen(c), &got) < 0 || got != crc)) {
		char *obj = objstore_object_url(s, name);
		rc = pbx_err_setc(err, PBX_EXIT_SECURITY,
				  "%s: the store kept CRC32C %s, not the one sent", obj, c);
		free(obj);
	}
	json_decref(o);
	return rc;
}

static int put_single(struct pbx_objstore *s, const char *name, const void *data, size_t len,
		      const char *content_type, uint32_t crc32c, struct pbx_err *err)
{
	struct pbx_buf u = PBX_BUF_INIT;
	char b64[9], *ct = xasprintf("Content-Type: %s", content_type);
	char *hash;
	const char *extra[4] = { ct, NULL, NULL, NULL };
	struct pbx_http_req r = { .method = "POST", .body = data, .body_len = len };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	objstore_crc32c_b64(crc32c, b64);
	hash = xasprintf("x-goog-hash: crc32c=%s", b64);
	extra[1] = hash;
	objects_url(s, &u, "upload/");
	pbx_buf_adds(&u, "?uploadType=media&ifGenerationMatch=0&name=");
	objstore_enc(&u, name);
	r.url = u.buf;
	rc = gcs_call(s, &r, extra, &resp, err);
	s->put_retried = resp.attempts > 1;
	if (rc == 0 && resp.status == 412)
		rc = PBX_OBJSTORE_EXISTS;
	else if (rc == 0 && resp.status != 200)
		rc = (objstore_http_error(s, name, "cannot create", resp.status, &resp.body, err),
		      -1);
	else if (rc == 0)
		rc = check_stored(s, name, &resp.body, crc32c, err);
	pbx_buf_release(&resp.body);
	pbx_buf_release(&u);
	free(ct);
	free(hash);
	return rc;
}

/* ------------------------------------------------------ resumable upload */

#define GCS_UNIT         ((uint64_t)256 << 10) /* a chunk is a multiple of it */
#define GCS_FAILURES_MAX 8 /* failed chunks in a row, with no progress between */

int objstore_gcs_range_parse(const char *range, uint64_t *out)
{
	char *end = NULL;
	unsigned long long last;
	*out = 0;
	if (!range)
		return 0;
	if (strncmp(range, "bytes=0-", 8) != 0 || range[8] < '0' || range[8] > '9')
		return -1;
	errno = 0;
	last = strtoull(range + 8, &end, 10);
	if (errno || *end || last == ULLONG_MAX)
		return -1;
	*out = (uint64_t)last + 1;
	return 0;
}

/* Begins a session: *session the URI to send the bytes to (caller frees),
 * or PBX_OBJSTORE_EXISTS when the name is taken already. */
static int session_begin(struct pbx_objstore *s, const char *name, size_t len,
			 const char *content_type, uint32_t crc32c, char **session,
			 struct pbx_err *err)
{
	struct pbx_buf u = PBX_BUF_INIT, h = PBX_BUF_INIT;
	char b64[9], *xct = xasprintf("X-Upload-Content-Type: %s", content_type);
	char *xlen = xasprintf("X-Upload-Content-Length: %zu", len), *meta;
	const char *extra[4] = { "Content-Type: application/json; charset=UTF-8", xct, xlen, NULL };
	json_t *m = json_object();
	struct pbx_http_req r = { .method = "POST", .resp_headers = &h };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	objstore_crc32c_b64(crc32c, b64);
	json_object_set_new(m, "crc32c", json_string(b64)); /* checked by the store at the end */
	json_object_set_new(m, "contentType", json_string(content_type));
	meta = json_dumps(m, JSON_COMPACT);
	r.body = meta;
	r.body_len = strlen(meta);
	objects_url(s, &u, "upload/");
	pbx_buf_adds(&u, "?uploadType=resumable&ifGenerationMatch=0&name=");
	objstore_enc(&u, name);
	r.url = u.buf;
	rc = gcs_call(s, &r, extra, &resp, err);
	if (rc == 0 && resp.status == 412)
		rc = PBX_OBJSTORE_EXISTS;
	else if (rc == 0 && resp.status != 200)
		rc = (objstore_http_error(s, name, "cannot begin a resumable upload", resp.status,
					  &resp.body, err),
		      -1);
	else if (rc == 0 && !(*session = pbx_http_header(&h, "location")))
		rc = pbx_err_set(err, "gs://%s/%s: resumable upload began without a session URI",
				 s->url.bucket, name);
	json_decref(m);
	free(meta);
	free(xct);
	free(xlen);
	pbx_buf_release(&u);
	pbx_buf_release(&h);
	pbx_buf_release(&resp.body);
	return rc;
}

/* One resumable upload: what every request of its session needs. */
struct session {
	char *uri;        /* where the bytes go (owned) */
	const char *name; /* the object */
	const char *data;
	size_t len;
	uint64_t chunk;    /* bytes a request, a multiple of GCS_UNIT */
	const char *ctype; /* "Content-Type: ..." of every chunk */
	uint32_t crc32c;   /* of the whole object */
};

/* One request to the session: data[off, off + n) with its Content-Range
 * (n 0: the status query, "bytes * / LEN").  A chunk is sent once
 * (max_attempts 1): the caller asks how far it got before sending again. */
static int session_put(struct pbx_objstore *s, const struct session *ss, uint64_t off, uint64_t n,
		       struct pbx_buf *h, struct pbx_http_resp *resp, struct pbx_err *err)
{
	char range[96], b64[9], hash[32];
	const char *hdrs[4] = { range, ss->ctype, NULL, NULL };
	struct pbx_http_req r = { .method = "PUT",
				  .url = ss->uri,
				  .headers = hdrs,
				  .body = n ? ss->data + off : "",
				  .body_len = (size_t)n,
				  .resp_headers = h,
				  .max_attempts = n ? 1 : 0 };
	int rc;
	if (n)
		snprintf(range, sizeof(range), "Content-Range: bytes %llu-%llu/%zu",
			 (unsigned long long)off, (unsigned long long)(off + n - 1), ss->len);
	else
		snprintf(range, sizeof(range), "Content-Range: bytes */%zu", ss->len);
	if (n && off + n == ss->len) { /* the last chunk: the store checks the whole */
		objstore_crc32c_b64(ss->crc32c, b64);
		snprintf(hash, sizeof(hash), "x-goog-hash: crc32c=%s", b64);
		hdrs[2] = hash;
	}
	rc = pbx_http_do(s->http, &r, resp, err);
	s->requests += (unsigned long)resp->attempts;
	return rc;
}

/* What one answer of the session means: 1 go on (*held: the bytes it
 * holds), 0 done (the object made), PBX_OBJSTORE_EXISTS, -1 an error;
 * 2 for a failure worth asking the session again (a retryable status). */
static int session_answer(struct pbx_objstore *s, const struct session *ss, const struct pbx_buf *h,
			  const struct pbx_http_resp *resp, uint64_t *held, struct pbx_err *err)
{
	char *range;
	int bad;
	if (resp->status == 200 || resp->status == 201)
		return check_stored(s, ss->name, &resp->body, ss->crc32c, err);
	if (resp->status == 412)
		return PBX_OBJSTORE_EXISTS;
	if (pbx_http_retryable_default(resp->status, NULL, 0, NULL))
		return 2;
	if (resp->status != 308)
		return (objstore_http_error(s, ss->name, "resumable upload failed", resp->status,
					    &resp->body, err),
			-1);
	range = pbx_http_header(h, "range");
	bad = objstore_gcs_range_parse(range, held);
	free(range);
	if (bad || *held > ss->len)
		return pbx_err_set(err,
				   "gs://%s/%s: resumable upload: a Range the session "
				   "cannot mean",
				   s->url.bucket, ss->name);
	return 1;
}

/* After a chunk failed GCS_FAILURES_MAX + 1 times in a row: the error. */
static int give_up(struct pbx_objstore *s, const char *name, const struct pbx_err *e,
		   const struct pbx_http_resp *resp, struct pbx_err *err)
{
	if (e->msg[0]) {
		*err = *e;
		return -1;
	}
	objstore_http_error(s, name, "resumable upload failed", resp->status, &resp->body, err);
	return -1;
}

/* Sends the data from where the session stands until the store has it
 * all: 0, PBX_OBJSTORE_EXISTS or -1. */
static int session_send(struct pbx_objstore *s, const struct session *ss, struct pbx_err *err)
{
	struct pbx_buf h = PBX_BUF_INIT;
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	uint64_t off = 0, held = 0;
	int failures = 0, query = 0, r;
	for (;;) {
		uint64_t n = query ? 0 : (ss->len - off < ss->chunk ? ss->len - off : ss->chunk);
		struct pbx_err e = PBX_ERR_INIT;
		r = session_put(s, ss, off, n, &h, &resp, &e) < 0
			    ? 2
			    : session_answer(s, ss, &h, &resp, &held, err);
		if (r == 1 && !query && held <= off)
			r = 2; /* the chunk made no progress */
		if (r != 1 && r != 2)
			break;
		if (r == 2 && ++failures > GCS_FAILURES_MAX) {
			r = give_up(s, ss->name, &e, &resp, err);
			break;
		}
		if (r == 2) { /* a chunk lost or refused: ask how far it got */
			s->put_retried = 1;
			objstore_backoff(failures);
			query = 1;
			continue;
		}
		if (held > off)
			failures = 0;
		off = held;
		query = 0;
	}
	pbx_buf_release(&h);
	pbx_buf_release(&resp.body);
	return r;
}

static int put_resumable(struct pbx_objstore *s, const char *name, const void *data, size_t len,
			 uint64_t chunk, const char *content_type, uint32_t crc32c,
			 struct pbx_err *err)
{
	struct session ss = { NULL, name, data, len, chunk, NULL, crc32c };
	char *ct = xasprintf("Content-Type: %s", content_type);
	int rc = session_begin(s, name, len, content_type, crc32c, &ss.uri, err);
	ss.ctype = ct;
	if (rc == 0)
		rc = session_send(s, &ss, err);
	free(ss.uri);
	free(ct);
	return rc;
}

static int gcs_put_new(struct pbx_objstore *s, const char *name, const void *data, size_t len,
		       const char *content_type, uint32_t crc32c, struct pbx_err *err)
{
	struct objstore_plan plan;
	objstore_part_plan(len, objstore_part_size(), GCS_UNIT, GCS_UNIT, 0, &plan);
	if (plan.count == 1)
		return put_single(s, name, data, len, content_type, crc32c, err);
	return put_resumable(s, name, data, len, plan.part, content_type, crc32c, err);
}

static void gcs_close(struct pbx_objstore *s)
{
	struct gcs *g = s->backend;
	if (!g)
		return;
	pbx_gce_auth_close(g->auth);
	free(g->base);
	free(g);
	s->backend = NULL;
}

static const struct objstore_ops gcs_ops = { gcs_list_page,  gcs_get,     gcs_stat,
					     gcs_read_range, gcs_put_new, gcs_close };

int objstore_gcs_open(struct pbx_objstore *s, const struct pbx_config *cfg, struct pbx_err *err)
{
	const char *base = cfg && cfg->gce.storage_endpoint ? cfg->gce.storage_endpoint : GCS_BASE;
	struct gcs *g = xcalloc(1, sizeof(*g));
	char why[256];
	s->ops = &gcs_ops;
	s->backend = g;
	g->base = base[strlen(base) - 1] == '/' ? xstrdup(base) : xasprintf("%s/", base);
	if (!pbx_http_url_allowed(g->base, why, sizeof(why)))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "clouds.gce.storage_endpoint: %s", why);
	if (pbx_gce_auth_open(cfg ? cfg->gce.credentials : NULL, s->http, &g->auth, err) < 0)
		return -1;
	pbx_gce_auth_set_scope(g->auth, GCS_SCOPE);
	snprintf(s->identity, sizeof(s->identity), "%s", pbx_gce_auth_source(g->auth));
	return 0;
}
