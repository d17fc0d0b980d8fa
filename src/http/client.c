/*
 * client.c - pbx_http_do: one request over a reused libcurl handle, with
 * timeouts, retries (exponential backoff, full jitter, Retry-After), the
 * redacted request log and the PBX_STATS counters.  See http.h.
 */
#include "http/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/buf.h"
#include "util/xalloc.h"

struct pbx_http {
	CURL *curl;             /* its connection cache is what gets reused */
	pthread_mutex_t mu;     /* one request at a time on the handle */
	struct pbx_http_opts o; /* with defaults filled in */
	char *service;
	pbx_http_log_fn log; /* request log, may be NULL */
	void *log_ctx;
	int64_t log_tag; /* given back with each line */
};

static unsigned long stat_calls, stat_retries, stat_failed;

void pbx_http_stats(struct pbx_http_stats *out)
{
	out->calls = __atomic_load_n(&stat_calls, __ATOMIC_RELAXED);
	out->retries = __atomic_load_n(&stat_retries, __ATOMIC_RELAXED);
	out->failed = __atomic_load_n(&stat_failed, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ the handle */

int pbx_http_open(const struct pbx_http_opts *o, struct pbx_http **out, struct pbx_err *err)
{
	struct pbx_http *h = xcalloc(1, sizeof(*h));
	h->o = *o;
	h->service = xstrdup(o->service ? o->service : "http");
	h->o.service = h->service;
	if (h->o.connect_timeout_ms <= 0)
		h->o.connect_timeout_ms = 10000;
	if (h->o.timeout_ms <= 0)
		h->o.timeout_ms = 120000;
	if (h->o.max_attempts <= 0)
		h->o.max_attempts = 8;
	if (h->o.backoff_base_ms <= 0)
		h->o.backoff_base_ms = 500;
	if (h->o.backoff_cap_ms <= 0)
		h->o.backoff_cap_ms = 32000;
	if (h->o.max_body == 0)
		h->o.max_body = 64u << 20;
	h->curl = curl_easy_init();
	if (!h->curl) {
		free(h->service);
		free(h);
		*out = NULL;
		return pbx_err_set(err, "%s: cannot start libcurl",
				   o->service ? o->service : "http");
	}
	pthread_mutex_init(&h->mu, NULL);
	*out = h;
	return 0;
}

void pbx_http_close(struct pbx_http *h)
{
	if (!h)
		return;
	curl_easy_cleanup(h->curl);
	pthread_mutex_destroy(&h->mu);
	free(h->service);
	free(h);
}

void pbx_http_set_log(struct pbx_http *h, pbx_http_log_fn fn, void *ctx, int64_t tag)
{
	pthread_mutex_lock(&h->mu);
	h->log = fn;
	h->log_ctx = ctx;
	h->log_tag = tag;
	pthread_mutex_unlock(&h->mu);
}

/* ------------------------------------------------------------- policy */

int pbx_http_retryable_default(long status, const char *body, size_t len, void *ctx)
{
	(void)body;
	(void)len;
	(void)ctx;
	return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

long pbx_http_backoff_ms(int attempt, long base_ms, long cap_ms, double rnd01)
{
	long bound = base_ms;
	int i;
	for (i = 1; i < attempt && bound < cap_ms; i++)
		bound *= 2;
	if (bound > cap_ms)
		bound = cap_ms;
	if (rnd01 < 0)
		rnd01 = 0;
	return (long)(rnd01 * (double)bound);
}

static double random01(void)
{
	uint32_t r = 0;
	if (RAND_bytes((unsigned char *)&r, sizeof(r)) != 1)
		r = (uint32_t)rand();
	return (double)r / 4294967296.0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Transport failures worth another attempt: the request may not have
 * reached the server, or its answer was lost. */
static int curl_code_retryable(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
		return 1;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------- transfer */

struct sink {
	struct pbx_buf *body;
	int over;                /* the cap was passed */
	struct pbx_buf *headers; /* the response's header lines, may be NULL */
	CURL *curl;              /* for the status, when into is set */
	char *into;              /* a 2xx body's place (pbx_http_req.into), or NULL */
	size_t into_len, into_got;
	const struct pbx_http_req *req; /* its into_fn and into_ctx */
	int into_errno;                 /* into_fn failed: its errno (-1 none) */
};

#define HEADERS_MAX (64u << 10)

/* Keeps the header lines of the last response only: a status line (an
 * interim 1xx's, then the final one's) starts the buffer again. */
static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	size_t n = size * nmemb;
	if (n >= 5 && !strncmp(ptr, "HTTP/", 5))
		pbx_buf_reset(s->headers);
	if (pbx_buf_add(s->headers, ptr, n) < 0)
		return 0;
	return n;
}

/* A 2xx body into the caller's place: 1 when it went there (or over its
 * end: s->over), 0 when the body is another status's. */
static int into_place(struct sink *s, const char *ptr, size_t n)
{
	long code = 0;
	curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code > 299)
		return 0;
	if (n > s->into_len - s->into_got) {
		s->over = 1;
		return 1;
	}
	errno = 0;
	if (s->into)
		memcpy(s->into + s->into_got, ptr, n);
	else if (s->req->into_fn(s->req->into_ctx, s->into_got, ptr, n) != 0)
		s->into_errno = errno ? errno : -1;
	s->into_got += s->into_errno ? 0 : n;
	return 1;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	if ((s->into || s->req->into_fn) && into_place(s, ptr, size * nmemb))
		return s->over || s->into_errno ? 0 : size * nmemb;
	if (pbx_buf_add(s->body, ptr, size * nmemb) < 0) {
		s->over = 1;
		return 0;
	}
	return size * nmemb;
}

static struct curl_slist *header_list(const struct pbx_http_req *r)
{
	struct curl_slist *l = NULL;
	size_t i;
	/* No "Expect: 100-continue" round trip before bodies. */
	l = curl_slist_append(l, "Expect:");
	for (i = 0; r->headers && r->headers[i]; i++)
		l = curl_slist_append(l, r->headers[i]);
	return l;
}

/* One attempt.  Returns the CURLcode; *status, *retry_after_s filled. */
static CURLcode attempt_once(struct pbx_http *h, const struct pbx_http_req *r,
			     struct curl_slist *hdrs, struct sink *sink, long *status,
			     long *retry_after_s)
{
	CURL *c = h->curl;
	CURLcode rc;
	curl_off_t ra = 0;

	curl_easy_reset(c);
	pbx_buf_release(sink->body);
	sink->body->max = r->max_body ? r->max_body : h->o.max_body;
	sink->over = 0;
	sink->into_got = 0;
	curl_easy_setopt(c, CURLOPT_URL, r->url);
	/* Only http and https, never a redirect (a 3xx is the caller's to
	 * judge): a Location header can neither downgrade to http nor take
	 * the credentials in our headers to another host. */
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
	/* Plain http goes only to loopback or a metadata server (see
	 * pbx_http_url_allowed): straight there, never through a proxy. */
	if (!strncasecmp(r->url, "http://", 7))
		curl_easy_setopt(c, CURLOPT_PROXY, "");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, h->o.connect_timeout_ms);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, h->o.timeout_ms);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, sink);
	if (sink->headers) {
		pbx_buf_release(sink->headers);
		sink->headers->max = HEADERS_MAX;
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(c, CURLOPT_HEADERDATA, sink);
	}
	curl_easy_setopt(c, CURLOPT_USERAGENT, "pbx/" PBX_VERSION);
	curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
	if (r->body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body);
	} else if (!strcmp(r->method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	}
	if (!strcmp(r->method, "GET"))
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	else if (!strcmp(r->method, "HEAD")) /* no body follows the headers */
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(r->method, "POST") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
	rc = curl_easy_perform(c);
	*status = 0;
	*retry_after_s = 0;
	if (rc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
		if (curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
			*retry_after_s = ra > 60 ? 60 : (long)ra;
	}
	return rc;
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (long)((t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000);
}

/* The log line of one attempt, to the handle's log function. */
static void log_attempt(struct pbx_http *h, const struct pbx_http_req *r, const char *url,
			int attempt, long ms, long status, CURLcode rc, const struct pbx_buf *body,
			long delay_ms)
{
	struct pbx_buf line = PBX_BUF_INIT;
	char *detail = NULL;
	char retry[64] = "";
	if (!h->log)
		return;
	if (delay_ms >= 0)
		snprintf(retry, sizeof(retry), "; retry in %ld ms", delay_ms);
	if (rc != CURLE_OK)
		pbx_buf_addf(&line, "%s %s %s: %s (attempt %d, %ld ms%s)", h->service, r->method,
			     url, curl_easy_strerror(rc), attempt, ms, retry);
	else if (status >= 400)
		detail = pbx_http_redact_json(body->buf, body->len, 600);
	if (rc == CURLE_OK)
		pbx_buf_addf(&line, "%s %s %s -> %ld (attempt %d, %ld ms%s)%s%s", h->service,
			     r->method, url, status, attempt, ms, retry, detail ? ": " : "",
			     detail ? detail : "");
	h->log(h->log_ctx, h->log_tag, line.buf);
	pbx_buf_release(&line);
	free(detail);
}

static int do_locked(struct pbx_http *h, const struct pbx_http_req *r, struct pbx_http_resp *resp,
		     const char *url, struct pbx_err *err)
{
	pbx_http_retryable_fn retryable = r->retryable ? r->retryable : pbx_http_retryable_default;
	struct curl_slist *hdrs = header_list(r);
	struct sink sink = {
		&resp->body, 0, r->resp_headers, h->curl, r->into, r->into_len, 0, r, 0
	};
	CURLcode rc = CURLE_OK;
	long status = 0, retry_after = 0;
	int attempt, again = 0, max = r->max_attempts > 0 ? r->max_attempts : h->o.max_attempts;

	for (attempt = 1; attempt <= max; attempt++) {
		struct timespec t0;
		long delay = -1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		__atomic_add_fetch(&stat_calls, 1, __ATOMIC_RELAXED);
		if (attempt > 1)
			__atomic_add_fetch(&stat_retries, 1, __ATOMIC_RELAXED);
		rc = attempt_once(h, r, hdrs, &sink, &status, &retry_after);
		if (sink.over || sink.into_errno)
			break;
		again = rc != CURLE_OK ? curl_code_retryable(rc)
				       : retryable(status, resp->body.buf, resp->body.len,
						   r->retryable_ctx);
		if (again && attempt < max) {
			delay = pbx_http_backoff_ms(attempt, h->o.backoff_base_ms,
						    h->o.backoff_cap_ms, random01());
			if (delay < retry_after * 1000)
				delay = retry_after * 1000;
		}
		log_attempt(h, r, url, attempt, elapsed_ms(&t0), status, rc, &resp->body, delay);
		if (delay < 0)
			break;
		sleep_ms(delay);
	}
	curl_slist_free_all(hdrs);
	resp->attempts = attempt > max ? max : attempt;
	resp->status = status;
	resp->into_got = sink.into_got;
	if (sink.over) {
		pbx_buf_release(&resp->body);
		__atomic_add_fetch(&stat_failed, 1, __ATOMIC_RELAXED);
		return pbx_err_set(err, "%s %s %s: reply larger than %zu bytes", h->service,
				   r->method, url,
				   r->into       ? r->into_len
				   : r->max_body ? r->max_body
						 : h->o.max_body);
	}
	if (sink.into_errno) {
		__atomic_add_fetch(&stat_failed, 1, __ATOMIC_RELAXED);
		return pbx_err_set(err, "%s %s %s: cannot keep the reply%s%s", h->service,
				   r->method, url, sink.into_errno > 0 ? ": " : "",
				   sink.into_errno > 0 ? strerror(sink.into_errno) : "");
	}
	if (rc != CURLE_OK) {
		__atomic_add_fetch(&stat_failed, 1, __ATOMIC_RELAXED);
		return pbx_err_set(err, "%s %s %s: %s (after %d attempt%s)", h->service, r->method,
				   url, curl_easy_strerror(rc), resp->attempts,
				   resp->attempts == 1 ? "" : "s");
	}
	if (status >= 400)
		__atomic_add_fetch(&stat_failed, 1, __ATOMIC_RELAXED);
	return 0;
}

int pbx_http_do(struct pbx_http *h, const struct pbx_http_req *r, struct pbx_http_resp *resp,
		struct pbx_err *err)
{
	char *url = pbx_http_redact_url(r->url), why[256];
	int rc;
	pbx_buf_release(&resp->body);
	if (r->resp_headers)
		pbx_buf_release(r->resp_headers);
	resp->status = 0;
	resp->attempts = 0;
	if (!pbx_http_url_allowed(r->url, why, sizeof(why))) {
		rc = pbx_err_setc(err, PBX_EXIT_USAGE, "%s %s %s: refused: %s", h->service,
				  r->method, url, why);
		free(url);
		return rc;
	}
	pthread_mutex_lock(&h->mu);
	rc = do_locked(h, r, resp, url, err);
	pthread_mutex_unlock(&h->mu);
	free(url);
	return rc;
}

/* ------------------------------------------------------------ headers */

/* Appends the trimmed value of the header line [p, end) to out when its
 * name is `name`. */
static void header_line(const char *p, const char *end, const char *name, struct pbx_buf *out,
			int *found)
{
	size_t nl = strlen(name);
	const char *v;
	if ((size_t)(end - p) <= nl || p[nl] != ':' || strncasecmp(p, name, nl) != 0)
		return;
	v = p + nl + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		end--;
	if (*found)
		pbx_buf_adds(out, ", ");
	pbx_buf_add(out, v, (size_t)(end - v));
	*found = 1;
}

char *pbx_http_header(const struct pbx_buf *headers, const char *name)
{
	struct pbx_buf out = PBX_BUF_INIT;
	const char *p = headers->buf, *end = headers->buf + headers->len;
	int found = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;
		header_line(p, e, name, &out, &found);
		p = nl ? nl + 1 : end;
	}
	if (!found) {
		pbx_buf_release(&out);
		return NULL;
	}
	return pbx_buf_detach(&out, NULL);
}
