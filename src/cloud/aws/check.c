/*
 * check.c - `pbx config check --clouds` on EC2: one DescribeRegions of the
 * configured region (authenticated and signed: the credentials work, and
 * the region exists for the account).  EC2 keeps its instance limits in
 * Service Quotas (vCPUs per instance family, e.g. L-DB2E81BA for G and VT
 * instances), another API that pbx does not call: the check says so.
 */
#include "cloud/aws/aws.h"
#include "util/buf.h"

#include <stdio.h>
#include <string.h>

int aws_check(void *ctx, struct pbx_cloud_check *c, struct pbx_err *err)
{
	struct aws *a = ctx;
	struct aws_params p = { 0 };
	struct pbx_buf reply = PBX_BUF_INIT;
	int rc;
	snprintf(c->identity, sizeof(c->identity), "%s",
		 a->creds.source[0] ? a->creds.source : "(dry run)");
	snprintf(c->where, sizeof(c->where), "region %s", a->region);
	aws_param(&p, "RegionName.1", "%s", a->region);
	rc = aws_call(a, "DescribeRegions", &p, &reply, NULL, err);
	if (rc == 0 && !strstr(reply.buf ? reply.buf : "", "<regionName>"))
		rc = pbx_err_set(err, "DescribeRegions: region %s is not among the account's",
				 a->region);
	aws_params_free(&p);
	pbx_buf_release(&reply);
	snprintf(c->note, sizeof(c->note),
		 "instance limits live in Service Quotas (vCPUs per family, e.g. L-DB2E81BA "
		 "for G and VT GPU instances): see the console's Service Quotas page");
	return rc;
}
