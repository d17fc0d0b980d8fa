/*
 * test_http.c - the HTTP layer against a scripted loopback server
 * (tests/http/server.py): connection reuse, timeouts, retries with the same
 * idempotency token, which statuses are retried, Retry-After, the body cap,
 * the request log without secrets, and the PBX_STATS counters.
 *
 * usage: test_http SERVER.py
 */
#include <curl/curl.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/pyserver.h"
#include "common/tap.h"
#include "http/http.h"
#include "store/store.h"

static struct pyserver srv;
static char base[64];

static char *url(const char *path)
{
	static char u[512];
	snprintf(u, sizeof(u), "%s%s", base, path);
	return u;
}

static struct pbx_http *open_http(int attempts, long timeout_ms)
{
	struct pbx_http_opts o = { .service = "test",
				   .max_attempts = attempts,
				   .backoff_base_ms = 5,
				   .backoff_cap_ms = 40,
				   .timeout_ms = timeout_ms,
				   .max_body = 1 << 20 };
	struct pbx_http *h = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_http_open(&o, &h, &err) < 0)
		printf("# %s\n", err.msg);
	return h;
}

/* GET/POST and return the parsed JSON reply (caller decrefs), or NULL. */
static json_t *call(struct pbx_http *h, const char *method, const char *path, const char *body,
		    const char *const *headers, long *status, int *attempts)
{
	struct pbx_http_req r = { .method = method,
				  .url = url(path),
				  .headers = headers,
				  .body = body,
				  .body_len = body ? strlen(body) : 0 };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	json_t *v = NULL;
	if (pbx_http_do(h, &r, &resp, &err) == 0)
		v = json_loadb(resp.body.buf, resp.body.len, 0, NULL);
	else
		printf("# %s\n", err.msg);
	if (status)
		*status = resp.status;
	if (attempts)
		*attempts = resp.attempts;
	pbx_buf_release(&resp.body);
	return v;
}

static void test_basic_and_reuse(void)
{
	struct pbx_http *h = open_http(3, 0);
	const char *hdrs[] = { "Content-Type: application/json", "X-Test: yes", NULL };
	long st = 0;
	json_t *a = call(h, "GET", "/echo", NULL, NULL, &st, NULL);
	json_t *b = call(h, "POST", "/echo?x=1", "{\"a\":1}", hdrs, &st, NULL);
	json_t *c = call(h, "DELETE", "/echo", NULL, NULL, &st, NULL);
	ok(a && b && c && st == 200, "GET, POST and DELETE answered 200");
	is_str(json_string_value(json_object_get(b, "method")), "POST", "POST sent as POST");
	is_str(json_string_value(json_object_get(b, "body")), "{\"a\":1}", "POST body arrived");
	is_str(json_string_value(json_object_get(json_object_get(b, "headers"), "x-test")), "yes",
	       "extra header arrived");
	ok(!json_object_get(json_object_get(b, "headers"), "expect"), "no Expect: 100-continue");
	is_str(json_string_value(json_object_get(c, "method")), "DELETE", "DELETE sent as DELETE");
	ok(a && b && c &&
		   json_integer_value(json_object_get(a, "peer_port")) ==
			   json_integer_value(json_object_get(b, "peer_port")) &&
		   json_integer_value(json_object_get(b, "peer_port")) ==
			   json_integer_value(json_object_get(c, "peer_port")),
	   "three requests on one handle share one connection (same client port)");
	json_decref(a);
	json_decref(b);
	json_decref(c);
	pbx_http_close(h);
}

/* Queries the server saw for key k, as a JSON array (caller decrefs). */
static json_t *seen(struct pbx_http *h, const char *k)
{
	char p[128];
	snprintf(p, sizeof(p), "/log?k=%s", k);
	return call(h, "GET", p, NULL, NULL, NULL, NULL);
}

static void test_retries(void)
{
	struct pbx_http *h = open_http(5, 0);
	struct pbx_http_stats s0, s1;
	long st = 0;
	int att = 0;
	json_t *v, *log;
	size_t i, same = 0;

	pbx_http_stats(&s0);
	v = call(h, "POST",
		 "/fail?k=r503&n=3&code=503&requestId=7d3c0f4e-1111-4a6b-9c3e-0123456789ab", "{}",
		 NULL, &st, &att);
	ok(st == 200 && att == 4, "three 503s then 200: 4 attempts, status 200 (got %ld, %d)", st,
	   att);
	log = seen(h, "r503");
	for (i = 0; i < json_array_size(log); i++)
		same += strstr(json_string_value(json_array_get(log, i)),
			       "requestId=7d3c0f4e-1111-4a6b-9c3e-0123456789ab") != NULL;
	ok(json_array_size(log) == 4 && same == 4,
	   "every attempt carried the same requestId (%zu of %zu)", same, json_array_size(log));
	pbx_http_stats(&s1);
	ok(s1.calls - s0.calls == 5 && s1.retries - s0.retries == 3,
	   "stats count 5 calls (4 + the log query) and 3 retries (got %lu, %lu)",
	   s1.calls - s0.calls, s1.retries - s0.retries);
	json_decref(v);
	json_decref(log);

	v = call(h, "GET", "/fail?k=r429&n=1&code=429", NULL, NULL, &st, &att);
	ok(st == 200 && att == 2, "429 is retried");
	json_decref(v);
	v = call(h, "GET", "/fail?k=r404&n=1&code=404", NULL, NULL, &st, &att);
	ok(st == 404 && att == 1, "404 is not retried (status %ld, %d attempts)", st, att);
	json_decref(v);
	v = call(h, "GET", "/fail?k=r403&n=1&code=403&reason=rateLimitExceeded", NULL, NULL, &st,
		 &att);
	ok(st == 403 && att == 1, "403 is not retried by the default classifier");
	json_decref(v);
	v = call(h, "GET", "/fail?k=rmax&n=9&code=503", NULL, NULL, &st, &att);
	ok(st == 503 && att == 5, "after max attempts the last 503 comes back (%ld, %d)", st, att);
	json_decref(v);
	{
		struct pbx_http_req r = { .method = "GET",
					  .url = url("/fail?k=rone&n=9&code=503"),
					  .max_attempts = 1 };
		struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
		struct pbx_err err = PBX_ERR_INIT;
		int rc = pbx_http_do(h, &r, &resp, &err);
		ok(rc == 0 && resp.status == 503 && resp.attempts == 1,
		   "a request's own max_attempts 1: sent once (%ld, %d)", resp.status,
		   resp.attempts);
		pbx_buf_release(&resp.body);
	}
	pbx_http_close(h);
	/* A fresh handle: on a reused connection libcurl itself retries once. */
	h = open_http(5, 0);
	v = call(h, "GET", "/drop?k=drop&n=2", NULL, NULL, &st, &att);
	ok(v && st == 200 && att == 3, "a connection closed without a reply is retried (%ld, %d)",
	   st, att);
	json_decref(v);
	pbx_http_close(h);
}

static int google_rate_limit(long status, const char *body, size_t len, void *ctx)
{
	(void)ctx;
	(void)len;
	return status == 403 && strstr(body, "rateLimitExceeded") != NULL;
}

static void test_classifier_and_retry_after(void)
{
	struct pbx_http *h = open_http(4, 0);
	struct pbx_http_req r = { .method = "GET", .url = NULL, .retryable = google_rate_limit };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	struct timespec t0, t1;
	char u[256];
	double secs;

	snprintf(u, sizeof(u), "%s/fail?k=cls&n=2&code=403&reason=rateLimitExceeded", base);
	r.url = u;
	ok(pbx_http_do(h, &r, &resp, &err) == 0 && resp.status == 200 && resp.attempts == 3,
	   "a classifier makes 403 rateLimitExceeded retryable");

	snprintf(u, sizeof(u), "%s/fail?k=ra&n=1&code=429&retry_after=1", base);
	r.url = u;
	r.retryable = NULL;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok(pbx_http_do(h, &r, &resp, &err) == 0 && resp.status == 200, "Retry-After answered");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ok(secs >= 0.95, "Retry-After: 1 waited at least 1 s (backoff cap is 40 ms; took %.2f s)",
	   secs);
	pbx_buf_release(&resp.body);
	pbx_http_close(h);
}

static void test_failures(void)
{
	struct pbx_http *h = open_http(2, 300);
	struct pbx_http_req r = { .method = "GET" };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char u[256];

	snprintf(u, sizeof(u), "%s/slow?ms=1500&access_token=TOPSECRET", base);
	r.url = u;
	ok(pbx_http_do(h, &r, &resp, &err) < 0 && resp.attempts == 2,
	   "a reply slower than the timeout fails after every attempt");
	ok(strstr(err.msg, "imeout") || strstr(err.msg, "timed out"), "error says timeout: %s",
	   err.msg);
	ok(!strstr(err.msg, "TOPSECRET") && strstr(err.msg, "access_token=REDACTED"),
	   "error names the URL without the token");

	snprintf(u, sizeof(u), "%s/big?n=2000000", base);
	r.url = u;
	ok(pbx_http_do(h, &r, &resp, &err) < 0 && strstr(err.msg, "larger than"),
	   "a body over the cap is refused: %s", err.msg);
	pbx_http_close(h);

	h = open_http(2, 300);
	r.url = "http://127.0.0.1:1/nothing";
	ok(pbx_http_do(h, &r, &resp, &err) < 0 && resp.attempts == 2,
	   "connection refused is retried, then reported: %s", err.msg);
	pbx_buf_release(&resp.body);
	pbx_http_close(h);
}

/* Credentials never go over plain http off loopback, and no redirect is
 * followed (a Location could downgrade to http or name another host). */
static void test_transport_policy(void)
{
	/* Sent through pbx_http_do: hosts that can never be reached (.invalid
	 * never resolves), so a broken policy still sends nothing anywhere;
	 * address literals and real hosts are judged without sending below. */
	static const char *const refused[] = { "http://compute.googleapis.invalid/compute/v1/",
					       "http://127.0.0.1.evil.invalid/", "ftp://127.0.0.1/",
					       "file:///etc/passwd" };
	struct pbx_http *h = open_http(1, 300);
	struct pbx_http_req r = { .method = "GET" };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char u[512], why[256];
	size_t i;
	json_t *v;
	long status;
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		r.url = refused[i];
		ok(pbx_http_do(h, &r, &resp, &err) < 0 && resp.attempts == 0 &&
			   err.code == PBX_EXIT_USAGE && strstr(err.msg, "refused"),
		   "%s: refused before sending: %s", refused[i], err.msg);
		ok(!pbx_http_url_allowed(refused[i], why, sizeof(why)) && why[0],
		   "pbx_http_url_allowed says no: %s", why);
	}
	ok(pbx_http_url_allowed("https://oauth2.googleapis.com/token", why, sizeof(why)) &&
		   !pbx_http_url_allowed("http://198.51.100.7:9/token", why, sizeof(why)) &&
		   !pbx_http_url_allowed("http://compute.googleapis.com/compute/v1/", why,
					 sizeof(why)) &&
		   pbx_http_url_allowed("http://[::1]:9/", why, sizeof(why)) &&
		   pbx_http_url_allowed("http://127.200.0.1/", why, sizeof(why)) &&
		   pbx_http_url_allowed("http://metadata.google.internal/x", why, sizeof(why)) &&
		   pbx_http_url_allowed("http://169.254.169.254/latest", why, sizeof(why)) &&
		   pbx_http_url_allowed("http://[fd00:ec2::254]/latest", why, sizeof(why)),
	   "https anywhere, http to loopback and the metadata servers");
	snprintf(u, sizeof(u), "/redirect?to=%s/echo%%3Fk%%3Dredir-target", base);
	v = call(h, "GET", u, NULL, NULL, &status, NULL);
	ok(status == 302, "a redirect is returned as is (%ld), not followed", status);
	json_decref(v);
	v = call(h, "GET", "/log?k=redir-target", NULL, NULL, &status, NULL);
	ok(json_is_array(v) && json_array_size(v) == 0, "its target was never asked");
	json_decref(v);
	pbx_buf_release(&resp.body);
	pbx_http_close(h);
}

static int count_rows(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int n = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

static int dump_row(void *ctx, int n, char **vals, char **names)
{
	(void)ctx;
	(void)names;
	if (n > 0)
		printf("# event: %s\n", vals[0]);
	return 0;
}

/* The request log into the store, as the clouds send it
 * (pbx_cloud_http_log). */
static void log_to_store(void *st, int64_t cluster_id, const char *line)
{
	pbx_store_event(st, cluster_id, "http", "%s", line);
}

static void test_log(const char *dir)
{
	struct pbx_http *h = open_http(2, 0);
	struct pbx_store *st = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char path[512];
	const char *hdrs[] = { "Authorization: Bearer ya29.SECRET-HEADER", NULL };
	json_t *v;
	long status;
	sqlite3 *db;

	snprintf(path, sizeof(path), "%s/pbx.db", dir);
	if (!ok(pbx_store_open(path, &st, &err) == 0, "store opened"))
		return;
	pbx_http_set_log(h, log_to_store, st, 0);
	v = call(h, "POST", "/autherr?access_token=SECRET-QUERY&alt=json", "assertion=SECRET-BODY",
		 hdrs, &status, NULL);
	json_decref(v);
	v = call(h, "GET", "/fail?k=logr&n=1&code=503", NULL, hdrs, &status, NULL);
	json_decref(v);
	db = pbx_store_db(st);
	ok(count_rows(db, "SELECT count(*) FROM events WHERE kind='http'") == 3,
	   "one http event per attempt (3)");
	if (getenv("TEST_HTTP_DUMP"))
		(void)sqlite3_exec(db, "SELECT detail FROM events", dump_row, NULL, NULL);
	ok(count_rows(db, "SELECT count(*) FROM events WHERE detail LIKE '%SECRET%'") == 0,
	   "no secret (header, query, request body, reply member) in the log");
	ok(count_rows(db, "SELECT count(*) FROM events WHERE detail LIKE "
			  "'%/autherr?access_token=REDACTED&alt=json -> 401%invalid_grant%'") == 1,
	   "the log names the redacted URL, the status and the error");
	ok(count_rows(db, "SELECT count(*) FROM events WHERE detail LIKE '%-> 503%retry in%'") == 1,
	   "a retried attempt is logged with its delay");
	pbx_http_close(h);
	pbx_store_close(st);
}

static void test_pure(void)
{
	char *u;
	char *j;
	int i, over = 0;
	long prev_bound = 0;
	for (i = 1; i <= 12; i++) {
		long hi = pbx_http_backoff_ms(i, 500, 32000, 0.999999);
		if (hi > 32000 || pbx_http_backoff_ms(i, 500, 32000, 0.0) != 0)
			over++;
		if (i <= 6 && hi < prev_bound)
			over++;
		prev_bound = hi;
	}
	ok(!over, "full jitter: delays in [0, min(cap, base*2^n)), growing");
	ok(pbx_http_backoff_ms(3, 500, 32000, 0.5) == 1000, "attempt 3, half-way: 1000 ms");
	u = pbx_http_redact_url(
		"https://u:pw@h.example/p?a=1&access_token=x&Key=y&code=z&b=2#frag");
	is_str(u, "https://h.example/p?a=1&access_token=REDACTED&Key=REDACTED&code=z&b=2",
	       "URL redaction: userinfo, fragment and secret parameters go");
	free(u);
	u = pbx_http_redact_url("https://h/upload/o?uploadType=resumable&upload_id=SESSION");
	is_str(u, "https://h/upload/o?uploadType=resumable&upload_id=REDACTED",
	       "a resumable session's upload_id is redacted");
	free(u);
	u = pbx_http_redact_url("https://h/p?x?access_token=SECRET&y=1");
	ok(u && !strstr(u, "SECRET"), "a token after a stray '?' in the query is redacted too: %s",
	   u);
	free(u);
	{
		const char *in = "{\"a\":{\"private_key\":\"-----BEGIN\"},\"b\":[1]}";
		j = pbx_http_redact_json(in, strlen(in), 200);
	}
	is_str(j, "{\"a\":{\"private_key\":\"REDACTED\"},\"b\":[1]}", "JSON redaction, nested");
	free(j);
	j = pbx_http_redact_json("<html>", 6, 200);
	is_str(j, "(6 bytes, not JSON)", "non-JSON body not logged");
	free(j);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/pbx-test-http.XXXXXX";
	if (argc != 2 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: test_http SERVER.py\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	test_pure();
	if (!ok(pyserver_start(&srv, argv[1], dir, NULL) == 0, "test server started"))
		return tap_done();
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", srv.port);
	test_basic_and_reuse();
	test_retries();
	test_classifier_and_retry_after();
	test_failures();
	test_transport_policy();
	test_log(dir);
	pyserver_stop(&srv);
	{
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", dir);
	}
	curl_global_cleanup();
	return tap_done();
}
