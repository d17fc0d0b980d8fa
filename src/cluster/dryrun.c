/*
 * dryrun.c - `start --dry-run` and `stop --dry-run`: the provider runs
 * with spec.dry_run set, so every request it would send goes to a print
 * callback instead (and the cloud is taken to hold nothing); the store is
 * only read.
 */
#include "cluster/cluster_internal.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tg's template, with the recorded sizes of an existing cluster
 * (*sized, whose group array *groups the caller frees), or NULL. */
static const struct pbx_cluster_template *dry_template(const struct pbx_cluster_target *tg,
						       struct pbx_cluster_template *sized,
						       struct pbx_node_group **groups)
{
	*groups = NULL;
	if (!tg->t || !tg->known || !tg->row.template_json)
		return tg->t;
	pbx_template_sized(tg->t, tg->row.template_json, sized, groups);
	return sized;
}

char *pbx_cluster_dry_template_json(const struct pbx_cluster_target *tg)
{
	struct pbx_cluster_template sized;
	struct pbx_node_group *groups = NULL;
	const struct pbx_cluster_template *t = dry_template(tg, &sized, &groups);
	char *json = t ? pbx_template_json(t) : NULL;
	free(groups);
	return json;
}

int pbx_cluster_price(struct pbx_store *st, const struct pbx_config *cfg,
		      const struct pbx_cluster_target *tg, int offline, struct pbx_price_quote *q,
		      struct pbx_err *err)
{
	struct pbx_cluster_template sized;
	struct pbx_node_group *groups = NULL;
	const struct pbx_cluster_template *t = dry_template(tg, &sized, &groups);
	int rc;
	memset(q, 0, sizeof(*q));
	if (!t)
		return pbx_cluster_target_template(tg, cfg, err);
	rc = pbx_price_quote(st, cfg, t, offline, q, err);
	free(groups);
	return rc;
}

static int dry_open(const struct pbx_provider **p, struct pbx_cluster_spec *spec, void **pctx,
		    struct pbx_err *err)
{
	const char *cloud = spec->t ? spec->t->cloud : NULL;
	*p = cloud ? pbx_provider_find(cloud) : NULL;
	if (!*p)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "cloud '%s' is not supported",
				    cloud ? cloud : "?");
	if (!strcmp((*p)->name, "local"))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "--dry-run: cloud local sends no "
				    "requests (its nodes are processes on this machine)");
	return (*p)->open(spec, pctx, err);
}

/* A dry run's provider context, opened on the cluster's template (sized
 * as recorded) with requests going to `print`. */
struct dry {
	struct pbx_cluster_spec spec;
	char uid[PBX_CLUSTER_UID_LEN + 1]; /* spec.uid */
	struct pbx_cluster_template sized;
	struct pbx_node_group *groups;
	const struct pbx_provider *p;
	void *pctx;
};

static int dry_begin(struct dry *d, struct pbx_store *st, const struct pbx_config *cfg,
		     const struct pbx_cluster_target *tg, pbx_request_fn print, void *ctx,
		     struct pbx_err *err)
{
	memset(d, 0, sizeof(*d));
	d->spec = (struct pbx_cluster_spec){ .cfg = cfg,
					     .name = tg->name,
					     .store = st,
					     .dry_run = 1,
					     .print_request = print,
					     .print_ctx = ctx };
	d->spec.t = dry_template(tg, &d->sized, &d->groups);
	if (!d->spec.t)
		return pbx_cluster_target_template(tg, cfg, err);
	if (tg->known) {
		d->spec.id = tg->row.id;
		d->spec.slot = tg->row.slot;
		snprintf(d->uid, sizeof(d->uid), "%s", tg->row.uid);
	} else if (pbx_cluster_uid_new(d->uid, err) < 0) {
		/* a new cluster: the requests show a fresh id, as a start would make */
		return -1;
	}
	d->spec.uid = d->uid;
	return dry_open(&d->p, &d->spec, &d->pctx, err);
}

static void dry_end(struct dry *d)
{
	if (d->pctx)
		d->p->close(d->pctx);
	free(d->groups);
}

/* Leaves out the nodes that start asleep (power saving): a start makes
 * them only when SLURM wakes them. */
static void dry_drop_asleep(const struct pbx_cluster_template *t, struct pbx_node_row *nodes,
			    size_t *n)
{
	size_t i, k = 0;
	for (i = 0; i < *n; i++) {
		if (!strcmp(nodes[i].role, "compute") && pbx_power_may_sleep(t, nodes[i].name)) {
			pbx_node_row_release(&nodes[i]);
			continue;
		}
		nodes[k++] = nodes[i];
	}
	*n = k;
}

int pbx_cluster_start_dry(struct pbx_store *st, const struct pbx_config *cfg,
			  const struct pbx_cluster_target *tg, pbx_request_fn print, void *ctx,
			  struct pbx_err *err)
{
	struct dry d;
	struct pbx_node_row *nodes = NULL;
	size_t n = 0;
	int rc = dry_begin(&d, st, cfg, tg, print, ctx, err);
	if (rc == 0)
		rc = d.p->plan(d.pctx, &nodes, &n, err);
	if (rc == 0) {
		dry_drop_asleep(tg->t, nodes, &n);
		rc = d.p->create_begin(d.pctx, nodes, n, NULL, err);
	}
	pbx_node_rows_free(nodes, n);
	dry_end(&d);
	return rc;
}

/* A dry run lists nothing from the cloud: the instances the store knows
 * are the ones a real stop would find. */
static void dry_add_known(struct pbx_store *st, int64_t id, struct pbx_instance **v, size_t *n)
{
	struct pbx_node_row *rows = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t nrows = 0, i;
	if (pbx_store_node_list(st, id, &rows, &nrows, &err) < 0)
		return;
	for (i = 0; i < nrows; i++) {
		struct pbx_instance *x;
		if (!rows[i].instance_id)
			continue;
		*v = xreallocarray(*v, *n + 1, sizeof(**v));
		x = &(*v)[(*n)++];
		memset(x, 0, sizeof(*x));
		x->id = xstrdup(rows[i].instance_id);
		x->zone = rows[i].zone ? xstrdup(rows[i].zone) : NULL;
		x->state = xstrdup(rows[i].state);
	}
	pbx_node_rows_free(rows, nrows);
}

int pbx_cluster_stop_dry(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			 const char *uid, pbx_request_fn print, void *ctx, struct pbx_err *err)
{
	struct dry d;
	struct pbx_cluster_target tg;
	struct pbx_instance *v = NULL;
	size_t n = 0;
	int survey = 0, rc;
	if (uid && !pbx_cluster_uid_valid(uid))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--id %s: not a cluster id", uid);
	if (pbx_cluster_target_resolve(st, cfg, name, NULL, &tg, err) < 0)
		return -1;
	rc = dry_begin(&d, st, cfg, &tg, print, ctx, err);
	if (rc == 0 && !d.spec.id) {
		/* not in the store: --id's cluster, else a survey by name */
		d.spec.uid = uid;
		survey = !uid;
	} else if (rc == 0 && uid && strcmp(uid, d.uid) != 0) {
		rc = pbx_err_setc(err, PBX_EXIT_USAGE,
				  "cluster '%s' in this store has id %s, not %s", name, d.uid, uid);
	}
	if (rc == 0)
		rc = d.p->list(d.pctx, &v, &n, err);
	if (rc == 0 && d.spec.id)
		dry_add_known(st, d.spec.id, &v, &n);
	if (rc == 0 && !survey)
		rc = d.p->destroy(d.pctx, v, n, err);
	pbx_instances_free(v, n);
	dry_end(&d);
	pbx_cluster_target_release(&tg);
	return rc;
}
