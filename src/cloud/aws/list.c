/*
 * list.c - list of the aws provider: the cluster's live instances and its
 * security group and key pair (access.c), all found by the cluster's tags
 * (tags.c); a survey (no cluster id) lists what is tagged with the name,
 * each with the id it carries.  The group and key pair are told apart by
 * their state, AWS_SG and AWS_KEY, which destroy (destroy.c) reads.
 * list_nodes: the instances alone, each with its addresses and the node
 * its pbx-node tag names (what the laptop's view learns from, awake.c).
 */
#include "cloud/aws/aws_internal.h"

#include <stddef.h>
#include <stdlib.h>

#include "util/xalloc.h"

/* The cluster id a resource carries: its tag, none when "". */
static const char *carried(const char *id)
{
	return id && *id ? id : NULL;
}

int aws_list(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	struct aws *a = ctx;
	struct pbx_instance *have = NULL;
	char **sg = NULL, **keys = NULL, **sg_ids = NULL, **key_ids = NULL;
	size_t nhave = 0, nsg = 0, nkeys = 0, i;
	int rc;
	*v = NULL;
	*n = 0;
	rc = aws_describe(a, NULL, &have, &nhave, err);
	if (rc == 0)
		rc = aws_tagged_ids(a, "DescribeSecurityGroups", "securityGroupInfo", "groupId",
				    &sg, &nsg, &sg_ids, err);
	if (rc == 0)
		rc = aws_tagged_ids(a, "DescribeKeyPairs", "keySet", "keyName", &keys, &nkeys,
				    &key_ids, err);
	for (i = 0; rc == 0 && i < nhave; i++)
		pbx_instances_add(v, n, have[i].id, have[i].subnet, have[i].state,
				  carried(have[i].cluster), have[i].stopped_at);
	for (i = 0; rc == 0 && i < nsg; i++)
		pbx_instances_add(v, n, sg[i], NULL, AWS_SG, carried(sg_ids[i]), 0);
	for (i = 0; rc == 0 && i < nkeys; i++)
		pbx_instances_add(v, n, keys[i], NULL, AWS_KEY, carried(key_ids[i]), 0);
	pbx_instances_free(have, nhave);
	aws_strs_free(sg, nsg);
	aws_strs_free(sg_ids, sg_ids ? nsg : 0);
	aws_strs_free(keys, nkeys);
	aws_strs_free(key_ids, key_ids ? nkeys : 0);
	return rc;
}

int aws_list_nodes(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	struct aws *a = ctx;
	struct pbx_instance *have = NULL;
	size_t nhave = 0, i;
	*v = NULL;
	*n = 0;
	if (aws_describe(a, NULL, &have, &nhave, err) < 0)
		return -1;
	for (i = 0; i < nhave; i++) {
		struct pbx_instance *x = &have[i];
		x->zone = x->subnet ? xstrdup(x->subnet) : NULL;
		if (!carried(x->cluster)) {
			free(x->cluster);
			x->cluster = NULL;
		}
		pbx_instance_check_addresses(x, a->endpoint);
	}
	*v = have;
	*n = nhave;
	return 0;
}
