/*
 * tags.c - how the aws provider marks a cluster's EC2 resources and finds
 * them again: the one place their names are made (aws_res_name), the
 * cluster's tags on what RunInstances, CreateSecurityGroup and
 * ImportKeyPair make (aws_tag_spec), and the calls that find what carries
 * them: the instances (aws_describe, every page) and the security groups
 * and key pairs (aws_tagged).  Creation, the poll, list and destroy all
 * go through here, so every one of them sees the same resources.
 */
#include "cloud/aws/aws_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static const char *const live_states[] = { "pending", "running",       "stopping",
					   "stopped", "shutting-down", NULL };

/*
 * The name of the cluster's security group and key pair, the one place
 * EC2 names are made: pbx-NAME-ID with the full cluster id (both names
 * may be 255 characters; key pair names are unique in the region, group
 * names in the VPC, so two pbx homes' clusters called NAME never share
 * one).  A legacy cluster's (see pbx_cluster_uid_legacy): pbx-NAME.
 * Caller frees.
 */
char *aws_res_name(const struct aws *a)
{
	const char *uid = a->s->uid;
	if (!uid || pbx_cluster_uid_legacy(uid))
		return xasprintf("pbx-%s", a->s->name);
	return xasprintf("pbx-%s-%s", a->s->name, uid);
}

/* Filter.N for the cluster's tags from N = first: pbx-cluster = NAME and
 * pbx-cluster-id = ID (a survey: the name only).  Returns the next N. */
static int filter_cluster(const struct aws *a, struct aws_params *p, int first)
{
	struct pbx_labels l;
	char k[64];
	size_t i;
	pbx_cluster_labels(a->s, &l);
	for (i = 0; i < l.n; i++, first++) {
		snprintf(k, sizeof(k), "Filter.%d.Name", first);
		aws_param(p, k, "tag:%s", l.keys[i]);
		snprintf(k, sizeof(k), "Filter.%d.Value.1", first);
		aws_param(p, k, "%s", l.values[i]);
	}
	return first;
}

/* TagSpecification.N for resource type `type`: the cluster's labels (and
 * Name, pbx-role for instances and volumes), then the pairs of `extra`. */
void aws_tag_spec(const struct aws *a, struct aws_params *p, int n, const char *type,
		  const char *role, const char *const *extra)
{
	struct pbx_labels l;
	char k[80];
	size_t i;
	int m = 1;
	pbx_cluster_labels(a->s, &l);
	snprintf(k, sizeof(k), "TagSpecification.%d.ResourceType", n);
	aws_param(p, k, "%s", type);
	for (i = 0; i < l.n; i++, m++) {
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Key", n, m);
		aws_param(p, k, "%s", l.keys[i]);
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Value", n, m);
		aws_param(p, k, "%s", l.values[i]);
	}
	if (role) {
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Key", n, m);
		aws_param(p, k, AWS_TAG_ROLE);
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Value", n, m++);
		aws_param(p, k, "%s", role);
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Key", n, m);
		aws_param(p, k, "Name");
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Value", n, m);
		aws_param(p, k, "%s-%s", a->s->name, role);
		m++;
	} else {
		char *name = aws_res_name(a);
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Key", n, m);
		aws_param(p, k, "Name");
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Value", n, m);
		aws_param(p, k, "%s", name);
		free(name);
		m++;
	}
	for (; extra && extra[0] && extra[1]; extra += 2, m++) {
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Key", n, m);
		aws_param(p, k, "%s", extra[0]);
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Value", n, m);
		aws_param(p, k, "%s", extra[1]);
	}
}

/* The instances of the cluster in `states` (NULL = live ones), every page. */
int aws_describe(struct aws *a, const char *const *states, struct pbx_instance **v, size_t *n,
		 struct pbx_err *err)
{
	char *token = NULL;
	int rc = 0;
	*v = NULL;
	*n = 0;
	if (!states)
		states = live_states;
	do {
		struct aws_params p = { 0 };
		struct pbx_buf r = PBX_BUF_INIT;
		size_t i;
		int f = filter_cluster(a, &p, 1);
		char k[40];
		snprintf(k, sizeof(k), "Filter.%d.Name", f);
		aws_param(&p, k, "instance-state-name");
		for (i = 0; states[i]; i++) {
			snprintf(k, sizeof(k), "Filter.%d.Value.%zu", f, i + 1);
			aws_param(&p, k, "%s", states[i]);
		}
		aws_param(&p, "MaxResults", "1000");
		if (token)
			aws_param(&p, "NextToken", "%s", token);
		free(token);
		token = NULL;
		rc = aws_call(a, "DescribeInstances", &p, &r, NULL, err);
		aws_params_free(&p);
		if (rc == 0 && !a->s->dry_run)
			rc = aws_insts_parse(r.buf, r.len, v, n, &token, err);
		pbx_buf_release(&r);
	} while (rc == 0 && token);
	free(token);
	return rc;
}

const struct pbx_instance *aws_find(const struct pbx_instance *v, size_t n, const char *id)
{
	size_t i;
	for (i = 0; id && i < n; i++)
		if (!strcmp(v[i].id, id))
			return &v[i];
	return NULL;
}

void aws_strs_free(char **v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The `field` of each item of the `set` list of `action`'s reply, filtered
 * by the cluster's tags (and with parameter `flag`=true when not NULL);
 * with `v2` (may be NULL) also each item's `field2`, as many. */
static int tagged(struct aws *a, const char *action, const char *flag, const char *set,
		  const char *field, const char *field2, char ***v, size_t *n, char ***v2,
		  struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	size_t n2 = 0;
	int rc;
	*v = NULL;
	*n = 0;
	if (v2)
		*v2 = NULL;
	filter_cluster(a, &p, 1);
	if (flag)
		aws_param(&p, flag, "true");
	rc = aws_call(a, action, &p, &r, NULL, err);
	aws_params_free(&p);
	if (rc == 0 && !a->s->dry_run &&
	    (aws_xml_texts(r.buf, r.len, set, field, v, n) < 0 ||
	     (v2 && aws_xml_texts(r.buf, r.len, set, field2, v2, &n2) < 0)))
		rc = pbx_err_set(err, "EC2 %s: the reply is not XML", action);
	if (rc == 0 && v2 && n2 != *n)
		rc = pbx_err_set(err, "EC2 %s: an item without %s", action, field2);
	if (rc < 0) { /* nothing to release */
		aws_strs_free(*v, *n);
		*v = NULL;
		*n = 0;
		if (v2) {
			aws_strs_free(*v2, n2);
			*v2 = NULL;
		}
	}
	pbx_buf_release(&r);
	return rc;
}

int aws_tagged_ids(struct aws *a, const char *action, const char *set, const char *field, char ***v,
		   size_t *n, char ***ids, struct pbx_err *err)
{
	return tagged(a, action, NULL, set, field, "tag:" PBX_LABEL_CLUSTER_ID, v, n, ids, err);
}

int aws_key_pairs(struct aws *a, char ***names, char ***keys, size_t *n, struct pbx_err *err)
{
	return tagged(a, "DescribeKeyPairs", "IncludePublicKey", "keySet", "keyName", "publicKey",
		      names, n, keys, err);
}

int aws_tagged(struct aws *a, const char *action, const char *set, const char *field, char ***v,
	       size_t *n, struct pbx_err *err)
{
	return aws_tagged_ids(a, action, set, field, v, n, NULL, err);
}
