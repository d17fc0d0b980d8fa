/*
 * test_objstore_unit.c - src/objstore without a store: URL parsing (good
 * URLs, bad buckets, "." and ".." prefixes), which object names are safe
 * as local paths (hostile ones), the CRC32C base64 form, the S3
 * ListObjectsV2 and GCS objects.list parsers, a large upload's part plan,
 * a large read's range plan and its replies' Content-Range,
 * the multipart replies (UploadId, a completion or the <Error> in its
 * 200), a resumable session's Range, and what src/http gained
 * for the stores: response headers (pbx_http_header, resp_headers), a
 * per-request body cap and a body written in place (into), against
 * tests/http/server.py.
 *
 *   test_objstore_unit SERVER.py
 */
#include <stdlib.h>
#include <string.h>

#include "common/pyserver.h"
#include "common/tap.h"
#include "objstore/objstore_internal.h"
#include "util/crc32c.h"

static void url_good(const char *url, const char *scheme, const char *bucket, const char *prefix)
{
	struct pbx_objstore_url u;
	struct pbx_err err = PBX_ERR_INIT;
	if (!ok(pbx_objstore_url_parse(url, &u, &err) == 0, "%s parses: %s", url, err.msg))
		return;
	ok(!strcmp(u.scheme, scheme) && !strcmp(u.bucket, bucket) && !strcmp(u.prefix, prefix),
	   "%s: %s, %s, '%s'", url, u.scheme, u.bucket, u.prefix);
	pbx_objstore_url_free(&u);
}

static void url_bad(const char *url)
{
	struct pbx_objstore_url u;
	struct pbx_err err = PBX_ERR_INIT;
	int rc = pbx_objstore_url_parse(url, &u, &err);
	ok(rc < 0 && err.code == PBX_EXIT_USAGE && u.bucket == NULL && !strpbrk(err.msg, "\n\x7f"),
	   "refused (usage), the message printable: %s", err.msg);
}

static void test_urls(void)
{
	url_good("gs://my-bucket", "gs", "my-bucket", "");
	url_good("gs://my-bucket/", "gs", "my-bucket", "");
	url_good("s3://b.c-d_e/runs/2024", "s3", "b.c-d_e", "runs/2024/");
	url_good("s3://abc/a/b/", "s3", "abc", "a/b/");
	url_good("gs://abc/..a/b..", "gs", "abc", "..a/b../");
	url_bad("http://bucket/x");
	url_bad("gs:/bucket");
	url_bad("gs://");
	url_bad("gs://ab");
	url_bad("gs://Bucket");
	url_bad("gs://-bucket");
	url_bad("gs://bucket-");
	url_bad("s3://buck et");
	url_bad("s3://bucket%2f");
	url_bad("s3://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	url_bad("gs://bucket/../x");
	url_bad("gs://bucket/a/../x");
	url_bad("gs://bucket/a/..");
	url_bad("gs://bucket/./x");
	url_bad("gs://bucket/a//b");
	url_bad("gs://bucket//");
	url_bad("gs://bucket/a\nb");
	url_bad("gs://bucket/a\x7f");
	url_bad(NULL);
}

static void test_names(void)
{
	static const char *good[] = { "a", "a/b/c.json", "..a", "a..", "a/.b", "é/ü", NULL };
	static const char *bad[] = { "",     "/etc/passwd", "..",    "../x",     "a/../b", "a/..",
				     ".",    "./a",         "a/./b", "a//b",     "a/",     "a\nb",
				     "a\tb", "a\x7f",       "a\x01", "\x1b[31m", NULL };
	char longname[1100];
	int i;
	for (i = 0; good[i]; i++)
		ok(pbx_objstore_name_safe(good[i]), "safe: '%s'", good[i]);
	for (i = 0; bad[i]; i++)
		ok(!pbx_objstore_name_safe(bad[i]), "unsafe: index %d", i);
	ok(!pbx_objstore_name_safe(NULL), "unsafe: NULL");
	memset(longname, 'a', sizeof(longname) - 1);
	longname[1024] = '\0';
	ok(pbx_objstore_name_safe(longname), "1024 bytes: safe");
	longname[1024] = 'a';
	longname[1025] = '\0';
	ok(!pbx_objstore_name_safe(longname), "1025 bytes: unsafe");
}

static void test_crc_b64(void)
{
	char b64[9];
	uint32_t c = 0;
	/* GCS's documented example: CRC32C of "hello world" is yZRlqg== */
	objstore_crc32c_b64(pbx_crc32c(0, "hello world", 11), b64);
	is_str(b64, "yZRlqg==", "CRC32C of 'hello world' as the stores write it");
	ok(objstore_crc32c_unb64("yZRlqg==", 8, &c) == 0 && c == 0xc99465aa, "and back: %08x", c);
	ok(objstore_crc32c_unb64("yZRlqg=", 7, &c) < 0, "7 characters refused");
	ok(objstore_crc32c_unb64("yZRlqgAA", 8, &c) < 0, "no padding refused");
	ok(objstore_crc32c_unb64("yZ!lqg==", 8, &c) < 0, "not base64 refused");
	ok(objstore_crc32c_unb64("yZRlqg==-2", 10, &c) < 0, "a composite checksum refused");
}

static const char s3_page1[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
	"<IsTruncated>true</IsTruncated>"
	"<Contents><Key>p/a &amp; b.txt</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
	"<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>12</Size>"
	"<StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>p/c</Key><ETag>\"abc-2\"</ETag><Size>0</Size></Contents>"
	"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
	"</ListBucketResult>";

static void s3_bad(const char *xml, const char *what)
{
	struct pbx_object *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	ok(objstore_s3_list_parse(xml, strlen(xml), &v, &n, &next, &err) < 0 && !next,
	   "S3: %s refused: %s", what, err.msg);
	pbx_objects_free(v, n);
}

static void test_s3_parse(void)
{
	struct pbx_object *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL, code[64];
	static const char last[] = "<ListBucketResult><IsTruncated>false</IsTruncated>"
				   "<Contents><Key>p/z</Key><Size>3</Size></Contents>"
				   "</ListBucketResult>";
	REQUIRE(objstore_s3_list_parse(s3_page1, strlen(s3_page1), &v, &n, &next, &err) == 0);
	REQUIRE(n == 2);
	is_str(v[0].name, "p/a & b.txt", "S3: key with an entity");
	ok(v[0].size == 12 && !v[0].has_crc32c, "S3: size 12, no CRC32C in a listing");
	is_str(v[0].version, "9b2cf535f27731c974343645a3985328", "S3: ETag without quotes");
	is_str(v[1].version, "abc-2", "S3: multipart ETag");
	is_str(next, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=", "S3: continuation token");
	free(next);
	ok(objstore_s3_list_parse(last, strlen(last), &v, &n, &next, &err) == 0 && n == 3 &&
		   !next && !strcmp(v[2].name, "p/z"),
	   "S3: a last page appends, no token");
	pbx_objects_free(v, n);
	s3_bad("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
	       "truncated without a token");
	s3_bad("<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
	       "an entry without a key");
	s3_bad("<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents>"
	       "</ListBucketResult>",
	       "a negative size");
	s3_bad("<ListBucketResult><Contents><Key>a</Key><Size>1x</Size></Contents>"
	       "</ListBucketResult>",
	       "a size that is not a number");
	s3_bad("<Error><Code>AccessDenied</Code></Error>", "an error document");
	s3_bad("<!DOCTYPE x [<!ENTITY e \"k\">]><ListBucketResult><Contents><Key>&e;</Key>"
	       "<Size>1</Size></Contents></ListBucketResult>",
	       "a DTD");
	s3_bad("not xml", "text");
	static const char slow[] = "<Error><Code>SlowDown</Code><Message>m</Message></Error>";
	ok(objstore_s3_error_code(slow, strlen(slow), code, sizeof(code)) == 0 &&
		   !strcmp(code, "SlowDown"),
	   "S3 error code read");
}

static void gcs_bad(const char *json, const char *what)
{
	struct pbx_object *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	ok(objstore_gcs_list_parse(json, strlen(json), &v, &n, &next, &err) < 0 && !next,
	   "GCS: %s refused: %s", what, err.msg);
	pbx_objects_free(v, n);
}

static void test_gcs_parse(void)
{
	static const char page[] =
		"{\"kind\":\"storage#objects\",\"nextPageToken\":\"CgNwL2I=\",\"items\":["
		"{\"name\":\"p/a\",\"size\":\"11\",\"generation\":\"1700000000000001\","
		"\"crc32c\":\"yZRlqg==\"},"
		"{\"name\":\"p/b\",\"size\":\"18446744073709551615\",\"generation\":\"2\"}]}";
	struct pbx_object *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	REQUIRE(objstore_gcs_list_parse(page, strlen(page), &v, &n, &next, &err) == 0);
	REQUIRE(n == 2);
	ok(!strcmp(v[0].name, "p/a") && v[0].size == 11 && v[0].has_crc32c &&
		   v[0].crc32c == 0xc99465aa && !strcmp(v[0].version, "1700000000000001"),
	   "GCS: name, size, generation, CRC32C");
	ok(v[1].size == UINT64_MAX && !v[1].has_crc32c, "GCS: largest size, no CRC32C");
	is_str(next, "CgNwL2I=", "GCS: page token");
	free(next);
	ok(objstore_gcs_list_parse("{}", 2, &v, &n, &next, &err) == 0 && n == 2 && !next,
	   "GCS: an empty page (no items) is fine");
	pbx_objects_free(v, n);
	gcs_bad("{\"items\":[{\"size\":\"1\"}]}", "an item without a name");
	gcs_bad("{\"items\":[{\"name\":\"a\",\"size\":1}]}", "a size that is a number");
	gcs_bad("{\"items\":[{\"name\":\"a\",\"size\":\"-1\"}]}", "a negative size");
	gcs_bad("{\"items\":{}}", "items not an array");
	gcs_bad("[]", "an array");
	gcs_bad("{\"items\":[", "cut JSON");
}

static void test_header_parse(void)
{
	struct pbx_buf h = PBX_BUF_INIT;
	char *v;
	pbx_buf_adds(&h,
		     "HTTP/1.1 200 OK\r\nX-Goog-Hash: crc32c=yZRlqg==\r\n"
		     "Content-Length: 11\r\nx-goog-hash:  md5=XrY7u+Ae7tCTyyK7j1rNww== \r\n\r\n");
	v = pbx_http_header(&h, "x-goog-hash");
	is_str(v, "crc32c=yZRlqg==, md5=XrY7u+Ae7tCTyyK7j1rNww==", "two header lines joined");
	free(v);
	v = pbx_http_header(&h, "content-length");
	is_str(v, "11", "a header, name in another case");
	free(v);
	ok(pbx_http_header(&h, "content") == NULL && pbx_http_header(&h, "etag") == NULL,
	   "no such header: NULL (a name's prefix does not match)");
	pbx_buf_release(&h);
}

/* A 2xx body written into the caller's place (a ranged read's), not
 * resp->body; more than its room fails; another status's body goes to
 * resp->body, for the error. */
static void test_http_into(struct pbx_http *h, struct pbx_http_req *r, struct pbx_http_resp *resp,
			   int port)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *place = calloc(1, 5001), url[128];
	const char *url0 = r->url;
	r->url = url;
	r->max_body = 0;
	r->into = place;
	r->into_len = 5000;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/big?n=5000", port);
	ok(pbx_http_do(h, r, resp, &err) == 0 && resp->into_got == 5000 && resp->body.len == 0 &&
		   place[0] == 'x' && place[4999] == 'x' && place[5000] == '\0',
	   "into: the 5000 bytes written in place, none in resp->body");
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/big?n=5001", port);
	ok(pbx_http_do(h, r, resp, &err) < 0 && strstr(err.msg, "larger than 5000"),
	   "into: a body past its room fails: %s", err.msg);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/autherr", port);
	ok(pbx_http_do(h, r, resp, &err) == 0 && resp->status == 401 && resp->into_got == 0 &&
		   strstr(resp->body.buf, "invalid_grant"),
	   "into: an error status's body goes to resp->body");
	r->into = NULL;
	r->into_len = 0;
	r->url = url0;
	free(place);
}

static void test_http_headers(const char *script)
{
	struct pyserver srv;
	struct pbx_http_opts o = { .service = "test", .max_attempts = 1 };
	struct pbx_http *h = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_buf hdrs = PBX_BUF_INIT;
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	char url[128], *v;
	struct pbx_http_req r = { .method = "GET", .url = url, .resp_headers = &hdrs };
	if (!ok(pyserver_start(&srv, script, "/tmp", NULL) == 0, "server.py started"))
		return;
	pbx_http_open(&o, &h, &err);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/echo", srv.port);
	ok(pbx_http_do(h, &r, &resp, &err) == 0 && resp.status == 200, "GET /echo: %s", err.msg);
	v = pbx_http_header(&hdrs, "Content-Type");
	is_str(v, "application/json", "resp_headers holds the response's headers");
	ok(!strncmp(hdrs.buf, "HTTP/1", 6), "status line first");
	free(v);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/big?n=5000", srv.port);
	r.max_body = 4096;
	ok(pbx_http_do(h, &r, &resp, &err) < 0 && strstr(err.msg, "larger than 4096"),
	   "a request's own body cap: %s", err.msg);
	r.max_body = 5000;
	ok(pbx_http_do(h, &r, &resp, &err) == 0 && resp.body.len == 5000,
	   "a cap of exactly the size passes");
	test_http_into(h, &r, &resp, srv.port);
	pbx_buf_release(&resp.body);
	pbx_buf_release(&hdrs);
	pbx_http_close(h);
	pyserver_stop(&srv);
}

static void plan_is(uint64_t len, uint64_t want, uint64_t min, uint64_t align, uint64_t max,
		    uint64_t part, uint64_t count, const char *what)
{
	struct objstore_plan p;
	objstore_part_plan(len, want, min, align, max, &p);
	ok(p.part == part && p.count == count, "plan: %s (part %llu, count %llu)", what,
	   (unsigned long long)p.part, (unsigned long long)p.count);
}

static void test_part_plan(void)
{
	const uint64_t M = 1 << 20, K = 1 << 10;
	plan_is(0, 64 * M, 5 * M, 1, 10000, 0, 1, "an empty object is one request");
	plan_is(64 * M, 64 * M, 5 * M, 1, 10000, 64 * M, 1, "exactly one part: one request");
	plan_is(64 * M + 1, 64 * M, 5 * M, 1, 10000, 64 * M, 2, "a byte more: two parts");
	plan_is(18 * M, 1 * M, 5 * M, 1, 10000, 5 * M, 4, "S3: raised to its 5 MiB minimum");
	plan_is(20 * M, 5 * M, 5 * M, 1, 10000, 5 * M, 4, "a whole number of parts");
	plan_is(100000 * M, 5 * M, 5 * M, 1, 10000, 10 * M, 10000, "S3: grown to fit 10,000 parts");
	plan_is(100000 * M + 1, 5 * M, 5 * M, 1, 10000, 10 * M + 1, 10000,
		"S3: grown by a byte when 10,000 parts do not hold it");
	plan_is(3 * M, 300 * K, 256 * K, 256 * K, 0, 256 * K, 12, "GCS: rounded down to 256 KiB");
	plan_is(3 * M, 100, 256 * K, 256 * K, 0, 256 * K, 12, "GCS: raised to 256 KiB");
	plan_is(100000 * M, 5 * M + 1, 256 * K, 256 * K, 0, 5 * M, 20000, "GCS: no part limit");
	setenv("PBX_OBJSTORE_PART_SIZE", "5242880", 1);
	ok(objstore_part_size() == 5 * M, "PBX_OBJSTORE_PART_SIZE read");
	setenv("PBX_OBJSTORE_PART_SIZE", "5M", 1);
	ok(objstore_part_size() == 64 * M, "PBX_OBJSTORE_PART_SIZE not a number: 64 MiB");
	setenv("PBX_OBJSTORE_PART_SIZE", "-1", 1);
	ok(objstore_part_size() == 64 * M, "PBX_OBJSTORE_PART_SIZE negative: 64 MiB");
	unsetenv("PBX_OBJSTORE_PART_SIZE");
	ok(objstore_part_size() == 64 * M, "default 64 MiB");
}

static void test_multipart_parse(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *id = NULL, code[64] = "";
	uint32_t crc = 0;
	int has = -1;
	static const char init[] =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?><InitiateMultipartUploadResult "
		"xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><Key>k</Key>"
		"<UploadId>VXBsb2FkIElE</UploadId></InitiateMultipartUploadResult>";
	static const char done[] = "<CompleteMultipartUploadResult><ETag>\"e-3\"</ETag>"
				   "<ChecksumCRC32C>yZRlqg==</ChecksumCRC32C>"
				   "<ChecksumType>FULL_OBJECT</ChecksumType>"
				   "</CompleteMultipartUploadResult>";
	static const char composite[] =
		"<CompleteMultipartUploadResult><ChecksumCRC32C>"
		"yZRlqg==-3</ChecksumCRC32C></CompleteMultipartUploadResult>";
	static const char failed[] =
		"<Error><Code>InternalError</Code><Message>m</Message></Error>";
	static const char empty[] = "<InitiateMultipartUploadResult><UploadId></UploadId>"
				    "</InitiateMultipartUploadResult>";
	REQUIRE(objstore_s3_upload_id_parse(init, strlen(init), &id, &err) == 0);
	is_str(id, "VXBsb2FkIElE", "UploadId read");
	free(id);
	ok(objstore_s3_upload_id_parse(empty, strlen(empty), &id, &err) < 0 && !id,
	   "an empty UploadId refused: %s", err.msg);
	ok(objstore_s3_upload_id_parse(failed, strlen(failed), &id, &err) < 0 && !id,
	   "an <Error> is no UploadId");
	ok(objstore_s3_complete_parse(done, strlen(done), &crc, &has, code, sizeof(code)) == 0 &&
		   has == 1 && crc == pbx_crc32c(0, "hello world", 11),
	   "completion read, with the whole object's CRC32C");
	ok(objstore_s3_complete_parse(composite, strlen(composite), &crc, &has, code,
				      sizeof(code)) == 0 &&
		   has == 0,
	   "a composite B64-N checksum is not the object's");
	ok(objstore_s3_complete_parse(failed, strlen(failed), &crc, &has, code, sizeof(code)) ==
			   1 &&
		   !strcmp(code, "InternalError"),
	   "a 200 carrying an <Error>: its code");
	ok(objstore_s3_complete_parse("not xml", 7, &crc, &has, code, sizeof(code)) == -1,
	   "anything else: -1");
}

static void test_gcs_range(void)
{
	uint64_t n = 7;
	ok(objstore_gcs_range_parse(NULL, &n) == 0 && n == 0, "no Range: the session holds 0");
	ok(objstore_gcs_range_parse("bytes=0-262143", &n) == 0 && n == 262144,
	   "bytes=0-262143: 262144 held");
	ok(objstore_gcs_range_parse("bytes=0-0", &n) == 0 && n == 1, "bytes=0-0: 1 held");
	ok(objstore_gcs_range_parse("bytes=1-5", &n) < 0, "a range not from 0 refused");
	ok(objstore_gcs_range_parse("bytes=0-", &n) < 0, "no end refused");
	ok(objstore_gcs_range_parse("bytes=0-12x", &n) < 0, "trailing bytes refused");
	ok(objstore_gcs_range_parse("bytes=0--1", &n) < 0, "a sign refused");
	ok(objstore_gcs_range_parse("bytes=0-18446744073709551615", &n) < 0, "overflow refused");
}

static void range_plan_cap_is(uint64_t len, uint64_t cap, uint64_t part, uint64_t count,
			      const char *what)
{
	struct objstore_plan p;
	objstore_range_plan(len, cap, &p);
	ok(p.part == part && p.count == count, "range plan: %s (part %llu, count %llu)", what,
	   (unsigned long long)p.part, (unsigned long long)p.count);
}

static void range_plan_is(uint64_t len, uint64_t part, uint64_t count, const char *what)
{
	range_plan_cap_is(len, 0, part, count, what);
}

/* A large read's ranges: 4 (OBJSTORE_STREAMS), of whole MiB but the
 * last, covering the object, or more of at most 256 MiB
 * (PBX_OBJSTORE_RANGE_PART); the threshold from the environment. */
static void test_range_plan(void)
{
	const uint64_t M = 1 << 20;
	range_plan_is(0, 0, 1, "an empty object: one request");
	range_plan_is(M, M, 1, "1 MiB: one range");
	range_plan_is(1000 * M, 250 * M, 4, "1,000 MiB: 4 ranges of 250 MiB");
	range_plan_is(1000 * M + 1, 251 * M, 4, "a byte more: 4 ranges of 251 MiB");
	range_plan_is(15 * M + 123457, 4 * M, 4, "15 MiB and a bit: 4 of 4 MiB, the last the rest");
	range_plan_is(4 * M + 1, 2 * M, 3, "4 MiB and a byte: 3 ranges of 2 MiB");
	range_plan_is(2 * M, M, 2, "2 MiB: 2 ranges of 1 MiB, none smaller");
	range_plan_is(1024 * M, 256 * M, 4, "1 GiB: 4 ranges of 256 MiB");
	range_plan_is(1024 * M + 1, 256 * M, 5, "a byte more: 256 MiB at most, a 5th of 1 byte");
	range_plan_is(10240 * M, 256 * M, 40, "10 GiB: 40 ranges of 256 MiB (4 at a time)");
	setenv("PBX_OBJSTORE_RANGE_PART", "3145728", 1);
	range_plan_is(15 * M + 123457, 3 * M, 6, "PBX_OBJSTORE_RANGE_PART 3 MiB: 6 ranges");
	setenv("PBX_OBJSTORE_RANGE_PART", "2621440", 1);
	range_plan_is(15 * M + 123457, 2 * M, 8, "2.5 MiB: rounded down to 2 MiB, 8 ranges");
	setenv("PBX_OBJSTORE_RANGE_PART", "1000", 1);
	range_plan_is(3 * M, M, 3, "under 1 MiB: 1 MiB, the least");
	unsetenv("PBX_OBJSTORE_RANGE_PART");
	range_plan_cap_is(1000 * M, OBJSTORE_READ_ALONG_PART, 16 * M, 63,
			  "read along: 1,000 MiB in 63 ranges of 16 MiB, the prefix kept close");
	range_plan_cap_is(40 * M, OBJSTORE_READ_ALONG_PART, 10 * M, 4,
			  "read along, 40 MiB: 4 of 10 MiB (under the cap, as without it)");
	setenv("PBX_OBJSTORE_RANGE_PART", "2097152", 1);
	range_plan_cap_is(15 * M, OBJSTORE_READ_ALONG_PART, 2 * M, 8,
			  "PBX_OBJSTORE_RANGE_PART below the cap bounds it too");
	unsetenv("PBX_OBJSTORE_RANGE_PART");
	setenv("PBX_OBJSTORE_RANGE_MIN", "4194304", 1);
	ok(pbx_objstore_range_min() == 4 * M, "PBX_OBJSTORE_RANGE_MIN read");
	setenv("PBX_OBJSTORE_RANGE_MIN", "4M", 1);
	ok(pbx_objstore_range_min() == 64 * M, "PBX_OBJSTORE_RANGE_MIN not a number: 64 MiB");
	unsetenv("PBX_OBJSTORE_RANGE_MIN");
	ok(pbx_objstore_range_min() == 64 * M, "range threshold default 64 MiB");
}

static void content_range_is(const char *v, int rc, uint64_t first, uint64_t last, uint64_t total)
{
	uint64_t f = 1, l = 1, t = 1;
	int got = objstore_content_range_parse(v, &f, &l, &t);
	ok(got == rc && (rc < 0 || (f == first && l == last && t == total)),
	   "Content-Range '%s': %s", v ? v : "(none)", rc == 0 ? "read" : "refused");
}

static void test_content_range(void)
{
	content_range_is("bytes 0-1048575/15851777", 0, 0, 1048575, 15851777);
	content_range_is("bytes 5-5/6", 0, 5, 5, 6);
	content_range_is("bytes 0-9/*", 0, 0, 9, UINT64_MAX);
	content_range_is(NULL, -1, 0, 0, 0);
	content_range_is("bytes */100", -1, 0, 0, 0);
	content_range_is("bytes 5-4/10", -1, 0, 0, 0);
	content_range_is("bytes 0-10/10", -1, 0, 0, 0);
	content_range_is("bytes -1-4/10", -1, 0, 0, 0);
	content_range_is("bytes 0-4/10x", -1, 0, 0, 0);
	content_range_is("items 0-4/10", -1, 0, 0, 0);
	content_range_is("bytes 0-18446744073709551616/*", -1, 0, 0, 0);
}

int main(int argc, char **argv)
{
	test_urls();
	test_names();
	test_crc_b64();
	test_s3_parse();
	test_gcs_parse();
	test_header_parse();
	test_part_plan();
	test_multipart_parse();
	test_gcs_range();
	test_range_plan();
	test_content_range();
	if (argc > 1)
		test_http_headers(argv[1]);
	else
		tap_skip("no server.py given");
	return tap_done();
}
