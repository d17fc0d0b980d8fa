/*
 * router.c - pbx's Cloud Router with a Cloud NAT, through which compute
 * nodes without an external address reach the internet.  A NAT covering
 * every subnetwork must be the only NAT on its network in a region, so pbx
 * never makes one per cluster: a start (create.c) uses the NAT that serves
 * the network in the region already (pbx's shared router, or one the
 * project had), and makes pbx's (gce_router_name, bodies.c) only when
 * there is none; list (list.c) shows it and destroy (destroy.c) deletes it
 * only where no other cluster has instances in the region.
 */
#include "cloud/gce/gce_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static const long ok_404[] = { 404, 0 };

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
	struct pbx_instance *v = NULL;
	size_t n = 0, i;
	int rc = gce_list_instances_where(g, filter, &v, &n, err), used = 0;
	for (i = 0; rc == 0 && i < n; i++)
		used |= gce_zone_in(v[i].zone, region) &&
			!(v[i].cluster && !strcmp(v[i].cluster, g->s->uid));
	pbx_instances_free(v, n);
	free(filter);
	return rc < 0 ? -1 : used;
}

/* A Cloud NAT in every region of the cluster's zones, so compute nodes
 * without an external address reach the internet (apt-get) from their
 * first boot: the one serving the network there already, else pbx's
 * router, made and waited for (a 409: a start beside this one made it).
 * None when compute nodes have external addresses. */
int gce_routers(struct gce *g, struct pbx_err *err)
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
int gce_list_routers(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	char **regions = gce_regions(g);
	size_t i;
	int rc = 0;
	for (i = 0; rc == 0 && regions[i]; i++) {
		rc = gce_router_is_last(g, regions[i], err);
		if (rc == 1) {
			char *name = gce_router_name(g);
			pbx_instances_add(v, n, name, regions[i], "ROUTER", NULL, 0);
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
int gce_delete_routers(struct gce *g, struct pbx_err *err)
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
