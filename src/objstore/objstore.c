/*
 * objstore.c - the store's front: opens a store from its URL (a pbx_http
 * handle, then the backend: gcs.c or s3.c), and the checks every backend
 * shares: the CRC32C of what was read against the store's, the CRC32C of
 * what is written computed once here, size caps, error messages that name
 * the object and never a secret; and how a large upload is cut into
 * parts (the backends send them: s3.c multipart, gcs.c resumable).  See
 * objstore.h.
 */
#include "objstore/objstore_internal.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cloud/aws/aws.h"
#include "util/crc32c.h"
#include "util/xalloc.h"

#define GET_MAX_DEFAULT (1ul << 30)

/* ------------------------------------------------------------- helpers */

void objstore_enc(struct pbx_buf *b, const char *s)
{
	aws_uri_encode(b, s, strlen(s));
}

void objstore_crc32c_b64(uint32_t crc, char out[9])
{
	unsigned char be[4] = { (unsigned char)(crc >> 24), (unsigned char)(crc >> 16),
				(unsigned char)(crc >> 8), (unsigned char)crc };
	EVP_EncodeBlock((unsigned char *)out, be, 4);
}

int objstore_crc32c_unb64(const char *s, size_t len, uint32_t *crc)
{
	unsigned char raw[8];
	char in[9];
	if (len != 8 || s[6] != '=' || s[7] != '=')
		return -1;
	memcpy(in, s, 8);
	in[8] = '\0';
	if (EVP_DecodeBlock(raw, (const unsigned char *)in, 8) != 6)
		return -1;
	*crc = (uint32_t)raw[0] << 24 | (uint32_t)raw[1] << 16 | (uint32_t)raw[2] << 8 | raw[3];
	return 0;
}

char *objstore_object_url(const struct pbx_objstore *s, const char *name)
{
	return xasprintf("%s://%s/%s", s->url.scheme, s->url.bucket, name ? name : "");
}

void pbx_object_release(struct pbx_object *o)
{
	free(o->name);
	free(o->version);
	o->name = o->version = NULL;
}

void pbx_objects_free(struct pbx_object *v, size_t n)
{
	size_t i;
	if (!v)
		return;
	for (i = 0; i < n; i++)
		pbx_object_release(&v[i]);
	free(v);
}

/* The store's words for what went wrong, printable and short: an S3
 * error's Code and Message, a JSON error with secret members removed. */
static char *error_excerpt(const struct pbx_objstore *s, const struct pbx_buf *body)
{
	char *t, *p;
	if (!body || body->len == 0)
		return xstrdup("empty reply");
	if (!strcmp(s->url.scheme, "s3")) {
		char *code = aws_xml_text(body->buf, body->len, "Code");
		char *msg = aws_xml_text(body->buf, body->len, "Message");
		t = code ? xasprintf("%s%s%s", code, msg ? ": " : "", msg ? msg : "")
			 : xasprintf("%zu bytes, not an S3 error", body->len);
		free(code);
		free(msg);
	} else {
		t = pbx_http_redact_json(body->buf, body->len, 300);
	}
	if (strlen(t) > 300)
		t[300] = '\0';
	for (p = t; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return t;
}

void objstore_http_error(struct pbx_objstore *s, const char *name, const char *what, long status,
			 const struct pbx_buf *body, struct pbx_err *err)
{
	char *obj = objstore_object_url(s, name), *ex = error_excerpt(s, body);
	int code = status == 401 || status == 403 ? PBX_EXIT_USAGE
		   : status == 404                ? PBX_EXIT_NOTFOUND
						  : PBX_EXIT_FAIL;
	pbx_err_setc(err, code, "%s: %s (HTTP %ld: %s)", obj, what, status, ex);
	free(obj);
	free(ex);
}

/* -------------------------------------------------------- large uploads */

uint64_t objstore_part_size(void)
{
	const char *v = getenv("PBX_OBJSTORE_PART_SIZE");
	char *end = NULL;
	unsigned long long n;
	if (!v || !*v || *v == '-')
		return OBJSTORE_PART_DEFAULT;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || n == 0)
		return OBJSTORE_PART_DEFAULT;
	return n;
}

void objstore_part_plan(uint64_t len, uint64_t want, uint64_t min, uint64_t align,
			uint64_t max_parts, struct objstore_plan *out)
{
	uint64_t part = want < min ? min : want;
	if (align < 1)
		align = 1;
	part -= part % align;
	if (part < min)
		part = min;
	if (max_parts && len / max_parts >= part) { /* more than max_parts parts */
		part = len / max_parts + (len % max_parts != 0);
		part += (align - part % align) % align;
	}
	if (len <= part) {
		out->part = len;
		out->count = 1;
		return;
	}
	out->part = part;
	out->count = len / part + (len % part != 0);
}

void objstore_backoff(int attempt)
{
	unsigned char r[4];
	struct timespec ts;
	long ms;
	/* jitter need not be secret: any bytes do, zeros are a short wait */
	if (!RAND_bytes(r, sizeof(r)))
		memset(r, 0, sizeof(r));
	ms = pbx_http_backoff_ms(
		attempt, 500, 32000,
		(double)((uint32_t)r[0] << 24 | (uint32_t)r[1] << 16 | (uint32_t)r[2] << 8 | r[3]) /
			4294967296.0);
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---------------------------------------------------------------- open */

int pbx_objstore_open(const char *url, const struct pbx_config *cfg, struct pbx_objstore **out,
		      struct pbx_err *err)
{
	struct pbx_objstore *s = xcalloc(1, sizeof(*s));
	struct pbx_http_opts o = { 0 };
	int gs;
	*out = NULL;
	if (pbx_objstore_url_parse(url, &s->url, err) < 0) {
		free(s);
		return -1;
	}
	gs = !strcmp(s->url.scheme, "gs");
	o.service = gs ? "gcs" : "s3";
	o.timeout_ms = 600000; /* an object of up to 1 GiB in one attempt */
	if (pbx_http_open(&o, &s->http, err) < 0 ||
	    (gs ? objstore_gcs_open(s, cfg, err) : objstore_s3_open(s, cfg, err)) < 0) {
		pbx_objstore_close(s);
		return -1;
	}
	*out = s;
	return 0;
}

void pbx_objstore_close(struct pbx_objstore *s)
{
	if (!s)
		return;
	if (s->ops)
		s->ops->close(s);
	pbx_http_close(s->http);
	pbx_objstore_url_free(&s->url);
	free(s);
}

const struct pbx_objstore_url *pbx_objstore_where(const struct pbx_objstore *s)
{
	return &s->url;
}

const char *pbx_objstore_identity(const struct pbx_objstore *s)
{
	return s->identity;
}

unsigned long pbx_objstore_requests(const struct pbx_objstore *s)
{
	return s->requests;
}

/* ------------------------------------------------------------ the calls */

int pbx_objstore_list_page(struct pbx_objstore *s, const char *prefix, char **token,
			   struct pbx_object **v, size_t *n, struct pbx_err *err)
{
	char *next = NULL;
	int rc;
	*v = NULL;
	*n = 0;
	rc = s->ops->list_page(s, prefix ? prefix : "", *token, v, n, &next, err);
	free(*token);
	*token = next;
	if (rc == 0)
		return 0;
	pbx_objects_free(*v, *n);
	*v = NULL;
	*n = 0;
	free(*token);
	*token = NULL;
	return -1;
}

int pbx_objstore_list(struct pbx_objstore *s, const char *prefix, struct pbx_object **v, size_t *n,
		      struct pbx_err *err)
{
	char *token = NULL, *next = NULL;
	int rc;
	*v = NULL;
	*n = 0;
	do { /* each page appended to *v */
		rc = s->ops->list_page(s, prefix ? prefix : "", token, v, n, &next, err);
		free(token);
		token = next;
		next = NULL;
	} while (rc == 0 && token);
	free(token);
	if (rc == 0)
		return 0;
	pbx_objects_free(*v, *n);
	*v = NULL;
	*n = 0;
	return -1;
}

/* The store's checksum against the bytes: -1 (PBX_EXIT_SECURITY) when
 * they differ. */
static int check_crc(struct pbx_objstore *s, const char *name, const struct pbx_buf *body,
		     const struct pbx_object *m, struct pbx_err *err)
{
	uint32_t got;
	char *obj;
	if (!m->has_crc32c)
		return 0;
	got = pbx_crc32c(0, body->buf, body->len);
	if (got == m->crc32c)
		return 0;
	obj = objstore_object_url(s, name);
	pbx_err_setc(err, PBX_EXIT_SECURITY,
		     "%s: content does not match the store's checksum (CRC32C %08x read, "
		     "%08x stored): refused",
		     obj, got, m->crc32c);
	free(obj);
	return -1;
}

int pbx_objstore_get(struct pbx_objstore *s, const char *name, size_t max, struct pbx_buf *body,
		     struct pbx_object *meta, struct pbx_err *err)
{
	struct pbx_object m = { 0 };
	int rc;
	pbx_buf_release(body);
	rc = s->ops->get(s, name, max ? max : GET_MAX_DEFAULT, body, &m, err);
	if (rc == 0)
		rc = check_crc(s, name, body, &m, err);
	if (rc < 0) {
		pbx_buf_release(body);
		pbx_object_release(&m);
		return -1;
	}
	if (meta)
		*meta = m;
	else
		pbx_object_release(&m);
	return 0;
}

/* After a put that was sent more than once came back EXISTS: whether the
 * object there is what we sent (an earlier attempt of ours wrote it). */
static int ours(struct pbx_objstore *s, const char *name, const void *data, size_t len,
		uint32_t crc)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err e = PBX_ERR_INIT;
	int same = 0;
	if (pbx_objstore_get(s, name, len + 1, &b, NULL, &e) == 0)
		same = b.len == len && (len == 0 || !memcmp(b.buf, data, len)) &&
		       pbx_crc32c(0, b.buf, b.len) == crc;
	pbx_buf_release(&b);
	return same;
}

int pbx_objstore_put_new(struct pbx_objstore *s, const char *name, const void *data, size_t len,
			 const char *content_type, struct pbx_err *err)
{
	uint32_t crc = pbx_crc32c(0, data, len);
	int rc;
	s->put_retried = 0;
	rc = s->ops->put_new(s, name, data ? data : "", len,
			     content_type ? content_type : "application/octet-stream", crc, err);
	if (rc == PBX_OBJSTORE_EXISTS && s->put_retried && ours(s, name, data, len, crc))
		return 0;
	return rc;
}
