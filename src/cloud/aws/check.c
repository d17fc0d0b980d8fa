/*
 * check.c - `pbx config check --clouds` on EC2: one DescribeRegions of the
 * configured region (authenticated and signed: the credentials work, and
 * the region exists for the account), then the template's vCPU quotas.
 * EC2 counts running instances' vCPUs per instance family against quotas
 * kept in Service Quotas (quota.c: L-DB2E81BA for G and VT instances, a
 * spot quota apart): what the template needs (each node's type's vCPUs,
 * DescribeInstanceTypes), what runs already in the region
 * (DescribeInstances, pending and running) and each quota's value
 * (GetServiceQuota).
 */
#include "cloud/aws/aws.h"
#include "util/buf.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_TYPES_PER_CALL 100 /* DescribeInstanceTypes' most names */

/* The instance types whose vCPUs are asked, and their counts. */
struct check_types {
	char **names;
	int *vcpus; /* 0 until known */
	size_t n;
};

static void types_add(struct check_types *t, const char *name)
{
	size_t i;
	for (i = 0; name && i < t->n; i++)
		if (!strcmp(t->names[i], name))
			return;
	if (!name)
		return;
	t->names = xreallocarray(t->names, t->n + 1, sizeof(*t->names));
	t->vcpus = xreallocarray(t->vcpus, t->n + 1, sizeof(*t->vcpus));
	t->names[t->n] = xstrdup(name);
	t->vcpus[t->n++] = 0;
}

static int types_vcpus(const struct check_types *t, const char *name)
{
	size_t i;
	for (i = 0; name && i < t->n; i++)
		if (!strcmp(t->names[i], name))
			return t->vcpus[i];
	return 0;
}

static void types_free(struct check_types *t)
{
	size_t i;
	for (i = 0; i < t->n; i++)
		free(t->names[i]);
	free(t->names);
	free(t->vcpus);
}

/* Every pending or running instance of the region (every page). */
static int check_running(struct aws *a, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	char *token = NULL;
	int rc, pages = 0;
	do {
		struct aws_params p = { 0 };
		struct pbx_buf r = PBX_BUF_INIT;
		char *next = NULL;
		aws_param(&p, "Filter.1.Name", "instance-state-name");
		aws_param(&p, "Filter.1.Value.1", "pending");
		aws_param(&p, "Filter.1.Value.2", "running");
		aws_param(&p, "MaxResults", "1000");
		if (token)
			aws_param(&p, "NextToken", "%s", token);
		rc = aws_call(a, "DescribeInstances", &p, &r, NULL, err);
		if (rc == 0)
			rc = aws_insts_parse(r.buf, r.len, v, n, &next, err);
		aws_params_free(&p);
		pbx_buf_release(&r);
		free(token);
		token = next;
	} while (rc == 0 && token && ++pages < 100);
	free(token);
	return rc;
}

/* The vCPUs of each of t's types, CHECK_TYPES_PER_CALL a call; a type
 * EC2 does not know in the region fails naming it. */
static int check_vcpus(struct aws *a, struct check_types *t, struct pbx_err *err)
{
	size_t at, i, k;
	int rc = 0;
	for (at = 0; rc == 0 && at < t->n; at += CHECK_TYPES_PER_CALL) {
		struct aws_params p = { 0 };
		struct pbx_buf r = PBX_BUF_INIT;
		char code[64], **names = NULL;
		int *vcpus = NULL;
		size_t n = 0;
		for (i = at; i < t->n && i < at + CHECK_TYPES_PER_CALL; i++) {
			char key[32];
			snprintf(key, sizeof(key), "InstanceType.%zu", i - at + 1);
			aws_param(&p, key, "%s", t->names[i]);
		}
		rc = aws_call(a, "DescribeInstanceTypes", &p, &r, code, err);
		if (rc < 0 && !strcmp(code, "InvalidInstanceType"))
			pbx_err_prefix(err,
				       "an instance type of the template is not one of region %s",
				       a->region);
		if (rc == 0)
			rc = aws_vcpus_parse(r.buf, r.len, &names, &vcpus, &n, err);
		for (k = 0; k < n; k++) {
			for (i = 0; i < t->n; i++)
				if (!strcmp(t->names[i], names[k]))
					t->vcpus[i] = vcpus[k];
			free(names[k]);
		}
		free(names);
		free(vcpus);
		aws_params_free(&p);
		pbx_buf_release(&r);
	}
	return rc;
}

/* The entry of c for quota q (spot or on-demand), made when `make`; its
 * metric is "CODE (FAMILY[ spot] vCPUs)". */
static struct pbx_cloud_quota *check_entry(struct pbx_cloud_check *c,
					   const struct aws_vcpu_quota *q, int spot, int make)
{
	const char *code = spot ? q->spot : q->on_demand;
	size_t i, len = strlen(code);
	for (i = 0; i < c->nquotas; i++)
		if (!strncmp(c->quotas[i].metric, code, len) && c->quotas[i].metric[len] == ' ')
			return &c->quotas[i];
	if (!make || c->nquotas == PBX_CLOUD_CHECK_QUOTAS)
		return NULL;
	memset(&c->quotas[c->nquotas], 0, sizeof(c->quotas[0]));
	snprintf(c->quotas[c->nquotas].metric, sizeof(c->quotas[0].metric), "%s (%s%s vCPUs)", code,
		 q->family, spot ? " spot" : "");
	c->quotas[c->nquotas].limit = -1; /* not asked (yet) */
	return &c->quotas[c->nquotas++];
}

/* Adds `count` nodes of `type` to what the template needs; a family with
 * no known quota is noted. */
static void check_need(struct pbx_cloud_check *c, const struct check_types *t, const char *type,
		       int spot, size_t count)
{
	const struct aws_vcpu_quota *q = aws_vcpu_quota_of(type);
	struct pbx_cloud_quota *e = q ? check_entry(c, q, spot, 1) : NULL;
	if (e)
		e->need += (double)count * types_vcpus(t, type);
	else if (!q)
		snprintf(c->note, sizeof(c->note),
			 "pbx knows no vCPU quota of %s's family: check it in Service Quotas",
			 type);
}

/* Where Service Quotas is: the EC2 endpoint an emulator's configuration
 * names (it answers both), else the region's own.  Caller frees both. */
static void check_quota_api(const struct aws *a, char **base, char **host)
{
	if (a->s->cfg->aws.endpoint) {
		*base = xstrdup(a->endpoint);
		*host = xstrdup(a->host);
	} else {
		*base = xasprintf("https://servicequotas.%s.amazonaws.com/", a->region);
		*host = xasprintf("servicequotas.%s.amazonaws.com", a->region);
	}
}

/* Each entry's value from Service Quotas; a policy that does not allow
 * reading them is a note, not a failure. */
static int check_limits(struct aws *a, struct pbx_cloud_check *c, struct pbx_err *err)
{
	struct aws_json_call call = { a->http,   &a->creds,       NULL, NULL,
				      a->region, "servicequotas", NULL };
	char *base, *host;
	size_t i;
	int rc = 0;
	check_quota_api(a, &base, &host);
	call.base = base;
	call.host = host;
	for (i = 0; rc == 0 && i < c->nquotas; i++) {
		char code[16];
		snprintf(code, sizeof(code), "%.*s", (int)strcspn(c->quotas[i].metric, " "),
			 c->quotas[i].metric);
		rc = aws_service_quota(&call, code, &c->quotas[i].limit, err);
		if (rc < 0 && strstr(err->msg, "AccessDeniedException")) {
			snprintf(
				c->note, sizeof(c->note),
				"these credentials may not read Service Quotas "
				"(servicequotas:GetServiceQuota): the vCPU quotas are not checked");
			pbx_err_clear(err);
			for (i = 0; i < c->nquotas; i++)
				c->quotas[i].limit = -1;
			rc = 0;
			break;
		}
	}
	free(base);
	free(host);
	return rc;
}

/* The template's vCPU needs against its quotas, less what runs already. */
static int check_quotas(struct aws *a, const struct pbx_cluster_template *tp,
			struct pbx_cloud_check *c, struct pbx_err *err)
{
	const char *head = tp->head_machine_type ? tp->head_machine_type : AWS_HEAD_TYPE;
	struct check_types t = { 0 };
	struct pbx_instance *run = NULL;
	size_t nrun = 0, i;
	int rc = check_running(a, &run, &nrun, err);
	types_add(&t, head);
	for (i = 0; i < tp->ngroups; i++)
		types_add(&t, tp->groups[i].machine_type);
	for (i = 0; rc == 0 && i < nrun; i++)
		types_add(&t, run[i].type);
	if (rc == 0)
		rc = check_vcpus(a, &t, err);
	if (rc == 0) {
		check_need(c, &t, head, 0, 1);
		for (i = 0; i < tp->ngroups; i++)
			check_need(c, &t, tp->groups[i].machine_type, tp->groups[i].spot,
				   tp->groups[i].count);
		for (i = 0; i < nrun; i++) {
			const struct aws_vcpu_quota *q = aws_vcpu_quota_of(run[i].type);
			struct pbx_cloud_quota *e = q ? check_entry(c, q, run[i].spot, 0) : NULL;
			if (e)
				e->used += types_vcpus(&t, run[i].type);
		}
		rc = check_limits(a, c, err);
	}
	pbx_instances_free(run, nrun);
	types_free(&t);
	return rc;
}

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
	if (rc == 0 && a->s->t)
		rc = check_quotas(a, a->s->t, c, err);
	return rc;
}
