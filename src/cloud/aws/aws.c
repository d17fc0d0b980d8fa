/*
 * aws.c - the `aws` provider: EC2 through the Query API (ec2.c), with the
 * clouds.aws section and a template.  Here: its context (struct aws,
 * aws.h) opened and closed, the plan, the login and the SLURM layout, and
 * the provider's table; each other operation has a file of its own
 * (aws_internal.h lists them).
 *
 *   open     region, endpoint, credentials (creds.c), an HTTP handle
 *            logging into the store
 *   plan     head + GROUPn nodes
 *   begin    (create.c) the image's root device (DescribeImages); the
 *            cluster's security group (SSH from the template's ssh_from,
 *            everything inside the group) and key pair (ImportKeyPair of
 *            the login key) unless they exist (access.c); one RunInstances
 *            per node kind for the nodes without a live instance (MinCount
 *            = MaxCount: all or nothing, a ClientToken, TagSpecifications
 *            that name each instance's node (launch.c), the root volume,
 *            spot), each instance id recorded at once.  A
 *            capacity error sends the same nodes to the next subnet of
 *            clouds.aws.subnets; without one, or on a quota error, what this
 *            start made is removed (the group and key pair too when no
 *            instance of the cluster is left) and the message says why
 *   poll     (poll.c) DescribeInstances by tag (paged) until every node is
 *            running with an address (loopback only, against an API on
 *            loopback); with power saving, an instance whose tags name
 *            no node gets pbx-node=NODE (CreateTags, one per instance)
 *   list     (list.c) instances, security group and key pair tagged
 *            pbx-cluster=NAME and pbx-cluster-id=ID (a survey, without an
 *            id: every one tagged NAME, with the id it carries); the group
 *            and key pair are named pbx-NAME-ID (aws_res_name, tags.c)
 *   destroy  (destroy.c) TerminateInstances, waits until they are gone;
 *            then, when no instance of the cluster is left, the group and
 *            the key pair
 *   images   CreateImage and the rest of `pbx image` (image.c)
 */
#include "cloud/aws/aws_internal.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

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
	free(a->key_name);
	free(a->group_id);
	for (i = 0; i < a->nmade; i++)
		free(a->made[i]);
	free(a->made);
	for (i = 0; i < a->ntagged; i++)
		free(a->tagged[i]);
	free(a->tagged);
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
		pbx_http_set_log(a->http, pbx_cloud_http_log, s->store, s->id);
	if (!s->dry_run && aws_creds_open(a, err) < 0)
		goto fail;
	if (pbx_cloud_login_read(s, "admin",
				 "cloud aws (its .pub becomes the cluster's EC2 key pair)",
				 &a->user, &a->key_path, &a->pubkey, err) < 0)
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

/* No DNS of EC2's knows a name before the instance exists (its names are
 * made of its address or id), so a node that sleeps is NAME-NODE, which
 * the head's pbx writes into every node's /etc/hosts as it wakes nodes
 * (names_in_hosts; docs/power-saving.md). */
static char *aws_dns_name(void *ctx, const char *node)
{
	struct aws *a = ctx;
	return xasprintf("%s-%s", a->s->name, node);
}

const struct pbx_provider pbx_provider_aws = {
	.name = "aws",
	.open = aws_open,
	.close = aws_close,
	.plan = aws_plan,
	.create_begin = aws_create_begin,
	.create_poll = aws_create_poll,
	.list = aws_list,
	.check = aws_check,
	.list_nodes = aws_list_nodes,
	.destroy = aws_destroy,
	.remove_nodes = aws_remove_nodes,
	.login = aws_login,
	.layout = aws_layout,
	.dns_name = aws_dns_name,
	.names_in_hosts = 1,
	.images = &aws_image_ops,
};
