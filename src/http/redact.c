/*
 * redact.c - what of a request or reply may be written down: URLs without
 * userinfo or secret query values (parsed with libcurl's URL API), JSON
 * replies without secret members (jansson).  Used by the request log and
 * by every error message that names a URL.
 */
#include "http/http.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"
#include "util/xalloc.h"

static const char *const secret_names[] = {
	"authorization",
	"access_token",
	"refresh_token",
	"id_token",
	"token",
	"key",
	"private_key",
	"private_key_id",
	"client_secret",
	"assertion",
	"password",
	"secret",
	"signature",
	"x-amz-signature",
	"x-amz-security-token",
	"x-amz-credential",
	"x-goog-signature",
	"upload_id", /* a GCS resumable session URI is its own credential */
	NULL,
};

int pbx_http_secret_name(const char *name, size_t len)
{
	size_t i;
	for (i = 0; secret_names[i]; i++)
		if (strlen(secret_names[i]) == len && !strncasecmp(secret_names[i], name, len))
			return 1;
	return 0;
}

/* "a=1&token=x" -> "a=1&token=REDACTED".  '?' and ';' separate too: a
 * stray "?access_token=x" inside a value is redacted as well (erring on
 * the side of removing too much; found by fuzz_redact). */
static void redact_query(const char *q, struct pbx_buf *out)
{
	while (*q) {
		size_t n = strcspn(q, "&?;");
		size_t name = strcspn(q, "=");
		if (name < n && pbx_http_secret_name(q, name)) {
			pbx_buf_add(out, q, name);
			pbx_buf_adds(out, "=REDACTED");
		} else {
			pbx_buf_add(out, q, n);
		}
		q += n;
		if (*q)
			pbx_buf_addc(out, *q++);
	}
}

char *pbx_http_redact_url(const char *url)
{
	CURLU *u = curl_url();
	char *query = NULL, *full = NULL, *res;
	struct pbx_buf b = PBX_BUF_INIT;

	if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
		curl_url_cleanup(u);
		return xstrdup("(unparsable URL)");
	}
	curl_url_set(u, CURLUPART_USER, NULL, 0);
	curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
	curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
	if (curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK && query) {
		redact_query(query, &b);
		curl_url_set(u, CURLUPART_QUERY, b.buf, 0);
	}
	if (curl_url_get(u, CURLUPART_URL, &full, 0) != CURLUE_OK)
		full = NULL;
	res = xstrdup(full ? full : "(unparsable URL)");
	curl_free(full);
	curl_free(query);
	pbx_buf_release(&b);
	curl_url_cleanup(u);
	return res;
}

static void redact_value(json_t *v)
{
	const char *k;
	json_t *m;
	size_t i;
	if (json_is_object(v)) {
		json_object_foreach(v, k, m)
		{
			if (pbx_http_secret_name(k, strlen(k)))
				json_object_set_new(v, k, json_string("REDACTED"));
			else
				redact_value(m);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, m) redact_value(m);
	}
}

char *pbx_http_redact_json(const char *text, size_t len, size_t max)
{
	json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	char *s;
	if (!v)
		return xasprintf("(%zu bytes, not JSON)", len);
	redact_value(v);
	s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(v);
	if (!s)
		return xstrdup("(unprintable JSON)");
	if (max > 3 && strlen(s) > max)
		memcpy(s + max - 3, "...", 4);
	{
		char *r = xstrdup(s);
		free(s);
		return r;
	}
}
