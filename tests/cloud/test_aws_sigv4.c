/*
 * test_aws_sigv4.c - pbx's SigV4 and form bodies against AWS's published
 * test vector and against botocore: every case aws_sigv4_cases.py wrote
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
