/*
 * sigv4.c - AWS Signature Version 4 for a request with a body (the EC2
 * Query API's form POST), with OpenSSL: canonical request, string to sign,
 * the derived key, the Authorization header.  Steps as in
 * docs/cloud-api.md, "EC2: SigV4"; tests/cloud/test_aws_sigv4.c checks
 * it against AWS's test vector and botocore.
 */
#include "cloud/aws/aws.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/fs.h"
#include "util/xalloc.h"

void aws_uri_encode(struct pbx_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			pbx_buf_addc(b, (char)c);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			pbx_buf_add(b, e, 3);
		}
	}
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

char *aws_sigv4_authorization(const struct aws_sign_in *in, struct pbx_buf *creq_out,
			      struct pbx_buf *sts_out)
{
	struct pbx_buf creq = PBX_BUF_INIT, sts = PBX_BUF_INIT;
	const char *signed_headers;
	char payload[65], creq_hash[65], date[9], sig[65];
	unsigned char k[32], k2[32];
	char *secret, *auth;

	memcpy(date, in->amz_date, 8);
	date[8] = '\0';
	pbx_sha256_hex(in->body ? in->body : "", in->body ? in->body_len : 0, payload);
	signed_headers =
		in->content_type
			? (in->creds->token ? "content-type;host;x-amz-date;x-amz-security-token"
					    : "content-type;host;x-amz-date")
			: (in->creds->token ? "host;x-amz-date;x-amz-security-token"
					    : "host;x-amz-date");

	/* canonical request: method, URI, query (none), headers, names, hash */
	pbx_buf_addf(&creq, "%s\n", in->method);
	aws_uri_encode(&creq, in->path, strlen(in->path));
	/* '/' separates segments and stays as it is */
	{
		char *p;
		while ((p = strstr(creq.buf, "%2F")) != NULL) {
			*p = '/';
			memmove(p + 1, p + 3, strlen(p + 3) + 1);
			creq.len -= 2;
		}
	}
	pbx_buf_adds(&creq, "\n\n");
	if (in->content_type) {
		pbx_buf_adds(&creq, "content-type:");
		add_trimmed(&creq, in->content_type);
		pbx_buf_addc(&creq, '\n');
	}
	pbx_buf_adds(&creq, "host:");
	add_trimmed(&creq, in->host);
	pbx_buf_addf(&creq, "\nx-amz-date:%s\n", in->amz_date);
	if (in->creds->token) {
		pbx_buf_adds(&creq, "x-amz-security-token:");
		add_trimmed(&creq, in->creds->token);
		pbx_buf_addc(&creq, '\n');
	}
	pbx_buf_addf(&creq, "\n%s\n%s", signed_headers, payload);
	pbx_sha256_hex(creq.buf, creq.len, creq_hash);

	pbx_buf_addf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", in->amz_date, date,
		     in->region, in->service, creq_hash);

	secret = xasprintf("AWS4%s", in->creds->secret_key);
	hmac(secret, strlen(secret), date, k);
	explicit_bzero(secret, strlen(secret));
	free(secret);
	hmac(k, 32, in->region, k2);
	hmac(k2, 32, in->service, k);
	hmac(k, 32, "aws4_request", k2);
	hmac(k2, 32, sts.buf, k);
	pbx_hex(k, 32, sig);
	explicit_bzero(k, sizeof(k));
	explicit_bzero(k2, sizeof(k2));

	auth = xasprintf("AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
			 "Signature=%s",
			 in->creds->access_key, date, in->region, in->service, signed_headers, sig);
	if (creq_out) {
		pbx_buf_release(creq_out);
		*creq_out = creq;
	} else {
		pbx_buf_release(&creq);
	}
	if (sts_out) {
		pbx_buf_release(sts_out);
		*sts_out = sts;
	} else {
		pbx_buf_release(&sts);
	}
	return auth;
}
