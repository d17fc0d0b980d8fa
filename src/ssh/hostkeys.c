/*
 * hostkeys.c - the store-backed host key policy: trust on first use, pin
 * the key in the store, and refuse a changed key with a message that says
 * how to reset the pin.
 */
#include "ssh/ssh.h"
#include "store/store.h"
#include "util/xalloc.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

/* "SHA256:<unpadded base64>" of a base64 key blob, as OpenSSH prints it;
 * caller frees. */
static char *hostkeys_fingerprint(const char *key_b64)
{
	size_t len = strlen(key_b64);
	unsigned char *blob = xmalloc(len / 4 * 3 + 3), md[EVP_MAX_MD_SIZE];
	char out[128];
	unsigned mdlen = 0;
	int n = EVP_DecodeBlock(blob, (const unsigned char *)key_b64, (int)len);
	if (n < 0) {
		free(blob);
		return xstrdup("(undecodable key)");
	}
	n -= (len >= 1 && key_b64[len - 1] == '=') + (len >= 2 && key_b64[len - 2] == '=');
	EVP_Digest(blob, (size_t)n, md, &mdlen, EVP_sha256(), NULL);
	free(blob);
	n = EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
	while (n > 0 && out[n - 1] == '=')
		out[--n] = '\0';
	return xasprintf("SHA256:%s", out);
}

static int hostkeys_changed(const char *hostport, const char *old_type, const char *old_key,
			    const char *type, const char *key, struct pbx_err *err)
{
	char *old_fp = hostkeys_fingerprint(old_key), *new_fp = hostkeys_fingerprint(key);
	pbx_err_setc(err, PBX_EXIT_SECURITY,
		     "host key for %s changed (pinned %s %s, got %s %s); if the node was "
		     "legitimately rebuilt run 'pbx cluster forget-host %s'",
		     hostport, old_type, old_fp, type, new_fp, hostport);
	free(old_fp);
	free(new_fp);
	return -1;
}

/* 1 when a key is pinned and equal, 0 when none is pinned, -1 on a
 * mismatch or error. */
static int hostkeys_compare(struct pbx_store *st, const char *hostport, const char *type,
			    const char *key, struct pbx_err *err)
{
	char *old_type = NULL, *old_key = NULL;
	int rc = pbx_store_hostkey_get(st, hostport, &old_type, &old_key, err);
	if (rc == 1 && (strcmp(old_type, type) != 0 || strcmp(old_key, key) != 0))
		rc = hostkeys_changed(hostport, old_type, old_key, type, key, err);
	free(old_type);
	free(old_key);
	return rc;
}

static int hostkeys_check(void *ctx, const char *hostport, const char *type, const char *key_b64,
			  struct pbx_err *err)
{
	struct pbx_store *st = ctx;
	int rc = hostkeys_compare(st, hostport, type, key_b64, err);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (pbx_store_hostkey_put(st, hostport, type, key_b64, err) < 0)
		return -1;
	/* Another connection may have pinned a different key meanwhile. */
	return hostkeys_compare(st, hostport, type, key_b64, err) == 1 ? 0 : -1;
}

void pbx_hostkeys_from_store(struct pbx_hostkeys *hk, struct pbx_store *store)
{
	hk->check = hostkeys_check;
	hk->ctx = store;
}
