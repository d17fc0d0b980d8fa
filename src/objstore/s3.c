/*
 * s3.c - S3 through its REST API, signed with SigV4 (cloud/aws/sigv4.c):
 * ListObjectsV2 (list-type=2, prefix, continuation-token; XML read with
 * libxml2), GetObject with x-amz-checksum-mode: ENABLED (the CRC32C from
 * x-amz-checksum-crc32c; or a Range with If-Match: the ETag the read is
 * pinned to), HeadObject (size, ETag, CRC32C), PutObject with If-None-Match: * and
 * x-amz-checksum-crc32c (create only, checked by S3).  Every request
 * carries x-amz-content-sha256, the payload's SHA-256.
 *
 * An object larger than the part size (objstore_part_size: 64 MiB, at
 * least 5 MiB here) goes up as a multipart upload: CreateMultipartUpload
 * (CRC32C, checksum type FULL_OBJECT), UploadPart for each part with its
 * own CRC32C (each part retried alone by src/http), then
 * CompleteMultipartUpload with If-None-Match: * and the whole object's
 * CRC32C, which S3 checks against the parts and keeps as the object's.
 * Anything but a completed upload ends with AbortMultipartUpload, so no
 * part is left stored (and billed).
 *
 * Addressing: clouds.aws.s3_endpoint (an emulator, or another S3) gets
 * path-style requests (ENDPOINT/BUCKET/KEY); without one, virtual-hosted
 * https://BUCKET.s3.REGION.amazonaws.com/KEY (path-style on
 * s3.REGION.amazonaws.com for a bucket with a '.', whose name would not
 * match the certificate's wildcard).
 */
#include <curl/curl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cloud/aws/aws.h"
#include "config/config.h"
#include "objstore/objstore_internal.h"
#include "util/crc32c.h"
#include "util/fs.h"
#include "util/xalloc.h"

struct s3 {
	struct aws_creds creds;
	char *region;
	char *base;   /* scheme://host[:port], no trailing '/' */
	char *host;   /* Host header */
	char *prefix; /* path before the key: "/BUCKET/" or "/" */
};

/* ----------------------------------------------------------- the parser */

#define S3_XML_OPTS (XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)

static void s3_xml_quiet(void *ctx, const char *fmt, ...)
{
	(void)ctx;
	(void)fmt;
}

/* A reply's document; NULL when not XML or when it has a DTD (S3 sends
 * none: its entities are refused with it). */
static xmlDocPtr s3_xml_read(const char *xml, size_t len)
{
	xmlDocPtr d;
	if (!xml || !len || len > (size_t)0x7fffffff)
		return NULL;
	xmlSetGenericErrorFunc(NULL, s3_xml_quiet);
	d = xmlReadMemory(xml, (int)len, "s3.xml", NULL, S3_XML_OPTS);
	if (d && (d->intSubset || d->extSubset)) {
		xmlFreeDoc(d);
		return NULL;
	}
	return d;
}

static int is(const xmlNode *n, const char *name)
{
	return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

/* The text of n's first child element `name` (caller frees), or NULL. */
static char *child_text(const xmlNode *n, const char *name)
{
	xmlNode *c;
	for (c = n ? n->children : NULL; c; c = c->next)
		if (is(c, name)) {
			xmlChar *t = xmlNodeGetContent(c);
			char *s = xstrdup(t ? (const char *)t : "");
			xmlFree(t);
			return s;
		}
	return NULL;
}

/* ETag without its quotes. */
static char *unquote(char *e)
{
	size_t n = e ? strlen(e) : 0;
	if (n >= 2 && e[0] == '"' && e[n - 1] == '"') {
		memmove(e, e + 1, n - 2);
		e[n - 2] = '\0';
	}
	return e;
}

static int contents_parse(const xmlNode *c, struct pbx_object *o, struct pbx_err *err)
{
	char *key = child_text(c, "Key"), *size = child_text(c, "Size"), *end = NULL;
	int rc = 0;
	if (!key || !*key)
		rc = pbx_err_set(err, "ListObjectsV2: an entry without a key");
	else if (!size || !*size || *size == '-' || (o->size = strtoull(size, &end, 10), *end))
		rc = pbx_err_set(err, "ListObjectsV2: entry has no size or a bad one");
	if (rc == 0) {
		o->name = key;
		key = NULL;
		o->version = unquote(child_text(c, "ETag"));
		o->has_crc32c = 0;
	}
	free(key);
	free(size);
	return rc;
}

static int contents_all(const xmlNode *root, struct pbx_object **v, size_t *n, struct pbx_err *err)
{
	const xmlNode *c;
	size_t k = 0;
	for (c = root->children; c; c = c->next)
		k += is(c, "Contents");
	*v = xreallocarray(*v, *n + k + 1, sizeof(**v));
	for (c = root->children; c; c = c->next) {
		if (!is(c, "Contents"))
			continue;
		memset(&(*v)[*n], 0, sizeof(**v));
		if (contents_parse(c, &(*v)[*n], err) < 0)
			return -1;
		(*n)++;
	}
	return 0;
}

int objstore_s3_list_parse(const char *xml, size_t len, struct pbx_object **v, size_t *n,
			   char **next, struct pbx_err *err)
{
	xmlDocPtr d = s3_xml_read(xml, len);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
	char *trunc;
	int rc;
	*next = NULL;
	if (!is(root, "ListBucketResult")) {
		xmlFreeDoc(d);
		return pbx_err_set(err, "ListObjectsV2: reply is not a ListBucketResult");
	}
	rc = contents_all(root, v, n, err);
	trunc = child_text(root, "IsTruncated");
	if (rc == 0 && trunc && !strcmp(trunc, "true")) {
		*next = child_text(root, "NextContinuationToken");
		if (!*next || !**next) {
			free(*next);
			*next = NULL;
			rc = pbx_err_set(err, "ListObjectsV2: truncated reply without a "
					      "NextContinuationToken");
		}
	}
	free(trunc);
	xmlFreeDoc(d);
	return rc;
}

int objstore_s3_error_code(const char *xml, size_t len, char *code, size_t size)
{
	xmlDocPtr d = s3_xml_read(xml, len);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
	char *c = is(root, "Error") ? child_text(root, "Code") : NULL;
	int rc = c && *c ? 0 : -1;
	if (rc == 0)
		snprintf(code, size, "%s", c);
	free(c);
	xmlFreeDoc(d);
	return rc;
}

int objstore_s3_upload_id_parse(const char *xml, size_t len, char **id, struct pbx_err *err)
{
	xmlDocPtr d = s3_xml_read(xml, len);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
	*id = is(root, "InitiateMultipartUploadResult") ? child_text(root, "UploadId") : NULL;
	xmlFreeDoc(d);
	if (*id && **id)
		return 0;
	free(*id);
	*id = NULL;
	return pbx_err_set(err, "CreateMultipartUpload: reply without an UploadId");
}

int objstore_s3_complete_parse(const char *xml, size_t len, uint32_t *crc, int *has_crc, char *code,
			       size_t size)
{
	xmlDocPtr d = s3_xml_read(xml, len);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
	char *t = NULL;
	int rc = -1;
	*has_crc = 0;
	/* moto 5.2.1 names the root ...Response: taken too (tests/emulators/s3) */
	if (is(root, "CompleteMultipartUploadResult") ||
	    is(root, "CompleteMultipartUploadResponse")) {
		t = child_text(root, "ChecksumCRC32C");
		*has_crc = t && objstore_crc32c_unb64(t, strlen(t), crc) == 0;
		rc = 0;
	} else if (is(root, "Error") && (t = child_text(root, "Code")) != NULL && *t) {
		snprintf(code, size, "%s", t);
		rc = 1;
	}
	free(t);
	xmlFreeDoc(d);
	return rc;
}

/* The retry classifier: 5xx, 429, and the codes S3 documents as
 * transient (SlowDown, InternalError, RequestTimeout), plus a PutObject's
 * 409 ConditionalRequestConflict (a concurrent conditional write: AWS
 * says to retry; the retry is a 412 when the other write won). */
static int transient_code(const char *code)
{
	return !strcmp(code, "SlowDown") || !strcmp(code, "InternalError") ||
	       !strcmp(code, "RequestTimeout") || !strcmp(code, "ConditionalRequestConflict");
}

static int s3_retryable(long status, const char *body, size_t len, void *ctx)
{
	char code[64];
	(void)ctx;
	if (status == 429 || status >= 500)
		return 1;
	if (status < 400 || objstore_s3_error_code(body, len, code, sizeof(code)) < 0)
		return 0;
	return transient_code(code);
}

/* CompleteMultipartUpload's: as above, and a 200 whose body is an
 * transient <Error> (S3 may fail a completion after its 200 is sent). */
static int complete_retryable(long status, const char *body, size_t len, void *ctx)
{
	char code[64];
	if (status == 200)
		return objstore_s3_error_code(body, len, code, sizeof(code)) == 0 &&
		       transient_code(code);
	return s3_retryable(status, body, len, ctx);
}

/* ------------------------------------------------------------- requests */

/* What one signed call needs besides the handle (and counter). */
struct s3_req {
	const char *method;
	const char *key;          /* object key, or NULL for the bucket */
	const char *const *query; /* key, value, ..., NULL; may be NULL */
	const char *const *extra; /* signed headers, "Name: value", NULL-terminated */
	const void *body;
	size_t len;
	size_t max;                      /* response cap, 0 = the handle's */
	struct pbx_buf *headers;         /* response headers, may be NULL */
	pbx_http_retryable_fn retryable; /* NULL = s3_retryable */
	struct objstore_into *into;      /* a 2xx body's place (objstore_into_write) */
	size_t into_len;
};

/* The request's headers: its own, then Authorization, date, payload hash
 * and token.  hdrs has room for 12; the strings go into owned[4]. */
static void sign(struct s3 *b, const struct s3_req *q, const char *path, const char *hash,
		 const char *hdrs[12], char *owned[4])
{
	char date[17];
	struct aws_sign_in in = { .method = q->method,
				  .host = b->host,
				  .path = path,
				  .amz_date = date,
				  .region = b->region,
				  .service = "s3",
				  .creds = &b->creds,
				  .query = q->query,
				  .headers = q->extra,
				  .payload_hash = hash };
	char *auth;
	size_t i = 0, k;
	aws_amz_date((long long)time(NULL), date);
	auth = aws_sigv4_authorization(&in, NULL, NULL);
	for (k = 0; q->extra && q->extra[k] && i < 6; k++)
		hdrs[i++] = q->extra[k];
	owned[0] = xasprintf("Authorization: %s", auth);
	owned[1] = xasprintf("X-Amz-Date: %s", date);
	owned[2] = xasprintf("X-Amz-Content-Sha256: %s", hash);
	owned[3] = b->creds.token ? xasprintf("X-Amz-Security-Token: %s", b->creds.token) : NULL;
	for (k = 0; k < 4; k++)
		if (owned[k])
			hdrs[i++] = owned[k];
	hdrs[i] = NULL;
	free(auth);
}

/* One signed call on handle `http`, its attempts added to *requests.
 * Thread-safe for calls on different handles (signing only reads the
 * credentials). */
static int s3_call_on(struct pbx_objstore *s, struct pbx_http *http, const struct s3_req *q,
		      struct pbx_http_resp *resp, unsigned long *requests, struct pbx_err *err)
{
	struct s3 *b = s->backend;
	struct pbx_buf path = PBX_BUF_INIT, url = PBX_BUF_INIT;
	char hash[65], *query = aws_canonical_query(q->query), *owned[4] = { NULL };
	const char *hdrs[12];
	struct pbx_http_req r = { .method = q->method,
				  .headers = hdrs,
				  .body = q->body,
				  .body_len = q->len,
				  .retryable = q->retryable ? q->retryable : s3_retryable,
				  .max_body = q->max,
				  .resp_headers = q->headers,
				  .into_fn = q->into ? objstore_into_write : NULL,
				  .into_ctx = q->into,
				  .into_len = q->into_len };
	int rc, k;
	pbx_buf_addf(&path, "%s%s", b->prefix, q->key ? q->key : "");
	pbx_sha256_hex(q->body ? q->body : "", q->body ? q->len : 0, hash);
	sign(b, q, path.buf, hash, hdrs, owned);
	pbx_buf_adds(&url, b->base);
	aws_uri_encode_path(&url, path.buf, path.len);
	if (*query)
		pbx_buf_addf(&url, "?%s", query);
	r.url = url.buf;
	rc = pbx_http_do(http, &r, resp, err);
	*requests += (unsigned long)resp->attempts;
	for (k = 0; k < 4; k++) {
		if (owned[k])
			explicit_bzero(owned[k], strlen(owned[k]));
		free(owned[k]);
	}
	free(query);
	pbx_buf_release(&path);
	pbx_buf_release(&url);
	return rc;
}

static int s3_call(struct pbx_objstore *s, const struct s3_req *q, struct pbx_http_resp *resp,
		   struct pbx_err *err)
{
	return s3_call_on(s, s->http, q, resp, &s->requests, err);
}

static int s3_list_page(struct pbx_objstore *s, const char *prefix, const char *token,
			struct pbx_object **v, size_t *n, char **next, struct pbx_err *err)
{
	const char *query[] = { "list-type",          "2",   "prefix", prefix,
				"continuation-token", token, NULL };
	struct s3_req q = { .method = "GET", .query = query };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	if (!token)
		query[4] = NULL;
	rc = s3_call(s, &q, &resp, err);
	if (rc == 0 && resp.status != 200) {
		objstore_http_error(s, prefix, "cannot list", resp.status, &resp.body, err);
		rc = -1;
	}
	if (rc == 0 && objstore_s3_list_parse(resp.body.buf, resp.body.len, v, n, next, err) < 0)
		rc = pbx_err_prefix(err, "s3://%s/%s", s->url.bucket, prefix);
	pbx_buf_release(&resp.body);
	return rc;
}

/* x-amz-checksum-crc32c of a whole object (a multipart object's
 * composite "B64-N" is not the CRC32C of its bytes and is ignored). */
static void checksum_header(const struct pbx_buf *h, struct pbx_object *m)
{
	char *v = pbx_http_header(h, "x-amz-checksum-crc32c");
	if (v && objstore_crc32c_unb64(v, strlen(v), &m->crc32c) == 0)
		m->has_crc32c = 1;
	free(v);
}

static int s3_get(struct pbx_objstore *s, const char *name, size_t max, struct pbx_buf *body,
		  struct pbx_object *meta, struct pbx_err *err)
{
	const char *extra[] = { "x-amz-checksum-mode: ENABLED", NULL };
	struct pbx_buf h = PBX_BUF_INIT;
	struct s3_req q = {
		.method = "GET", .key = name, .extra = extra, .max = max, .headers = &h
	};
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc = s3_call(s, &q, &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = objstore_read_error(s, name, "cannot read", resp.status, &resp.body, err);
	if (rc == 0) {
		meta->name = xstrdup(name);
		meta->size = resp.body.len;
		meta->version = unquote(pbx_http_header(&h, "etag"));
		checksum_header(&h, meta);
		*body = resp.body;
		resp.body = (struct pbx_buf)PBX_BUF_INIT;
	}
	pbx_buf_release(&resp.body);
	pbx_buf_release(&h);
	return rc;
}

/* HeadObject with x-amz-checksum-mode: ENABLED: size (Content-Length),
 * ETag and the whole object's CRC32C when S3 keeps one. */
static int s3_stat(struct pbx_objstore *s, const char *name, struct pbx_object *meta,
		   struct pbx_err *err)
{
	const char *extra[] = { "x-amz-checksum-mode: ENABLED", NULL };
	struct pbx_buf h = PBX_BUF_INIT;
	struct s3_req q = { .method = "HEAD", .key = name, .extra = extra, .headers = &h };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	char *len = NULL, *end = NULL;
	int rc = s3_call(s, &q, &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = objstore_read_error(s, name, "cannot read its metadata", resp.status,
					 &resp.body, err);
	if (rc == 0) {
		len = pbx_http_header(&h, "content-length");
		if (!len || *len < '0' || *len > '9' ||
		    (meta->size = strtoull(len, &end, 10), *end))
			rc = pbx_err_set(err,
					 "s3://%s/%s: HeadObject: no Content-Length or a bad one",
					 s->url.bucket, name);
	}
	if (rc == 0) {
		meta->name = xstrdup(name);
		meta->version = unquote(pbx_http_header(&h, "etag"));
		checksum_header(&h, meta);
	}
	free(len);
	pbx_buf_release(&resp.body);
	pbx_buf_release(&h);
	return rc;
}

/* GetObject of bytes [off, off + len) with If-Match: the ETag `version`
 * ("": none) into `into`; a 412 PreconditionFailed (the object is another
 * now) is OBJSTORE_CHANGED. */
static int s3_read_range(struct pbx_objstore *s, struct pbx_http *http, const char *name,
			 const char *version, uint64_t off, uint64_t len,
			 struct objstore_into *into, unsigned long *requests, struct pbx_err *err)
{
	char range[64], *match = *version ? xasprintf("If-Match: \"%s\"", version) : NULL;
	const char *extra[] = { range, match, NULL };
	struct pbx_buf h = PBX_BUF_INIT;
	struct s3_req q = { .method = "GET",
			    .key = name,
			    .extra = extra,
			    .headers = &h,
			    .into = into,
			    .into_len = (size_t)len };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	snprintf(range, sizeof(range), "Range: bytes=%llu-%llu", (unsigned long long)off,
		 (unsigned long long)(off + len - 1));
	rc = s3_call_on(s, http, &q, &resp, requests, err);
	if (rc == 0 && match && resp.status == 412)
		rc = objstore_changed(s, name, err);
	else if (rc == 0)
		rc = objstore_range_reply(s, name, resp.status, &h, &resp.body, resp.into_got, off,
					  len, err);
	pbx_buf_release(&resp.body);
	pbx_buf_release(&h);
	free(match);
	return rc;
}

static int put_single(struct pbx_objstore *s, const char *name, const void *data, size_t len,
		      const char *content_type, uint32_t crc32c, struct pbx_err *err)
{
	char b64[9], *ct = xasprintf("Content-Type: %s", content_type), *sum;
	/* the SDKs name the algorithm too (x-amz-sdk-checksum-algorithm, the
	 * ChecksumAlgorithm parameter); S3 checks the value either way */
	const char *extra[5] = { ct, "If-None-Match: *", "x-amz-sdk-checksum-algorithm: CRC32C",
				 NULL, NULL };
	struct s3_req q = { .method = "PUT", .key = name, .extra = extra, .body = data, .len = len };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	objstore_crc32c_b64(crc32c, b64);
	sum = xasprintf("x-amz-checksum-crc32c: %s", b64);
	extra[3] = sum;
	rc = s3_call(s, &q, &resp, err);
	s->put_retried = resp.attempts > 1;
	if (rc == 0 && resp.status == 412)
		rc = PBX_OBJSTORE_EXISTS;
	else if (rc == 0 && resp.status != 200)
		rc = (objstore_http_error(s, name, "cannot create", resp.status, &resp.body, err),
		      -1);
	pbx_buf_release(&resp.body);
	free(ct);
	free(sum);
	return rc;
}

/* ------------------------------------------------------ multipart upload */

#define S3_PART_MIN  ((uint64_t)5 << 20) /* every part but the last */
#define S3_PART_MAX  ((uint64_t)5 << 30)
#define S3_PARTS_MAX 10000

/* One uploaded part: what CompleteMultipartUpload names. */
struct s3_part {
	char *etag; /* as S3 gave it, quotes included */
	uint32_t crc;
};

/* CreateMultipartUpload: *uid the upload's id (caller frees). */
static int create_upload(struct pbx_objstore *s, const char *name, const char *content_type,
			 char **uid, struct pbx_err *err)
{
	char *ct = xasprintf("Content-Type: %s", content_type);
	const char *query[] = { "uploads", "", NULL };
	const char *extra[] = { ct, "x-amz-checksum-algorithm: CRC32C",
				"x-amz-checksum-type: FULL_OBJECT", NULL };
	struct s3_req q = { .method = "POST", .key = name, .query = query, .extra = extra };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc = s3_call(s, &q, &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = (objstore_http_error(s, name, "cannot begin a multipart upload", resp.status,
					  &resp.body, err),
		      -1);
	else if (rc == 0 && objstore_s3_upload_id_parse(resp.body.buf, resp.body.len, uid, err) < 0)
		rc = pbx_err_prefix(err, "s3://%s/%s", s->url.bucket, name);
	pbx_buf_release(&resp.body);
	free(ct);
	return rc;
}

/* UploadPart `num` (1-based) of data[0, len) with its CRC32C; p gets its
 * ETag and CRC.  A transport failure, a 5xx or SlowDown sends this part
 * again (src/http), not the whole object. */
static int upload_part(struct pbx_objstore *s, const char *name, const char *uid, uint64_t num,
		       const char *data, size_t len, struct s3_part *p, struct pbx_err *err)
{
	char nb[24], b64[9], *sum;
	const char *query[] = { "partNumber", nb, "uploadId", uid, NULL };
	/* a Content-Type of our own: curl would send a form's, which a
	 * server may take for one (moto does, and reads no bytes) */
	const char *extra[] = { "Content-Type: application/octet-stream",
				"x-amz-sdk-checksum-algorithm: CRC32C", NULL, NULL };
	struct pbx_buf h = PBX_BUF_INIT;
	struct s3_req q = { .method = "PUT",
			    .key = name,
			    .query = query,
			    .extra = extra,
			    .body = data,
			    .len = len,
			    .headers = &h };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	snprintf(nb, sizeof(nb), "%llu", (unsigned long long)num);
	p->crc = pbx_crc32c(0, data, len);
	objstore_crc32c_b64(p->crc, b64);
	sum = xasprintf("x-amz-checksum-crc32c: %s", b64);
	extra[2] = sum;
	rc = s3_call(s, &q, &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = (objstore_http_error(s, name, "cannot upload a part", resp.status, &resp.body,
					  err),
		      -1);
	else if (rc == 0 && !(p->etag = pbx_http_header(&h, "etag")))
		rc = pbx_err_set(err, "s3://%s/%s: UploadPart %s: reply without an ETag",
				 s->url.bucket, name, nb);
	pbx_buf_release(&resp.body);
	pbx_buf_release(&h);
	free(sum);
	return rc;
}

/* The CompleteMultipartUpload document naming every part, written with
 * libxml2 (ETags come from the store: escaped as text).  Caller frees. */
static char *complete_doc(const struct s3_part *p, uint64_t n, int *len)
{
	xmlDocPtr d = xmlNewDoc(BAD_CAST "1.0");
	xmlNodePtr root = xmlNewNode(NULL, BAD_CAST "CompleteMultipartUpload"), part;
	xmlChar *mem = NULL;
	char num[24], b64[9], *out;
	uint64_t i;
	xmlDocSetRootElement(d, root);
	xmlSetNs(root, xmlNewNs(root, BAD_CAST "http://s3.amazonaws.com/doc/2006-03-01/", NULL));
	for (i = 0; i < n; i++) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)i + 1);
		objstore_crc32c_b64(p[i].crc, b64);
		part = xmlNewChild(root, NULL, BAD_CAST "Part", NULL);
		xmlNewTextChild(part, NULL, BAD_CAST "PartNumber", BAD_CAST num);
		xmlNewTextChild(part, NULL, BAD_CAST "ETag", BAD_CAST p[i].etag);
		xmlNewTextChild(part, NULL, BAD_CAST "ChecksumCRC32C", BAD_CAST b64);
	}
	xmlDocDumpMemoryEnc(d, &mem, len, "UTF-8");
	out = xstrdup(mem ? (const char *)mem : "");
	xmlFree(mem);
	xmlFreeDoc(d);
	return out;
}

/* What a completion's answer means: 0 done (the CRC32C S3 kept, when it
 * says, must be ours), PBX_OBJSTORE_EXISTS (If-None-Match failed), -1. */
static int complete_result(struct pbx_objstore *s, const char *name,
			   const struct pbx_http_resp *resp, uint32_t crc32c, struct pbx_err *err)
{
	char code[64] = "";
	uint32_t kept = 0;
	int has = 0, r;
	if (resp->status == 412)
		return PBX_OBJSTORE_EXISTS;
	r = objstore_s3_complete_parse(resp->body.buf, resp->body.len, &kept, &has, code,
				       sizeof(code));
	if (resp->status == 200 && r == 1 && !strcmp(code, "PreconditionFailed"))
		return PBX_OBJSTORE_EXISTS;
	if (resp->status != 200 || r != 0) {
		objstore_http_error(s, name, "cannot complete the multipart upload", resp->status,
				    &resp->body, err);
		return -1;
	}
	if (has && kept != crc32c) {
		char *obj = objstore_object_url(s, name);
		pbx_err_setc(err, PBX_EXIT_SECURITY,
			     "%s: the store kept CRC32C %08x, not %08x sent", obj, kept, crc32c);
		free(obj);
		return -1;
	}
	return 0;
}

/* CompleteMultipartUpload with If-None-Match: * and the whole object's
 * CRC32C (S3 refuses the completion when the parts do not add up to it). */
static int complete_upload(struct pbx_objstore *s, const char *name, const char *uid,
			   const struct s3_part *p, uint64_t n, uint32_t crc32c,
			   struct pbx_err *err)
{
	char b64[9], *sum;
	const char *query[] = { "uploadId", uid, NULL };
	const char *extra[] = { "Content-Type: application/xml", "If-None-Match: *",
				"x-amz-checksum-type: FULL_OBJECT", NULL, NULL };
	int len = 0;
	char *doc = complete_doc(p, n, &len);
	struct s3_req q = { .method = "POST",
			    .key = name,
			    .query = query,
			    .extra = extra,
			    .body = doc,
			    .len = (size_t)len,
			    .retryable = complete_retryable };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	objstore_crc32c_b64(crc32c, b64);
	sum = xasprintf("x-amz-checksum-crc32c: %s", b64);
	extra[3] = sum;
	rc = s3_call(s, &q, &resp, err);
	s->put_retried = resp.attempts > 1;
	if (rc == 0)
		rc = complete_result(s, name, &resp, crc32c, err);
	pbx_buf_release(&resp.body);
	free(sum);
	free(doc);
	return rc;
}

/* AbortMultipartUpload: the parts stored so far are dropped.  Its own
 * failure is not the caller's error (that is what went wrong before). */
static void abort_upload(struct pbx_objstore *s, const char *name, const char *uid)
{
	const char *query[] = { "uploadId", uid, NULL };
	struct s3_req q = { .method = "DELETE", .key = name, .query = query };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	struct pbx_err e = PBX_ERR_INIT;
	s3_call(s, &q, &resp, &e);
	pbx_buf_release(&resp.body);
}

static int put_multipart(struct pbx_objstore *s, const char *name, const char *data, size_t len,
			 const struct objstore_plan *plan, const char *content_type,
			 uint32_t crc32c, struct pbx_err *err)
{
	struct s3_part *parts = xcalloc(plan->count, sizeof(*parts));
	char *uid = NULL;
	uint64_t i;
	int rc = create_upload(s, name, content_type, &uid, err);
	for (i = 0; rc == 0 && i < plan->count; i++) {
		uint64_t off = i * plan->part, n = len - off < plan->part ? len - off : plan->part;
		rc = upload_part(s, name, uid, i + 1, data + off, (size_t)n, &parts[i], err);
	}
	if (rc == 0)
		rc = complete_upload(s, name, uid, parts, plan->count, crc32c, err);
	if (uid && rc != 0)
		abort_upload(s, name, uid);
	for (i = 0; i < plan->count; i++)
		free(parts[i].etag);
	free(parts);
	free(uid);
	return rc;
}

static int s3_put_new(struct pbx_objstore *s, const char *name, const void *data, size_t len,
		      const char *content_type, uint32_t crc32c, struct pbx_err *err)
{
	struct objstore_plan plan;
	uint64_t want = objstore_part_size();
	objstore_part_plan(len, want > S3_PART_MAX ? S3_PART_MAX : want, S3_PART_MIN, 1,
			   S3_PARTS_MAX, &plan);
	if (plan.count == 1)
		return put_single(s, name, data, len, content_type, crc32c, err);
	return put_multipart(s, name, data, len, &plan, content_type, crc32c, err);
}

static void s3_close(struct pbx_objstore *s)
{
	struct s3 *b = s->backend;
	if (!b)
		return;
	aws_creds_free(&b->creds);
	free(b->region);
	free(b->base);
	free(b->host);
	free(b->prefix);
	free(b);
	s->backend = NULL;
}

static const struct objstore_ops s3_ops = { s3_list_page,  s3_get,     s3_stat,
					    s3_read_range, s3_put_new, s3_close };

/* ----------------------------------------------------------------- open */

/* Path-style on an endpoint: base and Host from its scheme, host, port. */
static int endpoint_parse(struct s3 *b, const char *bucket, const char *endpoint,
			  struct pbx_err *err)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, why[256];
	int rc = 0;
	if (!pbx_http_url_allowed(endpoint, why, sizeof(why)) ||
	    curl_url_set(u, CURLUPART_URL, endpoint, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		rc = pbx_err_setc(err, PBX_EXIT_USAGE, "clouds.aws.s3_endpoint: %s",
				  pbx_http_url_allowed(endpoint, why, sizeof(why)) ? "not a URL"
										   : why);
	} else {
		curl_url_get(u, CURLUPART_PORT, &port, 0);
		b->host = port ? xasprintf("%s:%s", host, port) : xstrdup(host);
		b->base = xasprintf("%s://%s", scheme, b->host);
		b->prefix = xasprintf("/%s/", bucket);
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

static void aws_default(struct s3 *b, const char *bucket)
{
	if (strchr(bucket, '.')) {
		b->host = xasprintf("s3.%s.amazonaws.com", b->region);
		b->prefix = xasprintf("/%s/", bucket);
	} else {
		b->host = xasprintf("%s.s3.%s.amazonaws.com", bucket, b->region);
		b->prefix = xstrdup("/");
	}
	b->base = xasprintf("https://%s", b->host);
}

int objstore_s3_open(struct pbx_objstore *s, const struct pbx_config *cfg, struct pbx_err *err)
{
	struct s3 *b = xcalloc(1, sizeof(*b));
	struct aws_creds_opts co = { cfg ? cfg->aws.profile : NULL, s->http };
	const char *endpoint = cfg ? cfg->aws.s3_endpoint : NULL;
	s->ops = &s3_ops;
	s->backend = b;
	b->region = cfg && cfg->aws.region ? xstrdup(cfg->aws.region)
					   : aws_region_find(cfg ? cfg->aws.profile : NULL);
	if (!b->region)
		b->region = xstrdup("us-east-1");
	if (endpoint) {
		if (endpoint_parse(b, s->url.bucket, endpoint, err) < 0)
			return -1;
	} else {
		aws_default(b, s->url.bucket);
	}
	if (aws_creds_find(&co, &b->creds, err) < 0)
		return -1;
	snprintf(s->identity, sizeof(s->identity), "%s", b->creds.source);
	return 0;
}
