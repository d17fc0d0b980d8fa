/*
 * access.c - the cluster's own resources on EC2 besides its instances,
 * which decide who reaches the nodes: its security group (SSH from the
 * template's ssh_from, everything from inside the group) and its key pair
 * (the login key's public half).  create_begin (create.c) finds or makes
 * both before the first RunInstances; destroy (destroy.c) deletes both
 * once no instance of the cluster is left.
 */
#include "cloud/aws/aws_internal.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/xalloc.h"

/* The VPC of the first subnet (NULL: the default VPC). */
static int aws_vpc(struct aws *a, char **vpc, struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	int rc;
	*vpc = NULL;
	if (!a->nsubnets)
		return 0;
	aws_param(&p, "SubnetId.1", "%s", a->subnets[0]);
	rc = aws_call(a, "DescribeSubnets", &p, &r, NULL, err);
	aws_params_free(&p);
	if (rc == 0 && !a->s->dry_run && !(*vpc = aws_xml_text(r.buf, r.len, "vpcId")))
		rc = pbx_err_set(err, "EC2 DescribeSubnets: subnet %s has no vpcId", a->subnets[0]);
	pbx_buf_release(&r);
	return rc;
}

/* The cluster's security group: found by tag, else made; its rules are
 * (re)authorized either way (a start killed between the two calls). */
int aws_group(struct aws *a, struct pbx_err *err)
{
	static const char *const dup[] = { "InvalidPermission.Duplicate", NULL };
	const struct pbx_cluster_template *t = a->s->t;
	char **ids = NULL, *vpc = NULL, *name;
	size_t n = 0, i;
	struct aws_params p = { 0 };
	int rc = aws_tagged(a, "DescribeSecurityGroups", "securityGroupInfo", "groupId", &ids, &n,
			    err);
	if (rc == 0 && n) {
		free(a->group_id);
		a->group_id = xstrdup(ids[0]);
	} else if (rc == 0) {
		struct pbx_buf r = PBX_BUF_INIT;
		rc = aws_vpc(a, &vpc, err);
		name = aws_res_name(a);
		aws_param(&p, "GroupName", "%s", name);
		aws_param(&p, "GroupDescription", "pbx cluster %s id %s", a->s->name, a->s->uid);
		if (vpc)
			aws_param(&p, "VpcId", "%s", vpc);
		aws_tag_spec(a, &p, 1, "security-group", NULL, NULL);
		if (rc == 0)
			rc = aws_call(a, "CreateSecurityGroup", &p, &r, NULL, err);
		aws_params_free(&p);
		if (rc == 0)
			a->group_id = a->s->dry_run ? xstrdup("sg-dry-run")
						    : aws_xml_text(r.buf, r.len, "groupId");
		if (rc == 0 && !a->group_id)
			rc = pbx_err_set(err, "EC2 CreateSecurityGroup: no groupId in the reply");
		a->touched |= rc == 0;
		pbx_buf_release(&r);
		free(name);
	}
	aws_strs_free(ids, n);
	free(vpc);
	if (rc < 0)
		return pbx_err_prefix(err, "security group");
	/* SSH from ssh_from; everything from inside the group */
	aws_param(&p, "GroupId", "%s", a->group_id);
	aws_param(&p, "IpPermissions.1.IpProtocol", "tcp");
	aws_param(&p, "IpPermissions.1.FromPort", "22");
	aws_param(&p, "IpPermissions.1.ToPort", "22");
	for (i = 0; i < (t->nssh_from ? t->nssh_from : 1); i++) {
		char k[64];
		snprintf(k, sizeof(k), "IpPermissions.1.IpRanges.%zu.CidrIp", i + 1);
		aws_param(&p, k, "%s", t->nssh_from ? t->ssh_from[i] : "0.0.0.0/0");
		snprintf(k, sizeof(k), "IpPermissions.1.IpRanges.%zu.Description", i + 1);
		aws_param(&p, k, "pbx: SSH to the head");
	}
	aws_param(&p, "IpPermissions.2.IpProtocol", "-1");
	aws_param(&p, "IpPermissions.2.Groups.1.GroupId", "%s", a->group_id);
	if (aws_do(a, "AuthorizeSecurityGroupIngress", &p, dup, NULL, err) < 0)
		return pbx_err_prefix(err, "security group %s", a->group_id);
	return 0;
}

/* The length of an OpenSSH public key's type and base64 words. */
static size_t key_words(const char *k)
{
	size_t i = strcspn(k, " \r\n");
	if (k[i] == ' ')
		i += 1 + strcspn(k + i + 1, " \r\n");
	return i;
}

/* Whether two OpenSSH public keys are the same key (the comment, which EC2
 * may not keep, aside). */
static int same_key(const char *x, const char *y)
{
	size_t n = key_words(x);
	return n && n == key_words(y) && !strncmp(x, y, n);
}

/* The name a new key pair of the cluster gets: aws_res_name for the first,
 * with the first 8 hex digits of the key's SHA-256 after it for another
 * (the head's own, docs/head-identity.md).  Caller frees. */
static char *key_pair_name(const struct aws *a, size_t existing)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char *base = aws_res_name(a), *name;
	if (!existing)
		return base;
	EVP_Digest(a->pubkey, strlen(a->pubkey), md, &mdlen, EVP_sha256(), NULL);
	name = xasprintf("%s-%02x%02x%02x%02x", base, md[0], md[1], md[2], md[3]);
	free(base);
	return name;
}

int aws_key(struct aws *a, struct pbx_err *err)
{
	static const char *const dup[] = { "InvalidKeyPair.Duplicate", NULL };
	char **names = NULL, **keys = NULL, *b64;
	size_t n = 0, i, len = strlen(a->pubkey);
	struct aws_params p = { 0 };
	int rc = aws_key_pairs(a, &names, &keys, &n, err);
	free(a->key_name);
	a->key_name = NULL;
	for (i = 0; rc == 0 && i < n && !a->key_name; i++)
		if (same_key(keys[i], a->pubkey))
			a->key_name = xstrdup(names[i]);
	if (rc == 0 && !a->key_name) {
		a->key_name = key_pair_name(a, n);
		b64 = xcalloc(4 * ((len + 2) / 3) + 1, 1);
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)a->pubkey, (int)len);
		aws_param(&p, "KeyName", "%s", a->key_name);
		aws_param(&p, "PublicKeyMaterial", "%s", b64);
		aws_tag_spec(a, &p, 1, "key-pair", NULL, NULL);
		rc = aws_do(a, "ImportKeyPair", &p, dup, NULL, err);
		a->touched |= rc == 0;
		free(b64);
	}
	aws_strs_free(names, n);
	aws_strs_free(keys, n);
	return rc < 0 ? pbx_err_prefix(err, "key pair") : 0;
}

static int has(char *const *v, size_t n, const char *s)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return 1;
	return 0;
}

/* The group and key pair, once no instance uses them any more (a group
 * still attached to a shutting-down instance: DependencyViolation,
 * retried). */
int aws_delete_own(struct aws *a, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	static const char *const gone_sg[] = { "InvalidGroup.NotFound", NULL };
	static const char *const gone_key[] = { "InvalidKeyPair.NotFound", NULL };
	char **sg = NULL, **keys = NULL;
	size_t nsg = 0, nkeys = 0, i;
	int rc = aws_tagged(a, "DescribeSecurityGroups", "securityGroupInfo", "groupId", &sg, &nsg,
			    err);
	if (rc == 0)
		rc = aws_tagged(a, "DescribeKeyPairs", "keySet", "keyName", &keys, &nkeys, err);
	for (i = 0; rc == 0 && i < n; i++) /* what the caller listed, too */
		if (has(sg, nsg, v[i].id) || has(keys, nkeys, v[i].id))
			continue;
		else if (v[i].state && !strcmp(v[i].state, AWS_SG)) {
			sg = xreallocarray(sg, nsg + 1, sizeof(*sg));
			sg[nsg++] = xstrdup(v[i].id);
		} else if (v[i].state && !strcmp(v[i].state, AWS_KEY)) {
			keys = xreallocarray(keys, nkeys + 1, sizeof(*keys));
			keys[nkeys++] = xstrdup(v[i].id);
		}
	for (i = 0; rc == 0 && i < nsg; i++) {
		time_t until = time(NULL) + AWS_WAIT_LIMIT_S;
		for (;;) {
			struct aws_params p = { 0 };
			char code[64];
			struct pbx_buf r = PBX_BUF_INIT;
			aws_param(&p, "GroupId", "%s", sg[i]);
			rc = aws_call(a, "DeleteSecurityGroup", &p, &r, code, err);
			aws_params_free(&p);
			pbx_buf_release(&r);
			if (rc < 0 && !strcmp(code, gone_sg[0])) {
				pbx_err_clear(err);
				rc = 0;
			}
			if (rc == 0 || strcmp(code, "DependencyViolation") != 0 ||
			    time(NULL) >= until)
				break;
			pbx_err_clear(err);
			sleep(2);
		}
	}
	for (i = 0; rc == 0 && i < nkeys; i++) {
		struct aws_params p = { 0 };
		aws_param(&p, "KeyName", "%s", keys[i]);
		rc = aws_do(a, "DeleteKeyPair", &p, gone_key, NULL, err);
	}
	aws_strs_free(sg, nsg);
	aws_strs_free(keys, nkeys);
	return rc;
}

/* The VPC instance `id` runs in (caller frees), or NULL with err set. */
static char *aws_instance_vpc(struct aws *a, const char *id, struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	char *vpc = NULL;
	aws_param(&p, "InstanceId.1", "%s", id);
	if (aws_call(a, "DescribeInstances", &p, &r, NULL, err) == 0 &&
	    !(vpc = aws_xml_text(r.buf, r.len, "vpcId")))
		pbx_err_set(err, "EC2 DescribeInstances: instance %s has no vpcId", id);
	aws_params_free(&p);
	pbx_buf_release(&r);
	return vpc;
}

/* The id of VPC `vpc`'s own group, "default" (caller frees), or NULL. */
static char *aws_default_group(struct aws *a, const char *vpc, struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	char *id = NULL;
	aws_param(&p, "Filter.1.Name", "vpc-id");
	aws_param(&p, "Filter.1.Value.1", "%s", vpc);
	aws_param(&p, "Filter.2.Name", "group-name");
	aws_param(&p, "Filter.2.Value.1", "default");
	if (aws_call(a, "DescribeSecurityGroups", &p, &r, NULL, err) == 0 &&
	    !(id = aws_xml_text(r.buf, r.len, "groupId")))
		pbx_err_set(err, "EC2: VPC %s has no default security group", vpc);
	aws_params_free(&p);
	pbx_buf_release(&r);
	return id;
}

int aws_leave_own(struct aws *a, const char *self, const struct pbx_instance *v, size_t n,
		  struct pbx_err *err)
{
	char *vpc = aws_instance_vpc(a, self, err), *dflt = NULL;
	int rc = vpc ? 0 : -1;
	if (rc == 0 && !(dflt = aws_default_group(a, vpc, err)))
		rc = -1;
	if (rc == 0) {
		struct aws_params p = { 0 };
		aws_param(&p, "InstanceId", "%s", self);
		aws_param(&p, "GroupId.1", "%s", dflt);
		rc = aws_do(a, "ModifyInstanceAttribute", &p, NULL, NULL, err);
	}
	if (rc == 0)
		rc = aws_delete_own(a, v, n, err);
	free(vpc);
	free(dflt);
	return rc;
}
