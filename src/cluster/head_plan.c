/*
 * head_plan.c - which clusters' heads run pbx themselves (docs/autostop.md,
 * docs/head-identity.md): one that deletes its own cluster (autostop_action:
 * delete), and a cloud cluster's head that makes and removes the nodes of
 * SLURM power saving.  Pure predicates on an open cluster's template and row
 * (cluster_plan.h); what the head gets staged for it is headdelete.c.
 */
#include "cluster/cluster_internal.h"

#include <string.h>

int pbx_head_deletes(const struct pbx_cluster *c)
{
	return c->spec.t && c->spec.t->autostop_delete;
}

int pbx_head_runs_pbx(const struct pbx_cluster *c)
{
	/* power saving on a cloud: the head makes and removes the nodes */
	return pbx_head_deletes(c) ||
	       (pbx_power_saving(c->spec.t) && strcmp(c->row.cloud, "local") != 0);
}
