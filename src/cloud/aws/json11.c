/*
 * json11.c - one call of an AWS JSON 1.1 API (the Price List Query API,
 * Service Quotas): POST / with the body, Content-Type
 * application/x-amz-json-1.1 and X-Amz-Target SERVICE_PREFIX.Operation,
 * signed with SigV4 (sigv4.c) for the API's signing name and region; and
 * the message of such an API's error reply ({"__type": "...#Code",
 * "message"}), read with jansson.
 */
#include "cloud/aws/aws.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/xalloc.h"

#define JSON11_TYPE "application/x-amz-json-1.1"

/* The codes of a JSON 1.1 reply worth another attempt: throttling, and
 * the transient statuses. */
static int json11_retryable(long status, const char *body, size_t len, void *ctx)
{
	char code[128];
	(void)ctx;
	aws_json_error(body, len, code, sizeof(code));
	if (!strncmp(code, "ThrottlingException:", 20) ||
	    !strncmp(code, "TooManyRequestsException:", 25))
		return 1;
	return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

int aws_json_post(const struct aws_json_call *c, const char *body, struct pbx_http_resp *resp,
		  struct pbx_err *err)
{
	char date[17], *auth, *h_auth, *h_date, *h_target, *h_tok = NULL;
	const char *hdrs[6];
	struct aws_sign_in in = { "POST",       c->host, "/",       JSON11_TYPE, body,
				  strlen(body), date,    c->region, c->service,  c->creds };
	struct pbx_http_req r = { .method = "POST",
				  .url = c->base,
				  .headers = hdrs,
				  .body = body,
				  .body_len = strlen(body),
				  .retryable = json11_retryable };
	int rc;
	aws_amz_date((long long)time(NULL), date);
	auth = aws_sigv4_authorization(&in, NULL, NULL);
	h_auth = xasprintf("Authorization: %s", auth);
	h_date = xasprintf("X-Amz-Date: %s", date);
	h_target = xasprintf("X-Amz-Target: %s", c->target);
	hdrs[0] = "Content-Type: " JSON11_TYPE;
	hdrs[1] = h_target;
	hdrs[2] = h_auth;
	hdrs[3] = h_date;
	hdrs[4] = NULL;
	hdrs[5] = NULL;
	if (c->creds->token) {
		h_tok = xasprintf("X-Amz-Security-Token: %s", c->creds->token);
		hdrs[4] = h_tok;
	}
	rc = pbx_http_do(c->http, &r, resp, err);
	free(auth);
	free(h_auth);
	free(h_date);
	free(h_target);
	if (h_tok) {
		explicit_bzero(h_tok, strlen(h_tok));
		free(h_tok);
	}
	return rc;
}

void aws_json_error(const char *body, size_t len, char *out, size_t size)
{
	json_t *e = json_loadb(body ? body : "", body ? len : 0, 0, NULL);
	char *p;
	const char *type = json_string_value(json_object_get(e, "__type"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *hash = type ? strrchr(type, '#') : NULL;
	if (!msg)
		msg = json_string_value(json_object_get(e, "Message"));
	if (type || msg)
		snprintf(out, size, "%.100s: %.300s",
			 hash   ? hash + 1
			 : type ? type
				: "error",
			 msg ? msg : "no message");
	else
		snprintf(out, size, "an answer that is not an AWS error (%zu bytes)", len);
	json_decref(e);
	for (p = out; *p; p++) /* the reply's text reaches a terminal */
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}
