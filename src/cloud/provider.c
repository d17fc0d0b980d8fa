/*
 * provider.c - the table of providers and what they share: the cluster's
 * labels (made here only) and the list of resources found by them.
 */
#include "cloud/provider.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct pbx_provider pbx_provider_local;
extern const struct pbx_provider pbx_provider_gce;

const struct pbx_provider *const pbx_providers[] = {
	&pbx_provider_local,
	&pbx_provider_gce,
	NULL,
};

const struct pbx_provider *pbx_provider_find(const char *cloud)
{
	size_t i;
	for (i = 0; pbx_providers[i]; i++)
		if (!strcmp(pbx_providers[i]->name, cloud))
			return pbx_providers[i];
	return NULL;
}

void pbx_events_stage(const struct pbx_cluster_events *ev, size_t node, const char *stage)
{
	if (ev && ev->stage)
		ev->stage(ev->ctx, node, stage);
}

void pbx_cluster_labels(const struct pbx_cluster_spec *s, struct pbx_labels *l)
{
	memset(l, 0, sizeof(*l));
	l->keys[0] = PBX_LABEL_CLUSTER;
	snprintf(l->values[0], sizeof(l->values[0]), "%s", s->name);
	l->n = 1;
	if (s->id > 0) {
		l->keys[1] = PBX_LABEL_CLUSTER_ID;
		snprintf(l->values[1], sizeof(l->values[1]), "%" PRId64, s->id);
		l->n = 2;
	}
}

void pbx_instances_free(struct pbx_instance *v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].zone);
		free(v[i].state);
	}
	free(v);
}
