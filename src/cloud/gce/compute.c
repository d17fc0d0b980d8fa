/*
 * compute.c - one Compute Engine v1 call over src/http: the bearer token
 * (refetched once after a 401), a requestId on mutating calls, the
 * rate-limit classifier, Google's error replies turned into messages, and
 * dry-run (the request printed, nothing sent).
 */
#include "cloud/gce/gce.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

void gce_uuid(char out[37])
{
	unsigned char b[16];
	if (RAND_bytes(b, sizeof(b)) != 1) {
		size_t i;
		for (i = 0; i < sizeof(b); i++)
			b[i] = (unsigned char)rand();
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

void gce_pool_init(struct gce *g)
{
	pthread_mutex_init(&g->pool_mu, NULL);
	pthread_cond_init(&g->pool_cv, NULL);
	g->pool[0] = g->http;
}

void gce_pool_free(struct gce *g)
{
	size_t i;
	for (i = 1; i < GCE_HTTP_POOL; i++)
		pbx_http_close(g->pool[i]);
	pthread_mutex_destroy(&g->pool_mu);
	pthread_cond_destroy(&g->pool_cv);
}

/* A free handle of the pool (one more is opened while fewer than
 * GCE_HTTP_POOL exist); waits when all are busy. */
static size_t pool_take(struct gce *g)
{
	size_t i;
	pthread_mutex_lock(&g->pool_mu);
	for (;;) {
		for (i = 0; i < GCE_HTTP_POOL; i++) {
			if (g->busy[i])
				continue;
			if (!g->pool[i]) {
				struct pbx_http_opts o = { .service = "gce" };
				struct pbx_err err = PBX_ERR_INIT;
				if (pbx_http_open(&o, &g->pool[i], &err) < 0)
					continue;
				if (g->s->store && !g->s->dry_run)
					pbx_http_set_log(g->pool[i], pbx_cloud_http_log,
							 g->s->store, g->s->id);
			}
			g->busy[i] = 1;
			pthread_mutex_unlock(&g->pool_mu);
			return i;
		}
		pthread_cond_wait(&g->pool_cv, &g->pool_mu);
	}
}

static void pool_give(struct gce *g, size_t i)
{
	pthread_mutex_lock(&g->pool_mu);
	g->busy[i] = 0;
	pthread_cond_signal(&g->pool_cv);
	pthread_mutex_unlock(&g->pool_mu);
}

static int status_ok(long status, const long *ok)
{
	if (status >= 200 && status < 300)
		return 1;
	for (; ok && *ok; ok++)
		if (*ok == status)
			return 1;
	return 0;
}

/* The full URL: path as is when absolute, else under the endpoint; a
 * requestId for mutating calls. */
static char *call_url(const struct gce *g, const char *method, const char *path)
{
	char uuid[37];
	const char *sep = strchr(path, '?') ? "&" : "?";
	int mutating = strcmp(method, "GET") != 0;
	int absolute = !strncmp(path, "http://", 7) || !strncmp(path, "https://", 8);
	if (!mutating || strstr(path, "/wait"))
		return xasprintf("%s%s", absolute ? "" : g->base, path);
	gce_uuid(uuid);
	return xasprintf("%s%s%srequestId=%s", absolute ? "" : g->base, path, sep, uuid);
}

/* The dry-run reply: nothing exists, every mutation is done at once. */
static json_t *dry_reply(const char *method, long *status)
{
	if (!strcmp(method, "GET")) {
		*status = 404;
		return NULL;
	}
	*status = 200;
	return json_pack("{s:s, s:s, s:s}", "kind", "compute#operation", "name", "dry-run",
			 "status", "DONE");
}

static int send_once(struct gce *g, const char *method, const char *url, const char *body,
		     struct pbx_http_resp *resp, struct pbx_err *err)
{
	size_t slot = pool_take(g);
	static const char json_ct[] = "Content-Type: application/json";
	const char *hdrs[3] = { NULL, NULL, NULL };
	struct pbx_http_req r = { .method = method,
				  .url = url,
				  .headers = hdrs,
				  .body = body,
				  .body_len = body ? strlen(body) : 0,
				  .retryable = gce_retryable };
	char *auth = NULL;
	int rc;
	if (pbx_gce_auth_header(g->auth, &auth, err) < 0) {
		pool_give(g, slot);
		return -1;
	}
	hdrs[0] = auth;
	hdrs[1] = body ? json_ct : NULL;
	rc = pbx_http_do(g->pool[slot], &r, resp, err);
	pbx_gce_auth_free_header(auth);
	pool_give(g, slot);
	return rc;
}

int gce_call(struct gce *g, const char *method, const char *path, json_t *body,
	     const long *ok_statuses, json_t **reply, long *status, struct pbx_err *err)
{
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	char *url = call_url(g, method, path);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	char msg[600];
	int rc;

	*reply = NULL;
	*status = 0;
	if (g->s->dry_run) {
		if (g->s->print_request)
			g->s->print_request(g->s->print_ctx, method, url, text);
		*reply = dry_reply(method, status);
		free(url);
		free(text);
		return 0;
	}
	rc = send_once(g, method, url, text, &resp, err);
	if (rc == 0 && resp.status == 401) {
		/* The token expired or was revoked under us: one fresh one. */
		pbx_gce_auth_invalidate(g->auth);
		rc = send_once(g, method, url, text, &resp, err);
	}
	if (rc == 0) {
		*status = resp.status;
		if (resp.body.len)
			*reply = json_loadb(resp.body.buf, resp.body.len, 0, NULL);
		if (!status_ok(resp.status, ok_statuses)) {
			char *shown = pbx_http_redact_url(url);
			if (gce_error_text(resp.body.buf, resp.body.len, msg, sizeof(msg)) < 0)
				snprintf(msg, sizeof(msg), "no error message");
			rc = pbx_err_set(err, "Compute Engine %s %s: HTTP %ld: %s", method, shown,
					 resp.status, msg);
			free(shown);
			json_decref(*reply);
			*reply = NULL;
		}
	}
	pbx_buf_release(&resp.body);
	free(url);
	free(text);
	return rc;
}
