/*
 * http.h - the one HTTP client of pbx (libcurl), shared by every cloud.
 *
 * A struct pbx_http is one libcurl easy handle plus its policy:
 *  - connection reuse: requests on one handle reuse its live connections
 *    (curl keeps them across curl_easy_reset);
 *  - timeouts: a connect timeout and a whole-request timeout per attempt;
 *  - retries: transport failures and the responses the request's
 *    classifier calls retryable (default: 429, 500, 502, 503, 504) are
 *    retried with exponential backoff and full jitter (a random delay in
 *    [0, min(cap, base * 2^(attempt-1))], at least the server's
 *    Retry-After).  The request is sent again unchanged, so an idempotency
 *    token in its URL or body (GCE requestId, EC2 ClientToken) is the same
 *    on every attempt: mutating calls must carry one;
 *  - a request log: with a log function set (pbx_http_set_log; the
 *    clouds send it to the store as "http" events: pbx_cloud_http_log),
 *    every attempt becomes one line: method, URL with secret query parameters removed, status,
 *    milliseconds, attempt, and for an error status the response body with
 *    secret JSON members removed.  Headers and request bodies are never
 *    logged (they carry Authorization, assertions, client secrets);
 *  - counters for `PBX_STATS=1` (process-wide, see pbx_http_stats).
 *
 * A handle may be shared by threads: requests on it are serialised.
 * Library code: never prints, fills struct pbx_err.
 */
#ifndef PBX_HTTP_HTTP_H
#define PBX_HTTP_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

struct pbx_http;

struct pbx_http_opts {
	const char *service;     /* name in the log and in errors ("gce"); copied */
	long connect_timeout_ms; /* 0 = 10 s */
	long timeout_ms;         /* whole attempt; 0 = 120 s */
	int max_attempts;        /* 0 = 8 */
	long backoff_base_ms;    /* 0 = 500 ms */
	long backoff_cap_ms;     /* 0 = 32 s */
	size_t max_body;         /* response body cap; 0 = 64 MiB */
};

/* Opens a handle; *out is owned by the caller (pbx_http_close). */
int pbx_http_open(const struct pbx_http_opts *o, struct pbx_http **out, struct pbx_err *err);
void pbx_http_close(struct pbx_http *h);
/* One line of the request log (no secret in it), with the ctx and tag
 * given to pbx_http_set_log. */
typedef void (*pbx_http_log_fn)(void *ctx, int64_t tag, const char *line);
/* Sends each attempt's log line to fn(ctx, tag, line) from now on; fn NULL
 * stops logging.  ctx must outlive the handle or a later call with NULL.
 * The transport knows nothing of where the lines go. */
void pbx_http_set_log(struct pbx_http *h, pbx_http_log_fn fn, void *ctx, int64_t tag);

/* Says whether a response deserves another attempt (1) or not (0). */
typedef int (*pbx_http_retryable_fn)(long status, const char *body, size_t len, void *ctx);

struct pbx_http_req {
	const char *method; /* "GET", "POST", "DELETE", ... */
	const char *url;
	const char *const *headers; /* "Name: value" lines, NULL-terminated; may be NULL */
	const char *body;           /* may be NULL (no body) */
	size_t body_len;
	pbx_http_retryable_fn retryable; /* NULL = pbx_http_retryable_default */
	void *retryable_ctx;
	size_t max_body; /* response body cap of this request; 0 = the handle's */
	/* Attempts for this request; 0 = the handle's.  1 for a request the
	 * caller retries itself (a resumable upload's chunk: after a failure
	 * the caller asks the store how far it got before sending again). */
	int max_attempts;
	/* When not NULL: reset first, then the header lines of the last
	 * response ("Name: value\r\n" as received, the status line first;
	 * at most 64 KiB: more fails the attempt).  Owned by the caller; read
	 * a header with pbx_http_header. */
	struct pbx_buf *resp_headers;
	/* When not NULL: a 2xx response's body is written here instead of
	 * resp->body, from into[0] again at each attempt, at most into_len
	 * bytes (more fails the attempt as a body over the cap); how many in
	 * resp->into_got.  Another status's body goes to resp->body as usual.
	 * Owned by the caller (a ranged read's place in its buffer). */
	char *into;
	size_t into_len;
	/* When not NULL (and into NULL): a 2xx response's body is handed to
	 * into_fn(into_ctx, at, data, n) piece by piece instead, `at` the
	 * bytes this attempt handed over before (0 at each attempt's first
	 * piece: the callee starts again), at most into_len bytes in all
	 * (more fails the request as a body over the cap); a non-zero return
	 * fails it ("cannot keep the reply", with errno's words when the
	 * callee set errno).  resp->into_got counts them.  A large read
	 * written to a file as it comes (objstore's ranges). */
	int (*into_fn)(void *ctx, uint64_t at, const char *data, size_t n);
	void *into_ctx;
};

/* The value of header `name` (case-insensitive) in `headers` as
 * resp_headers holds them, trimmed; several lines of that name are joined
 * with ", " (RFC 9110).  NULL when absent.  Caller frees. */
char *pbx_http_header(const struct pbx_buf *headers, const char *name);

struct pbx_http_resp {
	long status;         /* HTTP status of the last attempt */
	struct pbx_buf body; /* its body; the caller releases it (pbx_buf_release) */
	int attempts;        /* attempts made, >= 1 */
	size_t into_got;     /* bytes written to the request's `into` (or into_fn) */
};

#define PBX_HTTP_RESP_INIT            \
	{                             \
		0, PBX_BUF_INIT, 0, 0 \
	}

/*
 * Performs the request with the handle's retry policy.  Returns 0 when a
 * response came back (any status: the caller judges it; after the last
 * attempt a retryable status is returned as is), -1 when no response came
 * back after every attempt (connection refused, timeout, body over the
 * cap), with err naming the method and the redacted URL; -1 too, sending
 * nothing, when pbx_http_url_allowed refuses the URL.  Redirects are never
 * followed.  resp->body is
 * reset first and holds the last response's body.
 */
int pbx_http_do(struct pbx_http *h, const struct pbx_http_req *r, struct pbx_http_resp *resp,
		struct pbx_err *err);

/*
 * Whether requests to `url` may carry credentials (urlpolicy.c): https://
 * to any host, or plain http:// to a loopback host (127.0.0.0/8, ::1,
 * localhost: the emulators) or a cloud metadata server at its documented
 * address (169.254.169.254, metadata.google.internal, [fd00:ec2::254]).
 * Returns 1, or 0 with why[size] a sentence saying why not (naming the
 * host at most, never the whole URL).  Every place that takes a URL from
 * configuration, a key file or the environment checks it with this when it
 * reads it (to name the file and key); pbx_http_do checks every request
 * again.
 */
int pbx_http_url_allowed(const char *url, char *why, size_t size);

/* Whether host (an address or name, IPv6 in brackets as libcurl gives it)
 * is a loopback host: 127.0.0.0/8, ::1 or "localhost". */
int pbx_http_host_loopback(const char *host);

/* Whether url parses and its host is a loopback host (an emulator's, or a
 * service on this very machine: one that means another machine elsewhere). */
int pbx_http_url_loopback(const char *url);

/* 429, 500, 502, 503, 504. */
int pbx_http_retryable_default(long status, const char *body, size_t len, void *ctx);

/* The delay before attempt `attempt` + 1 (attempt >= 1): full jitter,
 * rnd01 in [0, 1) times min(cap, base * 2^(attempt-1)). */
long pbx_http_backoff_ms(int attempt, long base_ms, long cap_ms, double rnd01);

/* ------------------------------------------------------------- redaction */

/* The URL with userinfo and the values of secret query parameters
 * (access_token, token, key, assertion, client_secret, refresh_token,
 * password, signature, X-Amz-Signature, X-Amz-Security-Token,
 * X-Amz-Credential, upload_id: a GCS resumable session's) replaced by
 * REDACTED.  Caller frees. */
char *pbx_http_redact_url(const char *url);
/* A JSON text with the values of secret members (access_token,
 * refresh_token, id_token, private_key, private_key_id, client_secret,
 * assertion, token, password, secret) replaced by "REDACTED", compact and
 * cut to `max` bytes; a text that is not JSON becomes "(N bytes, not
 * JSON)".  Caller frees. */
char *pbx_http_redact_json(const char *text, size_t len, size_t max);
/* True when a header or parameter name names a secret. */
int pbx_http_secret_name(const char *name, size_t len);

/* --------------------------------------------------------------- stats */

struct pbx_http_stats {
	unsigned long calls;   /* attempts sent (each retry counts) */
	unsigned long retries; /* attempts after the first */
	unsigned long failed;  /* requests without a usable answer */
};

/* Process-wide counters, for `PBX_STATS=1`. */
void pbx_http_stats(struct pbx_http_stats *out);

#endif
