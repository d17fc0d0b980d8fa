/*
 * gcs.c - Cloud Storage through its JSON API: objects.list (prefix, every
 * page), objects.get with alt=media (the CRC32C from x-goog-hash),
 * objects.insert with uploadType=media and ifGenerationMatch=0 (create
 * only; x-goog-hash carries our CRC32C).  Bearer tokens from
 * cloud/gce/auth with the devstorage.read_write scope; a 401 forgets the
 * token and tries once more.  The base URL is the host root
 * (clouds.gce.storage_endpoint, else https://storage.googleapis.com/).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cloud/gce/auth.h"
#include "config/config.h"
#include "objstore/objstore_internal.h"
#include "util/xalloc.h"

#define GCS_BASE  "https://storage.googleapis.com/"
#define GCS_SCOPE "https://www.googleapis.com/auth/devstorage.read_write"

struct gcs {
	struct pbx_gce_auth *auth;
	char *base; /* ends in '/' */
};

/* ------------------------------------------------------------ the parser */

static int item_parse(json_t *it, struct pbx_object *o, struct pbx_err *err)
{
	const char *name = json_string_value(json_object_get(it, "name"));
	const char *size = json_string_value(json_object_get(it, "size"));
	const char *gen = json_string_value(json_object_get(it, "generation"));
	const char *crc = json_string_value(json_object_get(it, "crc32c"));
	char *end = NULL;
	if (!name || !*name)
		return pbx_err_set(err, "objects.list: an item without a name");
	if (!size || !*size || *size == '-' || (o->size = strtoull(size, &end, 10), *end))
		return pbx_err_set(err, "objects.list: item has no size or a bad one");
	o->name = xstrdup(name);
	o->version = gen ? xstrdup(gen) : NULL;
	o->has_crc32c = crc && objstore_crc32c_unb64(crc, strlen(crc), &o->crc32c) == 0;
	return 0;
}

int objstore_gcs_list_parse(const char *json, size_t len, struct pbx_object **v, size_t *n,
			    char **next, struct pbx_err *err)
{
	json_t *root = json_loadb(json, len, 0, NULL), *items, *it;
	const char *tok;
	size_t i;
	int rc = 0;
	*next = NULL;
	if (!json_is_object(root)) {
		json_decref(root);
		return pbx_err_set(err, "objects.list: reply is not a JSON object");
	}
	items = json_object_get(root, "items");
	if (items && !json_is_array(items))
		rc = pbx_err_set(err, "objects.list: items is not an array");
	*v = xreallocarray(*v, *n + json_array_size(items) + 1, sizeof(**v));
	json_array_foreach(items, i, it)
	{
		memset(&(*v)[*n], 0, sizeof(**v));
		if (rc < 0 || item_parse(it, &(*v)[*n], err) < 0) {
			rc = -1;
			break;
		}
		(*n)++;
	}
	tok = json_string_value(json_object_get(root, "nextPageToken"));
	if (rc == 0 && tok && *tok)
		*next = xstrdup(tok);
	json_decref(root);
	return rc;
}

/* ------------------------------------------------------------- requests */

/* One authorized call; a 401 forgets the token and tries once more. */
static int gcs_call(struct pbx_objstore *s, struct pbx_http_req *r, const char *extra[4],
		    struct pbx_http_resp *resp, struct pbx_err *err)
{
	struct gcs *g = s->backend;
	int tries, rc = -1;
	for (tries = 0; tries < 2; tries++) {
		const char *hdrs[6] = { NULL };
		char *auth = NULL;
		int i;
		if (pbx_gce_auth_header(g->auth, &auth, err) < 0)
			return -1;
		hdrs[0] = auth;
		for (i = 0; extra && i < 4 && extra[i]; i++)
			hdrs[i + 1] = extra[i];
		r->headers = hdrs;
		rc = pbx_http_do(s->http, r, resp, err);
		pbx_gce_auth_free_header(auth);
		r->headers = NULL;
		s->requests += (unsigned long)resp->attempts;
		if (rc < 0 || resp->status != 401)
			break;
		pbx_gce_auth_invalidate(g->auth);
	}
	return rc;
}

/* BASE storage/v1/b/BUCKET/o */
static void objects_url(struct pbx_objstore *s, struct pbx_buf *u, const char *upload)
{
	struct gcs *g = s->backend;
	pbx_buf_addf(u, "%s%sstorage/v1/b/", g->base, upload);
	objstore_enc(u, s->url.bucket);
	pbx_buf_adds(u, "/o");
}

static int list_page(struct pbx_objstore *s, const char *prefix, const char *token,
		     struct pbx_object **v, size_t *n, char **next, struct pbx_err *err)
{
	struct pbx_buf u = PBX_BUF_INIT;
	struct pbx_http_req r = { .method = "GET" };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	objects_url(s, &u, "");
	pbx_buf_adds(&u, "?fields=items(name%2Csize%2Cgeneration%2Ccrc32c)%2CnextPageToken");
	pbx_buf_adds(&u, "&prefix=");
	objstore_enc(&u, prefix);
	if (token) {
		pbx_buf_adds(&u, "&pageToken=");
		objstore_enc(&u, token);
	}
	r.url = u.buf;
	rc = gcs_call(s, &r, NULL, &resp, err);
	if (rc == 0 && resp.status != 200) {
		objstore_http_error(s, prefix, "cannot list", resp.status, &resp.body, err);
		rc = -1;
	}
	if (rc == 0 && objstore_gcs_list_parse(resp.body.buf, resp.body.len, v, n, next, err) < 0)
		rc = pbx_err_prefix(err, "gs://%s/%s", s->url.bucket, prefix);
	pbx_buf_release(&u);
	pbx_buf_release(&resp.body);
	return rc;
}

static int gcs_list(struct pbx_objstore *s, const char *prefix, struct pbx_object **v, size_t *n,
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

/* x-goog-hash: crc32c=B64[, md5=B64] (one header or several). */
static void hash_header(const struct pbx_buf *h, struct pbx_object *m)
{
	char *v = pbx_http_header(h, "x-goog-hash"), *p;
	for (p = v; p && (p = strstr(p, "crc32c=")) != NULL; p += 7) {
		size_t len = strcspn(p + 7, ", ");
		if (objstore_crc32c_unb64(p + 7, len, &m->crc32c) == 0)
			m->has_crc32c = 1;
	}
	free(v);
}

static int gcs_get(struct pbx_objstore *s, const char *name, size_t max, struct pbx_buf *body,
		   struct pbx_object *meta, struct pbx_err *err)
{
	struct pbx_buf u = PBX_BUF_INIT, h = PBX_BUF_INIT;
	struct pbx_http_req r = { .method = "GET", .max_body = max, .resp_headers = &h };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	objects_url(s, &u, "");
	pbx_buf_addc(&u, '/');
	objstore_enc(&u, name);
	pbx_buf_adds(&u, "?alt=media");
	r.url = u.buf;
	rc = gcs_call(s, &r, NULL, &resp, err);
	if (rc == 0 && resp.status != 200) {
		objstore_http_error(s, name, resp.status == 404 ? "no such object" : "cannot read",
				    resp.status, &resp.body, err);
		rc = -1;
	}
	if (rc == 0) {
		meta->name = xstrdup(name);
		meta->size = resp.body.len;
		meta->version = pbx_http_header(&h, "x-goog-generation");
		hash_header(&h, meta);
		*body = resp.body;
		resp.body = (struct pbx_buf)PBX_BUF_INIT;
	}
	pbx_buf_release(&resp.body);
	pbx_buf_release(&u);
	pbx_buf_release(&h);
	return rc;
}

/* The object resource an upload returns: its crc32c must be ours. */
static int check_stored(struct pbx_objstore *s, const char *name, const struct pbx_buf *body,
			uint32_t crc, struct pbx_err *err)
{
	json_t *o = json_loadb(body->buf, body->len, 0, NULL);
	const char *c = json_string_value(json_object_get(o, "crc32c"));
	uint32_t got;
	int rc = 0;
	if (c && (objstore_crc32c_unb64(c, strlen(c), &got) < 0 || got != crc)) {
		char *obj = objstore_object_url(s, name);
		rc = pbx_err_setc(err, PBX_EXIT_SECURITY,
				  "%s: the store kept CRC32C %s, not the one sent", obj, c);
		free(obj);
	}
	json_decref(o);
	return rc;
}

static int gcs_put_new(struct pbx_objstore *s, const char *name, const void *data, size_t len,
		       const char *content_type, uint32_t crc32c, struct pbx_err *err)
{
	struct pbx_buf u = PBX_BUF_INIT;
	char b64[9], *ct = xasprintf("Content-Type: %s", content_type);
	char *hash;
	const char *extra[4] = { ct, NULL, NULL, NULL };
	struct pbx_http_req r = { .method = "POST", .body = data, .body_len = len };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;
	objstore_crc32c_b64(crc32c, b64);
	hash = xasprintf("x-goog-hash: crc32c=%s", b64);
	extra[1] = hash;
	objects_url(s, &u, "upload/");
	pbx_buf_adds(&u, "?uploadType=media&ifGenerationMatch=0&name=");
	objstore_enc(&u, name);
	r.url = u.buf;
	rc = gcs_call(s, &r, extra, &resp, err);
	s->put_retried = resp.attempts > 1;
	if (rc == 0 && resp.status == 412)
		rc = PBX_OBJSTORE_EXISTS;
	else if (rc == 0 && resp.status != 200)
		rc = (objstore_http_error(s, name, "cannot create", resp.status, &resp.body, err),
		      -1);
	else if (rc == 0)
		rc = check_stored(s, name, &resp.body, crc32c, err);
	pbx_buf_release(&resp.body);
	pbx_buf_release(&u);
	free(ct);
	free(hash);
	return rc;
}

static void gcs_close(struct pbx_objstore *s)
{
	struct gcs *g = s->backend;
	if (!g)
		return;
	pbx_gce_auth_close(g->auth);
	free(g->base);
	free(g);
	s->backend = NULL;
}

static const struct objstore_ops gcs_ops = { gcs_list, gcs_get, gcs_put_new, gcs_close };

int objstore_gcs_open(struct pbx_objstore *s, const struct pbx_config *cfg, struct pbx_err *err)
{
	const char *base = cfg && cfg->gce.storage_endpoint ? cfg->gce.storage_endpoint : GCS_BASE;
	struct gcs *g = xcalloc(1, sizeof(*g));
	char why[256];
	s->ops = &gcs_ops;
	s->backend = g;
	g->base = base[strlen(base) - 1] == '/' ? xstrdup(base) : xasprintf("%s/", base);
	if (!pbx_http_url_allowed(g->base, why, sizeof(why)))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "clouds.gce.storage_endpoint: %s", why);
	if (pbx_gce_auth_open(cfg ? cfg->gce.credentials : NULL, s->http, &g->auth, err) < 0)
		return -1;
	pbx_gce_auth_set_scope(g->auth, GCS_SCOPE);
	snprintf(s->identity, sizeof(s->identity), "%s", pbx_gce_auth_source(g->auth));
	return 0;
}
