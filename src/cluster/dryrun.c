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

/* The template for `name`: -t, else the one the store recorded, else
 * name; with the recorded sizes of an existing cluster (*sized, whose
 * group array *groups the caller frees).  *id and uid get the cluster's
 * store number and id; uid stays "" when the store does not know it. */
static const struct pbx_cluster_template *
dry_template(struct pbx_store *st, const struct pbx_config *cfg, const char *name, const char *tmpl,
	     int64_t *id, char uid[PBX_CLUSTER_UID_LEN + 1], struct pbx_cluster_template *sized,
	     struct pbx_node_group **groups)
{
	struct pbx_cluster_row row;
	struct pbx_err err = PBX_ERR_INIT;
	const struct pbx_cluster_template *t = NULL;
	char *json = NULL;
	*id = 0;
	uid[0] = '\0';
	*groups = NULL;
	if (pbx_store_cluster_get(st, name, &row, &err) == 0) {
		*id = row.id;
		snprintf(uid, PBX_CLUSTER_UID_LEN + 1, "%s", row.uid);
		if (!tmpl && row.template_name)
			t = pbx_config_template(cfg, row.template_name);
		json = row.template_json ? xstrdup(row.template_json) : NULL;
		pbx_cluster_row_free(&row);
	}
	if (!t)
		t = pbx_config_template(cfg, tmpl ? tmpl : name);
	if (t && json) {
		pbx_template_sized(t, json, sized, groups);
		t = sized;
	}
	free(json);
	return t;
}

char *pbx_cluster_dry_template_json(struct pbx_store *st, const struct pbx_config *cfg,
				    const char *name, const char *tmpl)
{
	struct pbx_cluster_template sized;
	struct pbx_node_group *groups = NULL;
	int64_t id;
	char uid[PBX_CLUSTER_UID_LEN + 1];
	const struct pbx_cluster_template *t =
		dry_template(st, cfg, name, tmpl, &id, uid, &sized, &groups);
	char *json = t ? pbx_template_json(t) : NULL;
	free(groups);
	return json;
}

int pbx_cluster_price(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		      const char *tmpl, int offline, struct pbx_price_quote *q, struct pbx_err *err)
{
	struct pbx_cluster_template sized;
	struct pbx_node_group *groups = NULL;
	int64_t id;
	char uid[PBX_CLUSTER_UID_LEN + 1];
	const struct pbx_cluster_template *t =
		dry_template(st, cfg, name, tmpl, &id, uid, &sized, &groups);
	int rc;
	memset(q, 0, sizeof(*q));
	if (!t)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no cluster template named '%s' in %s",
				    tmpl ? tmpl : name, cfg->path);
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
		     const char *name, const char *tmpl, pbx_request_fn print, void *ctx,
		     struct pbx_err *err)
{
	memset(d, 0, sizeof(*d));
	if (pbx_cluster_name_check(name, err) < 0)
		return -1;
	d->spec = (struct pbx_cluster_spec){ .cfg = cfg,
					     .name = name,
					     .store = st,
					     .dry_run = 1,
					     .print_request = print,
					     .print_ctx = ctx };
	d->spec.t = dry_template(st, cfg, name, tmpl, &d->spec.id, d->uid, &d->sized, &d->groups);
	if (!d->spec.t)
		return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no cluster template named '%s' in %s",
				    tmpl ? tmpl : name, cfg->path);
	/* a new cluster: the requests show a fresh id, as a start would make */
	if (!d->uid[0] && pbx_cluster_uid_new(d->uid, err) < 0)
		return -1;
	d->spec.uid = d->uid;
	return dry_open(&d->p, &d->spec, &d->pctx, err);
}

static void dry_end(struct dry *d)
{
	if (d->pctx)
		d->p->close(d->pctx);
	free(d->groups);
}

int pbx_cluster_start_dry(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			  const char *tmpl, pbx_request_fn print, void *ctx, struct pbx_err *err)
{
	struct dry d;
	struct pbx_node_row *nodes = NULL;
	size_t n = 0;
	int rc = dry_begin(&d, st, cfg, name, tmpl, print, ctx, err);
	if (rc == 0)
		rc = d.p->plan(d.pctx, &nodes, &n, err);
	if (rc == 0)
		rc = d.p->create_begin(d.pctx, nodes, n, NULL, err);
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
	struct pbx_instance *v = NULL;
	size_t n = 0;
	int survey = 0, rc;
	if (uid && !pbx_cluster_uid_valid(uid))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--id %s: not a cluster id", uid);
	rc = dry_begin(&d, st, cfg, name, NULL, print, ctx, err);
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
	return rc;
}
