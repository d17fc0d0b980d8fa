/*
 * stop.c - `pbx cluster stop`: remove every process, port, file and cloud
 * resource of a cluster.  The provider finds what to remove by label (for
 * the local provider: the cluster's directory), so a cluster the store has
 * half-forgotten is still removed completely.
 */
#include "cluster/cluster_internal.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

static int stop_forget_pins(struct pbx_store *st, const char *name, struct pbx_err *err)
{
	char *prefix = xasprintf("%s/", name);
	int removed, rc = pbx_store_hostkey_forget_prefix(st, prefix, &removed, err);
	free(prefix);
	return rc;
}

static void stop_announce(const struct pbx_cluster *c, const struct pbx_cluster_events *ev)
{
	const char **names;
	size_t i;
	if (!ev || !ev->nodes)
		return;
	names = xcalloc(c->nnodes ? c->nnodes : 1, sizeof(*names));
	for (i = 0; i < c->nnodes; i++)
		names[i] = c->nodes[i].name;
	ev->nodes(ev->ctx, c->nnodes, names);
	free(names);
}

/* Lists what carries the cluster's labels and removes it (with `always`,
 * destroy runs even when the list is empty: it also removes what belongs
 * to the cluster as a whole); *found says whether anything was listed. */
static int stop_by_label(const struct pbx_provider *p, void *pctx, int always, int *found,
			 struct pbx_err *err)
{
	struct pbx_instance *v = NULL;
	size_t n = 0;
	int rc = p->list(pctx, &v, &n, err), round;
	if (rc == 0 && (n > 0 || always))
		rc = p->destroy(pctx, v, n, err);
	if (found)
		*found = n > 0;
	/* What a creation still under way made meanwhile: look again. */
	for (round = 0; rc == 0 && n > 0 && round < 2; round++) {
		pbx_instances_free(v, n);
		v = NULL;
		n = 0;
		rc = p->list(pctx, &v, &n, err);
		if (rc == 0 && n > 0)
			rc = p->destroy(pctx, v, n, err);
	}
	pbx_instances_free(v, n);
	return rc;
}

/* Removes what is left of a cluster the store does not know as live: each
 * provider that is configured here looks for the cluster's labels.  A
 * provider whose section is absent answers open with PBX_EXIT_NOTFOUND. */
static int stop_orphan(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       struct pbx_err *err)
{
	struct pbx_cluster_spec spec = {0};
	struct pbx_err first = PBX_ERR_INIT;
	int any = 0, failed = 0;
	size_t i;
	spec.cfg = cfg;
	spec.name = name;
	spec.store = st;
	/* A provider that cannot look (no credentials here) does not keep the
	 * others from removing what they find; its error counts only when
	 * nothing was found. */
	for (i = 0; pbx_providers[i]; i++) {
		const struct pbx_provider *p = pbx_providers[i];
		struct pbx_err e = PBX_ERR_INIT;
		void *pctx = NULL;
		int found = 0, rc;
		if (p->open(&spec, &pctx, &e) < 0) {
			if (e.code != PBX_EXIT_NOTFOUND && !failed++)
				first = e;
			continue;
		}
		rc = stop_by_label(p, pctx, 0, &found, &e);
		p->close(pctx);
		if (rc < 0 && !failed++)
			first = e;
		any |= found && rc == 0;
	}
	if (failed && !any) {
		*err = first;
		return pbx_err_prefix(err, "cannot look for cluster '%s'", name);
	}
	if (!any)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no cluster named '%s'", name);
	return 0;
}

int pbx_cluster_stop(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		     const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	struct pbx_cluster *c;
	size_t i;
	int rc;
	if (pbx_cluster_open(st, cfg, name, &c, err) < 0) {
		if (err->code != PBX_EXIT_NOTFOUND)
			return -1;
		pbx_err_clear(err);
		return stop_orphan(st, cfg, name, err);
	}
	stop_announce(c, ev);
	for (i = 0; i < c->nnodes; i++)
		pbx_events_stage(ev, i, "stopping");
	pbx_cluster_mark(c, "stopping");
	pbx_ssh_pool_free(c->pool);   /* close our connections before the sshds go */
	c->pool = NULL;
	rc = stop_by_label(c->provider, c->pctx, 1, NULL, err);
	if (rc == 0)   /* pbx's own files of the cluster: munge key, known_hosts */
		rc = pbx_rm_rf(c->dir, err);
	if (rc == 0)
		rc = stop_forget_pins(st, name, err);
	if (rc == 0) {
		for (i = 0; i < c->nnodes; i++) {
			pbx_store_node_set_state(st, c->row.id, c->nodes[i].name, "deleted", err);
			pbx_events_stage(ev, i, "deleted");
		}
		pbx_cluster_mark(c, "deleted");
	}
	pbx_cluster_close(c);
	return rc;
}
