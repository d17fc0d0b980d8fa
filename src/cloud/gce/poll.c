/*
 * poll.c - create_poll of the gce provider: the bulkInsert operations
 * (create.c) followed to DONE, a stockout sending the same nodes to the
 * next zone of clouds.gce.zones and any other error read into a clear
 * message; then the instances listed by label until every node's is
 * RUNNING with an address, which its row then takes
 * (pbx_cloud_node_running).  A node whose instance is TERMINATED
 * (autostop) is started again; under min_nodes a node Compute Engine did
 * not make is let go.  A failure removes what the creation asked for
 * (gce_clean_up, create.c): all or nothing.
 */
#include "cloud/gce/gce_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/xalloc.h"

#define GCE_POLL_LIMIT 3000 /* create_poll calls (about 200 ms apart): 10 min */

static const long ok_404[] = { 404, 0 };

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
	if (strcmp(r->state, PBX_NODE_NOT_CREATED) != 0)
		pbx_cloud_node_state(nodes, i, PBX_NODE_NOT_CREATED,
				     "not created (quota or capacity)", h);
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
			     const struct pbx_instance *x, const struct pbx_create_hooks *h,
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
					   x->id);
		return 0;
	}
	path = xasprintf("projects/%s/zones/%s/instances/%s/start", g->project,
			 x->zone ? x->zone : g->zone, x->id);
	rc = gce_call(g, "POST", path, NULL, ok_404, &r, &st, err);
	json_decref(r);
	free(path);
	if (rc < 0)
		return pbx_err_prefix(err, "starting stopped instance %s", x->id);
	if (!g->started_at)
		g->started_at = time(NULL);
	pbx_cloud_node_state(nodes, i, "starting", "starting (was TERMINATED)", h);
	return 0;
}

int gce_create_poll(void *ctx, struct pbx_node_row *nodes, size_t n,
		    const struct pbx_create_hooks *h, struct pbx_err *err)
{
	struct gce *g = ctx;
	struct pbx_instance *have = NULL;
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
		const struct pbx_instance *x = gce_find(have, nhave, iname);
		free(iname);
		if (!x && gce_not_made(g, nodes, i, h)) {
			skipped++;
			continue;
		}
		if (!x) {
			pbx_instances_free(have, nhave);
			iname = gce_instance_name(g, nodes[i].name);
			pbx_err_set(err, "instance %s is gone (preempted or deleted)", iname);
			free(iname);
			return -1;
		}
		if (!strcmp(x->state, "TERMINATED") &&
		    gce_start_stopped(g, nodes, i, x, h, err) < 0) {
			pbx_instances_free(have, nhave);
			return -1;
		}
		if (strcmp(x->state, "RUNNING") != 0 || !x->private_ip)
			continue;
		rc = pbx_cloud_node_running(g->base, nodes, i, x->id, x->uid, x->private_ip,
					    x->public_ip, x->zone, h, err);
		if (rc < 0) {
			pbx_instances_free(have, nhave);
			return -1;
		}
		if (rc > 0)
			continue; /* once the head runs */
		running++;
	}
	pbx_instances_free(have, nhave);
	if (skipped && gce_too_few(g, nodes, n, skipped, err) < 0) {
		gce_clean_up(g, nodes, err);
		return -1;
	}
	return running + skipped == n;
}
