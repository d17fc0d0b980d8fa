/*
 * publisher.c - names in a pool: who holds a publisher name (its
 * publisher.json, made once, never overwritten, with the SHA-256 of the
 * holder's publisher key), this $PBX_HOME's key, and the names of task
 * objects.  The key guards against two people choosing the same name by
 * accident; it is no access control (the bucket's permissions are:
 * docs/pooling.md).
 */
#include "config/config.h"
#include "pool/pool_internal.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <inttypes.h>
#include <jansson.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *pbx_pool_url_normal(const char *url, struct pbx_err *err)
{
	struct pbx_objstore_url u;
	char *s;
	if (pbx_objstore_url_parse(url, &u, err) < 0)
		return NULL;
	s = xasprintf("%s://%s/%s", u.scheme, u.bucket, u.prefix);
	pbx_objstore_url_free(&u);
	return s;
}

char *pool_object_name(const char *prefix, const char *publisher, const char *short_id, int64_t idx)
{
	return xasprintf("%s%s/%s/%" PRId64 "%s", prefix, publisher, short_id, idx,
			 POOL_OBJECT_SUFFIX);
}

int pool_object_parse(const char *prefix, const char *name, char publisher[65], char short_id[13],
		      int64_t *idx)
{
	size_t plen = strlen(prefix), n;
	const char *p = name + plen, *slash, *slash2, *end;
	char *stop;
	long long v;
	if (strncmp(name, prefix, plen) != 0 || !(slash = strchr(p, '/')))
		return -1;
	n = (size_t)(slash - p);
	if (n < 1 || n > 64)
		return -1;
	memcpy(publisher, p, n);
	publisher[n] = '\0';
	if (!pbx_publisher_name_valid(publisher) || !(slash2 = strchr(slash + 1, '/')) ||
	    slash2 - slash - 1 != 12 || strspn(slash + 1, "0123456789abcdef") < 12)
		return -1;
	memcpy(short_id, slash + 1, 12);
	short_id[12] = '\0';
	end = slash2 + 1 + strspn(slash2 + 1, "0123456789");
	if (end == slash2 + 1 || end - slash2 - 1 > 9 || strcmp(end, POOL_OBJECT_SUFFIX) != 0 ||
	    (slash2[1] == '0' && end - slash2 - 1 > 1))
		return -1;
	v = strtoll(slash2 + 1, &stop, 10);
	*idx = (int64_t)v;
	return 0;
}

char *pool_publisher_key(struct pbx_err *err)
{
	char *path = pbx_home_path("publisher.key");
	struct pbx_buf b = PBX_BUF_INIT;
	int missing = 0;
	char *key = NULL;
	if (pbx_read_regular(path, 256, &b, &missing, err) == 0) {
		while (b.len && (b.buf[b.len - 1] == '\n' || b.buf[b.len - 1] == ' '))
			b.buf[--b.len] = '\0';
		if (b.len >= 16)
			key = xstrdup(b.buf);
		else
			pbx_err_set(err, "%s: too short to be a publisher key", path);
	} else if (missing) {
		unsigned char r[16];
		char hex[33];
		if (RAND_bytes(r, sizeof(r)) != 1) {
			pbx_err_set(err, "no randomness for a publisher key");
		} else {
			pbx_hex(r, sizeof(r), hex);
			pbx_err_clear(err);
			if (pbx_write_file_atomic(path, hex, 32, 0600, err) == 0)
				key = xstrdup(hex);
		}
	}
	pbx_buf_release(&b);
	free(path);
	return key;
}

/* {"publisher": NAME, "key_sha256": HEX} */
static char *claim_text(const char *publisher, const char *key_hash)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "format", "pbx-publisher/1", "publisher",
			      publisher, "key_sha256", key_hash);
	char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* Whether the claim found in the pool is this key's. */
static int claim_is_ours(struct pbx_objstore *s, const char *name, const char *key_hash,
			 struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	json_t *o;
	const char *h;
	int ours;
	if (pbx_objstore_get(s, name, 1 << 16, &b, NULL, err) < 0)
		return -1;
	o = json_loadb(b.buf, b.len, 0, NULL);
	h = json_string_value(json_object_get(o, "key_sha256"));
	ours = h && strcmp(h, key_hash) == 0;
	json_decref(o);
	pbx_buf_release(&b);
	return ours;
}

int pool_publisher_claim(struct pbx_objstore *s, const char *publisher, struct pbx_err *err)
{
	const struct pbx_objstore_url *u = pbx_objstore_where(s);
	char *key = pool_publisher_key(err), *name, *text;
	char hash[65];
	int rc;
	if (!key)
		return -1;
	pbx_sha256_hex(key, strlen(key), hash);
	explicit_bzero(key, strlen(key));
	free(key);
	name = xasprintf("%s%s/publisher.json", u->prefix, publisher);
	text = claim_text(publisher, hash);
	rc = pbx_objstore_put_new(s, name, text, strlen(text), "application/json", err);
	if (rc == PBX_OBJSTORE_EXISTS) {
		rc = claim_is_ours(s, name, hash, err);
		if (rc == 0)
			rc = pbx_err_setc(
				err, PBX_EXIT_SECURITY,
				"the publisher name '%s' in %s://%s/%s is taken by someone "
				"else (their %s holds another key); publish under another "
				"name with --as NAME, or set 'publisher:' in the "
				"configuration",
				publisher, u->scheme, u->bucket, u->prefix, name);
		else if (rc == 1)
			rc = 0;
	}
	free(name);
	free(text);
	return rc;
}
