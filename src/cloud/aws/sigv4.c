/*
 * sigv4.c - AWS Signature Version 4, with OpenSSL: canonical request
 * (method, path, sorted encoded query, sorted lower-cased headers, payload
 * hash), string to sign, the derived key, the Authorization header.  Used
 * for the EC2 Query API's form POST (ec2.c, price/fetch.c: content-type,
 * host, x-amz-date) and S3's REST calls (src/objstore/s3.c: a query, more
 * headers, x-amz-content-sha256).  Steps as in docs/cloud-api.md, "EC2:
 * SigV4"; tests/cloud/test_aws_sigv4.c checks it against AWS's test
 * vector, AWS's S3 GET example and botocore.
 */
#include "cloud/aws/aws.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/fs.h"
#include "util/xalloc.h"

static void uri_encode(struct pbx_buf *b, const char *s, size_t len, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
			pbx_buf_addc(b, (char)c);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			pbx_buf_add(b, e, 3);
		}
	}
}

void aws_uri_encode(struct pbx_buf *b, const char *s, size_t len)
{
	uri_encode(b, s, len, 0);
}

void aws_uri_encode_path(struct pbx_buf *b, const char *s, size_t len)
{
	uri_encode(b, s, len, 1);
}

/* ------------------------------------------------------ canonical query */

struct kv {
	char *k, *v; /* encoded */
};

static int kv_cmp(const void *a, const void *b)
{
	const struct kv *x = a, *y = b;
	int c = strcmp(x->k, y->k);
	return c ? c : strcmp(x->v, y->v);
}

static char *encoded(const char *s)
{
	struct pbx_buf b = PBX_BUF_INIT;
	aws_uri_encode(&b, s, strlen(s));
	return pbx_buf_detach(&b, NULL);
}

char *aws_canonical_query(const char *const *kv)
{
	struct pbx_buf out = PBX_BUF_INIT;
	struct kv *v;
	size_t n = 0, i;
	while (kv && kv[2 * n])
		n++;
	v = xcalloc(n + 1, sizeof(*v));
	for (i = 0; i < n; i++) {
		v[i].k = encoded(kv[2 * i]);
		v[i].v = encoded(kv[2 * i + 1] ? kv[2 * i + 1] : "");
	}
	qsort(v, n, sizeof(*v), kv_cmp);
	for (i = 0; i < n; i++) {
		pbx_buf_addf(&out, "%s%s=%s", i ? "&" : "", v[i].k, v[i].v);
		free(v[i].k);
		free(v[i].v);
	}
	free(v);
	return pbx_buf_detach(&out, NULL);
}

void aws_amz_date(long long t, char out[17])
{
	time_t tt = (time_t)t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int n = 32;
	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &n);
}

/* A header value as SigV4 wants it: trimmed, inner runs of spaces one. */
static void add_trimmed(struct pbx_buf *b, const char *v)
{
	int space = 0;
	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			space = 1;
			continue;
		}
		if (space)
			pbx_buf_addc(b, ' ');
		space = 0;
		pbx_buf_addc(b, *v);
	}
}

/* ---------------------------------------------------- canonical headers */

struct hdr {
	char *name;         /* lower-cased */
	struct pbx_buf val; /* trimmed */
};

static int hdr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct hdr *)a)->name, ((const struct hdr *)b)->name);
}

static void hdr_add(struct hdr *v, size_t *n, const char *name, size_t nlen, const char *value)
{
	struct hdr *h = &v[(*n)++];
	size_t i;
	h->name = xstrndup(name, nlen);
	for (i = 0; i < nlen; i++)
		if (h->name[i] >= 'A' && h->name[i] <= 'Z')
			h->name[i] = (char)(h->name[i] - 'A' + 'a');
	h->val = (struct pbx_buf)PBX_BUF_INIT;
	add_trimmed(&h->val, value);
}

/* Every header signed, sorted by name. */
static struct hdr *collect_headers(const struct aws_sign_in *in, size_t *n)
{
	size_t cap = 5, i;
	struct hdr *v;
	for (i = 0; in->headers && in->headers[i]; i++)
		cap++;
	v = xcalloc(cap, sizeof(*v));
	*n = 0;
	if (in->content_type)
		hdr_add(v, n, "content-type", 12, in->content_type);
	hdr_add(v, n, "host", 4, in->host);
	hdr_add(v, n, "x-amz-date", 10, in->amz_date);
	if (in->creds->token)
		hdr_add(v, n, "x-amz-security-token", 20, in->creds->token);
	if (in->payload_hash)
		hdr_add(v, n, "x-amz-content-sha256", 20, in->payload_hash);
	for (i = 0; in->headers && in->headers[i]; i++) {
		const char *c = strchr(in->headers[i], ':');
		if (c)
			hdr_add(v, n, in->headers[i], (size_t)(c - in->headers[i]), c + 1);
	}
	qsort(v, *n, sizeof(*v), hdr_cmp);
	return v;
}

/* "name:value\n" lines into creq and "a;b;c" into names; frees v.  Two
 * headers of one name become one, values joined with ','. */
static void canonical_headers(struct hdr *v, size_t n, struct pbx_buf *creq, struct pbx_buf *names)
{
	size_t i;
	for (i = 0; i < n; i++) {
		int same = i > 0 && !strcmp(v[i].name, v[i - 1].name);
		if (same) {
			creq->len--; /* the previous line's newline */
			creq->buf[creq->len] = '\0';
			pbx_buf_addf(creq, ",%s\n", v[i].val.buf);
		} else {
			pbx_buf_addf(creq, "%s:%s\n", v[i].name, v[i].val.buf);
			pbx_buf_addf(names, "%s%s", names->len ? ";" : "", v[i].name);
		}
	}
	for (i = 0; i < n; i++) {
		free(v[i].name);
		pbx_buf_release(&v[i].val);
	}
	free(v);
}

static void canonical_request(const struct aws_sign_in *in, struct pbx_buf *creq,
			      struct pbx_buf *names)
{
	char payload[65], *query = aws_canonical_query(in->query);
	struct hdr *v;
	size_t n;
	if (!in->payload_hash)
		pbx_sha256_hex(in->body ? in->body : "", in->body ? in->body_len : 0, payload);
	pbx_buf_addf(creq, "%s\n", in->method);
	aws_uri_encode_path(creq, in->path, strlen(in->path));
	pbx_buf_addf(creq, "\n%s\n", query);
	free(query);
	v = collect_headers(in, &n);
	canonical_headers(v, n, creq, names);
	pbx_buf_addf(creq, "\n%s\n%s", names->buf, in->payload_hash ? in->payload_hash : payload);
}

/* The signature of sts with the key derived from the secret. */
static void signature(const struct aws_sign_in *in, const char *date, const char *sts, char sig[65])
{
	unsigned char k[32], k2[32];
	char *secret = xasprintf("AWS4%s", in->creds->secret_key);
	hmac(secret, strlen(secret), date, k);
	explicit_bzero(secret, strlen(secret));
	free(secret);
	hmac(k, 32, in->region, k2);
	hmac(k2, 32, in->service, k);
	hmac(k, 32, "aws4_request", k2);
	hmac(k2, 32, sts, k);
	pbx_hex(k, 32, sig);
	explicit_bzero(k, sizeof(k));
	explicit_bzero(k2, sizeof(k2));
}

static void hand_over(struct pbx_buf *b, struct pbx_buf *out)
{
	if (out) {
		pbx_buf_release(out);
		*out = *b;
	} else {
		pbx_buf_release(b);
	}
}

char *aws_sigv4_authorization(const struct aws_sign_in *in, struct pbx_buf *creq_out,
			      struct pbx_buf *sts_out)
{
	struct pbx_buf creq = PBX_BUF_INIT, sts = PBX_BUF_INIT, names = PBX_BUF_INIT;
	char creq_hash[65], date[9], sig[65];
	char *auth;

	memcpy(date, in->amz_date, 8);
	date[8] = '\0';
	canonical_request(in, &creq, &names);
	pbx_sha256_hex(creq.buf, creq.len, creq_hash);
	pbx_buf_addf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", in->amz_date, date,
		     in->region, in->service, creq_hash);
	signature(in, date, sts.buf, sig);
	auth = xasprintf("AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
			 "Signature=%s",
			 in->creds->access_key, date, in->region, in->service, names.buf, sig);
	pbx_buf_release(&names);
	hand_over(&creq, creq_out);
	hand_over(&sts, sts_out);
	return auth;
}
