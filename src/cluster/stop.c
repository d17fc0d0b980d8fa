/*
 * stop.c - `pbx cluster stop`: remove every process, port, file and cloud
 * resource of a cluster.  The provider finds what to remove by label (the
 * cluster's name and id; for the local provider: the cluster's directory),
 * so a cluster the store has half-forgotten is still removed completely.
 *
 * A cluster the store does not know has no id here: nothing is removed
 * then, since the name alone may be another pbx home's cluster.  What
 * carries the name is listed (with the ids) and `--id ID` removes exactly
 * what carries one id.
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
int pbx_stop_by_label(const struct pbx_provider *p, void *pctx, int always, int *found,
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

/* Runs fn on each provider configured here, opened for `spec`.  A
 * provider whose section is absent answers open with PBX_EXIT_NOTFOUND
 * and is skipped; one that cannot look (no credentials here) does not keep
 * the others from looking: the first such error goes to *first and
 * *failed counts them.  Returns how many resources fn reported. */
typedef int (*stop_each_fn)(const struct pbx_provider *p, void *pctx, size_t *found, void *ctx,
			    struct pbx_err *err);
static size_t stop_each_provider(const struct pbx_cluster_spec *spec, stop_each_fn fn, void *ctx,
				 int *failed, struct pbx_err *first)
{
	size_t i, total = 0;
	*failed = 0;
	for (i = 0; pbx_providers[i]; i++) {
		const struct pbx_provider *p = pbx_providers[i];
		struct pbx_err e = PBX_ERR_INIT;
		void *pctx = NULL;
		size_t found = 0;
		int rc;
		if (p->open(spec, &pctx, &e) < 0) {
			if (e.code != PBX_EXIT_NOTFOUND && !(*failed)++)
				*first = e;
			continue;
		}
		rc = fn(p, pctx, &found, ctx, &e);
		p->close(pctx);
		if (rc < 0 && !(*failed)++)
			*first = e;
		if (rc == 0)
			total += found;
	}
	return total;
}

/* --id: removes what carries the id (and the name). */
static int stop_orphan_one(const struct pbx_provider *p, void *pctx, size_t *found, void *ctx,
			   struct pbx_err *err)
{
	int any = 0, rc = pbx_stop_by_label(p, pctx, 0, &any, err);
	(void)ctx;
	*found = (size_t)any;
	return rc;
}

/* A survey: hands each resource carrying the name to the caller. */
struct stop_survey {
	const struct pbx_stop_opts *o;
};

static int stop_survey_one(const struct pbx_provider *p, void *pctx, size_t *found, void *ctx,
			   struct pbx_err *err)
{
	struct stop_survey *sv = ctx;
	struct pbx_instance *v = NULL;
	size_t n = 0, i;
	if (p->list(pctx, &v, &n, err) < 0)
		return -1;
	for (i = 0; i < n && sv->o && sv->o->found; i++)
		sv->o->found(sv->o->found_ctx, p->name, &v[i]);
	*found = n;
	pbx_instances_free(v, n);
	return 0;
}

/* A cluster the store does not know as live.  With o->uid (--id) every
 * provider configured here removes what carries that id and the name;
 * without, nothing is removed: what carries the name (whoever made it)
 * goes to o->found and the error says how to remove one cluster's. */
static int stop_orphan(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       const struct pbx_stop_opts *o, struct pbx_err *err)
{
	struct pbx_cluster_spec spec = { 0 };
	struct stop_survey sv = { o };
	struct pbx_err first = PBX_ERR_INIT;
	const char *uid = o ? o->uid : NULL;
	size_t found;
	int failed;
	spec.cfg = cfg;
	spec.name = name;
	spec.store = st;
	spec.uid = uid;
	spec.self = o && uid ? o->self : NULL;
	found = uid ? stop_each_provider(&spec, stop_orphan_one, NULL, &failed, &first)
		    : stop_each_provider(&spec, stop_survey_one, &sv, &failed, &first);
	if (failed && !found) {
		*err = first;
		return pbx_err_prefix(err, "cannot look for cluster '%s'", name);
	}
	if (!found && uid)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND,
				    "nothing carries cluster name '%s' and "
				    "id %s",
				    name, uid);
	if (!found)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no cluster named '%s'", name);
	if (!uid)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND,
				    "cluster '%s' is not in this store "
				    "(%s): nothing was deleted; %zu resource%s the name (listed "
				    "above), perhaps another pbx home's; to delete one cluster's "
				    "resources: pbx cluster stop --id ID %s",
				    name, pbx_home(), found, found == 1 ? " carries" : "s carry",
				    name);
	return 0;
}

int pbx_cluster_stop(struct pbx_store *st, const struct pbx_config *cfg,
		     struct pbx_cluster_target *tg, const struct pbx_stop_opts *o,
		     const struct pbx_cluster_events *ev, struct pbx_err *err)
{
	struct pbx_cluster *c;
	const char *name = tg->name;
	size_t i;
	int rc;
	if (o && o->uid && !pbx_cluster_uid_valid(o->uid))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--id %s: not a cluster id (32 lowercase hex "
				    "digits, or an older pbx's decimal number)",
				    o->uid);
	if (!tg->known)
		return stop_orphan(st, cfg, name, o, err);
	/* the head's store knows its cluster (adopted after each start,
	 * headdelete.c): deleted by label all the same, the head last */
	if (o && o->self && o->uid && tg->row.uid && !strcmp(o->uid, tg->row.uid))
		return stop_orphan(st, cfg, name, o, err);
	if (o && o->self)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--self is for a head deleting its own cluster; cluster '%s' "
				    "in this store (%s) is another (id %s)",
				    name, pbx_home(), tg->row.uid ? tg->row.uid : "-");
	tg->known = 0; /* the row is c's */
	if (pbx_cluster_open_row(st, cfg, &tg->row, &c, err) < 0)
		return -1;
	if (o && o->uid && strcmp(o->uid, c->row.uid) != 0) {
		rc = pbx_err_setc(err, PBX_EXIT_USAGE,
				  "cluster '%s' in this store has id %s, not "
				  "%s: --id is for a cluster this store does not know (stop it "
				  "from its own pbx home)",
				  name, c->row.uid, o->uid);
		pbx_cluster_close(c);
		return rc;
	}
	stop_announce(c, ev);
	for (i = 0; i < c->nnodes; i++)
		pbx_events_stage(ev, i, "stopping");
	pbx_cluster_mark(c, "stopping");
	pbx_ssh_pool_free(c->pool); /* close our connections before the sshds go */
	c->pool = NULL;
	rc = pbx_stop_by_label(c->provider, c->pctx, 1, NULL, err);
	if (rc == 0) /* pbx's own files of the cluster: munge key, known_hosts */
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
