/*
 * gce.c - the `gce` provider: Compute Engine through the compute v1 REST
 * API (compute.c), with the clouds.gce section and a template.
 *
 *   open     credentials (auth.c), an HTTP handle logging into the store
 *   plan     head + GROUPn nodes; instance names NAME-IDP-NODE (gce_name:
 *            the cluster id's first 12 hex digits in every name)
 *   begin    the two firewall rules if missing; on a start (the head among
 *            the nodes: a resize touches neither), a Cloud NAT in each
 *            region of its zones unless one serves the network there already
 *            (shared by the pbx clusters of the region) or the template gives
 *            compute nodes external addresses; one bulkInsert per node
 *            kind (head, each group) for the nodes that do not exist yet,
 *            each node recorded (instance, zone, operation) at once
 *   poll     operations to DONE with their error read (QUOTA_EXCEEDED,
 *            ZONE_RESOURCE_POOL_EXHAUSTED*: a clear message, then every
 *            instance of the cluster deleted: all or nothing), then the
 *            instances listed by label until all are RUNNING; addresses
 *            recorded (a node's public one when it has one: pbx reaches
 *            the others through the head)
 *   list     instances labelled pbx-cluster=NAME and pbx-cluster-id=ID
 *            (paged) + the firewall rules whose description carries ID
 *            + pbx's shared router in a region where no other cluster has
 *            instances (its stop deletes it); without an id (a survey):
 *            everything labelled NAME and the rules named
 *            pbx-NAME[-IDP]-ssh|internal, with their ids
 *   destroy  deletes them and waits for every operation
 */
#include "cloud/gce/gce.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"
#include "util/fanout.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define GCE_POLL_LIMIT   3000 /* create_poll calls (about 200 ms apart): 10 min */
#define GCE_WAIT_LIMIT_S 600  /* waiting for one operation */
#define GCE_BULK_MAX     1000 /* instances per bulkInsert (Compute Engine's limit) */

static const long ok_404[] = { 404, 0 };

/* ---------------------------------------------------------------- open */

static int gce_configured(const struct pbx_config *cfg)
{
	return cfg->gce.project || cfg->gce.zone || cfg->gce.credentials || cfg->gce.endpoint;
}

static int gce_login_read(struct gce *g, struct pbx_err *err)
{
	const struct pbx_cluster_template *t = g->s->t;
	struct pbx_buf pub = PBX_BUF_INIT;
	char *path;
	if (!t)
		return 0;
	g->user = xstrdup(t->login_user ? t->login_user : "root");
	if (!t->ssh_key)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "%s:%d: clusters.%s.ssh_key: required for "
				    "cloud gce (its .pub goes into the instances' ssh-keys)",
				    g->s->cfg->path, t->line, t->name);
	g->key_path = xstrdup(t->ssh_key);
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
	g->pubkey = pbx_buf_detach(&pub, NULL);
	return 0;
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
		pbx_http_set_log(g->http, s->store, s->id);
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
	if (gce_login_read(g, err) < 0)
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

/* ---------------------------------------------------------- operations */

int gce_wait_op(struct gce *g, const char *scope, const char *op, struct pbx_err *err)
{
	struct timespec delay = { 0, 250 * 1000 * 1000 };
	time_t until = time(NULL) + GCE_WAIT_LIMIT_S;
	char *path = xasprintf("projects/%s/%s/operations/%s", g->project, scope, op);
	int rc = -1;
	while (time(NULL) < until) {
		json_t *r = NULL;
		struct gce_op o;
		long st;
		if (g->s->dry_run) {
			rc = 0;
			break;
		}
		if (gce_call(g, "GET", path, NULL, NULL, &r, &st, err) < 0 ||
		    gce_op_parse(r, &o, err) < 0) {
			json_decref(r);
			break;
		}
		json_decref(r);
		if (!strcmp(o.status, "DONE")) {
			rc = o.error[0] ? pbx_err_set(err, "operation %s failed: %s", op, o.error)
					: 0;
			break;
		}
		nanosleep(&delay, NULL);
	}
	if (rc < 0 && !err->msg[0])
		pbx_err_set(err, "operation %s not done after %d s", op, GCE_WAIT_LIMIT_S);
	free(path);
	return rc;
}

/* Sends a mutation and waits for its operation (in `scope`, see
 * gce_wait_op).  A status listed in `ok` other than 2xx is no operation. */
static int gce_mutate(struct gce *g, const char *method, const char *path, json_t *body,
		      const long *ok, const char *scope, struct pbx_err *err)
{
	json_t *r = NULL;
	struct gce_op o;
	long st;
	int rc = gce_call(g, method, path, body, ok, &r, &st, err);
	if (rc == 0 && st >= 200 && st < 300) {
		rc = gce_op_parse(r, &o, err);
		if (rc == 0)
			rc = gce_wait_op(g, scope, o.name, err);
	}
	json_decref(r);
	return rc;
}

/* ------------------------------------------------------------- listing */

/* Text URL-encoded for a query parameter.  Caller frees. */
static char *gce_escape(const char *text)
{
	char *e = curl_easy_escape(NULL, text, 0), *res = xstrdup(e ? e : "");
	curl_free(e);
	return res;
}

/* The list filter of the cluster's labels, `labels.pbx-cluster = "NAME"
 * AND labels.pbx-cluster-id = "ID"` (a survey: the name only),
 * URL-encoded.  Caller frees. */
static char *gce_label_filter(const struct gce *g)
{
	struct pbx_labels l;
	struct pbx_buf f = PBX_BUF_INIT;
	char *res;
	size_t i;
	pbx_cluster_labels(g->s, &l);
	for (i = 0; i < l.n; i++)
		pbx_buf_addf(&f, "%slabels.%s = \"%s\"", i ? " AND " : "", l.keys[i], l.values[i]);
	res = gce_escape(f.buf);
	pbx_buf_release(&f);
	return res;
}

/* Instances matching `filter` (URL-encoded) in every zone (aggregatedList),
 * every page; *v freed with gce_insts_free. */
static int gce_list_instances_where(struct gce *g, const char *filter, struct gce_inst **v,
				    size_t *n, struct pbx_err *err)
{
	char *token = NULL;
	int rc = 0;
	*v = NULL;
	*n = 0;
	do {
		char *path = xasprintf(
			"projects/%s/aggregated/instances?filter=%s&maxResults=500%s%s", g->project,
			filter, token ? "&pageToken=" : "", token ? token : "");
		json_t *r = NULL;
		long st;
		free(token);
		token = NULL;
		rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
		if (rc == 0 && st == 200)
			rc = gce_list_parse(r, v, n, &token, err);
		json_decref(r);
		free(path);
	} while (rc == 0 && token);
	free(token);
	return rc;
}

/* Instances carrying the cluster's labels, in every zone. */
static int gce_list_instances(struct gce *g, struct gce_inst **v, size_t *n, struct pbx_err *err)
{
	char *filter = gce_label_filter(g);
	int rc = gce_list_instances_where(g, filter, v, n, err);
	free(filter);
	return rc;
}

static const struct gce_inst *gce_find(const struct gce_inst *v, size_t n, const char *name)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

/* ------------------------------------------------------------- create */

/* Whether the cluster's firewall rule `which` is there: *state
 * GCE_RULE_NONE, GCE_RULE_MINE (its description carries the cluster's id;
 * a legacy cluster's rules carry none), or GCE_RULE_OTHERS (another
 * cluster's, whose name shares the id prefix: never used nor deleted). */
enum { GCE_RULE_NONE, GCE_RULE_MINE, GCE_RULE_OTHERS };
static int gce_rule_state(struct gce *g, int which, int *state, struct pbx_err *err)
{
	char *name = gce_firewall_name(g, which);
	char *path = xasprintf("projects/%s/global/firewalls/%s", g->project, name);
	json_t *r = NULL;
	long st;
	int rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
	*state = GCE_RULE_NONE;
	if (rc == 0 && st == 200) {
		char *owner = gce_firewall_owner(r);
		int legacy = pbx_cluster_uid_legacy(g->s->uid);
		*state = (legacy && !owner) || (owner && !strcmp(owner, g->s->uid))
				 ? GCE_RULE_MINE
				 : GCE_RULE_OTHERS;
		free(owner);
	}
	json_decref(r);
	free(path);
	free(name);
	return rc;
}

static int gce_firewalls(struct gce *g, struct pbx_err *err)
{
	int which, state;
	for (which = 0; which < 2; which++) {
		int rc = gce_rule_state(g, which, &state, err);
		if (rc == 0 && state == GCE_RULE_OTHERS) {
			char *name = gce_firewall_name(g, which);
			rc = pbx_err_set(
				err,
				"%s belongs to another cluster called %s (its id begins "
				"like this one's): stop this cluster and start it again for a "
				"new id",
				name, g->s->name);
			free(name);
		}
		if (rc == 0 && state == GCE_RULE_NONE) {
			char *ins = xasprintf("projects/%s/global/firewalls", g->project);
			json_t *body = gce_firewall_body(g, which);
			rc = gce_mutate(g, "POST", ins, body, NULL, "global", err);
			json_decref(body);
			free(ins);
		}
		if (rc < 0)
			return pbx_err_prefix(err, "firewall rule");
	}
	return 0;
}

/* -------------------------------------------------------------- routers */

static void gce_add(struct pbx_instance **v, size_t *n, const char *id, const char *zone,
		    const char *state, const char *cluster, int64_t stopped_at);

/* Compute nodes without an external address reach the internet through a
 * Cloud NAT.  A NAT covering every subnetwork must be the only NAT on its
 * network in a region, so pbx never makes one per cluster: a start uses
 * the NAT that serves the network in the region already (pbx's shared
 * router, or one the project had), and makes pbx's (gce_router_name) only
 * when there is none; a stop deletes pbx's router only when no other
 * cluster has instances in that region. */

/* The distinct regions of the zones the cluster may use (a zone's region
 * is its name without the last "-x"), NULL-terminated; caller frees the
 * array and its strings (gce_regions_free). */
static char **gce_regions(const struct gce *g)
{
	char **r = xcalloc(g->nzones + 1, sizeof(*r));
	size_t z, n = 0, k;
	for (z = 0; z < g->nzones; z++) {
		const char *dash = strrchr(g->zones[z], '-');
		char *reg = dash ? xstrndup(g->zones[z], (size_t)(dash - g->zones[z]))
				 : xstrdup(g->zones[z]);
		for (k = 0; k < n && strcmp(r[k], reg) != 0; k++)
			;
		if (k < n)
			free(reg);
		else
			r[n++] = reg;
	}
	return r;
}

static void gce_regions_free(char **r)
{
	size_t i;
	for (i = 0; r && r[i]; i++)
		free(r[i]);
	free(r);
}

/* Whether zone `zone` is in region `region` (us-central1-a in us-central1). */
static int gce_zone_in(const char *zone, const char *region)
{
	size_t l = strlen(region);
	return zone && !strncmp(zone, region, l) && zone[l] == '-' && !strchr(zone + l + 1, '-');
}

/* projects/P/regions/R/routers[/NAME] of pbx's router; caller frees. */
static char *gce_router_path(const struct gce *g, const char *region, int with_name)
{
	char *name = gce_router_name(g);
	char *p = with_name
			  ? xasprintf("projects/%s/regions/%s/routers/%s", g->project, region, name)
			  : xasprintf("projects/%s/regions/%s/routers", g->project, region);
	free(name);
	return p;
}

/* Whether pbx's router exists in `region`: 1 yes, 0 no, -1 error.  A
 * router of that name whose description is not pbx's is not pbx's: 0, and
 * *foreign set. */
static int gce_router_exists(struct gce *g, const char *region, int *foreign, struct pbx_err *err)
{
	char *path = gce_router_path(g, region, 1);
	json_t *r = NULL;
	long st;
	int rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err), mine = 0;
	const char *desc = json_string_value(json_object_get(r, "description"));
	if (rc == 0 && st == 200)
		mine = desc && !strcmp(desc, GCE_ROUTER_DESCRIPTION);
	if (foreign)
		*foreign = rc == 0 && st == 200 && !mine;
	json_decref(r);
	free(path);
	return rc < 0 ? -1 : mine;
}

/* Whether a router of the region (any, e.g. the project's own) carries a
 * NAT for every subnetwork of pbx's network: 1 yes, 0 no, -1 error. */
static int gce_region_has_nat(struct gce *g, const char *region, struct pbx_err *err)
{
	char *path = gce_router_path(g, region, 0), *token = NULL;
	int rc = 0, found = 0;
	do {
		char *page = xasprintf("%s?maxResults=500%s%s", path, token ? "&pageToken=" : "",
				       token ? token : "");
		json_t *r = NULL, *router, *nat;
		size_t i, k;
		long st;
		free(token);
		token = NULL;
		rc = gce_call(g, "GET", page, NULL, ok_404, &r, &st, err);
		json_array_foreach(rc == 0 && st == 200 ? json_object_get(r, "items") : NULL, i,
				   router)
		{
			const char *net = json_string_value(json_object_get(router, "network"));
			const char *slash = net ? strrchr(net, '/') : NULL;
			if (!slash || strcmp(slash + 1, "default") != 0)
				continue;
			json_array_foreach(json_object_get(router, "nats"), k, nat)
			{
				const char *what = json_string_value(
					json_object_get(nat, "sourceSubnetworkIpRangesToNat"));
				found |= what && !strncmp(what, "ALL_SUBNETWORKS_", 16);
			}
		}
		if (rc == 0 && st == 200 && json_string_value(json_object_get(r, "nextPageToken")))
			token = xstrdup(json_string_value(json_object_get(r, "nextPageToken")));
		json_decref(r);
		free(page);
	} while (rc == 0 && token && !found);
	free(token);
	free(path);
	return rc < 0 ? -1 : found;
}

/* Whether another cluster (any pbx cluster but this one) has instances in
 * `region`: 1 yes, 0 no, -1 error.  One aggregated list of every instance
 * carrying a pbx cluster id. */
static int gce_region_used_by_others(struct gce *g, const char *region, struct pbx_err *err)
{
	char *filter = gce_escape("labels." PBX_LABEL_CLUSTER_ID ":*");
	struct gce_inst *v = NULL;
	size_t n = 0, i;
	int rc = gce_list_instances_where(g, filter, &v, &n, err), used = 0;
	for (i = 0; rc == 0 && i < n; i++)
		used |= gce_zone_in(v[i].zone, region) &&
			!(v[i].cluster && !strcmp(v[i].cluster, g->s->uid));
	gce_insts_free(v, n);
	free(filter);
	return rc < 0 ? -1 : used;
}

/* A Cloud NAT in every region of the cluster's zones, so compute nodes
 * without an external address reach the internet (apt-get) from their
 * first boot: the one serving the network there already, else pbx's
 * router, made and waited for (a 409: a start beside this one made it).
 * None when compute nodes have external addresses. */
static int gce_routers(struct gce *g, struct pbx_err *err)
{
	static const long ok_409[] = { 409, 0 };
	char **regions;
	size_t i;
	int rc = 0, foreign;
	if (gce_nodes_external(g, 0))
		return 0;
	regions = gce_regions(g);
	for (i = 0; rc == 0 && regions[i]; i++) {
		char *scope = xasprintf("regions/%s", regions[i]), *ins;
		json_t *body;
		rc = gce_router_exists(g, regions[i], &foreign, err);
		if (rc == 0)
			rc = gce_region_has_nat(g, regions[i], err);
		if (rc == 0 && foreign) {
			char *name = gce_router_name(g);
			rc = pbx_err_set(
				err,
				"a router called %s that pbx did not make is in %s, and no "
				"NAT serves the network there",
				name, regions[i]);
			free(name);
		}
		if (rc == 0) {
			ins = gce_router_path(g, regions[i], 0);
			body = gce_router_body(g);
			rc = gce_mutate(g, "POST", ins, body, ok_409, scope, err);
			json_decref(body);
			free(ins);
		}
		if (rc < 0)
			pbx_err_prefix(err, "Cloud Router with NAT in %s", regions[i]);
		free(scope);
		rc = rc < 0 ? -1 : 0;
	}
	gce_regions_free(regions);
	return rc;
}

/* Whether this cluster's stop deletes pbx's router in `region`: it is
 * there and no other cluster has instances in the region.  1, 0, -1. */
static int gce_router_is_last(struct gce *g, const char *region, struct pbx_err *err)
{
	int rc = gce_router_exists(g, region, NULL, err), others;
	if (rc != 1)
		return rc;
	others = gce_region_used_by_others(g, region, err);
	return others < 0 ? -1 : !others;
}

/* Appends to v pbx's routers that this cluster's stop would delete (id =
 * name, zone = region, state "ROUTER"). */
static int gce_list_routers(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	char **regions = gce_regions(g);
	size_t i;
	int rc = 0;
	for (i = 0; rc == 0 && regions[i]; i++) {
		rc = gce_router_is_last(g, regions[i], err);
		if (rc == 1) {
			char *name = gce_router_name(g);
			gce_add(v, n, name, regions[i], "ROUTER", NULL, 0);
			free(name);
			rc = 0;
		}
	}
	gce_regions_free(regions);
	return rc;
}

/* Deletes pbx's router in every region of the zones where this cluster is
 * the last to use it (already gone is fine), and waits for each.  A dry
 * run prints each DELETE. */
static int gce_delete_routers(struct gce *g, struct pbx_err *err)
{
	char **regions = gce_regions(g);
	size_t i;
	int rc = 0;
	for (i = 0; rc == 0 && regions[i]; i++) {
		char *path = gce_router_path(g, regions[i], 1);
		char *scope = xasprintf("regions/%s", regions[i]);
		rc = g->s->dry_run ? 1 : gce_router_is_last(g, regions[i], err);
		if (rc == 1)
			rc = gce_mutate(g, "DELETE", path, NULL, ok_404, scope, err);
		if (rc < 0)
			pbx_err_prefix(err, "deleting Cloud Router %s", path);
		free(scope);
		free(path);
		rc = rc < 0 ? -1 : 0;
	}
	gce_regions_free(regions);
	return rc;
}

/* Whether a resource of a list is an instance (not a firewall rule or a
 * router, which are deleted by name after the instances). */
static int gce_is_instance(const struct pbx_instance *x)
{
	return !x->state || (strcmp(x->state, "FIREWALL") != 0 && strcmp(x->state, "ROUTER") != 0);
}

/* A start's node list has the head; a resize's only the nodes it adds. */
static int gce_has_head(const struct pbx_node_row *nodes, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(nodes[i].role, "head"))
			return 1;
	return 0;
}

static void gce_record(const struct pbx_create_hooks *h, const struct pbx_node_row *node)
{
	if (h && h->record)
		h->record(h->ctx, node);
}

static void set_str(char **field, const char *value)
{
	free(*field);
	*field = value ? xstrdup(value) : NULL;
}

/* One bulkInsert in `zone` for nodes idx[0..k) of kind grp (NULL = head),
 * at least `min` of which must be made. */
static int gce_bulk(struct gce *g, const char *zone, const struct pbx_node_group *grp,
		    struct pbx_node_row *nodes, const size_t *idx, size_t k, size_t min,
		    const struct pbx_create_hooks *h, struct pbx_err *err)
{
	char *path = xasprintf("projects/%s/zones/%s/instances/bulkInsert", g->project, zone);
	json_t *body = gce_bulk_body(g, grp, nodes, idx, k, min), *r = NULL;
	struct gce_pending *p;
	struct gce_op o;
	long st;
	size_t i;
	int rc = gce_call(g, "POST", path, body, NULL, &r, &st, err);
	if (rc == 0)
		rc = gce_op_parse(r, &o, err);
	json_decref(r);
	json_decref(body);
	free(path);
	if (rc < 0)
		return pbx_err_prefix(err, "creating %s", grp ? grp->name : "the head");
	g->pending = xreallocarray(g->pending, g->npending + 1, sizeof(*g->pending));
	p = &g->pending[g->npending++];
	p->op = xstrdup(o.name);
	p->zone = xstrdup(zone);
	p->grp = grp;
	p->nodes = xcalloc(k, sizeof(*p->nodes));
	memcpy(p->nodes, idx, k * sizeof(*idx));
	p->n = k;
	p->min = min;
	p->done = 0;
	for (i = 0; i < k; i++) {
		struct pbx_node_row *nd = &nodes[idx[i]];
		char *iname = gce_instance_name(g, nd->name);
		set_str(&nd->instance_id, iname);
		set_str(&nd->operation, o.name);
		set_str(&nd->zone, zone);
		set_str(&nd->state, "creating");
		gce_record(h, nd);
		pbx_events_stage(h ? h->ev : NULL, idx[i], "created");
		free(iname);
	}
	return 0;
}

/* minCount of a bulkInsert of k nodes: the head, always; compute nodes
 * short of the policy's slack. */
static size_t gce_min_count(const struct pbx_cluster_template *t, const struct pbx_node_group *grp,
			    size_t k)
{
	size_t slack = grp ? pbx_cloud_slack(t) : 0;
	return k > slack ? k - slack : 1;
}

static int gce_create_begin(void *ctx, struct pbx_node_row *nodes, size_t n,
			    const struct pbx_create_hooks *h, struct pbx_err *err)
{
	struct gce *g = ctx;
	const struct pbx_cluster_template *t = g->s->t;
	struct gce_inst *have = NULL;
	size_t nhave = 0, *idx, k, i;
	int rc;
	if (!g->s->uid)
		return pbx_err_set(err, "cluster %s: no cluster id, nothing is created",
				   g->s->name);
	idx = xcalloc(n ? n : 1, sizeof(*idx));
	rc = gce_firewalls(g, err);
	if (rc == 0 && gce_has_head(nodes, n))
		rc = gce_routers(g, err);
	if (rc == 0)
		rc = gce_list_instances(g, &have, &nhave, err);
	/* Head (grp NULL), then each group: the nodes not yet there. */
	for (k = 0; rc == 0 && k <= t->ngroups; k++) {
		const struct pbx_node_group *grp = k == 0 ? NULL : &t->groups[k - 1];
		size_t m = 0;
		for (i = 0; i < n; i++) {
			char *iname = gce_instance_name(g, nodes[i].name);
			int mine = grp ? !strcmp(nodes[i].role, "compute") &&
						   pbx_cloud_group_of(t, nodes[i].name) == grp
				       : !strcmp(nodes[i].role, "head");
			if (mine && !gce_find(have, nhave, iname))
				idx[m++] = i;
			free(iname);
		}
		/* bulkInsert makes at most 1000 instances a call. */
		for (i = 0; rc == 0 && i < m; i += GCE_BULK_MAX) {
			size_t count = m - i < GCE_BULK_MAX ? m - i : GCE_BULK_MAX;
			rc = gce_bulk(g, g->zone, grp, nodes, idx + i, count,
				      gce_min_count(t, grp, count), h, err);
		}
	}
	free(idx);
	gce_insts_free(have, nhave);
	return rc;
}

/* A placement failure's message: which quota or which zone. */
static int gce_placement_error(struct gce *g, const char *zone, const struct gce_op *o,
			       struct pbx_err *err)
{
	if (!strcmp(o->error_code, "QUOTA_EXCEEDED"))
		return pbx_err_set(err, "Compute Engine quota exceeded in project %s, zone %s: %s",
				   g->project, zone, o->error);
	if (!strncmp(o->error_code, "ZONE_RESOURCE_POOL_EXHAUSTED", 28))
		return pbx_err_set(err,
				   "zone %s has no capacity for these instances now "
				   "(stockout)%s: %s",
				   zone,
				   g->nzones > 1 ? ", nor has any zone "
						   "of clouds.gce.zones"
						 : "",
				   o->error);
	return pbx_err_set(err, "Compute Engine could not create the instances: %s", o->error);
}

/* All or nothing: after a failed creation every instance this creation
 * asked for goes (the nodes that were there before it, e.g. those of a
 * cluster being resized, stay); the firewall rules go too when nothing of
 * the cluster is left.  The message says so. */
static int gce_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err);
static int gce_delete_instances(struct gce *g, const struct pbx_instance *v, size_t n,
				struct pbx_err *err);

static void gce_clean_up(struct gce *g, const struct pbx_node_row *nodes, struct pbx_err *err)
{
	struct pbx_err e2 = PBX_ERR_INIT;
	struct pbx_instance *v = NULL;
	struct gce_inst *left = NULL;
	size_t n = 0, nleft = 0, i, k;
	int rc;
	for (i = 0; i < g->npending; i++)
		for (k = 0; k < g->pending[i].n; k++) {
			v = xreallocarray(v, n + 1, sizeof(*v));
			v[n].id = gce_instance_name(g, nodes[g->pending[i].nodes[k]].name);
			v[n].zone = xstrdup(g->pending[i].zone);
			v[n].cluster = NULL;
			v[n].stopped_at = 0;
			v[n++].state = NULL;
		}
	rc = gce_delete_instances(g, v, n, &e2);
	if (rc == 0)
		rc = gce_list_instances(g, &left, &nleft, &e2);
	if (rc == 0 && nleft == 0)
		rc = gce_destroy(g, NULL, 0, &e2);
	if (rc == 0)
		pbx_err_prefix(err, nleft ? "none of the new instances was kept (all or nothing)"
					  : "nothing was kept (all or nothing)");
	else
		pbx_err_prefix(err, "cleaning up failed too (%s); run 'pbx cluster stop %s'",
			       e2.msg, g->s->name);
	gce_insts_free(left, nleft);
	pbx_instances_free(v, n);
}

/* The zone after `zone` in the fallback order, or NULL. */
static const char *gce_next_zone(const struct gce *g, const char *zone)
{
	size_t z;
	for (z = 0; z + 1 < g->nzones; z++)
		if (!strcmp(g->zones[z], zone))
			return g->zones[z + 1];
	return NULL;
}

/* Polls the pending operations; 1 when all are DONE without error.  A
 * stockout sends the same nodes to the next zone of clouds.gce.zones. */
static int gce_poll_ops(struct gce *g, struct pbx_node_row *nodes, const struct pbx_create_hooks *h,
			struct pbx_err *err)
{
	size_t i, open = 0;
	for (i = 0; i < g->npending; i++) {
		struct gce_pending *p = &g->pending[i];
		const char *next;
		char *path;
		json_t *r = NULL;
		struct gce_op o;
		long st;
		int rc;
		if (p->done)
			continue;
		path = xasprintf("projects/%s/zones/%s/operations/%s", g->project, p->zone, p->op);
		rc = gce_call(g, "GET", path, NULL, NULL, &r, &st, err);
		free(path);
		if (rc == 0)
			rc = gce_op_parse(r, &o, err);
		json_decref(r);
		if (rc < 0)
			return -1;
		if (strcmp(o.status, "DONE") != 0) {
			open++;
			continue;
		}
		p->done = 1;
		next = o.error[0] && !strncmp(o.error_code, "ZONE_RESOURCE_POOL_EXHAUSTED", 28)
			       ? gce_next_zone(g, p->zone)
			       : NULL;
		if (next) {
			size_t k;
			pbx_store_event(g->s->store, g->s->id, "gce.stockout",
					"zone %s has no capacity: trying %s", p->zone, next);
			for (k = 0; k < p->n; k++)
				pbx_events_stage(h ? h->ev : NULL, p->nodes[k],
						 "zone full, next zone");
			/* gce_bulk may move g->pending: copy what it needs. */
			{
				size_t *idx = xcalloc(p->n, sizeof(*idx)), n = p->n, min = p->min;
				const struct pbx_node_group *grp = p->grp;
				int brc;
				memcpy(idx, p->nodes, n * sizeof(*idx));
				brc = gce_bulk(g, next, grp, nodes, idx, n, min, h, err);
				free(idx);
				if (brc < 0)
					return -1;
			}
			open++;
			continue;
		}
		if (o.error[0])
			return gce_placement_error(g, p->zone, &o, err);
	}
	return open == 0;
}

/* Every operation is DONE and node `r` has no instance: under min_nodes a
 * compute node never seen running is one Compute Engine did not make
 * (bulkInsert's minCount); it is marked so (once).  0 otherwise. */
static int gce_not_made(const struct gce *g, struct pbx_node_row *nodes, size_t i,
			const struct pbx_create_hooks *h)
{
	struct pbx_node_row *r = &nodes[i];
	int never_seen = !strcmp(r->state, "planned") || !strcmp(r->state, "creating") ||
			 !strcmp(r->state, PBX_NODE_NOT_CREATED);
	if (strcmp(r->role, "compute") != 0 || !never_seen || !pbx_cloud_slack(g->s->t))
		return 0;
	if (strcmp(r->state, PBX_NODE_NOT_CREATED) != 0) {
		set_str(&r->state, PBX_NODE_NOT_CREATED);
		gce_record(h, r);
		pbx_events_stage(h ? h->ev : NULL, i, "not created (quota or capacity)");
	}
	return 1;
}

/* min_nodes: fewer compute nodes than the policy accepts is a failure. */
static int gce_too_few(const struct gce *g, const struct pbx_node_row *nodes, size_t n,
		       size_t skipped, struct pbx_err *err)
{
	size_t i, compute = 0;
	for (i = 0; i < n; i++)
		compute += !strcmp(nodes[i].role, "compute");
	if (compute - skipped >= (size_t)g->s->t->min_nodes)
		return 0;
	return pbx_err_set(err,
			   "Compute Engine made %zu of the %zu compute nodes, fewer than "
			   "min_nodes (%d) (quota or capacity)",
			   compute - skipped, compute, g->s->t->min_nodes);
}

#define GCE_RESTART_GRACE_S 90 /* TERMINATED -> STAGING takes seconds */

/* A node whose instance is TERMINATED (autostop, a shutdown on it,
 * instances.stop): instances.start, once per start; its disk is as it
 * was.  The poll then waits for RUNNING as for a new one. */
static int gce_start_stopped(struct gce *g, struct pbx_node_row *nodes, size_t i,
			     const struct gce_inst *x, const struct pbx_create_hooks *h,
			     struct pbx_err *err)
{
	struct pbx_node_row *node = &nodes[i];
	char *path;
	json_t *r = NULL;
	long st = 0;
	int rc;
	if (!strcmp(node->state, "starting")) {
		/* TERMINATED long after instances.start: it powered itself off */
		if (g->started_at && time(NULL) - g->started_at > GCE_RESTART_GRACE_S)
			return pbx_err_set(err,
					   "instance %s is TERMINATED again after instances.start",
					   x->name);
		return 0;
	}
	path = xasprintf("projects/%s/zones/%s/instances/%s/start", g->project,
			 x->zone ? x->zone : g->zone, x->name);
	rc = gce_call(g, "POST", path, NULL, ok_404, &r, &st, err);
	json_decref(r);
	free(path);
	if (rc < 0)
		return pbx_err_prefix(err, "starting stopped instance %s", x->name);
	set_str(&node->state, "starting");
	if (!g->started_at)
		g->started_at = time(NULL);
	gce_record(h, node);
	pbx_events_stage(h ? h->ev : NULL, i, "starting (was TERMINATED)");
	return 0;
}

static int gce_create_poll(void *ctx, struct pbx_node_row *nodes, size_t n,
			   const struct pbx_create_hooks *h, struct pbx_err *err)
{
	struct gce *g = ctx;
	struct gce_inst *have = NULL;
	size_t nhave = 0, i, running = 0, skipped = 0;
	int rc;
	if (g->s->dry_run)
		return 1;
	if (++g->polls > GCE_POLL_LIMIT)
		return pbx_err_set(err, "instances not RUNNING after %d s", GCE_POLL_LIMIT / 5);
	rc = gce_poll_ops(g, nodes, h, err);
	if (rc < 0) {
		gce_clean_up(g, nodes, err);
		return -1;
	}
	if (rc == 0)
		return 0;
	if (gce_list_instances(g, &have, &nhave, err) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		char *iname = gce_instance_name(g, nodes[i].name);
		const struct gce_inst *x = gce_find(have, nhave, iname);
		free(iname);
		if (!x && gce_not_made(g, nodes, i, h)) {
			skipped++;
			continue;
		}
		if (!x) {
			gce_insts_free(have, nhave);
			iname = gce_instance_name(g, nodes[i].name);
			pbx_err_set(err, "instance %s is gone (preempted or deleted)", iname);
			free(iname);
			return -1;
		}
		if (!strcmp(x->status, "TERMINATED") &&
		    gce_start_stopped(g, nodes, i, x, h, err) < 0) {
			gce_insts_free(have, nhave);
			return -1;
		}
		if (strcmp(x->status, "RUNNING") != 0 || !x->private_ip)
			continue;
		rc = pbx_cloud_dial_allowed(g->base, nodes, i, x->name, x->private_ip, x->public_ip,
					    err);
		if (rc < 0) {
			gce_insts_free(have, nhave);
			return -1;
		}
		if (rc > 0)
			continue; /* once the head runs */
		if (strcmp(nodes[i].state, "running") != 0) {
			set_str(&nodes[i].address, x->private_ip);
			if (x->zone)
				set_str(&nodes[i].zone, x->zone);
			/* as the node has it: SSH goes through the head to a
			 * node without one (pbx_cluster_connect) */
			set_str(&nodes[i].public_address, x->public_ip);
			set_str(&nodes[i].state, "running");
			gce_record(h, &nodes[i]);
			pbx_events_stage(h ? h->ev : NULL, i, "running");
		}
		running++;
	}
	gce_insts_free(have, nhave);
	if (skipped && gce_too_few(g, nodes, n, skipped, err) < 0) {
		gce_clean_up(g, nodes, err);
		return -1;
	}
	return running + skipped == n;
}

/* ------------------------------------------------------ list / destroy */

/* Waits until the creations the store recorded for the cluster are over
 * (an operation still PENDING has made no instance yet, so a list would
 * miss what it is about to make: a start killed mid-create).  An
 * operation Compute Engine no longer knows (404) is over. */
static int gce_settle(struct gce *g, struct pbx_err *err)
{
	struct pbx_node_row *rows = NULL;
	size_t nrows = 0, i, k;
	int rc = 0;
	if (!g->s->store || g->s->id <= 0 || g->s->dry_run)
		return 0;
	if (pbx_store_node_list(g->s->store, g->s->id, &rows, &nrows, err) < 0)
		return -1;
	for (i = 0; i < nrows && rc == 0; i++) {
		time_t until = time(NULL) + GCE_WAIT_LIMIT_S;
		if (!rows[i].operation || strcmp(rows[i].state, "creating") != 0)
			continue;
		for (k = 0; k < i && (!rows[k].operation ||
				      strcmp(rows[k].operation, rows[i].operation) != 0);
		     k++)
			;
		if (k < i)
			continue; /* the same bulkInsert as an earlier node */
		while (rc == 0 && time(NULL) < until) {
			char *path =
				xasprintf("projects/%s/zones/%s/operations/%s", g->project,
					  rows[i].zone ? rows[i].zone : g->zone, rows[i].operation);
			struct timespec delay = { 0, 250 * 1000 * 1000 };
			json_t *r = NULL;
			struct gce_op o;
			long st;
			rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
			free(path);
			if (rc == 0 && (st == 404 || (gce_op_parse(r, &o, err) == 0 &&
						      !strcmp(o.status, "DONE")))) {
				json_decref(r);
				break;
			}
			json_decref(r);
			pbx_err_clear(err);
			nanosleep(&delay, NULL);
		}
	}
	pbx_node_rows_free(rows, nrows);
	return rc;
}

/* Appends one resource to *v (strings copied; zone, state, cluster may
 * be NULL; stopped_at 0 but for a powered-off instance). */
static void gce_add(struct pbx_instance **v, size_t *n, const char *id, const char *zone,
		    const char *state, const char *cluster, int64_t stopped_at)
{
	struct pbx_instance *x;
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	x = &(*v)[(*n)++];
	x->id = xstrdup(id);
	x->zone = zone ? xstrdup(zone) : NULL;
	x->state = state ? xstrdup(state) : NULL;
	x->cluster = cluster ? xstrdup(cluster) : NULL;
	x->stopped_at = stopped_at;
}

/* The cluster's firewall rules that are its own (gce_rule_state). */
static int gce_list_rules(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	int which, state;
	for (which = 0; which < 2; which++) {
		char *name;
		if (gce_rule_state(g, which, &state, err) < 0)
			return -1;
		if (state != GCE_RULE_MINE)
			continue;
		name = gce_firewall_name(g, which);
		gce_add(v, n, name, NULL, "FIREWALL", g->s->uid, 0);
		free(name);
	}
	return 0;
}

/* A survey: every rule named like a rule of a cluster called NAME, new
 * (pbx-NAME-IDP-ssh) or legacy (pbx-NAME-ssh), with the id its
 * description carries. */
static int gce_survey_rules(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	char *re = xasprintf("name eq \"pbx-%s(-[0-9a-f]{%d})?-(ssh|internal)\"", g->s->name,
			     GCE_ID_PREFIX);
	char *filter = gce_escape(re);
	char *path = xasprintf("projects/%s/global/firewalls?filter=%s&maxResults=500", g->project,
			       filter);
	json_t *r = NULL, *it;
	size_t i;
	long st;
	int rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
	json_array_foreach(rc == 0 && st == 200 ? json_object_get(r, "items") : NULL, i, it)
	{
		const char *name = json_string_value(json_object_get(it, "name"));
		char *owner = gce_firewall_owner(it);
		if (name)
			gce_add(v, n, name, NULL, "FIREWALL", owner, 0);
		free(owner);
	}
	json_decref(r);
	free(path);
	free(filter);
	free(re);
	return rc;
}

static int gce_list(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	struct gce *g = ctx;
	struct gce_inst *have = NULL;
	size_t nhave = 0, i;
	*v = NULL;
	*n = 0;
	if (gce_settle(g, err) < 0 || gce_list_instances(g, &have, &nhave, err) < 0)
		return -1;
	for (i = 0; i < nhave; i++)
		gce_add(v, n, have[i].name, have[i].zone ? have[i].zone : g->zone, have[i].status,
			have[i].cluster, have[i].stopped_at);
	gce_insts_free(have, nhave);
	if (!g->s->uid)
		return gce_survey_rules(g, v, n, err);
	if (gce_list_rules(g, v, n, err) < 0)
		return -1;
	return gce_list_routers(g, v, n, err);
}

struct gce_delete_run {
	struct gce *g;
	const struct pbx_instance *v;
};

/* One instance's DELETE (a 404: already gone). */
static int gce_delete_one(void *ctx, size_t i, struct pbx_err *err)
{
	struct gce_delete_run *r = ctx;
	const struct pbx_instance *x = &r->v[i];
	json_t *reply = NULL;
	char *path;
	long st;
	int rc;
	if (!gce_is_instance(x))
		return 0;
	path = xasprintf("projects/%s/zones/%s/instances/%s", r->g->project,
			 x->zone ? x->zone : r->g->zone, x->id);
	rc = gce_call(r->g, "DELETE", path, NULL, ok_404, &reply, &st, err);
	json_decref(reply);
	free(path);
	return rc;
}

/* Waits until no instance of v is listed any more: one aggregated list a
 * round, however many instances there are. */
static int gce_wait_gone(struct gce *g, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	struct timespec delay = { 0, 250 * 1000 * 1000 };
	time_t until = time(NULL) + GCE_WAIT_LIMIT_S;
	for (;;) {
		struct gce_inst *have = NULL;
		size_t nhave = 0, i, left = 0;
		const char *one = NULL;
		if (gce_list_instances(g, &have, &nhave, err) < 0)
			return -1;
		for (i = 0; i < n; i++)
			if (gce_is_instance(&v[i]) && gce_find(have, nhave, v[i].id)) {
				left++;
				one = v[i].id;
			}
		if (left && time(NULL) >= until) {
			pbx_err_set(err, "%zu instance%s still there after %d s (e.g. %s)", left,
				    left == 1 ? "" : "s", GCE_WAIT_LIMIT_S, one);
			gce_insts_free(have, nhave);
			return -1;
		}
		gce_insts_free(have, nhave);
		if (!left)
			return 0;
		nanosleep(&delay, NULL);
	}
}

/* Deletes the instances of v (GCE_HTTP_POOL calls at once; one at a time
 * in a dry run, so the printed order is stable) and waits until none is
 * listed.  What is already gone (404) is fine. */
static int gce_delete_instances(struct gce *g, const struct pbx_instance *v, size_t n,
				struct pbx_err *err)
{
	struct gce_delete_run run = { g, v };
	struct pbx_err *errs = xcalloc(n ? n : 1, sizeof(*errs));
	size_t i;
	int rc = 0;
	if (pbx_fanout(n, g->s->dry_run ? 1 : GCE_HTTP_POOL, gce_delete_one, &run, errs) > 0) {
		for (i = 0; i < n; i++)
			if (errs[i].msg[0]) {
				*err = errs[i];
				break;
			}
		rc = -1;
	}
	free(errs);
	if (rc == 0 && n && !g->s->dry_run)
		rc = gce_wait_gone(g, v, n, err);
	return rc;
}

/* Waits for the global operations still running on the cluster's firewall
 * rules: a start killed right after a rule's insert was accepted leaves
 * the rule to appear a moment later, after a stop that looked too early
 * would have missed it.  One list of the project's unfinished global
 * operations (every page). */
static int gce_settle_rules(struct gce *g, struct pbx_err *err)
{
	char *names[2] = { gce_firewall_name(g, 0), gce_firewall_name(g, 1) };
	char *filter = gce_escape("status != \"DONE\""), *token = NULL;
	int rc = 0;
	do {
		char *path = xasprintf("projects/%s/global/operations?filter=%s&maxResults=500%s%s",
				       g->project, filter, token ? "&pageToken=" : "",
				       token ? token : "");
		json_t *r = NULL, *op;
		size_t i;
		long st;
		free(token);
		token = NULL;
		rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
		json_array_foreach(rc == 0 && st == 200 ? json_object_get(r, "items") : NULL, i, op)
		{
			const char *target = json_string_value(json_object_get(op, "targetLink"));
			const char *name = json_string_value(json_object_get(op, "name"));
			const char *last = target ? strrchr(target, '/') : NULL;
			/* An insert that failed made no rule: not the stop's
			 * failure; an unreachable API shows in the GETs after. */
			if (rc == 0 && name && last &&
			    (!strcmp(last + 1, names[0]) || !strcmp(last + 1, names[1])) &&
			    gce_wait_op(g, "global", name, err) < 0)
				pbx_err_clear(err);
		}
		if (rc == 0 && st == 200 && json_string_value(json_object_get(r, "nextPageToken")))
			token = xstrdup(json_string_value(json_object_get(r, "nextPageToken")));
		json_decref(r);
		free(path);
	} while (rc == 0 && token);
	free(token);
	free(filter);
	free(names[0]);
	free(names[1]);
	return rc;
}

/* Deletes every instance, then pbx's shared router in each region of the
 * zones where no other cluster has instances left (with or without
 * compute_external_ips, which may have changed since the start), then the
 * firewall rules that are the cluster's own (a dry run prints every
 * DELETE). */
static int gce_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	struct gce *g = ctx;
	int rc, which, state = GCE_RULE_MINE;
	if (!g->s->uid)
		return pbx_err_set(err, "cluster %s: no cluster id, nothing is deleted",
				   g->s->name);
	rc = gce_delete_instances(g, v, n, err);
	if (rc == 0)
		rc = gce_delete_routers(g, err);
	if (rc == 0 && !g->s->dry_run)
		rc = gce_settle_rules(g, err);
	for (which = 0; which < 2 && rc == 0; which++) {
		char *name, *path;
		if (!g->s->dry_run && (rc = gce_rule_state(g, which, &state, err)) < 0)
			break;
		if (state != GCE_RULE_MINE)
			continue;
		name = gce_firewall_name(g, which);
		path = xasprintf("projects/%s/global/firewalls/%s", g->project, name);
		rc = gce_mutate(g, "DELETE", path, NULL, ok_404, "global", err);
		free(path);
		free(name);
	}
	return rc;
}

/* A resize's removal: the nodes' instances, by the name pbx gives them
 * (the recorded one when there is one) in their recorded zone. */
static int gce_remove_nodes(void *ctx, const struct pbx_node_row *nodes, size_t n,
			    struct pbx_err *err)
{
	struct gce *g = ctx;
	struct pbx_instance *v = xcalloc(n ? n : 1, sizeof(*v));
	size_t i;
	int rc;
	for (i = 0; i < n; i++) {
		v[i].id = nodes[i].instance_id ? xstrdup(nodes[i].instance_id)
					       : gce_instance_name(g, nodes[i].name);
		v[i].zone = xstrdup(nodes[i].zone ? nodes[i].zone : g->zone);
	}
	rc = gce_delete_instances(g, v, n, err);
	pbx_instances_free(v, n);
	return rc;
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

const struct pbx_provider pbx_provider_gce = {
	.name = "gce",
	.open = gce_open,
	.close = gce_close,
	.plan = gce_plan,
	.create_begin = gce_create_begin,
	.create_poll = gce_create_poll,
	.list = gce_list,
	.destroy = gce_destroy,
	.remove_nodes = gce_remove_nodes,
	.login = gce_login,
	.layout = gce_layout,
	.images = &gce_image_ops,
};
