/*
 * slurm_sleep_plan.c - the plan of SLURM power saving (docs/power-saving.md;
 * not autostop's power-off, autostop_off.c): which nodes may sleep, which
 * SLURM makes anew, and a start's plan of them.  Pure: no I/O, no store,
 * no clock (cluster_plan.h; tests/cluster/test_plan.c).  The steps that
 * stage SLURM's programs are slurm_sleep_steps.c, the verb that runs them
 * slurm_sleep.c.
 */
#include "cluster/cluster_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

const struct pbx_node_group *pbx_power_group(const struct pbx_cluster_template *t, const char *name,
					     int *k)
{
	const struct pbx_node_group *g = t ? pbx_cloud_group_of(t, name) : NULL;
	*k = g ? atoi(name + strlen(g->name)) : 0;
	return g;
}

int pbx_power_may_sleep(const struct pbx_cluster_template *t, const char *name)
{
	int k;
	const struct pbx_node_group *g = pbx_power_group(t, name, &k);
	return g && g->min >= 0 && k > g->min;
}

int pbx_power_remade(const struct pbx_cluster_template *t, const char *name)
{
	int k;
	const struct pbx_node_group *g = pbx_power_group(t, name, &k);
	return g && k >= 1 && k <= g->count && pbx_power_saving(t) &&
	       (g->spot || pbx_power_may_sleep(t, name));
}

void pbx_power_plan(struct pbx_cluster *c, struct pbx_node_row *planned, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(planned[i].role, "compute") &&
		    pbx_power_may_sleep(c->spec.t, planned[i].name)) {
			free(planned[i].state);
			planned[i].state = xstrdup(PBX_NODE_ASLEEP);
		}
}
