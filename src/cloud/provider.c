/*
 * provider.c - the table of providers and helpers they share.
 */
#include "cloud/provider.h"

#include <string.h>

extern const struct pbx_provider pbx_provider_local;

static const struct pbx_provider *const providers[] = {
	&pbx_provider_local,
	NULL,
};

const struct pbx_provider *pbx_provider_find(const char *cloud)
{
	size_t i;
	for (i = 0; providers[i]; i++)
		if (!strcmp(providers[i]->name, cloud))
			return providers[i];
	return NULL;
}

void pbx_events_stage(const struct pbx_cluster_events *ev, size_t node, const char *stage)
{
	if (ev && ev->stage)
		ev->stage(ev->ctx, node, stage);
}
