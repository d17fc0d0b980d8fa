/*
 * aws.c - the `aws` provider: EC2 through the Query API (ec2.c), with the
 * clouds.aws section and a template.
 *
 *   open     region, endpoint, credentials (creds.c), an HTTP handle
 *            logging into the store
 *   plan     head + GROUPn nodes
 *   begin    the image's root device (DescribeImages); the cluster's
 *            security group (SSH from the template's ssh_from, everything
 *            inside the group) and key pair (ImportKeyPair of the login
 *            key) unless they exist; one RunInstances per node kind for
 *            the nodes without a live instance (MinCount = MaxCount: all
 *            or nothing, a ClientToken, TagSpecifications, the root volume,
 *            spot), each instance id recorded at once.  A capacity error
 *            sends the same nodes to the next subnet of clouds.aws.subnets;
 *            without one, or on a quota error, what this start made is
 *            removed (the group and key pair too when no instance of the
 *            cluster is left) and the message says why
 *   poll     DescribeInstances by tag (paged) until every node is running
 *            with an address (loopback only, against an API on loopback)
 *   list     instances, security group and key pair tagged pbx-cluster=NAME
 *            and pbx-cluster-id=ID (a survey, without an id: every one
 *            tagged NAME, with the id it carries); the group and key pair
 *            are named pbx-NAME-ID (aws_res_name)
 *   destroy  TerminateInstances, waits until they are gone; then, when no
 *            instance of the cluster is left, the group and the key pair
 *   images   CreateImage and the rest of `pbx image` (image.c)
 */
#include "cloud/aws/aws.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/xalloc.h"

#define AWS_DISK_GB           50
#define AWS_RUN_MAX           1000 /* instance ids per TerminateInstances */
#define AWS_WAIT_LIMIT_S      600
#define AWS_POLL_LIMIT        3000 /* create_poll calls (about 200 ms apart): 10 min */
#define AWS_DESCRIBE_EVERY_MS 1000
#define AWS_RESTART_GRACE_MS  90000 /* stopped -> pending takes seconds */
#define AWS_SEEN_GRACE \
	150 /* polls an accepted instance may be missing
				   from DescribeInstances (eventual consistency) */

static const char *const live_states[] = { "pending", "running",       "stopping",
					   "stopped", "shutting-down", NULL };

/* ---------------------------------------------------------------- open */

static int aws_configured(const struct pbx_config *cfg)
{
	return cfg->aws.region || cfg->aws.profile || cfg->aws.endpoint || cfg->aws.subnet;
}

static void aws_close(void *ctx)
{
	struct aws *a = ctx;
	size_t i;
	if (!a)
		return;
	pbx_http_close(a->http);
	aws_creds_free(&a->creds);
	for (i = 0; i < a->nsubnets; i++)
		free(a->subnets[i]);
	free(a->subnets);
	free(a->endpoint);
	free(a->host);
	free(a->region);
	free(a->user);
	free(a->key_path);
	free(a->pubkey);
	free(a->group_id);
	for (i = 0; i < a->nmade; i++)
		free(a->made[i]);
	free(a->made);
	free(a);
}

/* The Host header of the endpoint: host, with :port when one is given. */
static int aws_host(struct aws *a, struct pbx_err *err)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL;
	int rc = -1;
	if (u && curl_url_set(u, CURLUPART_URL, a->endpoint, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
		if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK && port)
			a->host = xasprintf("%s:%s", host, port);
		else
			a->host = xstrdup(host);
		rc = 0;
	}
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	if (rc < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: clouds.aws.endpoint: not a URL: %s",
				    a->s->cfg->path, a->endpoint);
	return 0;
}

static int aws_login_read(struct aws *a, struct pbx_err *err)
{
	const struct pbx_cluster_template *t = a->s->t;
	struct pbx_buf pub = PBX_BUF_INIT;
	char *path;
	if (!t)
		return 0;
	a->user = xstrdup(t->login_user ? t->login_user : "admin");
	if (!t->ssh_key)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "%s:%d: clusters.%s.ssh_key: required for "
				    "cloud aws (its .pub becomes the cluster's EC2 key pair)",
				    a->s->cfg->path, t->line, t->name);
	a->key_path = xstrdup(t->ssh_key);
	path = xasprintf("%s.pub", t->ssh_key);
	if (pbx_read_file(path, &pub, err) < 0) {
		free(path);
		return pbx_err_prefix(err, "the public half of clusters.%s.ssh_key", t->name);
	}
	free(path);
	pbx_buf_rtrim(&pub);
	if (!pub.len || strchr(pub.buf, '\n')) {
		pbx_buf_release(&pub);
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s.pub: not one public key line",
				    t->ssh_key);
	}
	a->pubkey = pbx_buf_detach(&pub, NULL);
	return 0;
}

static int aws_creds_open(struct aws *a, struct pbx_err *err)
{
	struct pbx_http_opts io = { .service = "aws-imds",
				    .connect_timeout_ms = 1000,
				    .timeout_ms = 2000,
				    .max_attempts = 1 };
	struct aws_creds_opts o = { a->s->cfg->aws.profile, NULL };
	int rc;
	if (pbx_http_open(&io, &o.http, err) < 0)
		return -1;
	rc = aws_creds_find(&o, &a->creds, err);
	pbx_http_close(o.http);
	return rc;
}

static int aws_open(const struct pbx_cluster_spec *s, void **out, struct pbx_err *err)
{
	const struct pbx_cloud_aws *c = &s->cfg->aws;
	struct pbx_http_opts ho = { .service = "ec2" };
	const char *first;
	struct aws *a;
	size_t k;

	*out = NULL;
	if (!s->t && !aws_configured(s->cfg))
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "clouds.aws is not configured");
	a = xcalloc(1, sizeof(*a));
	a->s = s;
	a->region = c->region ? xstrdup(c->region) : aws_region_find(c->profile);
	if (!a->region || !*a->region) {
		pbx_err_setc(err, PBX_EXIT_USAGE,
			     "%s: clouds.aws.region: required (nor is "
			     "AWS_REGION set or a region in the profile)",
			     s->cfg->path);
		goto fail;
	}
	a->endpoint = c->endpoint
			      ? xasprintf("%s%s", c->endpoint,
					  c->endpoint[strlen(c->endpoint) - 1] == '/' ? "" : "/")
			      : xasprintf("https://ec2.%s.amazonaws.com/", a->region);
	if (aws_host(a, err) < 0)
		goto fail;
	/* the template's subnet, else clouds.aws.subnet; then the fallbacks */
	first = s->t && s->t->subnet ? s->t->subnet : c->subnet;
	a->subnets = xcalloc(c->nsubnets + 2, sizeof(*a->subnets));
	if (first)
		a->subnets[a->nsubnets++] = xstrdup(first);
	for (k = 0; k < c->nsubnets; k++)
		if (!first || strcmp(c->subnets[k], first) != 0)
			a->subnets[a->nsubnets++] = xstrdup(c->subnets[k]);
	if (pbx_http_open(&ho, &a->http, err) < 0)
		goto fail;
	if (s->store && !s->dry_run)
		pbx_http_set_log(a->http, s->store, s->id);
	if (!s->dry_run && aws_creds_open(a, err) < 0)
		goto fail;
	if (aws_login_read(a, err) < 0)
		goto fail;
	*out = a;
	return 0;
fail:
	aws_close(a);
	return -1;
}

/* ---------------------------------------------------------------- plan */

static int aws_plan(void *ctx, struct pbx_node_row **nodes, size_t *n, struct pbx_err *err)
{
	struct aws *a = ctx;
	(void)err;
	pbx_cloud_plan(a->s, a->nsubnets ? a->subnets[0] : NULL, nodes, n);
	return 0;
}

/* ------------------------------------------------------------- helpers */

static void set_str(char **field, const char *value)
{
	free(*field);
	*field = value ? xstrdup(value) : NULL;
}

static void aws_record(const struct pbx_create_hooks *h, const struct pbx_node_row *node)
{
	if (h && h->record)
		h->record(h->ctx, node);
}

/*
 * The name of the cluster's security group and key pair, the one place
 * EC2 names are made: pbx-NAME-ID with the full cluster id (both names
 * may be 255 characters; key pair names are unique in the region, group
 * names in the VPC, so two pbx homes' clusters called NAME never share
 * one).  A legacy cluster's (see pbx_cluster_uid_legacy): pbx-NAME.
 * Caller frees.
 */
static char *aws_res_name(const struct aws *a)
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
 * Name, pbx-role for instances and volumes). */
static void tag_spec(const struct aws *a, struct aws_params *p, int n, const char *type,
		     const char *role)
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
		aws_param(p, k, "pbx-role");
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Value", n, m++);
		aws_param(p, k, "%s", role);
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Key", n, m);
		aws_param(p, k, "Name");
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Value", n, m);
		aws_param(p, k, "%s-%s", a->s->name, role);
	} else {
		char *name = aws_res_name(a);
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Key", n, m);
		aws_param(p, k, "Name");
		snprintf(k, sizeof(k), "TagSpecification.%d.Tag.%d.Value", n, m);
		aws_param(p, k, "%s", name);
		free(name);
	}
}

/* A simple call whose reply is not needed; codes in `ok` (NULL-terminated,
 * may be NULL) count as success. */
static int aws_do(struct aws *a, const char *action, struct aws_params *p, const char *const *ok,
		  struct pbx_buf *reply, struct pbx_err *err)
{
	struct pbx_buf r = PBX_BUF_INIT;
	char code[64];
	int rc = aws_call(a, action, p, reply ? reply : &r, code, err);
	if (rc < 0 && ok)
		for (; *ok; ok++)
			if (!strcmp(code, *ok)) {
				pbx_err_clear(err);
				rc = 0;
				break;
			}
	pbx_buf_release(&r);
	aws_params_free(p);
	return rc;
}

/* The instances of the cluster in `states` (NULL = live ones), every page. */
static int aws_describe(struct aws *a, const char *const *states, struct aws_inst **v, size_t *n,
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

static const struct aws_inst *aws_find(const struct aws_inst *v, size_t n, const char *id)
{
	size_t i;
	for (i = 0; id && i < n; i++)
		if (!strcmp(v[i].id, id))
			return &v[i];
	return NULL;
}

static void strs_free(char **v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The `field` of each item of the `set` list of `action`'s reply, filtered
 * by the cluster's tags; with `ids` (may be NULL) also each item's
 * pbx-cluster-id tag ("" when none), as many. */
static int aws_tagged_ids(struct aws *a, const char *action, const char *set, const char *field,
			  char ***v, size_t *n, char ***ids, struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	size_t nids = 0;
	int rc;
	*v = NULL;
	*n = 0;
	if (ids)
		*ids = NULL;
	filter_cluster(a, &p, 1);
	rc = aws_call(a, action, &p, &r, NULL, err);
	aws_params_free(&p);
	if (rc == 0 && !a->s->dry_run &&
	    (aws_xml_texts(r.buf, r.len, set, field, v, n) < 0 ||
	     (ids && aws_xml_texts(r.buf, r.len, set, "tag:" PBX_LABEL_CLUSTER_ID, ids, &nids) < 0)))
		rc = pbx_err_set(err, "EC2 %s: the reply is not XML", action);
	if (rc == 0 && ids && nids != *n)
		rc = pbx_err_set(err, "EC2 %s: an item without %s", action, field);
	if (rc < 0) { /* nothing to release */
		strs_free(*v, *n);
		*v = NULL;
		*n = 0;
		if (ids) {
			strs_free(*ids, nids);
			*ids = NULL;
		}
	}
	pbx_buf_release(&r);
	return rc;
}

static int aws_tagged(struct aws *a, const char *action, const char *set, const char *field,
		      char ***v, size_t *n, struct pbx_err *err)
{
	return aws_tagged_ids(a, action, set, field, v, n, NULL, err);
}

/* ------------------------------------------------------------- create */

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
static int aws_group(struct aws *a, struct pbx_err *err)
{
	static const char *const dup[] = { "InvalidPermission.Duplicate", NULL };
	const struct pbx_cluster_template *t = a->s->t;
	char **ids = NULL, *vpc = NULL, *name;
	size_t n = 0, i;
	struct aws_params p = { 0 };
	int rc = aws_tagged(a, "DescribeSecurityGroups", "securityGroupInfo", "groupId", &ids, &n,
			    err);
	if (rc == 0 && n) {
		set_str(&a->group_id, ids[0]);
	} else if (rc == 0) {
		struct pbx_buf r = PBX_BUF_INIT;
		rc = aws_vpc(a, &vpc, err);
		name = aws_res_name(a);
		aws_param(&p, "GroupName", "%s", name);
		aws_param(&p, "GroupDescription", "pbx cluster %s id %s", a->s->name, a->s->uid);
		if (vpc)
			aws_param(&p, "VpcId", "%s", vpc);
		tag_spec(a, &p, 1, "security-group", NULL);
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
	strs_free(ids, n);
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

/* The cluster's key pair: the login key imported unless there. */
static int aws_key(struct aws *a, struct pbx_err *err)
{
	static const char *const dup[] = { "InvalidKeyPair.Duplicate", NULL };
	char **names = NULL, *name = aws_res_name(a), *b64;
	size_t n = 0, len = strlen(a->pubkey);
	struct aws_params p = { 0 };
	int rc = aws_tagged(a, "DescribeKeyPairs", "keySet", "keyName", &names, &n, err);
	if (rc == 0 && !n) {
		b64 = xcalloc(4 * ((len + 2) / 3) + 1, 1);
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)a->pubkey, (int)len);
		aws_param(&p, "KeyName", "%s", name);
		aws_param(&p, "PublicKeyMaterial", "%s", b64);
		tag_spec(a, &p, 1, "key-pair", NULL);
		rc = aws_do(a, "ImportKeyPair", &p, dup, NULL, err);
		a->touched |= rc == 0;
		free(b64);
	}
	strs_free(names, n);
	free(name);
	return rc < 0 ? pbx_err_prefix(err, "key pair") : 0;
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

/* RunInstances for nodes idx[0..k) of kind grp (NULL = head) in subnet
 * (NULL = default VPC), MinCount from the template's min_nodes (the head
 * and a template without it: all or nothing); ids recorded, the nodes EC2
 * did not make marked PBX_NODE_NOT_CREATED.  *code gets EC2's error code. */
static int aws_run(struct aws *a, const char *subnet, const char *dev,
		   const struct pbx_node_group *grp, struct pbx_node_row *nodes, const size_t *idx,
		   size_t k, const struct pbx_create_hooks *h, char code[64], struct pbx_err *err)
{
	size_t slack = grp ? pbx_cloud_slack(a->s->t) : 0;
	size_t min = k > slack ? k - slack : 1;
	const struct pbx_cluster_template *t = a->s->t;
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	struct aws_inst *v = NULL;
	size_t nv = 0, i;
	char tok[65], *next = NULL, *name = aws_res_name(a);
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
	aws_param(&p, "KeyName", "%s", name);
	aws_param(&p, "SecurityGroupId.1", "%s", a->group_id);
	if (subnet)
		aws_param(&p, "SubnetId", "%s", subnet);
	aws_param(&p, "BlockDeviceMapping.1.DeviceName", "%s", dev);
	aws_param(&p, "BlockDeviceMapping.1.Ebs.VolumeSize", "%d",
		  a->s->cfg->aws.disk_gb ? a->s->cfg->aws.disk_gb : AWS_DISK_GB);
	aws_param(&p, "BlockDeviceMapping.1.Ebs.VolumeType", "gp3");
	aws_param(&p, "BlockDeviceMapping.1.Ebs.DeleteOnTermination", "true");
	tag_spec(a, &p, 1, "instance", grp ? grp->name : "head");
	tag_spec(a, &p, 2, "volume", grp ? grp->name : "head");
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
		set_str(&nodes[idx[i]].state, PBX_NODE_NOT_CREATED);
		aws_record(h, &nodes[idx[i]]);
		pbx_events_stage(h ? h->ev : NULL, idx[i], "not created (quota or capacity)");
	}
	if (!a->s->dry_run)
		k = nv;
	for (i = 0; rc == 0 && i < k; i++) {
		struct pbx_node_row *nd = &nodes[idx[i]];
		char dry[32];
		snprintf(dry, sizeof(dry), "i-dry-run-%zu", idx[i]);
		set_str(&nd->instance_id, a->s->dry_run ? dry : v[i].id);
		set_str(&nd->operation, tok);
		set_str(&nd->zone, subnet ? subnet : "");
		set_str(&nd->state, "creating");
		aws_record(h, nd);
		pbx_events_stage(h ? h->ev : NULL, idx[i], "created");
	}
	aws_insts_free(v, nv);
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

static int aws_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err);

/* All or nothing: after a failed creation the instances this context made
 * go, and the group and key pair too when no other instance of the
 * cluster is left (a first start leaves nothing; extra nodes added to a
 * running cluster leave it as it was).  Nothing to do when nothing was
 * made (a refused credential, a bad image). */
static void aws_clean_up(struct aws *a, struct pbx_err *err)
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

static int aws_create_begin(void *ctx, struct pbx_node_row *nodes, size_t n,
			    const struct pbx_create_hooks *h, struct pbx_err *err)
{
	struct aws *a = ctx;
	const struct pbx_cluster_template *t = a->s->t;
	struct aws_inst *have = NULL;
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
		const struct aws_inst *x;
		size_t m = 0;
		for (i = 0; i < n; i++) {
			int mine = grp ? !strcmp(nodes[i].role, "compute") &&
						   pbx_cloud_group_of(t, nodes[i].name) == grp
				       : !strcmp(nodes[i].role, "head");
			x = aws_find(have, nhave, nodes[i].instance_id);
			if (mine && (!x || !strcmp(x->state, "shutting-down")))
				idx[m++] = i;
		}
		if (m)
			rc = aws_run_kind(a, dev, grp, nodes, idx, m, h, err);
	}
	free(idx);
	free(dev);
	aws_insts_free(have, nhave);
	if (rc < 0)
		aws_clean_up(a, err);
	return rc;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The nodes whose instance is stopped (autostop, a shutdown on it,
 * StopInstances): one StartInstances for all of them, once per start;
 * their disks are as they were.  The poll then waits for `running` as
 * for a new instance, and takes the new public address EC2 gives. */
static int aws_start_stopped(struct aws *a, struct pbx_node_row *nodes, size_t n,
			     const struct aws_inst *have, size_t nhave,
			     const struct pbx_create_hooks *h, struct pbx_err *err)
{
	struct aws_params p = { 0 };
	size_t i, k = 0;
	char key[32];
	int rc;
	for (i = 0; i < n; i++) {
		const struct aws_inst *x = aws_find(have, nhave, nodes[i].instance_id);
		if (x && !strcmp(x->state, "stopped") && strcmp(nodes[i].state, "starting") != 0) {
			snprintf(key, sizeof(key), "InstanceId.%zu", ++k);
			aws_param(&p, key, "%s", x->id);
		}
	}
	if (!k)
		return 0;
	rc = aws_do(a, "StartInstances", &p, NULL, NULL, err);
	if (rc < 0)
		return pbx_err_prefix(err, "starting stopped instances");
	a->started_ms = now_ms();
	for (i = 0; i < n; i++) {
		const struct aws_inst *x = aws_find(have, nhave, nodes[i].instance_id);
		if (x && !strcmp(x->state, "stopped") && strcmp(nodes[i].state, "starting") != 0) {
			set_str(&nodes[i].state, "starting");
			aws_record(h, &nodes[i]);
			pbx_events_stage(h ? h->ev : NULL, i, "starting (was stopped)");
		}
	}
	return 0;
}

static int aws_create_poll(void *ctx, struct pbx_node_row *nodes, size_t n,
			   const struct pbx_create_hooks *h, struct pbx_err *err)
{
	static const char *const all[] = { "pending",       "running",    "stopping", "stopped",
					   "shutting-down", "terminated", NULL };
	struct aws *a = ctx;
	struct aws_inst *have = NULL;
	size_t nhave = 0, i, running = 0;
	int rc;
	if (a->s->dry_run)
		return 1;
	if (++a->polls > AWS_POLL_LIMIT)
		return pbx_err_set(err, "instances not running after %d s", AWS_POLL_LIMIT / 5);
	if (now_ms() - a->last_describe_ms < AWS_DESCRIBE_EVERY_MS)
		return 0;
	a->last_describe_ms = now_ms();
	if (aws_describe(a, all, &have, &nhave, err) < 0)
		return -1;
	if (aws_start_stopped(a, nodes, n, have, nhave, h, err) < 0) {
		aws_insts_free(have, nhave);
		return -1;
	}
	for (i = 0; i < n; i++) {
		const struct aws_inst *x = aws_find(have, nhave, nodes[i].instance_id);
		if (!strcmp(nodes[i].state, PBX_NODE_NOT_CREATED)) {
			running++; /* min_nodes let it go */
			continue;
		}
		if (!x && a->polls < AWS_SEEN_GRACE)
			continue;
		if (x && (!strcmp(x->state, "stopping") || !strcmp(x->state, "stopped"))) {
			/* started once it is stopped (aws_start_stopped); stopped
			 * again long after StartInstances: it powered itself off */
			if (!strcmp(nodes[i].state, "starting") && a->started_ms &&
			    now_ms() - a->started_ms > AWS_RESTART_GRACE_MS) {
				pbx_err_set(
					err,
					"instance %s of node %s is %s again after StartInstances%s%s",
					x->id, nodes[i].name, x->state, x->reason ? ": " : "",
					x->reason ? x->reason : "");
				aws_insts_free(have, nhave);
				aws_clean_up(a, err);
				return -1;
			}
			continue;
		}
		if (!x || !strcmp(x->state, "shutting-down") || !strcmp(x->state, "terminated")) {
			pbx_err_set(err, "instance %s of node %s is %s%s%s", nodes[i].instance_id,
				    nodes[i].name, x ? x->state : "gone",
				    x && x->reason ? ": " : "", x && x->reason ? x->reason : "");
			aws_insts_free(have, nhave);
			aws_clean_up(a, err);
			return -1;
		}
		if (strcmp(x->state, "running") != 0 || !x->private_ip)
			continue;
		rc = pbx_cloud_dial_allowed(a->endpoint, nodes, i, x->id, x->private_ip,
					    i == 0 ? x->public_ip : NULL, err);
		if (rc < 0) {
			aws_insts_free(have, nhave);
			return -1;
		}
		if (rc > 0)
			continue; /* once the head runs */
		if (strcmp(nodes[i].state, "running") != 0) {
			set_str(&nodes[i].address, x->private_ip);
			if (x->subnet)
				set_str(&nodes[i].zone, x->subnet);
			set_str(&nodes[i].public_address, i == 0 ? x->public_ip : NULL);
			set_str(&nodes[i].state, "running");
			aws_record(h, &nodes[i]);
			pbx_events_stage(h ? h->ev : NULL, i, "running");
		}
		running++;
	}
	aws_insts_free(have, nhave);
	return running == n;
}

/* ------------------------------------------------------ list / destroy */

#define AWS_SG  "SECURITY_GROUP"
#define AWS_KEY "KEY_PAIR"

/* Appends one resource (zone and cluster may be NULL; cluster "" = none;
 * stopped_at 0 but for a powered-off instance). */
static void inst_add(struct pbx_instance **v, size_t *n, const char *id, const char *zone,
		     const char *state, const char *cluster, int64_t stopped_at)
{
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	(*v)[*n].id = xstrdup(id);
	(*v)[*n].zone = zone ? xstrdup(zone) : NULL;
	(*v)[*n].state = xstrdup(state);
	(*v)[*n].cluster = cluster && *cluster ? xstrdup(cluster) : NULL;
	(*v)[*n].stopped_at = stopped_at;
	(*n)++;
}

static int aws_list(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	struct aws *a = ctx;
	struct aws_inst *have = NULL;
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
		inst_add(v, n, have[i].id, have[i].subnet, have[i].state, have[i].cluster,
			 have[i].stopped_at);
	for (i = 0; rc == 0 && i < nsg; i++)
		inst_add(v, n, sg[i], NULL, AWS_SG, sg_ids[i], 0);
	for (i = 0; rc == 0 && i < nkeys; i++)
		inst_add(v, n, keys[i], NULL, AWS_KEY, key_ids[i], 0);
	aws_insts_free(have, nhave);
	strs_free(sg, nsg);
	strs_free(sg_ids, sg_ids ? nsg : 0);
	strs_free(keys, nkeys);
	strs_free(key_ids, key_ids ? nkeys : 0);
	return rc;
}

static int is_res(const struct pbx_instance *x)
{
	return x->state && (!strcmp(x->state, AWS_SG) || !strcmp(x->state, AWS_KEY));
}

/* TerminateInstances of v[from..to)'s instances (at most AWS_RUN_MAX);
 * *code gets EC2's error code. */
static int aws_terminate_some(struct aws *a, const struct pbx_instance *v, size_t from, size_t to,
			      char code[64], struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	size_t i, m = 0;
	int rc = 0;
	for (i = from; i < to; i++) {
		char k[40];
		if (is_res(&v[i]))
			continue;
		snprintf(k, sizeof(k), "InstanceId.%zu", ++m);
		aws_param(&p, k, "%s", v[i].id);
	}
	if (m)
		rc = aws_call(a, "TerminateInstances", &p, &r, code, err);
	pbx_buf_release(&r);
	aws_params_free(&p);
	return rc;
}

/* TerminateInstances of v's instances, AWS_RUN_MAX a call.  One unknown id
 * fails the whole call (InvalidInstanceID.NotFound: an instance already
 * gone, e.g. one the store remembers): that batch is then sent one
 * instance at a time, an unknown one being done. */
static int aws_terminate(struct aws *a, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	static const char nf[] = "InvalidInstanceID.NotFound";
	size_t i, k;
	for (i = 0; i < n; i += AWS_RUN_MAX) {
		size_t to = n - i < AWS_RUN_MAX ? n : i + AWS_RUN_MAX;
		char code[64] = "";
		if (aws_terminate_some(a, v, i, to, code, err) == 0)
			continue;
		if (strcmp(code, nf) != 0)
			return -1;
		for (k = i; k < to; k++) {
			pbx_err_clear(err);
			if (aws_terminate_some(a, v, k, k + 1, code, err) < 0 &&
			    strcmp(code, nf) != 0)
				return -1;
		}
		pbx_err_clear(err);
	}
	return 0;
}

/* Waits until none of v's instances is live. */
static int aws_wait_gone(struct aws *a, const struct pbx_instance *v, size_t n, size_t *others,
			 struct pbx_err *err)
{
	struct timespec delay = { 0, 300 * 1000 * 1000 };
	time_t until = time(NULL) + AWS_WAIT_LIMIT_S;
	for (;;) {
		struct aws_inst *have = NULL;
		size_t nhave = 0, i, k, left = 0;
		const char *one = NULL;
		if (aws_describe(a, NULL, &have, &nhave, err) < 0)
			return -1;
		*others = 0;
		for (k = 0; k < nhave; k++) {
			for (i = 0; i < n && strcmp(v[i].id, have[k].id) != 0; i++)
				;
			if (i < n) {
				left++;
				one = v[i].id;
			} else {
				(*others)++;
			}
		}
		if (left && time(NULL) >= until) {
			pbx_err_set(err, "%zu instance%s still there after %d s (e.g. %s)", left,
				    left == 1 ? "" : "s", AWS_WAIT_LIMIT_S, one);
			aws_insts_free(have, nhave);
			return -1;
		}
		aws_insts_free(have, nhave);
		if (!left)
			return 0;
		nanosleep(&delay, NULL);
	}
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
static int aws_delete_own(struct aws *a, const struct pbx_instance *v, size_t n,
			  struct pbx_err *err)
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
	strs_free(sg, nsg);
	strs_free(keys, nkeys);
	return rc;
}

static int aws_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	struct aws *a = ctx;
	size_t others = 0;
	int rc;
	if (!a->s->uid)
		return pbx_err_set(err, "cluster %s: no cluster id, nothing is deleted",
				   a->s->name);
	rc = aws_terminate(a, v, n, err);
	if (rc == 0 && !a->s->dry_run)
		rc = aws_wait_gone(a, v, n, &others, err);
	/* a subset (resize -N) leaves the rest of the cluster standing */
	if (rc == 0 && !others)
		rc = aws_delete_own(a, v, n, err);
	return rc;
}

/* A resize's removal: the nodes' instances (those recorded), waiting
 * until they are gone; the group and key pair stay. */
static int aws_remove_nodes(void *ctx, const struct pbx_node_row *nodes, size_t n,
			    struct pbx_err *err)
{
	struct aws *a = ctx;
	struct pbx_instance *v = xcalloc(n ? n : 1, sizeof(*v));
	size_t i, m = 0, others = 0;
	int rc;
	for (i = 0; i < n; i++)
		if (nodes[i].instance_id && *nodes[i].instance_id)
			v[m++].id = xstrdup(nodes[i].instance_id);
	rc = aws_terminate(a, v, m, err);
	if (rc == 0 && m && !a->s->dry_run)
		rc = aws_wait_gone(a, v, m, &others, err);
	pbx_instances_free(v, m);
	return rc;
}

/* ------------------------------------------------------------- login */

static int aws_login(void *ctx, char **user, char **key_path, struct pbx_err *err)
{
	struct aws *a = ctx;
	(void)err;
	*user = xstrdup(a->user ? a->user : "admin");
	*key_path = a->key_path ? xstrdup(a->key_path) : NULL;
	return 0;
}

/* VMs: SLURM's defaults, daemons under systemd, NFS /shared from the head
 * (whose host name the head's user data sets). */
static int aws_layout(void *ctx, struct pbx_slurm_layout *l, struct pbx_err *err)
{
	struct aws *a = ctx;
	char *head = xasprintf("%s-head", a->s->name); /* as the user data sets it */
	(void)err;
	pbx_cloud_vm_layout(head, l);
	free(head);
	return 0;
}

const struct pbx_provider pbx_provider_aws = {
	.name = "aws",
	.open = aws_open,
	.close = aws_close,
	.plan = aws_plan,
	.create_begin = aws_create_begin,
	.create_poll = aws_create_poll,
	.list = aws_list,
	.destroy = aws_destroy,
	.remove_nodes = aws_remove_nodes,
	.login = aws_login,
	.layout = aws_layout,
	.images = &aws_image_ops,
};
