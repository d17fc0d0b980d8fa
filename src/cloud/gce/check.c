/*
 * check.c - `pbx config check --clouds` on Compute Engine: one regions.get
 * of the zone's region (authenticated: the credentials work, and it names
 * the project's quotas there), and the quotas a template needs: INSTANCES
 * (every node at once) and each GPU model's (NVIDIA_T4_GPUS, or
 * PREEMPTIBLE_NVIDIA_T4_GPUS for spot nodes where the project has it),
 * against the limit less what is in use.
 */
#include "cloud/gce/gce.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The regional quota metric of GPU model `type` (nvidia-tesla-t4 ->
 * NVIDIA_T4_GPUS, nvidia-l4 -> NVIDIA_L4_GPUS), PREEMPTIBLE_ first for
 * spot, into out. */
static void check_gpu_metric(const char *type, int spot, char *out, size_t size)
{
	const char *model = type;
	size_t k, n;
	if (!strncmp(model, "nvidia-", 7))
		model += 7;
	if (!strncmp(model, "tesla-", 6))
		model += 6;
	n = (size_t)snprintf(out, size, "%sNVIDIA_%s_GPUS", spot ? "PREEMPTIBLE_" : "", model);
	for (k = 0; k < n && k < size; k++)
		out[k] = out[k] == '-' ? '_' : (char)toupper((unsigned char)out[k]);
}

static struct pbx_cloud_quota *check_need(struct pbx_cloud_check *c, const char *metric)
{
	size_t i;
	for (i = 0; i < c->nquotas; i++)
		if (!strcmp(c->quotas[i].metric, metric))
			return &c->quotas[i];
	if (c->nquotas == PBX_CLOUD_CHECK_QUOTAS)
		return NULL;
	memset(&c->quotas[c->nquotas], 0, sizeof(c->quotas[0]));
	snprintf(c->quotas[c->nquotas].metric, sizeof(c->quotas[0].metric), "%s", metric);
	c->quotas[c->nquotas].limit = -1; /* not found (yet) */
	return &c->quotas[c->nquotas++];
}

/* The region's quota named `metric`: 0 with *limit and *used, -1 when the
 * region has none of that name. */
static int check_quota(json_t *region, const char *metric, double *limit, double *used)
{
	size_t i;
	json_t *q;
	json_array_foreach(json_object_get(region, "quotas"), i, q)
	{
		const char *m = json_string_value(json_object_get(q, "metric"));
		if (m && !strcmp(m, metric)) {
			*limit = json_number_value(json_object_get(q, "limit"));
			*used = json_number_value(json_object_get(q, "usage"));
			return 0;
		}
	}
	return -1;
}

/* The template's needs: INSTANCES and each GPU metric, filled from the
 * region's quotas (a spot group's PREEMPTIBLE_ metric falls back to the
 * plain one where the project has no preemptible quota). */
static void check_needs(const struct pbx_cluster_template *t, json_t *region,
			struct pbx_cloud_check *c)
{
	struct pbx_cloud_quota *q = check_need(c, "INSTANCES");
	size_t i;
	q->need = 1; /* the head */
	for (i = 0; i < t->ngroups; i++) {
		const struct pbx_node_group *g = &t->groups[i];
		char metric[64];
		c->quotas[0].need += g->count;
		if (!g->gpus || !g->gpu_type)
			continue;
		check_gpu_metric(g->gpu_type, g->spot, metric, sizeof(metric));
		if (g->spot && check_quota(region, metric, &(double){ 0 }, &(double){ 0 }) < 0)
			check_gpu_metric(g->gpu_type, 0, metric, sizeof(metric));
		if ((q = check_need(c, metric)))
			q->need += (double)g->gpus * g->count;
	}
	for (i = 0; i < c->nquotas; i++)
		if (check_quota(region, c->quotas[i].metric, &c->quotas[i].limit,
				&c->quotas[i].used) < 0)
			snprintf(c->note, sizeof(c->note),
				 "no quota named %s in the region: pbx cannot tell whether %g fit",
				 c->quotas[i].metric, c->quotas[i].need);
}

int gce_check(void *ctx, struct pbx_cloud_check *c, struct pbx_err *err)
{
	struct gce *g = ctx;
	char *region = xstrdup(g->zone), *dash = strrchr(region, '-'), *path;
	json_t *reply = NULL;
	long status = 0;
	int rc;
	if (dash)
		*dash = '\0';
	snprintf(c->identity, sizeof(c->identity), "%s",
		 g->auth ? pbx_gce_auth_source(g->auth) : "(dry run)");
	snprintf(c->where, sizeof(c->where), "project %s, region %s", g->project, region);
	path = xasprintf("projects/%s/regions/%s", g->project, region);
	rc = gce_call(g, "GET", path, NULL, NULL, &reply, &status, err);
	if (rc == 0 && g->s->t)
		check_needs(g->s->t, reply, c);
	json_decref(reply);
	free(path);
	free(region);
	return rc;
}
