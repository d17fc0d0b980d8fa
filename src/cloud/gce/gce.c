/*
 * gce.c - the `gce` provider: Compute Engine through the compute v1 REST
 * API (compute.c), with the clouds.gce section and a template.  Here: its
 * context (struct gce, gce.h) opened and closed, the plan, the login and
 * the SLURM layout, and the provider's table; each other operation has a
 * file of its own (gce_internal.h lists them).
 *
 *   open     credentials (auth.c), an HTTP handle logging into the store
 *   plan     head + GROUPn nodes; instance names NAME-IDP-NODE (gce_name:
 *            the cluster id's first 12 hex digits in every name)
 *   begin    (create.c) the two firewall rules if missing (firewall.c); on
 *            a start (the head among the nodes: a resize touches neither),
 *            a Cloud NAT in each region of its zones unless one serves the
 *            network there already (shared by the pbx clusters of the
 *            region) or the template gives compute nodes external addresses
 *            (router.c); one bulkInsert per node kind (head, each group) for
 *            the nodes that do not exist yet, each node recorded (instance,
 *            zone, operation) at once
 *   poll     (poll.c) operations to DONE with their error read
 *            (QUOTA_EXCEEDED, ZONE_RESOURCE_POOL_EXHAUSTED*: a clear
 *            message, then every instance of the cluster deleted: all or
 *            nothing), then the instances listed by label until all are
 *            RUNNING; addresses recorded (a node's public one when it has
 *            one: pbx reaches the others through the head)
 *   list     (list.c) instances labelled pbx-cluster=NAME and
 *            pbx-cluster-id=ID (paged) + the firewall rules whose
 *            description carries ID + pbx's shared router in a region where
 *            no other cluster has instances (its stop deletes it); without
 *            an id (a survey): everything labelled NAME and the rules named
 *            pbx-NAME[-IDP]-ssh|internal, with their ids
 *   destroy  (destroy.c) deletes them and waits for every operation
 */
#include "cloud/gce/gce_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

/* ---------------------------------------------------------------- open */

static int gce_configured(const struct pbx_config *cfg)
{
	return cfg->gce.project || cfg->gce.zone || cfg->gce.credentials || cfg->gce.endpoint;
}

static void gce_close(void *ctx)
{
	struct gce *g = ctx;
	size_t i;
	if (!g)
		return;
	for (i = 0; i < g->npending; i++) {
		free(g->pending[i].op);
		free(g->pending[i].zone);
		free(g->pending[i].nodes);
	}
	free(g->pending);
	if (g->http)
		gce_pool_free(g);
	for (i = 0; i < g->nzones; i++)
		free(g->zones[i]);
	free(g->zones);
	pbx_gce_auth_close(g->auth);
	pbx_http_close(g->http);
	free(g->base);
	free(g->project);
	free(g->zone);
	free(g->user);
	free(g->key_path);
	free(g->pubkey);
	free(g);
}

static int gce_open(const struct pbx_cluster_spec *s, void **out, struct pbx_err *err)
{
	const struct pbx_cloud_gce *c = &s->cfg->gce;
	struct pbx_http_opts ho = { .service = "gce" };
	struct gce *g;
	const char *ep = c->endpoint ? c->endpoint : PBX_GCE_ENDPOINT;

	*out = NULL;
	if (!s->t && !gce_configured(s->cfg))
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "clouds.gce is not configured");
	g = xcalloc(1, sizeof(*g));
	g->s = s;
	g->base = xasprintf("%s%s", ep, ep[strlen(ep) - 1] == '/' ? "" : "/");
	g->zone = c->zone ? xstrdup(c->zone) : c->nzones ? xstrdup(c->zones[0]) : NULL;
	if (g->zone) {
		size_t z;
		g->zones = xcalloc(c->nzones + 1, sizeof(*g->zones));
		g->zones[g->nzones++] = xstrdup(g->zone);
		for (z = 0; z < c->nzones; z++)
			if (strcmp(c->zones[z], g->zone) != 0)
				g->zones[g->nzones++] = xstrdup(c->zones[z]);
	}
	if (pbx_http_open(&ho, &g->http, err) < 0)
		goto fail;
	gce_pool_init(g);
	if (s->store && !s->dry_run)
		pbx_http_set_log(g->http, pbx_cloud_http_log, s->store, s->id);
	if (!s->dry_run && pbx_gce_auth_open(c->credentials, g->http, &g->auth, err) < 0)
		goto fail;
	g->project =
		xstrdup(c->project                                 ? c->project
			: g->auth && pbx_gce_auth_project(g->auth) ? pbx_gce_auth_project(g->auth)
								   : "");
	if (!*g->project) {
		pbx_err_setc(err, PBX_EXIT_USAGE,
			     "%s: clouds.gce.project: required (no project_id "
			     "in the credentials either)",
			     s->cfg->path);
		goto fail;
	}
	if (!g->zone) {
		pbx_err_setc(err, PBX_EXIT_USAGE, "%s: clouds.gce.zone: required", s->cfg->path);
		goto fail;
	}
	if (pbx_cloud_login_read(s, "root",
				 "cloud gce (its .pub goes into the instances' ssh-keys)", &g->user,
				 &g->key_path, &g->pubkey, err) < 0)
		goto fail;
	*out = g;
	return 0;
fail:
	gce_close(g);
	return -1;
}

/* ---------------------------------------------------------------- plan */

static int gce_plan(void *ctx, struct pbx_node_row **nodes, size_t *n, struct pbx_err *err)
{
	struct gce *g = ctx;
	size_t total, k;
	pbx_cloud_plan(g->s, g->zone, nodes, n);
	total = *n;
	for (k = 0; k <= total; k++) {
		/* every instance name, and the longest rule name */
		char *name = k < total ? gce_instance_name(g, (*nodes)[k].name)
				       : gce_firewall_name(g, 1);
		size_t len = strlen(name);
		if (len > 63) {
			pbx_err_setc(err, PBX_EXIT_USAGE,
				     "the name %s would be longer than 63 "
				     "characters: use a shorter cluster or node group name",
				     name);
			free(name);
			pbx_node_rows_free(*nodes, total);
			*nodes = NULL;
			*n = 0;
			return -1;
		}
		free(name);
	}
	return 0;
}

/* ------------------------------------------------------------- login */

static int gce_login(void *ctx, char **user, char **key_path, struct pbx_err *err)
{
	struct gce *g = ctx;
	(void)err;
	*user = xstrdup(g->user ? g->user : "root");
	*key_path = g->key_path ? xstrdup(g->key_path) : NULL;
	return 0;
}

/* VMs: SLURM's defaults, daemons under systemd, NFS /shared from the head. */
static int gce_layout(void *ctx, struct pbx_slurm_layout *l, struct pbx_err *err)
{
	struct gce *g = ctx;
	char *head = gce_instance_name(g, "head"); /* its host name */
	(void)err;
	pbx_cloud_vm_layout(head, l);
	free(head);
	return 0;
}

/* Every VM of the network resolves an instance's name to its address
 * (internal DNS), as slurm-gcp relies on; with zonal DNS (every project
 * made since 2018) the bare name only within the VM's own zone, through
 * its search domain.  A node that a stockout sent to the next zone of
 * clouds.gce.zones is found through /etc/hosts, which the head's pbx
 * writes (names_in_hosts; docs/power-saving.md). */
static char *gce_dns_name(void *ctx, const char *node)
{
	return gce_instance_name(ctx, node);
}

const struct pbx_provider pbx_provider_gce = {
	.name = "gce",
	.open = gce_open,
	.close = gce_close,
	.plan = gce_plan,
	.create_begin = gce_create_begin,
	.create_poll = gce_create_poll,
	.list = gce_list,
	.list_nodes = gce_list_nodes,
	.destroy = gce_destroy,
	.remove_nodes = gce_remove_nodes,
	.login = gce_login,
	.layout = gce_layout,
	.dns_name = gce_dns_name,
	.check = gce_check,
	.names_in_hosts = 1,
	.images = &gce_image_ops,
};
