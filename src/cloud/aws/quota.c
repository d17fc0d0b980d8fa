/*
 * quota.c - EC2's vCPU quotas, which live in Service Quotas (service code
 * ec2), not in EC2's API: which quota counts an instance type's vCPUs
 * (one per instance family, on-demand and spot apart: docs/cloud-api.md,
 * "EC2 vCPU quotas"), and GetServiceQuota over JSON 1.1 (json11.c) with
 * its reply read by jansson (fuzzed: tests/fuzz/fuzz_aws_quota.c).
 */
#include "cloud/aws/aws.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

/* Each family's quotas, by the letters an instance type starts with
 * (before its generation's digit).  Families with quotas of their own
 * that are not listed (trn, dl, hpc, mac, u-, x, f) are not known. */
static const struct {
	const char *prefix;
	struct aws_vcpu_quota q;
} families[] = {
	{ "g", { "G and VT", "L-DB2E81BA", "L-3819A6DF" } },
	{ "gr", { "G and VT", "L-DB2E81BA", "L-3819A6DF" } },
	{ "vt", { "G and VT", "L-DB2E81BA", "L-3819A6DF" } },
	{ "p", { "P", "L-417A185B", "L-7212CCBC" } },
	{ "inf", { "Inf", "L-1945791B", "L-B5D1601B" } },
	{ "a", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "c", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "d", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "h", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "i", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "im", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "is", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "m", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "r", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "t", { "Standard", "L-1216C47A", "L-34B43A08" } },
	{ "z", { "Standard", "L-1216C47A", "L-34B43A08" } },
};

const struct aws_vcpu_quota *aws_vcpu_quota_of(const char *type)
{
	size_t k = type ? strspn(type, "abcdefghijklmnopqrstuvwxyz") : 0, i;
	if (!k || type[k] < '0' || type[k] > '9')
		return NULL;
	for (i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		if (strlen(families[i].prefix) == k && !strncmp(type, families[i].prefix, k))
			return &families[i].q;
	return NULL;
}

int aws_quota_parse(const char *json, size_t len, const char *code, double *value,
		    struct pbx_err *err)
{
	json_t *root = json_loadb(json ? json : "", json ? len : 0, 0, NULL);
	json_t *q = json_object_get(root, "Quota"), *v = json_object_get(q, "Value");
	const char *got = json_string_value(json_object_get(q, "QuotaCode"));
	int rc = 0;
	if (!json_is_object(q) || !got || strcmp(got, code) != 0)
		rc = pbx_err_set(err, "GetServiceQuota %s: the reply names no such quota", code);
	else if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
		rc = pbx_err_set(err,
				 "GetServiceQuota %s: the reply's Value is not a number of 0 "
				 "or more",
				 code);
	else
		*value = json_number_value(v);
	json_decref(root);
	return rc;
}

/* One operation (GetServiceQuota, GetAWSDefaultServiceQuota) for `code`:
 * 0 with *value, 1 when the reply is error `absent` (its text in msg),
 * -1 with err. */
static int quota_op(const struct aws_json_call *base, const char *op, const char *code,
		    const char *absent, double *value, struct pbx_err *err)
{
	struct aws_json_call c = *base;
	struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
	json_t *req = json_pack("{s:s, s:s}", "ServiceCode", "ec2", "QuotaCode", code);
	char *body = json_dumps(req, JSON_COMPACT), *target, msg[512];
	int rc;
	target = xasprintf("ServiceQuotasV20190624.%s", op);
	c.target = target;
	rc = aws_json_post(&c, body, &resp, err);
	if (rc == 0 && resp.status == 200) {
		rc = aws_quota_parse(resp.body.buf, resp.body.len, code, value, err);
	} else if (rc == 0) {
		aws_json_error(resp.body.buf, resp.body.len, msg, sizeof(msg));
		if (absent && !strncmp(msg, absent, strlen(absent)) && msg[strlen(absent)] == ':')
			rc = 1;
		else
			rc = pbx_err_set(err, "Service Quotas %s %s: HTTP %ld %s", op, code,
					 resp.status, msg);
	}
	pbx_buf_release(&resp.body);
	json_decref(req);
	free(body);
	free(target);
	return rc;
}

int aws_service_quota(const struct aws_json_call *c, const char *code, double *value,
		      struct pbx_err *err)
{
	int rc = quota_op(c, "GetServiceQuota", code, "NoSuchResourceException", value, err);
	if (rc == 1) /* the account's value is AWS's default */
		rc = quota_op(c, "GetAWSDefaultServiceQuota", code, NULL, value, err);
	return rc;
}
