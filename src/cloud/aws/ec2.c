/*
 * ec2.c - one EC2 Query API call over src/http: the form body
 * (Action=...&Version=2016-11-15&...), SigV4 (sigv4.c) over it, the retry
 * classifier (throttling codes and 5xx, never capacity or quota), the
 * error envelope turned into a message that says what to do, and dry-run
 * (the request printed without credentials or signature, nothing sent);
 * and aws_do, the call whose reply the provider does not need.
 */
#include "cloud/aws/aws_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "util/xalloc.h"

void aws_param(struct aws_params *p, const char *key, const char *fmt, ...)
{
	va_list ap;
	struct pbx_buf b = PBX_BUF_INIT;
	va_start(ap, fmt);
	pbx_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	p->k = xreallocarray(p->k, p->n + 1, sizeof(*p->k));
	p->v = xreallocarray(p->v, p->n + 1, sizeof(*p->v));
	p->k[p->n] = xstrdup(key);
	p->v[p->n] = pbx_buf_detach(&b, NULL);
	p->n++;
}

void aws_params_free(struct aws_params *p)
{
	size_t i;
	for (i = 0; i < p->n; i++) {
		free(p->k[i]);
		free(p->v[i]);
	}
	free(p->k);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

/* application/x-www-form-urlencoded as botocore sends it (Python's
 * urlencode): A-Z a-z 0-9 - _ . ~ as they are, a space as '+', every other
 * byte %XX.  The signature covers these exact bytes. */
static void form_encode(struct pbx_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			pbx_buf_addc(b, (char)c);
		} else if (c == ' ') {
			pbx_buf_addc(b, '+');
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			pbx_buf_add(b, e, 3);
		}
	}
}

char *aws_form_body(const char *action, const struct aws_params *p)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	pbx_buf_adds(&b, "Action=");
	form_encode(&b, action);
	pbx_buf_adds(&b, "&Version=" PBX_EC2_VERSION);
	for (i = 0; p && i < p->n; i++) {
		pbx_buf_addc(&b, '&');
		form_encode(&b, p->k[i]);
		pbx_buf_addc(&b, '=');
		form_encode(&b, p->v[i]);
	}
	return pbx_buf_detach(&b, NULL);
}

/* ------------------------------------------------------------- retries */

static int code_in(const char *code, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(code, *list))
			return 1;
	return 0;
}

static const char *const throttling[] = {
	"Throttling",
	"ThrottlingException",
	"ThrottledException",
	"RequestThrottledException",
	"TooManyRequestsException",
	"RequestLimitExceeded",
	"BandwidthLimitExceeded",
	"EC2ThrottledException",
	"RequestThrottled",
	"SlowDown",
	"PriorRequestNotComplete",
	"RequestTimeout",
	"RequestTimeoutException",
	"InternalError",
	"ServiceUnavailable",
	"Unavailable",
	NULL,
};
/* Failures of this placement: another attempt would fail the same way. */
static const char *const capacity[] = {
	"InsufficientInstanceCapacity",
	"InsufficientHostCapacity",
	"InsufficientCapacity",
	"InsufficientReservedInstanceCapacity",
	"InstanceLimitExceeded",
	"VcpuLimitExceeded",
	"MaxSpotInstanceCountExceeded",
	"SpotMaxPriceTooLow",
	"Unsupported",
	NULL,
};

int aws_retryable(long status, const char *body, size_t len, void *ctx)
{
	char code[64] = "", msg[8];
	(void)ctx;
	if (aws_error_parse(body, len, code, sizeof(code), msg, sizeof(msg)) == 0) {
		if (code_in(code, capacity))
			return 0;
		if (code_in(code, throttling))
			return 1;
	}
	return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

/* ------------------------------------------------------------ messages */

static int aws_error(struct aws *a, const char *action, long status, const char *code,
		     const char *msg, struct pbx_err *err)
{
	const char *hint = "";
	if (!strcmp(code, "AuthFailure") || !strcmp(code, "SignatureDoesNotMatch") ||
	    !strcmp(code, "InvalidClientTokenId") || !strcmp(code, "UnrecognizedClientException"))
		hint = ": the credentials were refused; check the access key and secret key";
	else if (!strcmp(code, "RequestExpired"))
		hint = ": this machine's clock is more than 15 minutes off";
	else if (!strcmp(code, "UnauthorizedOperation") || !strcmp(code, "AccessDenied"))
		hint = ": the IAM policy of these credentials does not allow it";
	else if (!strcmp(code, "InsufficientInstanceCapacity") ||
		 !strcmp(code, "InsufficientHostCapacity"))
		hint = ": AWS has no capacity for this instance type in this subnet's availability "
		       "zone now; list other subnets in clouds.aws.subnets or try later";
	else if (!strcmp(code, "VcpuLimitExceeded") || !strcmp(code, "InstanceLimitExceeded") ||
		 !strcmp(code, "MaxSpotInstanceCountExceeded"))
		hint = ": an EC2 quota is too small; ask for more in Service Quotas (e.g. "
		       "'Running On-Demand G and VT instances' for GPUs)";
	if (!strcmp(code, "UnauthorizedOperation") || !strcmp(code, "AccessDenied"))
		return pbx_err_set(err,
				   "EC2 %s in %s: not authorized (%s, credentials from %s): "
				   "%s%s",
				   action, a->region, code, a->creds.source, msg, hint);
	if (strstr(hint, "credentials were refused"))
		return pbx_err_set(err,
				   "EC2 %s in %s: authentication failed (%s, credentials from "
				   "%s): %s%s",
				   action, a->region, code, a->creds.source, msg, hint);
	return pbx_err_set(err, "EC2 %s in %s: HTTP %ld %s: %s%s", action, a->region, status, code,
			   msg, hint);
}

/* ---------------------------------------------------------------- call */

int aws_call(struct aws *a, const char *action, const struct aws_params *p, struct pbx_buf *reply,
	     char code[64], struct pbx_err *err)
{
	static const char ct[] = "application/x-www-form-urlencoded; charset=utf-8";
	char *body = aws_form_body(action, p), *auth, *h_auth, *h_date, *h_tok = NULL;
	char date[17], ecode[64] = "", emsg[600] = "";
	const char *hdrs[5];
	struct aws_sign_in in = { "POST",       a->host, "/",       ct,    body,
				  strlen(body), date,    a->region, "ec2", &a->creds };
	struct pbx_http_req r = { .method = "POST",
				  .url = a->endpoint,
				  .headers = hdrs,
				  .body = body,
				  .body_len = strlen(body),
				  .retryable = aws_retryable };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	int rc;

	pbx_buf_release(reply);
	if (code)
		code[0] = '\0';
	if (a->s->dry_run) {
		if (a->s->print_request)
			a->s->print_request(a->s->print_ctx, "POST", a->endpoint, body);
		free(body);
		return 0;
	}
	aws_amz_date((long long)time(NULL), date);
	auth = aws_sigv4_authorization(&in, NULL, NULL);
	h_auth = xasprintf("Authorization: %s", auth);
	h_date = xasprintf("X-Amz-Date: %s", date);
	hdrs[0] = "Content-Type: application/x-www-form-urlencoded; charset=utf-8";
	hdrs[1] = h_auth;
	hdrs[2] = h_date;
	hdrs[3] = NULL;
	if (a->creds.token) {
		h_tok = xasprintf("X-Amz-Security-Token: %s", a->creds.token);
		hdrs[3] = h_tok;
	}
	hdrs[4] = NULL;
	rc = pbx_http_do(a->http, &r, &resp, err);
	free(auth);
	free(h_auth);
	free(h_date);
	if (h_tok) {
		explicit_bzero(h_tok, strlen(h_tok));
		free(h_tok);
	}
	free(body);
	if (rc < 0)
		return pbx_err_prefix(err, "EC2 %s", action);
	if (resp.status < 200 || resp.status >= 300) {
		if (aws_error_parse(resp.body.buf, resp.body.len, ecode, sizeof(ecode), emsg,
				    sizeof(emsg)) < 0) {
			snprintf(ecode, sizeof(ecode), "%s", "Unknown");
			snprintf(emsg, sizeof(emsg),
				 "an answer that is not an EC2 error (%zu bytes)", resp.body.len);
		}
		if (code)
			snprintf(code, 64, "%s", ecode);
		/* the request log says only "N bytes, not JSON" of an XML body */
		pbx_store_event(a->s->store, a->s->id, "ec2.error", "%s: HTTP %ld %s: %.300s",
				action, resp.status, ecode, emsg);
		pbx_buf_release(&resp.body);
		return aws_error(a, action, resp.status, ecode, emsg, err);
	}
	*reply = resp.body;
	return 0;
}

int aws_do(struct aws *a, const char *action, struct aws_params *p, const char *const *ok,
	   struct pbx_buf *reply, struct pbx_err *err)
{
	struct pbx_buf r = PBX_BUF_INIT;
	char code[64];
	int rc = aws_call(a, action, p, reply ? reply : &r, code, err);
	if (rc < 0 && ok)
		for (; *ok; ok++)
			if (!strcmp(code, *ok)) {
				pbx_err_clear(err);
				rc = 0;
				break;
			}
	pbx_buf_release(&r);
	aws_params_free(p);
	return rc;
}
