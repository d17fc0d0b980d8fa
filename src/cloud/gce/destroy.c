/*
 * destroy.c - destroy and remove_nodes of the gce provider: the
 * instances' DELETEs fanned out (GCE_HTTP_POOL at once), then one
 * aggregated list a round until none of them is listed; destroy then
 * deletes pbx's router where no other cluster is left (router.c) and the
 * cluster's firewall rules (firewall.c).  remove_nodes (a resize) deletes
 * the nodes' instances only.  create.c's all-or-nothing clean-up goes
 * through here too.
 */
#include "cloud/gce/gce_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/fanout.h"
#include "util/xalloc.h"

static const long ok_404[] = { 404, 0 };

/* Whether a resource of a list is an instance (not a firewall rule or a
 * router, which are deleted by name after the instances). */
static int gce_is_instance(const struct pbx_instance *x)
{
	return pbx_instance_is_machine(x);
}

struct gce_delete_run {
	struct gce *g;
	const struct pbx_instance *v;
};

/* Whether err is Compute Engine's 400 resourceNotReady (gce_call puts
 * the reason in parentheses: gce_error_text). */
static int gce_not_ready(long status, const struct pbx_err *err)
{
	return status == 400 && strstr(err->msg, "(resourceNotReady)") != NULL;
}

/* One instance's DELETE (a 404: already gone).  Compute Engine refuses to
 * delete an instance it is busy with, as a Spot instance it preempted and
 * deletes itself after the notice (instanceTerminationAction DELETE), with
 * 400 resourceNotReady: asked again every GCE_NOT_READY_POLL_S until it is
 * gone or deletable, for as long as an operation is waited for. */
static int gce_delete_one(void *ctx, size_t i, struct pbx_err *err)
{
	struct gce_delete_run *r = ctx;
	const struct pbx_instance *x = &r->v[i];
	const struct timespec poll = { GCE_NOT_READY_POLL_S, 0 };
	json_t *reply = NULL;
	char *path;
	long st;
	int rc, waited;
	if (!gce_is_instance(x))
		return 0;
	path = xasprintf("projects/%s/zones/%s/instances/%s", r->g->project,
			 x->zone ? x->zone : r->g->zone, x->id);
	for (waited = 0;; waited += GCE_NOT_READY_POLL_S) {
		rc = gce_call(r->g, "DELETE", path, NULL, ok_404, &reply, &st, err);
		json_decref(reply);
		reply = NULL;
		if (rc == 0 || !gce_not_ready(st, err) || waited >= GCE_WAIT_LIMIT_S)
			break;
		nanosleep(&poll, NULL);
	}
	free(path);
	return rc;
}

/* What gce_delete_instances waits for: v's instances. */
struct gone {
	struct gce *g;
	const struct pbx_instance *v;
	size_t n;
};

/* One round of the wait until no instance of v is listed any more: one
 * aggregated list, however many instances there are. */
static int count_left(void *ctx, size_t *left, const char **one, struct pbx_err *err)
{
	struct gone *w = ctx;
	struct pbx_instance *have = NULL;
	size_t nhave = 0, i;
	if (gce_list_instances(w->g, &have, &nhave, err) < 0)
		return -1;
	for (i = 0; i < w->n; i++)
		if (gce_is_instance(&w->v[i]) && gce_find(have, nhave, w->v[i].id)) {
			(*left)++;
			*one = w->v[i].id;
		}
	pbx_instances_free(have, nhave);
	return 0;
}

/* Deletes the instances of v (GCE_HTTP_POOL calls at once; one at a time
 * in a dry run, so the printed order is stable) and waits until none is
 * listed.  What is already gone (404) is fine. */
int gce_delete_instances(struct gce *g, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	struct gce_delete_run run = { g, v };
	struct gone w = { g, v, n };
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
		rc = pbx_cloud_wait_gone(count_left, &w, GCE_WAIT_LIMIT_S, 250, err);
	return rc;
}

/* Deletes every instance, then pbx's shared router in each region of the
 * zones where no other cluster has instances left (with or without
 * compute_external_ips, which may have changed since the start), then the
 * firewall rules that are the cluster's own (a dry run prints every
 * DELETE). */
int gce_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	struct gce *g = ctx;
	struct pbx_instance *rest = NULL, *me = NULL;
	size_t nrest = 0, nme = 0;
	int rc;
	if (!g->s->uid)
		return pbx_err_set(err, "cluster %s: no cluster id, nothing is deleted",
				   g->s->name);
	/* a head deleting its own cluster (spec.self): itself after the rest,
	 * routers and firewall rules included */
	pbx_instances_split_self(v, n, g->s->self, &rest, &nrest, &me, &nme);
	rc = gce_delete_instances(g, rest, nrest, err);
	if (rc == 0)
		rc = gce_delete_routers(g, err);
	if (rc == 0)
		rc = gce_delete_firewalls(g, err);
	if (rc == 0 && nme)
		rc = gce_delete_instances(g, me, nme, err);
	free(rest);
	free(me);
	return rc;
}

/* A resize's removal: the nodes' instances, by the name pbx gives them
 * (the recorded one when there is one) in their recorded zone. */
int gce_remove_nodes(void *ctx, const struct pbx_node_row *nodes, size_t n, struct pbx_err *err)
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
