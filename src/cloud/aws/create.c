/*
 * create.c - create_begin of the aws provider: the image's root device,
 * the cluster's security group and key pair (access.c), then one
 * RunInstances per node kind (the head, each node group) for the nodes
 * without a live instance, each instance id recorded the moment EC2
 * accepts it.  A capacity error sends the same nodes to the next subnet of
 * clouds.aws.subnets; any other failure removes what this context made
 * (aws_clean_up, which the poll, poll.c, calls too): all or nothing.
 */
#include "cloud/aws/aws_internal.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/xalloc.h"

#define AWS_DISK_GB 50

/* The root device name of the template's image. */
static int aws_root_device(struct aws *a, char **dev, struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	int rc;
	aws_param(&p, "ImageId.1", "%s", a->s->t->image);
	rc = aws_call(a, "DescribeImages", &p, &r, NULL, err);
	aws_params_free(&p);
	*dev = NULL;
	if (rc == 0 && a->s->dry_run)
		*dev = xstrdup("/dev/xvda");
	else if (rc == 0 && !(*dev = aws_xml_text(r.buf, r.len, "rootDeviceName")))
		rc = pbx_err_setc(err, PBX_EXIT_USAGE,
				  "%s:%d: clusters.%s.image: no image %s in "
				  "region %s",
				  a->s->cfg->path, a->s->t->line, a->s->t->name, a->s->t->image,
				  a->region);
	pbx_buf_release(&r);
	return rc;
}

/* A ClientToken: the same on every retry of one RunInstances (the body is
 * sent unchanged), a new one for the next. */
static void client_token(const struct aws *a, char out[65])
{
	unsigned char b[12];
	char hex[25];
	if (RAND_bytes(b, sizeof(b)) != 1)
		memset(b, 0, sizeof(b));
	pbx_hex(b, sizeof(b), hex);
	snprintf(out, 65, "pbx-%.30s-%s", a->s->name, hex);
}

/* v[0..n) put in launch order (v[j] of amiLaunchIndex j), which is the
 * order of the nodes the launch was for; left as EC2 listed them unless
 * their indexes are exactly 0 to n - 1. */
static void aws_launch_order(struct pbx_instance *v, size_t n)
{
	struct pbx_instance *sorted;
	size_t i;
	if (!n) /* a dry run's, or a refused launch's: v may be NULL */
		return;
	sorted = xcalloc(n, sizeof(*sorted));
	for (i = 0; i < n; i++) {
		long j = v[i].launch_index;
		if (j < 0 || (size_t)j >= n || sorted[j].id) {
			free(sorted);
			return;
		}
		sorted[j] = v[i];
	}
	memcpy(v, sorted, n * sizeof(*v));
	free(sorted);
}

/* The tags that name each instance of a launch of nodes idx[0..k) of kind
 * grp (NULL = the head) by its node: pbx-node for the head, pbx-launch
 * for a group (launch.c).  NULL when the launch tag would be too long:
 * then the poll tags each instance (poll.c).  Caller frees with
 * launch_tags_free. */
static char **launch_tags(const struct pbx_node_group *grp, const struct pbx_node_row *nodes,
			  const size_t *idx, size_t k)
{
	char **tags = xcalloc(3, sizeof(*tags));
	const char **names;
	size_t i;
	if (!grp) {
		tags[0] = xstrdup(AWS_TAG_NODE);
		tags[1] = xstrdup(nodes[idx[0]].name);
		return tags;
	}
	names = xcalloc(k ? k : 1, sizeof(*names));
	for (i = 0; i < k; i++)
		names[i] = nodes[idx[i]].name;
	tags[1] = aws_launch_tag(grp->name, names, k);
	free(names);
	if (tags[1])
		tags[0] = xstrdup(AWS_TAG_LAUNCH);
	return tags;
}

static void launch_tags_free(char **tags)
{
	free(tags[0]);
	free(tags[1]);
	free(tags);
}

/* RunInstances for nodes idx[0..k) of kind grp (NULL = head) in subnet
 * (NULL = default VPC), MinCount from the template's min_nodes (the head
 * and a template without it: all or nothing); ids recorded, the nodes EC2
 * did not make marked PBX_NODE_NOT_CREATED.  *code gets EC2's error code. */
static int aws_run(struct aws *a, const char *subnet, const char *dev,
		   const struct pbx_node_group *grp, struct pbx_node_row *nodes, const size_t *idx,
		   size_t k, const struct pbx_create_hooks *h, char code[64], struct pbx_err *err)
{
	size_t min = pbx_cloud_min_count(a->s->t, grp, k);
	const struct pbx_cluster_template *t = a->s->t;
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	struct pbx_instance *v = NULL;
	size_t nv = 0, i;
	char tok[65], *next = NULL, *name = aws_res_name(a);
	char **tags = launch_tags(grp, nodes, idx, k);
	int rc;
	client_token(a, tok);
	aws_param(&p, "ImageId", "%s", t->image);
	aws_param(&p, "InstanceType", "%s",
		  grp                    ? grp->machine_type
		  : t->head_machine_type ? t->head_machine_type
					 : AWS_HEAD_TYPE);
	aws_param(&p, "MinCount", "%zu", min);
	aws_param(&p, "MaxCount", "%zu", k);
	aws_param(&p, "ClientToken", "%s", tok);
	aws_param(&p, "KeyName", "%s", a->key_name ? a->key_name : name);
	aws_param(&p, "SecurityGroupId.1", "%s", a->group_id);
	if (subnet)
		aws_param(&p, "SubnetId", "%s", subnet);
	aws_param(&p, "BlockDeviceMapping.1.DeviceName", "%s", dev);
	aws_param(&p, "BlockDeviceMapping.1.Ebs.VolumeSize", "%d",
		  a->s->cfg->aws.disk_gb ? a->s->cfg->aws.disk_gb : AWS_DISK_GB);
	aws_param(&p, "BlockDeviceMapping.1.Ebs.VolumeType", "gp3");
	aws_param(&p, "BlockDeviceMapping.1.Ebs.DeleteOnTermination", "true");
	aws_tag_spec(a, &p, 1, "instance", grp ? grp->name : "head", (const char *const *)tags);
	aws_tag_spec(a, &p, 2, "volume", grp ? grp->name : "head", NULL);
	launch_tags_free(tags);
	/* a shutdown on the machine (autostop) stops it, disk kept; a one-time
	 * Spot instance cannot be stopped, so it ends (it holds no results:
	 * they are on the head's disk) and the next start makes it again */
	aws_param(&p, "InstanceInitiatedShutdownBehavior", "%s",
		  grp && grp->spot ? "terminate" : "stop");
	if (grp && grp->spot) {
		aws_param(&p, "InstanceMarketOptions.MarketType", "spot");
		aws_param(&p, "InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time");
		aws_param(&p, "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior",
			  "terminate");
	}
	if (!grp && t->head_instance_profile) /* the head's own identity */
		aws_param(&p, "IamInstanceProfile.Name", "%s", t->head_instance_profile);
	if (!grp) {
		/* the head's host name is what slurm.conf calls the controller */
		char *ud = xasprintf("#cloud-config\nhostname: %s-head\n", a->s->name);
		size_t ul = strlen(ud);
		char *b64 = xcalloc(4 * ((ul + 2) / 3) + 1, 1);
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)ud, (int)ul);
		aws_param(&p, "UserData", "%s", b64);
		free(b64);
		free(ud);
	}
	aws_param(&p, "MetadataOptions.HttpTokens", "required");
	rc = aws_call(a, "RunInstances", &p, &r, code, err);
	aws_params_free(&p);
	free(name);
	if (rc == 0 && !a->s->dry_run)
		rc = aws_insts_parse(r.buf, r.len, &v, &nv, &next, err);
	aws_launch_order(v, nv);
	free(next);
	pbx_buf_release(&r);
	if (rc == 0 && !a->s->dry_run && (nv < min || nv > k))
		rc = pbx_err_set(err, "EC2 RunInstances made %zu instance%s, not %zu to %zu", nv,
				 nv == 1 ? "" : "s", min, k);
	for (i = 0; !a->s->dry_run && i < nv; i++) { /* whatever the outcome */
		a->made = xreallocarray(a->made, a->nmade + 1, sizeof(*a->made));
		a->made[a->nmade++] = xstrdup(v[i].id);
	}
	for (i = a->s->dry_run ? k : nv; rc == 0 && i < k; i++) {
		/* min_nodes: EC2 made fewer than MaxCount; a later start tries again */
		pbx_cloud_node_state(nodes, idx[i], PBX_NODE_NOT_CREATED,
				     "not created (quota or capacity)", h);
	}
	if (!a->s->dry_run)
		k = nv;
	for (i = 0; rc == 0 && i < k; i++) {
		char dry[32];
		snprintf(dry, sizeof(dry), "i-dry-run-%zu", idx[i]);
		pbx_cloud_node_created(nodes, idx[i], a->s->dry_run ? dry : v[i].id, tok,
				       subnet ? subnet : "", h);
	}
	pbx_instances_free(v, nv);
	return rc;
}

static int aws_capacity_code(const char *code)
{
	return !strcmp(code, "InsufficientInstanceCapacity") ||
	       !strcmp(code, "InsufficientHostCapacity") || !strcmp(code, "InsufficientCapacity");
}

/* The nodes of one kind, in subnets tried in order on a capacity error. */
static int aws_run_kind(struct aws *a, const char *dev, const struct pbx_node_group *grp,
			struct pbx_node_row *nodes, const size_t *idx, size_t m,
			const struct pbx_create_hooks *h, struct pbx_err *err)
{
	size_t s = 0;
	for (;;) {
		char code[64] = "";
		const char *subnet = a->nsubnets ? a->subnets[s] : NULL;
		if (aws_run(a, subnet, dev, grp, nodes, idx, m, h, code, err) == 0)
			return 0;
		if (!aws_capacity_code(code) || s + 1 >= a->nsubnets)
			return pbx_err_prefix(err, "creating %s", grp ? grp->name : "the head");
		pbx_store_event(a->s->store, a->s->id, "aws.capacity",
				"subnet %s has no capacity: trying %s", subnet, a->subnets[s + 1]);
		pbx_err_clear(err);
		s++;
	}
}

/* All or nothing: after a failed creation the instances this context made
 * go, and the group and key pair too when no other instance of the
 * cluster is left (a first start leaves nothing; extra nodes added to a
 * running cluster leave it as it was).  Nothing to do when nothing was
 * made (a refused credential, a bad image). */
void aws_clean_up(struct aws *a, struct pbx_err *err)
{
	struct pbx_err e2 = PBX_ERR_INIT;
	struct pbx_instance *v;
	size_t i;
	if (a->s->dry_run || (!a->touched && !a->nmade))
		return;
	v = xcalloc(a->nmade ? a->nmade : 1, sizeof(*v));
	for (i = 0; i < a->nmade; i++)
		v[i].id = xstrdup(a->made[i]);
	if (aws_destroy(a, v, a->nmade, &e2) == 0)
		pbx_err_prefix(err, "nothing was kept (all or nothing)");
	else
		pbx_err_prefix(err, "cleaning up failed too (%s); run 'pbx cluster stop %s'",
			       e2.msg, a->s->name);
	pbx_instances_free(v, a->nmade);
}

int aws_create_begin(void *ctx, struct pbx_node_row *nodes, size_t n,
		     const struct pbx_create_hooks *h, struct pbx_err *err)
{
	struct aws *a = ctx;
	const struct pbx_cluster_template *t = a->s->t;
	struct pbx_instance *have = NULL;
	size_t nhave = 0, *idx, k, i;
	char *dev = NULL;
	int rc;
	if (!a->s->uid)
		return pbx_err_set(err, "cluster %s: no cluster id, nothing is created",
				   a->s->name);
	idx = xcalloc(n ? n : 1, sizeof(*idx));
	rc = aws_root_device(a, &dev, err);
	if (rc == 0)
		rc = aws_group(a, err);
	if (rc == 0)
		rc = aws_key(a, err);
	if (rc == 0)
		rc = aws_describe(a, NULL, &have, &nhave, err);
	/* head (grp NULL), then each group: the nodes without a live instance */
	for (k = 0; rc == 0 && k <= t->ngroups; k++) {
		const struct pbx_node_group *grp = k == 0 ? NULL : &t->groups[k - 1];
		const struct pbx_instance *x;
		size_t m = 0;
		for (i = 0; i < n; i++) {
			x = aws_find(have, nhave, nodes[i].instance_id);
			if (pbx_cloud_node_of(t, &nodes[i], grp) &&
			    (!x || !strcmp(x->state, "shutting-down")))
				idx[m++] = i;
		}
		if (m)
			rc = aws_run_kind(a, dev, grp, nodes, idx, m, h, err);
	}
	free(idx);
	free(dev);
	pbx_instances_free(have, nhave);
	if (rc < 0)
		aws_clean_up(a, err);
	return rc;
}
