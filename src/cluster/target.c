/*
 * target.c - a verb's cluster, resolved once (see cluster_session.h): the name
 * checked before anything is read or written, the store's row read once,
 * and the template chosen by one rule (-t TEMPLATE, else the template the
 * cluster was started from, else the cluster's own name).  `cluster start`
 * resolves its target here and hands it to the price note, the dry run and
 * the start itself, which opens the cluster on the row read here.
 */
#include "cluster/cluster.h"
#include "util/visible.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

int pbx_cluster_name_check(const char *name, struct pbx_err *err)
{
	char *shown;
	int rc;
	if (name && pbx_config_name_ok(name))
		return 0;
	shown = pbx_visible(name ? name : "", PBX_VISIBLE_LINE);
	rc = pbx_err_setc(err, PBX_EXIT_USAGE,
			  "cluster name '%s': 1 to 31 of a-z, 0-9 and '-', starting with a "
			  "letter and not ending in '-'",
			  shown);
	free(shown);
	return rc;
}

const char *pbx_cluster_template_for(const struct pbx_cluster_row *row, const char *name,
				     const char *tmpl)
{
	if (tmpl)
		return tmpl;
	if (row && row->template_name)
		return row->template_name;
	return name;
}

int pbx_cluster_target_resolve(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			       const char *tmpl, struct pbx_cluster_target *tg, struct pbx_err *err)
{
	memset(tg, 0, sizeof(*tg));
	if (pbx_cluster_name_check(name, err) < 0) /* before anything is read or written */
		return -1;
	tg->name = name;
	if (pbx_store_cluster_get(st, name, &tg->row, err) == 0) {
		tg->known = 1;
	} else if (err->code == PBX_EXIT_NOTFOUND) {
		pbx_err_clear(err);
	} else {
		return -1;
	}
	tg->tmpl_name = xstrdup(pbx_cluster_template_for(tg->known ? &tg->row : NULL, name, tmpl));
	tg->t = cfg ? pbx_config_template(cfg, tg->tmpl_name) : NULL;
	return 0;
}

int pbx_cluster_target_template(const struct pbx_cluster_target *tg, const struct pbx_config *cfg,
				struct pbx_err *err)
{
	if (tg->t)
		return 0;
	return pbx_err_setc(err, PBX_EXIT_NOTFOUND, "no cluster template named '%s' in %s%s",
			    tg->tmpl_name, cfg->path, pbx_config_none_hint(cfg));
}

void pbx_cluster_target_release(struct pbx_cluster_target *tg)
{
	pbx_cluster_row_free(&tg->row);
	free(tg->tmpl_name);
	memset(tg, 0, sizeof(*tg));
}
