/*
 * test_aws_sigv4.c - pbx's SigV4 and form bodies against AWS's published
 * test vector, AWS's S3 GET example (query, extra headers, payload hash)
 * and against botocore: every case aws_sigv4_cases.py wrote
 * (hostile tag values, long filter lists, session tokens, ports) must give
 * the same body bytes and the same Authorization header.
 *
 *   test_aws_sigv4 CASES.json
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cloud/aws/aws.h"
#include "common/tap.h"

/* The AWS SigV4 test suite's post-x-www-form-urlencoded case. */
static void test_vector(void)
{
	struct aws_creds c = { "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", NULL,
			       "" };
	struct aws_sign_in in = { "POST",
				  "example.amazonaws.com",
				  "/",
				  "application/x-www-form-urlencoded",
				  "Param1=value1",
				  13,
				  "20150830T123600Z",
				  "us-east-1",
				  "service",
				  &c };
	struct pbx_buf creq = PBX_BUF_INIT, sts = PBX_BUF_INIT;
	char *auth = aws_sigv4_authorization(&in, &creq, &sts);
	is_str(creq.buf,
	       "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\n"
	       "host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
	       "content-type;host;x-amz-date\n"
	       "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
	       "test suite post-x-www-form-urlencoded: canonical request");
	ok(strstr(sts.buf, "42a5e5bb") != NULL, "its string to sign ends in the suite's digest");
	is_str(auth,
	       "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
	       "aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature="
	       "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
	       "test suite post-x-www-form-urlencoded: Authorization");
	free(auth);
	pbx_buf_release(&creq);
	pbx_buf_release(&sts);
}

/* AWS's S3 example of header-based SigV4 (Amazon S3 API reference,
 * "Signature calculations for the Authorization header", GET object):
 * GET /test.txt of examplebucket with Range: bytes=0-9, the empty
 * payload's hash as x-amz-content-sha256. */
static void test_s3_get_example(void)
{
	struct aws_creds c = { "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
			       NULL, "" };
	const char *hdrs[] = { "Range: bytes=0-9", NULL };
	struct aws_sign_in in = {
		.method = "GET",
		.host = "examplebucket.s3.amazonaws.com",
		.path = "/test.txt",
		.amz_date = "20130524T000000Z",
		.region = "us-east-1",
		.service = "s3",
		.creds = &c,
		.headers = hdrs,
		.payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	};
	struct pbx_buf creq = PBX_BUF_INIT;
	char *auth = aws_sigv4_authorization(&in, &creq, NULL);
	is_str(creq.buf,
	       "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
	       "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	       "\nx-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
	       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	       "S3 GET example: canonical request");
	is_str(auth,
	       "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
	       "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
	       "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
	       "S3 GET example: Authorization as documented");
	free(auth);
	pbx_buf_release(&creq);
}

/* The canonical query: keys and values encoded, sorted by encoded key;
 * a key without a value gets "="; headers of any case signed lower-cased
 * and sorted, repeated names joined. */
static void test_query_and_headers(void)
{
	const char *kv[] = { "prefix", "a b/c+d", "list-type", "2", "continuation-token",
			     "x/y=",   "acl",     "",          NULL };
	char *q = aws_canonical_query(kv);
	struct aws_creds c = { "AKID", "SECRET", "TOKEN", "" };
	const char *hdrs[] = { "X-Amz-Checksum-Mode:  ENABLED ", "If-None-Match: *",
			       "x-amz-meta-a: 1", "X-Amz-Meta-A: 2", NULL };
	struct aws_sign_in in = { .method = "PUT",
				  .host = "127.0.0.1:9000",
				  .path = "/b/dir/a b%.txt",
				  .amz_date = "20240101T000000Z",
				  .region = "us-east-1",
				  .service = "s3",
				  .creds = &c,
				  .query = kv,
				  .headers = hdrs,
				  .payload_hash = "UNSIGNED-PAYLOAD" };
	struct pbx_buf creq = PBX_BUF_INIT;
	char *auth;
	is_str(q, "acl=&continuation-token=x%2Fy%3D&list-type=2&prefix=a%20b%2Fc%2Bd",
	       "canonical query: encoded, sorted");
	free(q);
	q = aws_canonical_query(NULL);
	is_str(q, "", "no query: empty");
	free(q);
	auth = aws_sigv4_authorization(&in, &creq, NULL);
	is_str(creq.buf,
	       "PUT\n/b/dir/a%20b%25.txt\n"
	       "acl=&continuation-token=x%2Fy%3D&list-type=2&prefix=a%20b%2Fc%2Bd\n"
	       "host:127.0.0.1:9000\nif-none-match:*\nx-amz-checksum-mode:ENABLED\n"
	       "x-amz-content-sha256:UNSIGNED-PAYLOAD\nx-amz-date:20240101T000000Z\n"
	       "x-amz-meta-a:1,2\nx-amz-security-token:TOKEN\n\n"
	       "host;if-none-match;x-amz-checksum-mode;x-amz-content-sha256;x-amz-date;"
	       "x-amz-meta-a;x-amz-security-token\nUNSIGNED-PAYLOAD",
	       "S3 PUT: canonical request with query, headers and token");
	ok(auth && strstr(auth, "SignedHeaders=host;if-none-match;") && !strstr(auth, "SECRET") &&
		   !strstr(auth, "TOKEN"),
	   "its Authorization names the signed headers, not the secret or token");
	free(auth);
	pbx_buf_release(&creq);
}

static void test_case(json_t *c, size_t idx, int *hostile)
{
	struct aws_params p = { 0 };
	struct aws_creds cr = { 0 };
	json_t *params = json_object_get(c, "params"), *kv;
	const char *action = NULL;
	char *body, *auth;
	size_t i;
	json_array_foreach(params, i, kv)
	{
		const char *k = json_string_value(json_array_get(kv, 0));
		const char *v = json_string_value(json_array_get(kv, 1));
		if (!strcmp(k, "Action"))
			action = v;
		else if (strcmp(k, "Version") != 0)
			aws_param(&p, k, "%s", v);
		if (strpbrk(v, " +/=%~\"'\n") || strstr(v, "\xc3\xa9"))
			(*hostile)++;
	}
	cr.access_key = (char *)json_string_value(json_object_get(c, "access_key"));
	cr.secret_key = (char *)json_string_value(json_object_get(c, "secret_key"));
	cr.token = (char *)json_string_value(json_object_get(c, "token"));
	body = aws_form_body(action, &p);
	{
		struct aws_sign_in in = { "POST",
					  json_string_value(json_object_get(c, "host")),
					  "/",
					  "application/x-www-form-urlencoded; charset=utf-8",
					  body,
					  strlen(body),
					  json_string_value(json_object_get(c, "amz_date")),
					  json_string_value(json_object_get(c, "region")),
					  "ec2",
					  &cr };
		char name[96];
		auth = aws_sigv4_authorization(&in, NULL, NULL);
		snprintf(name, sizeof(name), "case %zu (%zu parameters%s): body as botocore's", idx,
			 p.n, cr.token ? ", session token" : "");
		is_str(body, json_string_value(json_object_get(c, "body")), name);
		snprintf(name, sizeof(name), "case %zu: Authorization as botocore's", idx);
		is_str(auth, json_string_value(json_object_get(c, "authorization")), name);
	}
	free(auth);
	free(body);
	aws_params_free(&p);
}

int main(int argc, char **argv)
{
	json_error_t je;
	json_t *cases, *c;
	size_t i;
	int hostile = 0;
	test_vector();
	test_s3_get_example();
	test_query_and_headers();
	if (argc < 2 || !(cases = json_load_file(argv[1], 0, &je))) {
		ok(0, "cases from aws_sigv4_cases.py: %s", argc < 2 ? "no file given" : je.text);
		return tap_done();
	}
	json_array_foreach(cases, i, c) test_case(c, i, &hostile);
	ok(json_array_size(cases) >= 50 && hostile > 100, "%zu botocore cases, %d hostile values",
	   json_array_size(cases), hostile);
	json_decref(cases);
	return tap_done();
}
