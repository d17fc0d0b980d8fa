/*
 * create.c - create_begin of the gce provider: the cluster's firewall
 * rules (firewall.c) and, on a start, a Cloud NAT where none serves the
 * network (router.c); then one bulkInsert per node kind (the head, each
 * node group; at most GCE_BULK_MAX instances a call) for the nodes that do
 * not exist yet, each node recorded (instance, zone, operation) at once.
 * The poll (poll.c) follows the operations, sends a stockout's nodes to
 * the next zone (gce_bulk again) and, on failure, removes what this
 * creation asked for (gce_clean_up): all or nothing.
 */
#include "cloud/gce/gce_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

#define GCE_BULK_MAX 1000 /* instances per bulkInsert (Compute Engine's limit) */

/* A start's node list has the head; a resize's only the nodes it adds. */
static int gce_has_head(const struct pbx_node_row *nodes, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(nodes[i].role, "head"))
			return 1;
	return 0;
}

/* One bulkInsert in `zone` for nodes idx[0..k) of kind grp (NULL = head),
 * at least `min` of which must be made. */
int gce_bulk(struct gce *g, const char *zone, const struct pbx_node_group *grp,
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
		char *iname = gce_instance_name(g, nodes[idx[i]].name);
		pbx_cloud_node_created(nodes, idx[i], iname, o.name, zone, h);
		free(iname);
	}
	return 0;
}

int gce_create_begin(void *ctx, struct pbx_node_row *nodes, size_t n,
		     const struct pbx_create_hooks *h, struct pbx_err *err)
{
	struct gce *g = ctx;
	const struct pbx_cluster_template *t = g->s->t;
	struct pbx_instance *have = NULL;
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
			if (pbx_cloud_node_of(t, &nodes[i], grp) && !gce_find(have, nhave, iname))
				idx[m++] = i;
			free(iname);
		}
		/* bulkInsert makes at most 1000 instances a call. */
		for (i = 0; rc == 0 && i < m; i += GCE_BULK_MAX) {
			size_t count = m - i < GCE_BULK_MAX ? m - i : GCE_BULK_MAX;
			rc = gce_bulk(g, g->zone, grp, nodes, idx + i, count,
				      pbx_cloud_min_count(t, grp, count), h, err);
		}
	}
	free(idx);
	pbx_instances_free(have, nhave);
	return rc;
}

/* All or nothing: after a failed creation every instance this creation
 * asked for goes (the nodes that were there before it, e.g. those of a
 * cluster being resized, stay); the firewall rules go too when nothing of
 * the cluster is left.  The message says so. */
void gce_clean_up(struct gce *g, const struct pbx_node_row *nodes, struct pbx_err *err)
{
	struct pbx_err e2 = PBX_ERR_INIT;
	struct pbx_instance *v = NULL;
	struct pbx_instance *left = NULL;
	size_t n = 0, nleft = 0, i, k;
	int rc;
	for (i = 0; i < g->npending; i++)
		for (k = 0; k < g->pending[i].n; k++) {
			v = xreallocarray(v, n + 1, sizeof(*v));
			memset(&v[n], 0, sizeof(v[n])); /* every other field NULL */
			v[n].id = gce_instance_name(g, nodes[g->pending[i].nodes[k]].name);
			v[n++].zone = xstrdup(g->pending[i].zone);
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
	pbx_instances_free(left, nleft);
	pbx_instances_free(v, n);
}
