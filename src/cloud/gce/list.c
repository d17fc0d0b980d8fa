/*
 * list.c - list of the gce provider, and the instance lists the other
 * operations make: the instances carrying the cluster's labels in every
 * zone (aggregatedList, every page), with their addresses, after the creations the store
 * recorded are over (gce_settle); then the cluster's firewall rules
 * (firewall.c) and pbx's router where this cluster's stop would delete it
 * (router.c).  A survey (no cluster id) lists what carries the name, and
 * the rules named like the cluster's, each with the id it carries.
 */
#include "cloud/gce/gce_internal.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"
#include "util/xalloc.h"

static const long ok_404[] = { 404, 0 };

/* Text URL-encoded for a query parameter.  Caller frees. */
char *gce_escape(const char *text)
{
	char *e = curl_easy_escape(NULL, text, 0), *res = xstrdup(e ? e : "");
	curl_free(e);
	return res;
}

/* The list filter of the cluster's labels, `labels.pbx-cluster = "NAME"
 * AND labels.pbx-cluster-id = "ID"` (a survey: the name only),
 * URL-encoded.  Caller frees. */
static char *gce_label_filter(const struct gce *g)
{
	struct pbx_labels l;
	struct pbx_buf f = PBX_BUF_INIT;
	char *res;
	size_t i;
	pbx_cluster_labels(g->s, &l);
	for (i = 0; i < l.n; i++)
		pbx_buf_addf(&f, "%slabels.%s = \"%s\"", i ? " AND " : "", l.keys[i], l.values[i]);
	res = gce_escape(f.buf);
	pbx_buf_release(&f);
	return res;
}

/* Instances matching `filter` (URL-encoded) in every zone (aggregatedList),
 * every page; *v freed with pbx_instances_free. */
int gce_list_instances_where(struct gce *g, const char *filter, struct pbx_instance **v, size_t *n,
			     struct pbx_err *err)
{
	char *token = NULL;
	int rc = 0;
	*v = NULL;
	*n = 0;
	do {
		char *path = xasprintf(
			"projects/%s/aggregated/instances?filter=%s&maxResults=500%s%s", g->project,
			filter, token ? "&pageToken=" : "", token ? token : "");
		json_t *r = NULL;
		long st;
		free(token);
		token = NULL;
		rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
		if (rc == 0 && st == 200)
			rc = gce_list_parse(r, v, n, &token, err);
		json_decref(r);
		free(path);
	} while (rc == 0 && token);
	free(token);
	return rc;
}

/* Instances carrying the cluster's labels, in every zone. */
int gce_list_instances(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	char *filter = gce_label_filter(g);
	int rc = gce_list_instances_where(g, filter, v, n, err);
	free(filter);
	return rc;
}

const struct pbx_instance *gce_find(const struct pbx_instance *v, size_t n, const char *name)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(v[i].id, name))
			return &v[i];
	return NULL;
}

/* Waits until the creations the store recorded for the cluster are over
 * (an operation still PENDING has made no instance yet, so a list would
 * miss what it is about to make: a start killed mid-create).  An
 * operation Compute Engine no longer knows (404) is over. */
static int gce_settle(struct gce *g, struct pbx_err *err)
{
	struct pbx_node_row *rows = NULL;
	size_t nrows = 0, i, k;
	int rc = 0;
	if (!g->s->store || g->s->id <= 0 || g->s->dry_run)
		return 0;
	if (pbx_store_node_list(g->s->store, g->s->id, &rows, &nrows, err) < 0)
		return -1;
	for (i = 0; i < nrows && rc == 0; i++) {
		time_t until = time(NULL) + GCE_WAIT_LIMIT_S;
		if (!rows[i].operation || strcmp(rows[i].state, "creating") != 0)
			continue;
		for (k = 0; k < i && (!rows[k].operation ||
				      strcmp(rows[k].operation, rows[i].operation) != 0);
		     k++)
			;
		if (k < i)
			continue; /* the same bulkInsert as an earlier node */
		while (rc == 0 && time(NULL) < until) {
			char *path =
				xasprintf("projects/%s/zones/%s/operations/%s", g->project,
					  rows[i].zone ? rows[i].zone : g->zone, rows[i].operation);
			struct timespec delay = { 0, 250 * 1000 * 1000 };
			json_t *r = NULL;
			struct gce_op o;
			long st;
			rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
			free(path);
			if (rc == 0 && (st == 404 || (gce_op_parse(r, &o, err) == 0 &&
						      !strcmp(o.status, "DONE")))) {
				json_decref(r);
				break;
			}
			json_decref(r);
			pbx_err_clear(err);
			nanosleep(&delay, NULL);
		}
	}
	pbx_node_rows_free(rows, nrows);
	return rc;
}

/* The instances carrying the cluster's labels, with their addresses, as
 * the provider's entries (appended to *v). */
static int gce_list_as_instances(struct gce *g, struct pbx_instance **v, size_t *n,
				 struct pbx_err *err)
{
	struct pbx_instance *have = NULL;
	size_t nhave = 0, i;
	if (gce_list_instances(g, &have, &nhave, err) < 0)
		return -1;
	for (i = 0; i < nhave; i++) {
		if (!have[i].zone)
			have[i].zone = xstrdup(g->zone);
		pbx_instance_check_addresses(&have[i], g->base);
	}
	pbx_instances_append(v, n, have, nhave);
	return 0;
}

int gce_list_nodes(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	*v = NULL;
	*n = 0;
	return gce_list_as_instances(ctx, v, n, err);
}

int gce_list(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	struct gce *g = ctx;
	*v = NULL;
	*n = 0;
	if (gce_settle(g, err) < 0 || gce_list_as_instances(g, v, n, err) < 0)
		return -1;
	if (!g->s->uid)
		return gce_survey_rules(g, v, n, err);
	if (gce_list_rules(g, v, n, err) < 0)
		return -1;
	return gce_list_routers(g, v, n, err);
}
