/*
 * jwt.c - the RS256 JWT bearer assertion of a service account (RFC 7523):
 * base64url(header) "." base64url(claims) "." base64url(RSASSA-PKCS1-v1_5
 * SHA-256 signature), built with jansson and OpenSSL.  The audience is the
 * key file's token_uri, which is what Google expects for its own endpoint
 * and what points pbx at an emulator's.
 */
#include "cloud/gce/auth.h"

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/xalloc.h"

/* Appends base64url without padding (OpenSSL's encoder, URL alphabet). */
static void b64url_add(struct pbx_buf *b, const unsigned char *data, size_t len)
{
	size_t cap = 4 * ((len + 2) / 3) + 1, i, n;
	unsigned char *tmp = xmalloc(cap);
	n = (size_t)EVP_EncodeBlock(tmp, data, (int)len);
	while (n && tmp[n - 1] == '=')
		n--;
	for (i = 0; i < n; i++)
		tmp[i] = tmp[i] == '+' ? '-' : tmp[i] == '/' ? '_' : tmp[i];
	pbx_buf_add(b, tmp, n);
	free(tmp);
}

static void b64url_json(struct pbx_buf *b, json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT);
	b64url_add(b, (const unsigned char *)s, strlen(s));
	free(s);
}

static EVP_PKEY *load_key(const char *pem)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *k = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	BIO_free(bio);
	return k;
}

static int sign(EVP_PKEY *k, const struct pbx_buf *in, unsigned char **sig, size_t *siglen)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int ok = md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k) == 1 &&
		 EVP_DigestSign(md, NULL, siglen, (const unsigned char *)in->buf, in->len) == 1;
	if (ok) {
		*sig = xmalloc(*siglen);
		ok = EVP_DigestSign(md, *sig, siglen, (const unsigned char *)in->buf, in->len) == 1;
		if (!ok) {
			free(*sig);
			*sig = NULL;
		}
	}
	EVP_MD_CTX_free(md);
	return ok ? 0 : -1;
}

int pbx_gce_jwt_make(const struct pbx_gce_creds *c, const char *aud, const char *scope, time_t now,
		     char **jwt, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	EVP_PKEY *k = load_key(c->private_key);
	json_t *hdr, *claims;
	unsigned char *sig = NULL;
	size_t siglen = 0;

	*jwt = NULL;
	if (!k || EVP_PKEY_base_id(k) != EVP_PKEY_RSA) {
		EVP_PKEY_free(k);
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"service account %s: private_key is not an RSA private key in PEM",
			c->client_email);
	}
	hdr = json_pack("{s:s, s:s}", "alg", "RS256", "typ", "JWT");
	if (c->private_key_id)
		json_object_set_new(hdr, "kid", json_string(c->private_key_id));
	claims = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", c->client_email, "scope", scope,
			   "aud", aud, "iat", (json_int_t)now, "exp", (json_int_t)now + 3600);
	b64url_json(&b, hdr);
	pbx_buf_addc(&b, '.');
	b64url_json(&b, claims);
	json_decref(hdr);
	json_decref(claims);
	if (sign(k, &b, &sig, &siglen) < 0) {
		EVP_PKEY_free(k);
		pbx_buf_release(&b);
		return pbx_err_set(err, "service account %s: cannot sign the token request",
				   c->client_email);
	}
	EVP_PKEY_free(k);
	pbx_buf_addc(&b, '.');
	b64url_add(&b, sig, siglen);
	free(sig);
	*jwt = pbx_buf_detach(&b, NULL);
	return 0;
}
