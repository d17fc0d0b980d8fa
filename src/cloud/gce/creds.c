/*
 * creds.c - a Google credentials file (service-account key or gcloud's
 * authorized_user ADC file) read with jansson into struct pbx_gce_creds,
 * and the token endpoint's reply.  Both are parsers of untrusted text and
 * have fuzz targets (tests/fuzz/fuzz_gce_creds.c, fuzz_gce_token.c).
 */
#include "cloud/gce/auth.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void pbx_gce_creds_free(struct pbx_gce_creds *c)
{
	free(c->type);
	free(c->client_email);
	wipe_free(c->private_key);
	free(c->private_key_id);
	free(c->client_id);
	wipe_free(c->client_secret);
	wipe_free(c->refresh_token);
	free(c->token_uri);
	free(c->project);
	memset(c, 0, sizeof(*c));
}

/* A string member: 0 with *out (NULL when absent and optional), or -1. */
static int member(json_t *o, const char *path, const char *key, int required, char **out,
		  struct pbx_err *err)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: field %s: missing", path,
					    key);
		return 0;
	}
	if (!json_is_string(v) || !json_string_length(v))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: field %s: must be a non-empty string",
				    path, key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: field %s: contains a NUL byte", path,
				    key);
	*out = xstrdup(json_string_value(v));
	return 0;
}

static int parse_sa(json_t *o, const char *path, struct pbx_gce_creds *c, struct pbx_err *err)
{
	if (member(o, path, "client_email", 1, &c->client_email, err) < 0 ||
	    member(o, path, "private_key", 1, &c->private_key, err) < 0 ||
	    member(o, path, "private_key_id", 0, &c->private_key_id, err) < 0 ||
	    member(o, path, "token_uri", 1, &c->token_uri, err) < 0 ||
	    member(o, path, "project_id", 0, &c->project, err) < 0)
		return -1;
	return 0;
}

static int parse_user(json_t *o, const char *path, struct pbx_gce_creds *c, struct pbx_err *err)
{
	if (member(o, path, "client_id", 1, &c->client_id, err) < 0 ||
	    member(o, path, "client_secret", 1, &c->client_secret, err) < 0 ||
	    member(o, path, "refresh_token", 1, &c->refresh_token, err) < 0 ||
	    member(o, path, "token_uri", 0, &c->token_uri, err) < 0 ||
	    member(o, path, "quota_project_id", 0, &c->project, err) < 0)
		return -1;
	return 0;
}

int pbx_gce_creds_parse(const char *path, const char *text, size_t len, struct pbx_gce_creds *c,
			struct pbx_err *err)
{
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	char why[256];
	int rc = -1;

	memset(c, 0, sizeof(*c));
	if (!o)
		/* je.text may quote the file (a key): give the position only. */
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s:%d: not a JSON credentials file", path,
				    je.line);
	if (!json_is_object(o)) {
		pbx_err_setc(err, PBX_EXIT_USAGE, "%s: not a JSON object", path);
		goto out;
	}
	if (member(o, path, "type", 1, &c->type, err) < 0)
		goto out;
	if (!strcmp(c->type, "service_account"))
		rc = parse_sa(o, path, c, err);
	else if (!strcmp(c->type, "authorized_user"))
		rc = parse_user(o, path, c, err);
	else
		pbx_err_setc(err, PBX_EXIT_USAGE,
			     "%s: field type: '%s' is not supported "
			     "(service_account or authorized_user)",
			     path, c->type);
	if (rc == 0 && c->token_uri && !pbx_http_url_allowed(c->token_uri, why, sizeof(why)))
		/* the refresh token or signed assertion would go there */
		rc = pbx_err_setc(err, PBX_EXIT_USAGE, "%s: field token_uri: %s", path, why);
out:
	json_decref(o);
	if (rc < 0)
		pbx_gce_creds_free(c);
	return rc;
}

int pbx_gce_token_parse(const char *body, size_t len, const char *what, char **token,
			long *expires_in, struct pbx_err *err)
{
	json_t *o = json_loadb(body, len, 0, NULL), *t, *e;
	int rc = -1;

	*token = NULL;
	*expires_in = 0;
	if (!o || !json_is_object(o)) {
		pbx_err_set(err, "%s: reply is not a JSON object", what);
		goto out;
	}
	e = json_object_get(o, "error");
	if (e) {
		json_t *d = json_object_get(o, "error_description");
		const char *es =
			json_is_string(e) ? json_string_value(e)
			: json_is_object(e) && json_is_string(json_object_get(e, "message"))
				? json_string_value(json_object_get(e, "message"))
				: "unknown error";
		pbx_err_set(err, "%s: %s%s%.300s", what, es, json_is_string(d) ? ": " : "",
			    json_is_string(d) ? json_string_value(d) : "");
		goto out;
	}
	t = json_object_get(o, "access_token");
	if (!json_is_string(t) || !json_string_length(t) ||
	    strlen(json_string_value(t)) != json_string_length(t) ||
	    strpbrk(json_string_value(t), "\r\n")) {
		pbx_err_set(err, "%s: reply has no usable access_token", what);
		goto out;
	}
	e = json_object_get(o, "expires_in");
	if (!json_is_integer(e) || json_integer_value(e) < 1 ||
	    json_integer_value(e) > 365L * 86400) {
		pbx_err_set(err, "%s: reply's expires_in is not a positive number of seconds",
			    what);
		goto out;
	}
	*token = xstrdup(json_string_value(t));
	*expires_in = (long)json_integer_value(e);
	rc = 0;
out:
	json_decref(o);
	return rc;
}
