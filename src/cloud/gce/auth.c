/*
 * auth.c - where Compute Engine credentials come from (the lookup order in
 * auth.h), the token requests of each kind (JWT bearer, refresh token,
 * metadata server) and the in-memory token cache.
 */
#include "cloud/provider.h"
#include "cloud/gce/auth.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define CREDS_MAX_SIZE (1 << 20)

enum auth_kind { AUTH_FILE, AUTH_METADATA };

struct pbx_gce_auth {
	enum auth_kind kind;
	struct pbx_gce_creds creds; /* AUTH_FILE */
	char *metadata_url;         /* AUTH_METADATA */
	char *source;               /* for messages */
	struct pbx_http *http;
	char *token;       /* cached; wiped when replaced */
	time_t refresh_at; /* fetch a new one from this time on */
	unsigned fetches;
	const char *scope;  /* NULL: PBX_GCE_SCOPE */
	pthread_mutex_t mu; /* guards token, refresh_at, fetches */
};

static void token_forget(struct pbx_gce_auth *a)
{
	if (a->token) {
		explicit_bzero(a->token, strlen(a->token));
		free(a->token);
		a->token = NULL;
	}
	a->refresh_at = 0;
}

void pbx_gce_auth_close(struct pbx_gce_auth *a)
{
	if (!a)
		return;
	token_forget(a);
	pthread_mutex_destroy(&a->mu);
	pbx_gce_creds_free(&a->creds);
	free(a->metadata_url);
	free(a->source);
	free(a);
}

void pbx_gce_auth_invalidate(struct pbx_gce_auth *a)
{
	pthread_mutex_lock(&a->mu);
	token_forget(a);
	pthread_mutex_unlock(&a->mu);
}

void pbx_gce_auth_set_scope(struct pbx_gce_auth *a, const char *scope)
{
	pthread_mutex_lock(&a->mu);
	token_forget(a);
	a->scope = scope;
	pthread_mutex_unlock(&a->mu);
}

const char *pbx_gce_auth_source(const struct pbx_gce_auth *a)
{
	return a->source;
}

const char *pbx_gce_auth_project(const struct pbx_gce_auth *a)
{
	return a->creds.project;
}

unsigned pbx_gce_auth_fetches(const struct pbx_gce_auth *a)
{
	return a->fetches;
}

void pbx_gce_auth_free_header(char *header)
{
	if (header) {
		explicit_bzero(header, strlen(header));
		free(header);
	}
}

/* ------------------------------------------------------------- lookup */

static int file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* The gcloud ADC file path (caller frees). */
static char *adc_path(void)
{
	const char *cfg = getenv("CLOUDSDK_CONFIG"), *home = getenv("HOME");
	if (cfg && *cfg)
		return xasprintf("%s/application_default_credentials.json", cfg);
	return xasprintf("%s/.config/gcloud/application_default_credentials.json",
			 home ? home : "");
}

static int open_file(struct pbx_gce_auth *a, const char *path, const char *why, struct pbx_err *err)
{
	struct pbx_buf text = PBX_BUF_INIT;
	int rc;
	if (pbx_check_private(path, 1, err) < 0)
		return pbx_err_prefix(err, "Compute Engine credentials (%s)", why);
	if (pbx_read_file(path, &text, err) < 0)
		return pbx_err_prefix(err, "Compute Engine credentials (%s)", why);
	if (text.len > CREDS_MAX_SIZE) {
		explicit_bzero(text.buf, text.len);
		pbx_buf_release(&text);
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: larger than %d bytes", path,
				    CREDS_MAX_SIZE);
	}
	rc = pbx_gce_creds_parse(path, text.buf, text.len, &a->creds, err);
	explicit_bzero(text.buf, text.len);
	pbx_buf_release(&text);
	if (rc < 0)
		return -1;
	a->kind = AUTH_FILE;
	if (!a->creds.token_uri)
		a->creds.token_uri = xstrdup(PBX_GCE_TOKEN_URI);
	if (!strcmp(a->creds.type, "service_account"))
		a->source = xasprintf("service account %s (%s)", a->creds.client_email, path);
	else
		a->source = xasprintf("user credentials (%s)", path);
	return 0;
}

/* No key file: the metadata server, at GCE_METADATA_HOST when set (the
 * tests point it at loopback), which must pass pbx_http_url_allowed. */
static int open_metadata(struct pbx_gce_auth *a, struct pbx_err *err)
{
	const char *host = getenv("GCE_METADATA_HOST");
	char why[256];
	a->kind = AUTH_METADATA;
	if (!pbx_may_ask_metadata("gce"))
		return pbx_err_setc(
			err, PBX_EXIT_USAGE,
			"no Compute Engine credentials found: set clouds.gce.credentials "
			"or GOOGLE_APPLICATION_CREDENTIALS, or run 'gcloud auth "
			"application-default login' (this is no Compute Engine machine: its "
			"metadata server was not asked)");
	a->metadata_url =
		xasprintf("http://%s/computeMetadata/v1/instance/service-accounts/default/token",
			  host && *host ? host : "metadata.google.internal");
	if (!pbx_http_url_allowed(a->metadata_url, why, sizeof(why)))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "GCE_METADATA_HOST: %s", why);
	a->source = xasprintf("the metadata server (no credentials file: set "
			      "clouds.gce.credentials or GOOGLE_APPLICATION_CREDENTIALS, "
			      "or run 'gcloud auth application-default login')");
	return 0;
}

int pbx_gce_auth_open(const char *credentials, struct pbx_http *http, struct pbx_gce_auth **out,
		      struct pbx_err *err)
{
	struct pbx_gce_auth *a = xcalloc(1, sizeof(*a));
	const char *env = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	int rc;

	a->http = http;
	pthread_mutex_init(&a->mu, NULL);
	*out = NULL;
	if (credentials && *credentials) {
		rc = open_file(a, credentials, "clouds.gce.credentials", err);
	} else if (env && *env) {
		rc = open_file(a, env, "GOOGLE_APPLICATION_CREDENTIALS", err);
	} else {
		char *adc = adc_path();
		if (file_exists(adc)) {
			rc = open_file(a, adc, "gcloud application-default credentials", err);
		} else {
			rc = open_metadata(a, err);
		}
		free(adc);
	}
	if (rc < 0) {
		pbx_gce_auth_close(a);
		return -1;
	}
	*out = a;
	return 0;
}

/* ------------------------------------------------------------- fetching */

/* "name=value" with the value URL-encoded, appended to a form body. */
static void form_add(struct pbx_buf *b, const char *name, const char *value)
{
	char *enc = curl_easy_escape(NULL, value, 0);
	pbx_buf_addf(b, "%s%s=%s", b->len ? "&" : "", name, enc ? enc : "");
	if (enc) {
		explicit_bzero(enc, strlen(enc));
		curl_free(enc);
	}
}

/* The token request's form body (wiped by the caller). */
static int token_form(struct pbx_gce_auth *a, struct pbx_buf *form, struct pbx_err *err)
{
	const struct pbx_gce_creds *c = &a->creds;
	if (!strcmp(c->type, "service_account")) {
		char *jwt;
		if (pbx_gce_jwt_make(c, c->token_uri, a->scope ? a->scope : PBX_GCE_SCOPE,
				     time(NULL), &jwt, err) < 0)
			return -1;
		form_add(form, "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
		form_add(form, "assertion", jwt);
		explicit_bzero(jwt, strlen(jwt));
		free(jwt);
	} else {
		form_add(form, "grant_type", "refresh_token");
		form_add(form, "client_id", c->client_id);
		form_add(form, "client_secret", c->client_secret);
		form_add(form, "refresh_token", c->refresh_token);
	}
	return 0;
}

static int fetch(struct pbx_gce_auth *a, struct pbx_err *err)
{
	static const char *const form_hdrs[] = { "Content-Type: application/x-www-form-urlencoded",
						 NULL };
	static const char *const md_hdrs[] = { "Metadata-Flavor: Google", NULL };
	struct pbx_buf form = PBX_BUF_INIT;
	struct pbx_http_req r = { 0 };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	char *token = NULL;
	long expires = 0, margin;
	int rc;

	if (a->kind == AUTH_METADATA) {
		r.method = "GET";
		r.url = a->metadata_url;
		r.headers = md_hdrs;
	} else {
		if (token_form(a, &form, err) < 0)
			return -1;
		r.method = "POST";
		r.url = a->creds.token_uri;
		r.headers = form_hdrs;
		r.body = form.buf;
		r.body_len = form.len;
	}
	rc = pbx_http_do(a->http, &r, &resp, err);
	explicit_bzero(form.buf, form.len);
	pbx_buf_release(&form);
	if (rc < 0) {
		pbx_buf_release(&resp.body);
		return pbx_err_prefix(err, "cannot get a Compute Engine token from %s", a->source);
	}
	rc = pbx_gce_token_parse(resp.body.buf, resp.body.len, "token endpoint", &token, &expires,
				 err);
	explicit_bzero(resp.body.buf, resp.body.len);
	pbx_buf_release(&resp.body);
	if (rc < 0)
		return pbx_err_prefix(err, "Compute Engine authentication failed for %s (HTTP %ld)",
				      a->source, resp.status);
	token_forget(a);
	a->token = token;
	/* Renew a minute early (a quarter of the lifetime for short ones). */
	margin = expires >= 240 ? 60 : expires / 4;
	a->refresh_at = time(NULL) + expires - margin;
	a->fetches++;
	return 0;
}

int pbx_gce_auth_header(struct pbx_gce_auth *a, char **header, struct pbx_err *err)
{
	int rc = 0;
	*header = NULL;
	pthread_mutex_lock(&a->mu);
	if (!a->token || time(NULL) >= a->refresh_at)
		rc = fetch(a, err);
	if (rc == 0)
		*header = xasprintf("Authorization: Bearer %s", a->token);
	pthread_mutex_unlock(&a->mu);
	return rc;
}
