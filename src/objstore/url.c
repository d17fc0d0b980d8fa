/*
 * url.c - store URLs (gs://BUCKET/PREFIX, s3://BUCKET/PREFIX) and the
 * check that an object name, which comes from someone else's bucket, is
 * safe to turn into a local path.  See objstore.h.
 */
#include "objstore/objstore.h"

#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

/* 3 to 63 of a-z 0-9 - _ ., first and last a letter or digit. */
static int bucket_ok(const char *b, size_t n)
{
	size_t i;
	if (n < 3 || n > 63)
		return 0;
	for (i = 0; i < n; i++) {
		char c = b[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && c != '-' && c != '_' && c != '.')
			return 0;
		if (!alnum && (i == 0 || i == n - 1))
			return 0;
	}
	return 1;
}

/* One path component [p, p+n): not empty, not "." or "..". */
static int component_ok(const char *p, size_t n)
{
	if (n == 0)
		return 0;
	if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
		return 0;
	return 1;
}

/* Every component of s ('/'-separated, a trailing '/' allowed when
 * trailing_ok) passes component_ok, and no byte is a control byte. */
static int path_ok(const char *s, int trailing_ok)
{
	const char *p = s;
	for (; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return 0;
	p = s;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (!slash && n == 0 && trailing_ok && p != s)
			return 1;
		if (!component_ok(p, n))
			return 0;
		if (!slash)
			return 1;
		p = slash + 1;
	}
}

int pbx_objstore_name_safe(const char *rel)
{
	size_t n = rel ? strlen(rel) : 0;
	if (n == 0 || n > 1024 || rel[0] == '/')
		return 0;
	return path_ok(rel, 0);
}

/* The URL for a message: control bytes shown as '?', at most 300. */
static void printable(const char *url, char out[301])
{
	size_t i;
	for (i = 0; url[i] && i < 300; i++)
		out[i] = (unsigned char)url[i] < 0x20 || url[i] == 0x7f ? '?' : url[i];
	out[i] = '\0';
}

static int url_error(const char *url, const char *why, struct pbx_err *err)
{
	char p[301];
	printable(url, p);
	return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: %s", p, why);
}

int pbx_objstore_url_parse(const char *url, struct pbx_objstore_url *out, struct pbx_err *err)
{
	const char *b, *slash;
	size_t blen;
	memset(out, 0, sizeof(*out));
	if (!url || (strncmp(url, "gs://", 5) != 0 && strncmp(url, "s3://", 5) != 0))
		return url_error(url ? url : "(none)",
				 "not a store URL (gs://BUCKET/PREFIX or s3://BUCKET/PREFIX)", err);
	b = url + 5;
	slash = strchr(b, '/');
	blen = slash ? (size_t)(slash - b) : strlen(b);
	if (!bucket_ok(b, blen))
		return url_error(url,
				 "bad bucket name (3 to 63 of a-z 0-9 - _ ., beginning and ending "
				 "with a letter or digit)",
				 err);
	if (slash && slash[1] && !path_ok(slash + 1, 1))
		return url_error(url,
				 "bad prefix (\".\" or \"..\" components, \"//\" or control bytes)",
				 err);
	memcpy(out->scheme, url, 2);
	out->scheme[2] = '\0';
	out->bucket = xstrndup(b, blen);
	if (!slash || !slash[1])
		out->prefix = xstrdup("");
	else if (slash[strlen(slash) - 1] == '/')
		out->prefix = xstrdup(slash + 1);
	else
		out->prefix = xasprintf("%s/", slash + 1);
	return 0;
}

void pbx_objstore_url_free(struct pbx_objstore_url *u)
{
	if (!u)
		return;
	free(u->bucket);
	free(u->prefix);
	u->bucket = u->prefix = NULL;
}
