/*
 * head_plan.c - which clusters' heads run pbx themselves (docs/autostop.md,
 * docs/head-identity.md): one that deletes its own cluster (autostop_action:
 * delete), a cloud cluster's head that makes and removes the nodes of
 * SLURM power saving, and a head with its own cloud identity, which stages
 * the experiments' buckets itself (docs/data.md).  Pure predicates on an open cluster's template and row
 * (cluster_plan.h); what the head gets staged for it is headdelete.c.
 */
#include "cluster/cluster_internal.h"

#include <string.h>

int pbx_head_deletes(const struct pbx_cluster *c)
{
	return c->spec.t && c->spec.t->autostop_delete;
}

/* The head's own identity on its cloud: a service account (gce) or an
 * instance profile (aws). */
static int head_identity(const struct pbx_cluster *c)
{
	const struct pbx_cluster_template *t = c->spec.t;
	if (!t || !c->row.cloud)
		return 0;
	return (!strcmp(c->row.cloud, "gce") && t->head_service_account) ||
	       (!strcmp(c->row.cloud, "aws") && t->head_instance_profile);
}

int pbx_head_runs_pbx(const struct pbx_cluster *c)
{
	/* power saving on a cloud: the head makes and removes the nodes */
	return pbx_head_deletes(c) || head_identity(c) ||
	       (pbx_power_saving(c->spec.t) && strcmp(c->row.cloud, "local") != 0);
}

int pbx_head_stages_data(const struct pbx_cluster *c, const char *key)
{
	const char *scheme = !strcmp(c->row.cloud, "gce") ? "gs://" : "s3://";
	return c->here < 0 && head_identity(c) && pbx_head_runs_pbx(c) &&
	       !strncmp(key, scheme, strlen(scheme));
}
