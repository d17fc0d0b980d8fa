/*
 * config_clouds.c - `pbx config check --clouds`, like `sky check`: for
 * each cluster template on a cloud (gce, aws), whether its credentials are
 * found (and where from) and work (one cheap authenticated call, the
 * provider's check op), and whether the quotas the template needs fit in
 * what the cloud grants less what is in use (Compute Engine: INSTANCES and
 * each GPU model; EC2: each instance family's vCPUs, from Service Quotas).
 * Nothing is created; templates on local or ssh are not asked about, so a
 * configuration with no cloud sends nothing.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cloud/provider.h"
#include "config/config.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Whether quota q leaves room for what the template needs. */
static int quota_fits(const struct pbx_cloud_quota *q)
{
	return q->limit < 0 || q->need <= q->limit - q->used;
}

/* Checks template t: 0 when everything it needs is there, 1 otherwise;
 * fills *c and err. */
static int clouds_one(const struct pbx_config *cfg, const struct pbx_cluster_template *t,
		      struct pbx_cloud_check *c, struct pbx_err *err)
{
	const struct pbx_provider *p = pbx_provider_find(t->cloud);
	struct pbx_cluster_spec s;
	void *ctx = NULL;
	size_t i;
	int rc;
	memset(c, 0, sizeof(*c));
	memset(&s, 0, sizeof(s));
	s.cfg = cfg;
	s.t = t;
	s.name = t->name;
	if (!p || !p->check) {
		pbx_err_set(err, "cloud %s has nothing to check", t->cloud);
		return 1;
	}
	rc = p->open(&s, &ctx, err);
	if (rc == 0)
		rc = p->check(ctx, c, err);
	if (ctx)
		p->close(ctx);
	if (rc < 0)
		return 1;
	for (i = 0; i < c->nquotas; i++)
		if (!quota_fits(&c->quotas[i]))
			return 1;
	return 0;
}

static json_t *clouds_json(const struct pbx_cluster_template *t, const struct pbx_cloud_check *c,
			   int bad, const struct pbx_err *err)
{
	json_t *o = json_object(), *qs = json_array();
	size_t i;
	json_object_set_new(o, "template", json_string(t->name));
	json_object_set_new(o, "cloud", json_string(t->cloud));
	json_object_set_new(o, "ok", json_boolean(!bad));
	json_object_set_new(o, "identity", c->identity[0] ? json_string(c->identity) : json_null());
	json_object_set_new(o, "where", c->where[0] ? json_string(c->where) : json_null());
	json_object_set_new(o, "error", err->msg[0] ? json_string(err->msg) : json_null());
	for (i = 0; i < c->nquotas; i++) {
		const struct pbx_cloud_quota *q = &c->quotas[i];
		json_t *j = json_object();
		json_object_set_new(j, "metric", json_string(q->metric));
		json_object_set_new(j, "need", json_real(q->need));
		json_object_set_new(j, "limit", q->limit < 0 ? json_null() : json_real(q->limit));
		json_object_set_new(j, "used", q->limit < 0 ? json_null() : json_real(q->used));
		json_object_set_new(j, "fits", json_boolean(quota_fits(q)));
		json_array_append_new(qs, j);
	}
	json_object_set_new(o, "quotas", qs);
	json_object_set_new(o, "note", c->note[0] ? json_string(c->note) : json_null());
	return o;
}

static void clouds_text(const struct pbx_cluster_template *t, const struct pbx_cloud_check *c,
			const struct pbx_err *err)
{
	size_t i;
	printf("%s (%s): ", t->name, t->cloud);
	if (err->msg[0] && !c->where[0]) {
		printf("FAILED: %s\n", err->msg);
		return;
	}
	if (err->msg[0]) {
		printf("credentials from %s: FAILED asking %s: %s\n", c->identity, c->where,
		       err->msg);
		return;
	}
	printf("credentials from %s work (%s answered)\n", c->identity, c->where);
	for (i = 0; i < c->nquotas; i++) {
		const struct pbx_cloud_quota *q = &c->quotas[i];
		if (q->limit < 0)
			continue;
		printf("  %-33s needs %g, %g of %g in use: %s\n", q->metric, q->need, q->used,
		       q->limit, quota_fits(q) ? "ok" : "NOT ENOUGH: ask the cloud for more");
	}
	if (c->note[0])
		printf("  note: %s\n", c->note);
}

int pbx_cli_config_clouds(const struct pbx_config *cfg, int json)
{
	json_t *list = json ? json_array() : NULL;
	size_t i, asked = 0;
	int bad = 0;
	for (i = 0; i < cfg->ntemplates; i++) {
		const struct pbx_cluster_template *t = &cfg->templates[i];
		struct pbx_err err = PBX_ERR_INIT;
		struct pbx_cloud_check c;
		int one;
		if (strcmp(t->cloud, "gce") != 0 && strcmp(t->cloud, "aws") != 0)
			continue;
		asked++;
		one = clouds_one(cfg, t, &c, &err);
		bad |= one;
		if (list)
			json_array_append_new(list, clouds_json(t, &c, one, &err));
		else
			clouds_text(t, &c, &err);
	}
	if (list)
		pbx_print_json(list);
	else if (!asked)
		printf("no cluster template on a cloud (gce, aws): nothing to check\n");
	return bad ? PBX_EXIT_FAIL : 0;
}
