/*
 * objstore.c - the store's front: opens a store from its URL (a pbx_http
 * handle, then the backend: gcs.c or s3.c), and the checks every backend
 * shares: the CRC32C of what was read against the store's, the CRC32C of
 * what is written computed once here, size caps, error messages that name
 * the object and never a secret; and how a large upload is cut into
 * parts (the backends send them: s3.c multipart, gcs.c resumable); how a
 * large read is cut into ranges, read at once on handles of their own
 * and checked whole (the backends read each range pinned to a version).
 * See objstore.h.
 */
#include "objstore/objstore_internal.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cloud/aws/aws.h"
#include "util/crc32c.h"
#include "util/fanout.h"
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

/* A positive byte count from environment variable `name`, or 0 when it
 * is unset or not one. */
static uint64_t env_bytes(const char *name)
{
	const char *v = getenv(name);
	char *end = NULL;
	unsigned long long n;
	if (!v || !*v || *v == '-')
		return 0;
	errno = 0;
	n = strtoull(v, &end, 10);
	return errno || *end ? 0 : (uint64_t)n;
}

uint64_t objstore_part_size(void)
{
	uint64_t n = env_bytes("PBX_OBJSTORE_PART_SIZE");
	return n ? n : OBJSTORE_PART_DEFAULT;
}

/* len cut in parts of `part` bytes, the last the rest (one when len is at
 * most part). */
static void plan_of(uint64_t len, uint64_t part, struct objstore_plan *out)
{
	if (len <= part) {
		out->part = len;
		out->count = 1;
		return;
	}
	out->part = part;
	out->count = len / part + (len % part != 0);
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
	plan_of(len, part, out);
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

/* The options of every handle of store s. */
static void http_opts(const struct pbx_objstore *s, struct pbx_http_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->service = !strcmp(s->url.scheme, "gs") ? "gcs" : "s3";
	o->timeout_ms = 600000; /* an object of up to 1 GiB in one attempt */
}

int pbx_objstore_open(const char *url, const struct pbx_config *cfg, struct pbx_objstore **out,
		      struct pbx_err *err)
{
	struct pbx_objstore *s = xcalloc(1, sizeof(*s));
	struct pbx_http_opts o;
	int gs;
	*out = NULL;
	if (pbx_objstore_url_parse(url, &s->url, err) < 0) {
		free(s);
		return -1;
	}
	gs = !strcmp(s->url.scheme, "gs");
	http_opts(s, &o);
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
	size_t i;
	if (!s)
		return;
	for (i = 0; i < OBJSTORE_STREAMS - 1; i++)
		pbx_http_close(s->range_http[i]);
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

/* The CRC32C `got` of what was read against the store's: -1
 * (PBX_EXIT_SECURITY) when they differ. */
static int crc_check(struct pbx_objstore *s, const char *name, uint32_t got,
		     const struct pbx_object *m, struct pbx_err *err)
{
	char *obj;
	if (!m->has_crc32c || got == m->crc32c)
		return 0;
	obj = objstore_object_url(s, name);
	pbx_err_setc(err, PBX_EXIT_SECURITY,
		     "%s: content does not match the store's checksum (CRC32C %08x read, "
		     "%08x stored): refused",
		     obj, got, m->crc32c);
	free(obj);
	return -1;
}

/* The same for bytes read whole into body. */
static int check_crc(struct pbx_objstore *s, const char *name, const struct pbx_buf *body,
		     const struct pbx_object *m, struct pbx_err *err)
{
	if (!m->has_crc32c)
		return 0;
	return crc_check(s, name, pbx_crc32c(0, body->buf, body->len), m, err);
}

/* A read's end: on failure body and *m emptied (-1); else *m to *meta
 * (NULL: released) and 0. */
static int get_done(int rc, struct pbx_buf *body, struct pbx_object *m, struct pbx_object *meta)
{
	if (rc < 0) {
		pbx_buf_release(body);
		pbx_object_release(m);
		return -1;
	}
	if (meta)
		*meta = *m;
	else
		pbx_object_release(m);
	return 0;
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
	return get_done(rc, body, &m, meta);
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

/* ---------------------------------------------------------- large reads */

#define RANGE_ALIGN ((uint64_t)1 << 20)

uint64_t pbx_objstore_range_min(void)
{
	uint64_t n = env_bytes("PBX_OBJSTORE_RANGE_MIN");
	return n ? n : PBX_OBJSTORE_RANGE_MIN_DEFAULT;
}

uint64_t objstore_range_part(void)
{
	uint64_t n = env_bytes("PBX_OBJSTORE_RANGE_PART");
	return n ? n : OBJSTORE_RANGE_PART_DEFAULT;
}

void objstore_range_plan(uint64_t len, uint64_t cap, struct objstore_plan *out)
{
	if (!cap || cap > objstore_range_part())
		cap = objstore_range_part();
	uint64_t part = len / OBJSTORE_STREAMS + (len % OBJSTORE_STREAMS != 0);
	part += (RANGE_ALIGN - part % RANGE_ALIGN) % RANGE_ALIGN; /* up to 1 MiB */
	cap -= cap % RANGE_ALIGN;
	if (cap < RANGE_ALIGN)
		cap = RANGE_ALIGN;
	if (part > cap)
		part = cap;
	plan_of(len, part, out);
}

/* A decimal number at p (digits only), *end after it. */
static int u64_at(const char *p, char **end, uint64_t *v)
{
	unsigned long long n;
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	n = strtoull(p, end, 10);
	if (errno)
		return -1;
	*v = (uint64_t)n;
	return 0;
}

int objstore_content_range_parse(const char *v, uint64_t *first, uint64_t *last, uint64_t *total)
{
	char *end = NULL;
	if (!v || strncmp(v, "bytes ", 6) != 0 || u64_at(v + 6, &end, first) < 0 || *end != '-' ||
	    u64_at(end + 1, &end, last) < 0 || *end != '/')
		return -1;
	if (!strcmp(end + 1, "*"))
		*total = UINT64_MAX;
	else if (u64_at(end + 1, &end, total) < 0 || *end)
		return -1;
	if (*first > *last || (*total != UINT64_MAX && *last >= *total))
		return -1;
	return 0;
}

int objstore_range_reply(struct pbx_objstore *s, const char *name, long status,
			 const struct pbx_buf *headers, const struct pbx_buf *body, size_t got,
			 uint64_t off, uint64_t len, struct pbx_err *err)
{
	uint64_t first = 0, last = 0, total = 0;
	char *cr, *obj;
	int good;
	if (status == 200 && off == 0 && got == len)
		return 0; /* the whole object, which is that range */
	if (status != 206) {
		objstore_http_error(s, name, "cannot read a range", status, body, err);
		return -1;
	}
	cr = pbx_http_header(headers, "content-range");
	good = objstore_content_range_parse(cr, &first, &last, &total) == 0 && first == off &&
	       last == off + len - 1 && got == len;
	obj = objstore_object_url(s, name);
	if (!good)
		pbx_err_set(err,
			    "%s: the reply to bytes %llu-%llu is not that range (Content-Range "
			    "%.64s, %zu bytes)",
			    obj, (unsigned long long)off, (unsigned long long)(off + len - 1),
			    cr ? cr : "absent", got);
	free(obj);
	free(cr);
	return good ? 0 : -1;
}

int objstore_read_error(struct pbx_objstore *s, const char *name, const char *what, long status,
			const struct pbx_buf *body, struct pbx_err *err)
{
	objstore_http_error(s, name, status == 404 ? "no such object" : what, status, body, err);
	return -1;
}

int objstore_changed(struct pbx_objstore *s, const char *name, struct pbx_err *err)
{
	char *obj = objstore_object_url(s, name);
	pbx_err_setc(err, PBX_EXIT_FAIL,
		     "%s: object changed while it was read (the version being read is gone)", obj);
	free(obj);
	return OBJSTORE_CHANGED;
}

int objstore_into_write(void *ctx, uint64_t at, const char *data, size_t n)
{
	struct objstore_into *d = ctx;
	if (at == 0) /* a new attempt: from the range's start again */
		d->crc = 0;
	if (d->mem) {
		memcpy(d->mem + at, data, n);
	} else {
		size_t done = 0;
		while (done < n) {
			ssize_t w = pwrite(d->fd, data + done, n - done,
					   (off_t)(d->fd_off + at + done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return -1;
			done += (size_t)w;
		}
	}
	d->crc = pbx_crc32c(d->crc, data, n);
	if (at + n > d->seen) { /* a new attempt's bytes count once */
		if (d->on_bytes)
			d->on_bytes(d->on_bytes_ctx, at + n - d->seen);
		__atomic_store_n(&d->seen, at + n, __ATOMIC_RELEASE);
		if (d->grew)
			d->grew(d->owner);
	}
	return 0;
}

void pbx_objstore_on_bytes(struct pbx_objstore *s, void (*fn)(void *ctx, uint64_t n), void *ctx)
{
	s->on_bytes = fn;
	s->on_bytes_ctx = ctx;
}

void pbx_objstore_on_ready(struct pbx_objstore *s, void (*fn)(void *ctx, uint64_t n), void *ctx)
{
	s->on_ready = fn;
	s->on_ready_ctx = ctx;
}

int pbx_objstore_read_range(struct pbx_objstore *s, const char *name, const char *version,
			    uint64_t off, uint64_t len, void *dst, struct pbx_err *err)
{
	struct objstore_into into = { .mem = dst, .fd = -1 };
	if (len == 0)
		return 0;
	return s->ops->read_range(s, s->http, name, version ? version : "", off, len, &into,
				  &s->requests, err) == 0
		       ? 0
		       : -1;
}

/* One large read of version m->version: its ranges taken in order by up
 * to OBJSTORE_STREAMS streams, each range into mem (the object's place)
 * or file fd at its offset, its CRC32C computed as it comes. */
struct ranged {
	struct pbx_objstore *s;
	const struct pbx_object *m;
	char *mem; /* or NULL: */
	int fd;
	struct objstore_plan plan;
	struct objstore_into *into; /* per range */
	int *rc;                    /* per range (0 also for one not read) */
	struct pbx_err *errs;       /* per range */
	uint64_t next;              /* the next range to take */
	int failed;                 /* a range failed: the streams stop */
	unsigned long requests[OBJSTORE_STREAMS];
	pthread_mutex_t mu; /* whole and ready (on_ready's calls one at a time) */
	uint64_t whole;     /* the ranges before it are in place */
	uint64_t ready;     /* bytes from the object's start in place */
};

/* A range's bytes grew (range_grew's owner): the prefix in place told to
 * the store's on_ready when it grew. */
static void range_grew(void *owner)
{
	struct ranged *r = owner;
	uint64_t ready, len;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		uint64_t off = r->whole * r->plan.part;
		if (r->whole >= r->plan.count) {
			ready = r->m->size;
			break;
		}
		len = r->m->size - off < r->plan.part ? r->m->size - off : r->plan.part;
		ready = off + __atomic_load_n(&r->into[r->whole].seen, __ATOMIC_ACQUIRE);
		if (ready < off + len)
			break;
		r->whole++;
	}
	if (ready > r->ready) {
		r->ready = ready;
		r->s->on_ready(r->s->on_ready_ctx, ready);
	}
	pthread_mutex_unlock(&r->mu);
}

/* Range k on handle h. */
static int range_one(struct ranged *r, uint64_t k, struct pbx_http *h, unsigned long *requests)
{
	uint64_t off = k * r->plan.part, left = r->m->size - off;
	struct objstore_into *d = &r->into[k];
	d->mem = r->mem ? r->mem + off : NULL;
	d->fd = r->fd;
	d->fd_off = off;
	d->on_bytes = r->s->on_bytes;
	d->on_bytes_ctx = r->s->on_bytes_ctx;
	d->grew = r->s->on_ready ? range_grew : NULL;
	d->owner = r;
	r->rc[k] = r->s->ops->read_range(r->s, h, r->m->name, r->m->version ? r->m->version : "",
					 off, left < r->plan.part ? left : r->plan.part, d,
					 requests, &r->errs[k]);
	return r->rc[k];
}

/* Stream i, on its own handle (stream 0 on the store's): the next range
 * until none is left or one failed. */
static int stream_worker(void *ctx, size_t i, struct pbx_err *err)
{
	struct ranged *r = ctx;
	struct pbx_http *h = i ? r->s->range_http[i - 1] : r->s->http;
	uint64_t k;
	(void)err;
	while (!__atomic_load_n(&r->failed, __ATOMIC_RELAXED) &&
	       (k = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED)) < r->plan.count)
		if (range_one(r, k, h, &r->requests[i]) != 0)
			__atomic_store_n(&r->failed, 1, __ATOMIC_RELAXED);
	return 0;
}

/* The handles streams 1 to count - 1 go on, opened once per store. */
static int range_handles(struct pbx_objstore *s, uint64_t count, struct pbx_err *err)
{
	struct pbx_http_opts o;
	uint64_t i;
	http_opts(s, &o);
	for (i = 0; i + 1 < count; i++)
		if (!s->range_http[i] && pbx_http_open(&o, &s->range_http[i], err) < 0)
			return -1;
	return 0;
}

/* The ranges' errors and CRC32Cs: 0 with *crc the whole object's
 * (combined in order), OBJSTORE_CHANGED (a range found the version gone:
 * its error) or -1 (the first failed range's). */
static int ranges_end(struct ranged *r, uint32_t *crc, struct pbx_err *err)
{
	uint64_t k, bad = r->plan.count;
	for (k = 0; k < r->plan.count; k++)
		if (r->rc[k] != 0 && (bad == r->plan.count || (r->rc[k] == OBJSTORE_CHANGED &&
							       r->rc[bad] != OBJSTORE_CHANGED)))
			bad = k;
	if (bad < r->plan.count) {
		*err = r->errs[bad];
		return r->rc[bad] == OBJSTORE_CHANGED ? OBJSTORE_CHANGED : -1;
	}
	*crc = r->into[0].crc;
	for (k = 1; k < r->plan.count; k++) {
		uint64_t left = r->m->size - k * r->plan.part;
		*crc = pbx_crc32c_combine(*crc, r->into[k].crc,
					  left < r->plan.part ? left : r->plan.part);
	}
	return 0;
}

/* Every range of m's version into mem or fd (one range when `whole`),
 * *crc the CRC32C of all: as ranges_end. */
static int read_ranges(struct pbx_objstore *s, const struct pbx_object *m, char *mem, int fd,
		       int whole, uint32_t *crc, struct pbx_err *err)
{
	struct ranged r = { .s = s, .m = m, .mem = mem, .fd = fd };
	uint64_t streams, i;
	int rc;
	*crc = 0;
	if (m->size == 0)
		return 0;
	if (whole) {
		r.plan.part = m->size;
		r.plan.count = 1;
	} else {
		/* a reader along (on_ready) sends the prefix: ranges small
		 * enough that it grows at the streams' rate */
		objstore_range_plan(m->size, s->on_ready ? OBJSTORE_READ_ALONG_PART : 0, &r.plan);
	}
	streams = r.plan.count < OBJSTORE_STREAMS ? r.plan.count : OBJSTORE_STREAMS;
	if (range_handles(s, streams, err) < 0)
		return -1;
	r.into = xcalloc((size_t)r.plan.count, sizeof(*r.into));
	r.rc = xcalloc((size_t)r.plan.count, sizeof(*r.rc));
	r.errs = xcalloc((size_t)r.plan.count, sizeof(*r.errs));
	pthread_mutex_init(&r.mu, NULL);
	pbx_fanout((size_t)streams, (int)streams, stream_worker, &r, NULL);
	pthread_mutex_destroy(&r.mu);
	for (i = 0; i < streams; i++)
		s->requests += r.requests[i];
	rc = ranges_end(&r, crc, err);
	free(r.into);
	free(r.rc);
	free(r.errs);
	return rc;
}

/* What the store says of the object now, within max (0: any size): 0
 * or -1. */
static int stat_within(struct pbx_objstore *s, const char *name, size_t max, struct pbx_object *m,
		       struct pbx_err *err)
{
	char *obj;
	if (s->ops->stat(s, name, m, err) < 0)
		return -1;
	if (!max || m->size <= max)
		return 0;
	obj = objstore_object_url(s, name);
	pbx_err_set(err, "%s: %llu bytes, more than the %zu a read may take", obj,
		    (unsigned long long)m->size, max);
	free(obj);
	pbx_object_release(m);
	return -1;
}

/* Where a ranged read puts the object: body (within max), or file fd
 * (cut to the object's size first), read in one range when `whole`. */
struct ranged_dst {
	struct pbx_buf *body;
	size_t max;
	int fd;
	int whole;
};

/* The object's bytes (m: what stat said) into d: as read_ranges. */
static int ranged_into(struct pbx_objstore *s, const struct pbx_object *m,
		       const struct ranged_dst *d, uint32_t *crc, struct pbx_err *err)
{
	char *mem = NULL, *obj;
	if (d->body) {
		pbx_buf_release(d->body);
		if (pbx_buf_extend(d->body, (size_t)m->size, &mem) < 0)
			return pbx_err_set(err, "%s: no room for %llu bytes", m->name,
					   (unsigned long long)m->size);
	} else if (ftruncate(d->fd, (off_t)m->size) < 0) {
		obj = objstore_object_url(s, m->name);
		pbx_err_set(err, "%s: cannot make room for %llu bytes: %s", obj,
			    (unsigned long long)m->size, strerror(errno));
		free(obj);
		return -1;
	}
	return read_ranges(s, m, mem, d->body ? -1 : d->fd, d->whole, crc, err);
}

/* The ranged read: stat, the ranges pinned to the version it gave, once
 * more if that version went away meanwhile; then the whole object's
 * CRC32C.  *m what was read. */
static int get_ranged(struct pbx_objstore *s, const char *name, const struct ranged_dst *d,
		      struct pbx_object *m, struct pbx_err *err)
{
	uint32_t crc = 0;
	int tries, rc = -1;
	for (tries = 0; tries < 2; tries++) {
		pbx_object_release(m);
		memset(m, 0, sizeof(*m));
		if (tries && s->on_ready) /* what was reported is void */
			s->on_ready(s->on_ready_ctx, 0);
		if (stat_within(s, name, d->max, m, err) < 0)
			return -1;
		rc = ranged_into(s, m, d, &crc, err);
		if (rc != OBJSTORE_CHANGED)
			break;
	}
	if (rc == 0)
		rc = crc_check(s, name, crc, m, err);
	if (rc == 0 && !m->has_crc32c)
		m->crc32c = crc; /* for pbx_objstore_get_listed_fd's caller */
	return rc == 0 ? 0 : -1;
}

int pbx_objstore_get_listed(struct pbx_objstore *s, const struct pbx_object *o, size_t max,
			    struct pbx_buf *body, struct pbx_object *meta, struct pbx_err *err)
{
	struct pbx_object m = { 0 };
	struct ranged_dst d = { body, max ? max : GET_MAX_DEFAULT, -1, 0 };
	if (o->size < pbx_objstore_range_min())
		return pbx_objstore_get(s, o->name, max, body, meta, err);
	return get_done(get_ranged(s, o->name, &d, &m, err), body, &m, meta);
}

int pbx_objstore_get_listed_fd(struct pbx_objstore *s, const struct pbx_object *o, int fd,
			       struct pbx_object *meta, struct pbx_err *err)
{
	struct pbx_object m = { 0 };
	struct ranged_dst d = { NULL, 0, fd, o->size < pbx_objstore_range_min() };
	int rc = get_ranged(s, o->name, &d, &m, err);
	if (rc < 0 || !meta)
		pbx_object_release(&m);
	else
		*meta = m;
	return rc;
}
