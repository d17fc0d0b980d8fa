/*
 * dryrun.c - `start --dry-run` and `stop --dry-run`: the provider runs
 * with spec.dry_run set, so every request it would send goes to a print
 * callback instead (and the cloud is taken to hold nothing); the store is
 * only read.
 */
#include "cluster/cluster_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* The template for `name`: -t, else the one the store recorded, else
 * name; with the recorded sizes of an existing cluster (*sized, whose
 * group array *groups the caller frees). */
static const struct pbx_cluster_template *dry_template(struct pbx_store *st,
						       const struct pbx_config *cfg,
						       const char *name, const char *tmpl,
						       int64_t *id,
						       struct pbx_cluster_template *sized,
						       struct pbx_node_group **groups)
{
	struct pbx_cluster_row row;
	struct pbx_err err = PBX_ERR_INIT;
	const struct pbx_cluster_template *t = NULL;
	char *json = NULL;
	*id = 0;
	*groups = NULL;
	if (pbx_store_cluster_get(st, name, &row, &err) == 0) {
		*id = row.id;
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

static int dry_open(const struct pbx_provider **p, struct pbx_cluster_spec *spec, void **pctx,
		    struct pbx_err *err)
{
	const char *cloud = spec->t ? spec->t->cloud : NULL;
	*p = cloud ? pbx_provider_find(cloud) : NULL;
	if (!*p)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "cloud '%s' is not supported",
				    cloud ? cloud : "?");
	if (!strcmp((*p)->name, "local"))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "--dry-run: cloud local sends no "
				    "requests (its nodes are processes on this machine)");
	return (*p)->open(spec, pctx, err);
}

int pbx_cluster_start_dry(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			  const char *tmpl, pbx_request_fn print, void *ctx, struct pbx_err *err)
{
	struct pbx_cluster_spec spec = { .cfg = cfg, .name = name, .store = st, .dry_run = 1,
					 .print_request = print, .print_ctx = ctx };
	const struct pbx_provider *p;
	struct pbx_node_row *nodes = NULL;
	size_t n = 0;
	struct pbx_cluster_template sized;
	struct pbx_node_group *groups = NULL;
	void *pctx = NULL;
	int rc;
	spec.t = dry_template(st, cfg, name, tmpl, &spec.id, &sized, &groups);
	if (!spec.t)
		rc = pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no cluster template named '%s' in %s",
				  tmpl ? tmpl : name, cfg->path);
	else
		rc = dry_open(&p, &spec, &pctx, err);
	if (rc == 0)
		rc = p->plan(pctx, &nodes, &n, err);
	if (rc == 0)
		rc = p->create_begin(pctx, nodes, n, NULL, err);
	pbx_node_rows_free(nodes, n);
	if (pctx)
		p->close(pctx);
	free(groups);
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
		x->id = xstrdup(rows[i].instance_id);
		x->zone = rows[i].zone ? xstrdup(rows[i].zone) : NULL;
		x->state = xstrdup(rows[i].state);
	}
	pbx_node_rows_free(rows, nrows);
}

int pbx_cluster_stop_dry(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			 pbx_request_fn print, void *ctx, struct pbx_err *err)
{
	struct pbx_cluster_spec spec = { .cfg = cfg, .name = name, .store = st, .dry_run = 1,
					 .print_request = print, .print_ctx = ctx };
	const struct pbx_provider *p;
	struct pbx_instance *v = NULL;
	size_t n = 0;
	struct pbx_cluster_template sized;
	struct pbx_node_group *groups = NULL;
	void *pctx = NULL;
	int rc;
	spec.t = dry_template(st, cfg, name, NULL, &spec.id, &sized, &groups);
	if (!spec.t)
		rc = pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no cluster template for '%s' in %s",
				  name, cfg->path);
	else
		rc = dry_open(&p, &spec, &pctx, err);
	if (rc == 0)
		rc = p->list(pctx, &v, &n, err);
	if (rc == 0 && spec.id)
		dry_add_known(st, spec.id, &v, &n);
	if (rc == 0)
		rc = p->destroy(pctx, v, n, err);
	pbx_instances_free(v, n);
	if (pctx)
		p->close(pctx);
	free(groups);
	return rc;
}
