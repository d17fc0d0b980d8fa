/*
 * s3.c - S3 through its REST API, signed with SigV4 (cloud/aws/sigv4.c):
 * ListObjectsV2 (list-type=2, prefix, continuation-token; XML read with
 * libxml2), GetObject with x-amz-checksum-mode: ENABLED (the CRC32C from
 * x-amz-checksum-crc32c), PutObject with If-None-Match: * and
 * x-amz-checksum-crc32c (create only, checked by S3).  Every request
 * carries x-amz-content-sha256, the payload's SHA-256.
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

/* The retry classifier: 5xx, 429, and the codes S3 documents as
 * transient (SlowDown, InternalError, RequestTimeout), plus a PutObject's
 * 409 ConditionalRequestConflict (a concurrent conditional write: AWS
 * says to retry; the retry is a 412 when the other write won). */
static int s3_retryable(long status, const char *body, size_t len, void *ctx)
{
	char code[64];
	(void)ctx;
	if (status == 429 || status >= 500)
		return 1;
	if (status < 400 || objstore_s3_error_code(body, len, code, sizeof(code)) < 0)
		return 0;
	return !strcmp(code, "SlowDown") || !strcmp(code, "InternalError") ||
	       !strcmp(code, "RequestTimeout") || !strcmp(code, "ConditionalRequestConflict");
}

/* ------------------------------------------------------------- requests */

/* What one signed call needs besides the handle. */
struct s3_req {
	const char *method;
	const char *key;          /* object key, or NULL for the bucket */
	const char *const *query; /* key, value, ..., NULL; may be NULL */
	const char *const *extra; /* signed headers, "Name: value", NULL-terminated */
	const void *body;
	size_t len;
	size_t max;              /* response cap, 0 = the handle's */
	struct pbx_buf *headers; /* response headers, may be NULL */
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

static int s3_call(struct pbx_objstore *s, const struct s3_req *q, struct pbx_http_resp *resp,
		   struct pbx_err *err)
{
	struct s3 *b = s->backend;
	struct pbx_buf path = PBX_BUF_INIT, url = PBX_BUF_INIT;
	char hash[65], *query = aws_canonical_query(q->query), *owned[4] = { NULL };
	const char *hdrs[12];
	struct pbx_http_req r = { .method = q->method,
				  .headers = hdrs,
				  .body = q->body,
				  .body_len = q->len,
				  .retryable = s3_retryable,
				  .max_body = q->max,
				  .resp_headers = q->headers };
	int rc, k;
	pbx_buf_addf(&path, "%s%s", b->prefix, q->key ? q->key : "");
	pbx_sha256_hex(q->body ? q->body : "", q->body ? q->len : 0, hash);
	sign(b, q, path.buf, hash, hdrs, owned);
	pbx_buf_adds(&url, b->base);
	aws_uri_encode_path(&url, path.buf, path.len);
	if (*query)
		pbx_buf_addf(&url, "?%s", query);
	r.url = url.buf;
	rc = pbx_http_do(s->http, &r, resp, err);
	s->requests += (unsigned long)resp->attempts;
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

static int list_page(struct pbx_objstore *s, const char *prefix, const char *token,
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

static int s3_list(struct pbx_objstore *s, const char *prefix, struct pbx_object **v, size_t *n,
		   struct pbx_err *err)
{
	char *token = NULL, *next = NULL;
	int rc;
	do {
		rc = list_page(s, prefix, token, v, n, &next, err);
		free(token);
		token = next;
		next = NULL;
	} while (rc == 0 && token);
	free(token);
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
	if (rc == 0 && resp.status != 200) {
		objstore_http_error(s, name, resp.status == 404 ? "no such object" : "cannot read",
				    resp.status, &resp.body, err);
		rc = -1;
	}
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

static int s3_put_new(struct pbx_objstore *s, const char *name, const void *data, size_t len,
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

static const struct objstore_ops s3_ops = { s3_list, s3_get, s3_put_new, s3_close };

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
