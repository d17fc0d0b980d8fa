/*
 * test_gce_auth.c - Compute Engine credentials against a loopback token
 * endpoint and metadata server (tests/http/server.py): the service-account
 * JWT (its RS256 signature verified here with the public key), the
 * authorized_user refresh grant, the lookup order, the token cache and its
 * renewal, refusal of a readable key file, a rejected key's message, and
 * that no secret reaches the request log or an error.
 *
 * usage: test_gce_auth SERVER.py
 */
#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cloud/gce/auth.h"
#include "cloud/provider.h"
#include "common/pyserver.h"
#include "common/tap.h"
#include "http/http.h"
#include "store/store.h"

static struct pyserver srv;
static char dir[] = "/tmp/pbx-test-gce-auth.XXXXXX";
static EVP_PKEY *key;
static char *key_pem;
static struct pbx_http *http;

static char *path_in(const char *name)
{
	static char p[4][512];
	static int i;
	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static void write_json(const char *path, json_t *v, mode_t mode)
{
	char *s = json_dumps(v, JSON_INDENT(2));
	FILE *f = fopen(path, "w");
	fputs(s, f);
	fclose(f);
	chmod(path, mode);
	free(s);
	json_decref(v);
}

static void make_key(void)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long n;
	key = EVP_RSA_gen(2048);
	PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL);
	n = BIO_get_mem_data(b, &data);
	key_pem = strndup(data, (size_t)n);
	BIO_free(b);
}

static void write_sa(const char *path, const char *token_query, mode_t mode)
{
	char uri[256];
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/token%s", srv.port, token_query);
	write_json(path,
		   json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "type", "service_account",
			     "project_id", "proj-1", "private_key_id", "kid-123", "private_key",
			     key_pem, "client_email", "sa@proj-1.iam.gserviceaccount.com",
			     "client_id", "1234", "token_uri", uri),
		   mode);
}

static void write_user(const char *path)
{
	char uri[256];
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/token", srv.port);
	write_json(path,
		   json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "authorized_user", "client_id",
			     "cid.apps.googleusercontent.com", "client_secret",
			     "USER-CLIENT-SECRET", "refresh_token", "1//REFRESH-SECRET",
			     "token_uri", uri),
		   0600);
}

/* The last form the token endpoint received (caller frees). */
static char *last_form(void)
{
	struct pbx_http_req r = { .method = "GET" };
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char u[128];
	json_t *v;
	char *s = NULL;
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/log?k=token", srv.port);
	r.url = u;
	if (pbx_http_do(http, &r, &resp, &err) == 0 &&
	    (v = json_loadb(resp.body.buf, resp.body.len, 0, NULL))) {
		s = strdup(json_string_value(json_array_get(v, json_array_size(v) - 1)));
		json_decref(v);
	}
	pbx_buf_release(&resp.body);
	return s;
}

/* The value of `name` in a form body, unescaped (caller frees). */
static char *form_get(const char *form, const char *name)
{
	size_t n = strlen(name);
	const char *p = form;
	while (p && *p) {
		if (!strncmp(p, name, n) && p[n] == '=') {
			int len = 0;
			size_t vl = strcspn(p + n + 1, "&");
			char *raw = strndup(p + n + 1, vl),
			     *v = curl_easy_unescape(NULL, raw, 0, &len), *r;
			r = strdup(v);
			curl_free(v);
			free(raw);
			return r;
		}
		p = strchr(p, '&');
		if (p)
			p++;
	}
	return NULL;
}

static unsigned char *b64url_decode(const char *s, size_t n, size_t *out_len)
{
	size_t padded = (n + 3) / 4 * 4, i;
	char *t = calloc(1, padded + 1);
	unsigned char *out = calloc(1, padded);
	int len;
	for (i = 0; i < padded; i++)
		t[i] = i < n ? (s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i]) : '=';
	len = EVP_DecodeBlock(out, (unsigned char *)t, (int)padded);
	free(t);
	*out_len = len < 0 ? 0 : (size_t)len - (padded - n);
	return out;
}

static json_t *jwt_part(const char *jwt, int idx)
{
	const char *p = jwt, *e;
	size_t n;
	unsigned char *d;
	json_t *v;
	while (idx-- > 0)
		p = strchr(p, '.') + 1;
	e = strchr(p, '.');
	d = b64url_decode(p, e ? (size_t)(e - p) : strlen(p), &n);
	v = json_loadb((char *)d, n, 0, NULL);
	free(d);
	return v;
}

static int jwt_verify(const char *jwt)
{
	const char *dot2 = strrchr(jwt, '.');
	size_t siglen;
	unsigned char *sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &siglen);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int ok = EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
		 EVP_DigestVerify(md, sig, siglen, (const unsigned char *)jwt,
				  (size_t)(dot2 - jwt)) == 1;
	EVP_MD_CTX_free(md);
	free(sig);
	return ok;
}

static void test_service_account(void)
{
	struct pbx_gce_auth *a = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *h1 = NULL, *h2 = NULL, *form, *jwt, *gt;
	json_t *hdr, *cl;
	char aud[128];

	write_sa(path_in("sa.json"), "", 0600);
	ok(pbx_gce_auth_open(path_in("sa.json"), http, &a, &err) == 0,
	   "service-account file read: %s", err.msg);
	if (!a)
		return;
	ok(strstr(pbx_gce_auth_source(a), "sa@proj-1.iam.gserviceaccount.com") != NULL,
	   "source names the account");
	is_str(pbx_gce_auth_project(a), "proj-1", "project_id read");
	ok(pbx_gce_auth_header(a, &h1, &err) == 0 && pbx_gce_auth_header(a, &h2, &err) == 0,
	   "header fetched: %s", err.msg);
	ok(h1 && !strncmp(h1, "Authorization: Bearer tok-", 26), "bearer header carries the token");
	ok(h1 && h2 && !strcmp(h1, h2) && pbx_gce_auth_fetches(a) == 1,
	   "token cached: one fetch for two headers");
	form = last_form();
	gt = form ? form_get(form, "grant_type") : NULL;
	is_str(gt, "urn:ietf:params:oauth:grant-type:jwt-bearer", "JWT bearer grant");
	jwt = form ? form_get(form, "assertion") : NULL;
	ok(jwt && jwt_verify(jwt), "the assertion's RS256 signature verifies with the public key");
	hdr = jwt ? jwt_part(jwt, 0) : NULL;
	cl = jwt ? jwt_part(jwt, 1) : NULL;
	is_str(json_string_value(json_object_get(hdr, "alg")), "RS256", "JWT alg RS256");
	is_str(json_string_value(json_object_get(hdr, "kid")), "kid-123",
	       "JWT kid = private_key_id");
	is_str(json_string_value(json_object_get(cl, "iss")), "sa@proj-1.iam.gserviceaccount.com",
	       "iss = client_email");
	snprintf(aud, sizeof(aud), "http://127.0.0.1:%d/token", srv.port);
	is_str(json_string_value(json_object_get(cl, "aud")), aud, "aud = token_uri");
	is_str(json_string_value(json_object_get(cl, "scope")), PBX_GCE_SCOPE, "compute scope");
	ok(json_integer_value(json_object_get(cl, "exp")) -
				   json_integer_value(json_object_get(cl, "iat")) ==
			   3600 &&
		   llabs(json_integer_value(json_object_get(cl, "iat")) - (long long)time(NULL)) <
			   60,
	   "iat is now, exp an hour later");
	if (jwt) {
		jwt[strlen(jwt) - 5] ^= 1;
		ok(!jwt_verify(jwt), "(a changed signature does not verify)");
	}
	json_decref(hdr);
	json_decref(cl);
	free(jwt);
	free(gt);
	free(form);
	pbx_gce_auth_free_header(h1);
	pbx_gce_auth_free_header(h2);
	pbx_gce_auth_close(a);
}

static void test_refresh_before_expiry(void)
{
	struct pbx_gce_auth *a = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *h1 = NULL, *h2 = NULL;
	struct timespec ts = { 1, 200000000 };
	write_sa(path_in("short.json"), "?expires_in=1", 0600);
	if (pbx_gce_auth_open(path_in("short.json"), http, &a, &err) < 0)
		return (void)ok(0, "open: %s", err.msg);
	pbx_gce_auth_header(a, &h1, &err);
	nanosleep(&ts, NULL);
	pbx_gce_auth_header(a, &h2, &err);
	ok(h1 && h2 && strcmp(h1, h2) && pbx_gce_auth_fetches(a) == 2,
	   "a token past its lifetime is fetched again (%u fetches)", pbx_gce_auth_fetches(a));
	pbx_gce_auth_free_header(h1);
	pbx_gce_auth_free_header(h2);
	pbx_gce_auth_invalidate(a);
	pbx_gce_auth_header(a, &h1, &err);
	ok(pbx_gce_auth_fetches(a) == 3, "invalidate (after a 401) forces a fetch");
	pbx_gce_auth_free_header(h1);
	pbx_gce_auth_close(a);
}

static void test_refused_and_rejected(void)
{
	struct pbx_gce_auth *a = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *h = NULL;

	write_sa(path_in("open.json"), "", 0644);
	ok(pbx_gce_auth_open(path_in("open.json"), http, &a, &err) < 0 &&
		   err.code == PBX_EXIT_SECURITY && strstr(err.msg, "chmod 600") &&
		   strstr(err.msg, "open.json"),
	   "a key file others can read is refused (exit 4): %s", err.msg);

	write_sa(path_in("wrong.json"), "?fail=1", 0600);
	ok(pbx_gce_auth_open(path_in("wrong.json"), http, &a, &err) == 0, "wrong key file read");
	ok(a && pbx_gce_auth_header(a, &h, &err) < 0 && !h, "a rejected key gets no token");
	ok(strstr(err.msg, "authentication failed") && strstr(err.msg, "Invalid JWT Signature") &&
		   strstr(err.msg, "sa@proj-1"),
	   "clear authentication error: %s", err.msg);
	ok(!strstr(err.msg, "BEGIN") && !strstr(err.msg, "assertion") && !strstr(err.msg, "eyJ"),
	   "the error quotes neither key nor assertion");
	pbx_gce_auth_close(a);
	a = NULL;

	write_json(path_in("bad.json"),
		   json_pack("{s:s, s:s}", "type", "service_account", "client_email", "x@y"), 0600);
	ok(pbx_gce_auth_open(path_in("bad.json"), http, &a, &err) < 0 &&
		   err.code == PBX_EXIT_USAGE &&
		   strstr(err.msg, "bad.json: field private_key: missing"),
	   "missing field named: %s", err.msg);
	write_json(path_in("type.json"), json_pack("{s:s}", "type", "external_account"), 0600);
	ok(pbx_gce_auth_open(path_in("type.json"), http, &a, &err) < 0 &&
		   strstr(err.msg, "type.json: field type: 'external_account' is not supported"),
	   "unknown type named: %s", err.msg);
	write_json(path_in("notrsa.json"),
		   json_pack("{s:s, s:s, s:s, s:s}", "type", "service_account", "client_email",
			     "x@y", "private_key",
			     "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
			     "token_uri", "http://127.0.0.1:1/token"),
		   0600);
	ok(pbx_gce_auth_open(path_in("notrsa.json"), http, &a, &err) == 0 &&
		   pbx_gce_auth_header(a, &h, &err) < 0 &&
		   strstr(err.msg, "not an RSA private key"),
	   "a broken private key is named: %s", err.msg);
	pbx_gce_auth_close(a);
}

/* A key file whose token_uri is plain http to a host that is not loopback
 * is refused when read, naming the file and the field, and sends nothing;
 * so is a GCE_METADATA_HOST elsewhere. */
static void test_plain_http_refused(void)
{
	/* hosts that never resolve (.invalid): a broken refusal sends nothing */
	static const char *const uris[] = { "http://oauth2.googleapis.invalid/token",
					    "http://token.example.invalid:8080/token",
					    "http://127.0.0.1.evil.invalid/token",
					    "ftp://127.0.0.1/token" };
	struct pbx_gce_auth *a = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t i;
	for (i = 0; i < sizeof(uris) / sizeof(uris[0]); i++) {
		write_json(path_in("http-sa.json"),
			   json_pack("{s:s, s:s, s:s, s:s}", "type", "service_account",
				     "client_email", "x@y", "private_key", key_pem, "token_uri",
				     uris[i]),
			   0600);
		ok(pbx_gce_auth_open(path_in("http-sa.json"), http, &a, &err) < 0 && !a &&
			   err.code == PBX_EXIT_USAGE &&
			   strstr(err.msg, "http-sa.json: field token_uri: "),
		   "service account token_uri %s refused: %s", uris[i], err.msg);
		write_json(path_in("http-user.json"),
			   json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "authorized_user",
				     "client_id", "c", "client_secret", "USER-CLIENT-SECRET",
				     "refresh_token", "1//REFRESH-SECRET", "token_uri", uris[i]),
			   0600);
		ok(pbx_gce_auth_open(path_in("http-user.json"), http, &a, &err) < 0 && !a &&
			   strstr(err.msg, "http-user.json: field token_uri: ") &&
			   !strstr(err.msg, "SECRET"),
		   "authorized_user token_uri %s refused: %s", uris[i], err.msg);
	}
	setenv("CLOUDSDK_CONFIG", path_in("empty"), 1);
	setenv("GCE_METADATA_HOST", "metadata.evil.invalid", 1);
	ok(pbx_gce_auth_open(NULL, http, &a, &err) < 0 && !a &&
		   strstr(err.msg, "GCE_METADATA_HOST: plain http:// to metadata.evil.invalid"),
	   "GCE_METADATA_HOST off loopback refused: %s", err.msg);
	unsetenv("GCE_METADATA_HOST");
	unsetenv("CLOUDSDK_CONFIG");
}

static void test_user_and_lookup(void)
{
	struct pbx_gce_auth *a = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	char *h = NULL, *form, *v;
	char md[64];

	write_user(path_in("adc/application_default_credentials.json"));
	write_sa(path_in("env.json"), "", 0600);

	setenv("GOOGLE_APPLICATION_CREDENTIALS", path_in("env.json"), 1);
	setenv("CLOUDSDK_CONFIG", path_in("adc"), 1);
	ok(pbx_gce_auth_open(NULL, http, &a, &err) == 0 &&
		   strstr(pbx_gce_auth_source(a), "env.json"),
	   "GOOGLE_APPLICATION_CREDENTIALS comes before the gcloud ADC file");
	pbx_gce_auth_close(a);
	ok(pbx_gce_auth_open(path_in("sa.json"), http, &a, &err) == 0 &&
		   strstr(pbx_gce_auth_source(a), "sa.json"),
	   "clouds.gce.credentials comes before GOOGLE_APPLICATION_CREDENTIALS");
	pbx_gce_auth_close(a);

	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	ok(pbx_gce_auth_open(NULL, http, &a, &err) == 0 &&
		   strstr(pbx_gce_auth_source(a), "user credentials") &&
		   pbx_gce_auth_header(a, &h, &err) == 0,
	   "the gcloud ADC file (authorized_user) gives a token: %s", err.msg);
	form = last_form();
	v = form ? form_get(form, "grant_type") : NULL;
	is_str(v, "refresh_token", "refresh-token grant");
	free(v);
	v = form ? form_get(form, "refresh_token") : NULL;
	is_str(v, "1//REFRESH-SECRET", "refresh_token sent (URL-encoded)");
	free(v);
	v = form ? form_get(form, "client_secret") : NULL;
	is_str(v, "USER-CLIENT-SECRET", "client_secret sent");
	free(v);
	free(form);
	pbx_gce_auth_free_header(h);
	pbx_gce_auth_close(a);

	setenv("CLOUDSDK_CONFIG", path_in("empty"), 1);
	snprintf(md, sizeof(md), "127.0.0.1:%d", srv.port);
	setenv("GCE_METADATA_HOST", md, 1);
	ok(pbx_gce_auth_open(NULL, http, &a, &err) == 0 &&
		   strstr(pbx_gce_auth_source(a), "metadata server") &&
		   pbx_gce_auth_header(a, &h, &err) == 0 && h && strstr(h, "Bearer md-"),
	   "no file: the metadata server's token (with Metadata-Flavor): %s", err.msg);
	pbx_gce_auth_free_header(h);
	pbx_gce_auth_close(a);
	unsetenv("GCE_METADATA_HOST");
	unsetenv("CLOUDSDK_CONFIG");
}

static int count(sqlite3 *db, const char *like)
{
	sqlite3_stmt *st;
	int n = -1;
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM events WHERE detail LIKE ?", -1, &st,
			       NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, like, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			n = sqlite3_column_int(st, 0);
	}
	sqlite3_finalize(st);
	return n;
}

int main(int argc, char **argv)
{
	struct pbx_http_opts o = { .service = "gce", .max_attempts = 2, .backoff_base_ms = 5 };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_store *st = NULL;
	sqlite3 *db;

	if (argc != 2 || !mkdtemp(dir))
		return 2;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	mkdir(path_in("adc"), 0700);
	mkdir(path_in("empty"), 0700);
	make_key();
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("GCE_METADATA_HOST");
	if (!ok(pyserver_start(&srv, argv[1], dir, NULL) == 0, "token server started") ||
	    pbx_http_open(&o, &http, &err) < 0 || pbx_store_open(path_in("pbx.db"), &st, &err) < 0)
		return tap_done();
	pbx_http_set_log(http, pbx_cloud_http_log, st, 0);
	test_service_account();
	test_refresh_before_expiry();
	test_refused_and_rejected();
	test_plain_http_refused();
	test_user_and_lookup();
	db = pbx_store_db(st);
	ok(count(db, "%/token%") >= 6, "token requests are in the request log (%d)",
	   count(db, "%/token%"));
	ok(count(db, "%tok-%") == 0 && count(db, "%md-%") == 0 && count(db, "%BEGIN%") == 0 &&
		   count(db, "%REFRESH-SECRET%") == 0 && count(db, "%USER-CLIENT-SECRET%") == 0 &&
		   count(db, "%eyJ%") == 0,
	   "no token, key, client secret, refresh token or assertion in the log");
	pbx_http_close(http);
	pbx_store_close(st);
	pyserver_stop(&srv);
	{
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", dir);
	}
	EVP_PKEY_free(key);
	free(key_pem);
	curl_global_cleanup();
	return tap_done();
}
