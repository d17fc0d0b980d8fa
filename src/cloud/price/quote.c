/*
 * quote.c - a template's price an hour (pbx_price_quote, see price.h):
 * each node kind priced from `prices:` overrides first, else from the
 * cached catalogue, fetched when missing or older than prices.max_age
 * (one fetch per catalogue and quote).  The mapping from machine types to
 * catalogue items is in docs/cost.md.
 */
#include "cloud/price/price.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cloud/aws/aws.h"
#include "cloud/gce/gce.h"
#include "util/money.h"
#include "util/xalloc.h"

struct qctx {
	struct pbx_store *st;
	const struct pbx_config *cfg;
	struct pbx_price_quote *q;
	int offline;
	int aws;
	long max_age;
	char scope_done[8][80]; /* scopes made usable in this quote */
	size_t ndone;
	struct pbx_err *err; /* a fetch that failed with nothing cached */
	int failed;
};

void pbx_price_quote_free(struct pbx_price_quote *q)
{
	size_t i;
	for (i = 0; i < q->n; i++)
		free(q->lines[i].why);
	free(q->lines);
	free(q->warning);
	memset(q, 0, sizeof(*q));
}

static const struct pbx_price_override * override(const struct pbx_price_override *v, size_t n,
						  const char *name)
{
	size_t i;
	for (i = 0; name && i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

static void note_date(struct qctx *c, int64_t fetched)
{
	if (fetched && (!c->q->fetched || fetched < c->q->fetched))
		c->q->fetched = fetched;
}

static void warn_stale(struct qctx *c, const char *detail)
{
	if (!c->q->warning)
		c->q->warning = xasprintf("prices could not be refreshed, the cached ones are "
					  "used: %s",
					  detail);
}

/* Fetches scope `scope` into the cache (gce "skus:CUR": the region's SKUs;
 * aws "type:T": T's on-demand price, "spot:T": its spot price). */
static int fetch(struct qctx *c, const char *scope, struct pbx_err *err)
{
	struct pbx_price_item *v = NULL;
	size_t n = 0;
	int rc;
	if (c->aws && !strncmp(scope, "spot:", 5))
		rc = pbx_price_aws_spot_fetch(c->st, c->cfg, c->q->region, scope + 5, &v, &n, err);
	else if (c->aws)
		rc = pbx_price_aws_fetch(c->st, c->cfg, c->q->region, scope + 5, &v, &n, err);
	else
		rc = pbx_price_gce_fetch(c->st, c->cfg, c->q->region, c->q->currency, &v, &n, err);
	if (rc == 0)
		rc = pbx_store_prices_put(c->st, c->q->cloud, c->q->region, scope,
					  (int64_t)time(NULL), v, n, err);
	pbx_price_items_free(v, n);
	return rc;
}

/* Makes the cache of `scope` usable: fresh, fetched now, or stale when a
 * fetch cannot be made.  -1 (with c->err) when there is nothing. */
static int ensure(struct qctx *c, const char *scope)
{
	struct pbx_err ferr = PBX_ERR_INIT;
	int64_t fetched = 0, now = (int64_t)time(NULL);
	size_t i;
	for (i = 0; i < c->ndone; i++)
		if (!strcmp(c->scope_done[i], scope))
			return 0;
	if (pbx_store_prices_fetched(c->st, c->q->cloud, c->q->region, scope, &fetched, c->err) < 0)
		return -1;
	if (!fetched || now - fetched >= c->max_age) {
		if (!c->offline && fetch(c, scope, &ferr) == 0) {
			fetched = now;
		} else if (!fetched) {
			if (c->offline)
				pbx_err_setc(&ferr, PBX_EXIT_NOTFOUND,
					     "no cached prices for %s %s "
					     "(offline)",
					     c->q->region, scope);
			*c->err = ferr;
			return -1;
		} else {
			c->q->stale = 1;
			warn_stale(c, c->offline ? "offline" : ferr.msg);
		}
	}
	note_date(c, fetched);
	if (c->ndone < sizeof(c->scope_done) / sizeof(c->scope_done[0]))
		snprintf(c->scope_done[c->ndone++], sizeof(c->scope_done[0]), "%s", scope);
	return 0;
}

/* The cached price of `item`: 0, 1 when the catalogue lacks it, -1. */
static int cached(struct qctx *c, const char *scope, const char *item, int spot, int64_t *nanos)
{
	char cur[8];
	int rc;
	if (ensure(c, scope) < 0)
		return -1;
	rc = pbx_store_price_get(c->st, c->q->cloud, c->q->region, item, spot, nanos, cur, c->err);
	if (rc == 0 && strcmp(cur, c->q->currency))
		return 1;
	return rc;
}

/* A GPU-hour of `type`: an override, else the catalogue. */
static int gce_gpu(struct qctx *c, const char *type, int spot, int64_t *nanos, char **why)
{
	const struct pbx_price_override *o =
		override(c->cfg->prices.gpu_hourly, c->cfg->prices.ngpu_hourly, type);
	char scope[32], item[96];
	int rc;
	if (o) {
		*nanos = o->nanos;
		return 0;
	}
	snprintf(scope, sizeof(scope), "skus:%s", c->q->currency);
	snprintf(item, sizeof(item), "gpu:%s", type);
	rc = cached(c, scope, item, spot, nanos);
	if (rc == 1)
		*why = xasprintf("the catalogue has no %sprice for GPU %s in %s; set "
				 "prices.gpu_hourly.%s",
				 spot ? "spot " : "", type, c->q->region, type);
	return rc;
}

/* A Compute Engine machine type an hour, its own GPUs (a2, g2) included. */
static int gce_machine(struct qctx *c, const char *mt, int spot, int64_t *nanos, char **why)
{
	struct pbx_gce_type ty;
	int64_t core, ram, gpu = 0;
	char scope[32], item[64], fam[8];
	int rc;
	if (pbx_gce_type_lookup(mt, &ty) < 0) {
		*why = xasprintf("pbx does not know the vCPUs and memory of %s; set "
				 "prices.%s.%s",
				 mt, spot ? "spot_hourly" : "hourly", mt);
		return 1;
	}
	snprintf(fam, sizeof(fam), "%.*s", (int)strcspn(mt, "-"), mt);
	snprintf(scope, sizeof(scope), "skus:%s", c->q->currency);
	snprintf(item, sizeof(item), "core:%s", fam);
	rc = cached(c, scope, item, spot, &core);
	if (rc == 0) {
		snprintf(item, sizeof(item), "ram:%s", fam);
		rc = cached(c, scope, item, spot, &ram);
	}
	if (rc == 1)
		*why = xasprintf("the catalogue has no %s%s vCPU or RAM price in %s; set "
				 "prices.%s.%s",
				 spot ? "spot " : "", fam, c->q->region,
				 spot ? "spot_hourly" : "hourly", mt);
	if (rc == 0 && ty.gpus)
		rc = gce_gpu(c, ty.gpu_type, spot, &gpu, why);
	if (rc == 0) { /* MiB * nanos per GiB: exact to a nano-unit */
		int64_t cores = 0, mib = 0, sum = 0;
		if (pbx_money_muladd(core, ty.cpus, 0, &cores) < 0 ||
		    pbx_money_muladd(ram, ty.mem_mb, 512, &mib) < 0 ||
		    pbx_money_muladd(gpu, ty.gpus, cores + mib / 1024, &sum) < 0) {
			*why = xasprintf("the catalogue's %s prices make %s cost more than pbx "
					 "takes; set prices.%s.%s",
					 fam, mt, spot ? "spot_hourly" : "hourly", mt);
			return 1;
		}
		*nanos = sum;
	}
	return rc;
}

static int aws_machine(struct qctx *c, const char *type, int spot, int64_t *nanos, char **why)
{
	char scope[80], item[80];
	int rc;
	if (strcmp(c->q->currency, "USD")) {
		*why = xasprintf("EC2 prices are in USD only; set prices.%s.%s",
				 spot ? "spot_hourly" : "hourly", type);
		return 1;
	}
	snprintf(scope, sizeof(scope), "%s:%.70s", spot ? "spot" : "type", type);
	snprintf(item, sizeof(item), "type:%.70s", type);
	rc = cached(c, scope, item, spot, nanos);
	if (rc == 1 && spot)
		*why = xasprintf("EC2 lists no Linux spot price for %s in %s; set "
				 "prices.spot_hourly.%s",
				 type, c->q->region, type);
	else if (rc == 1)
		*why = xasprintf("the Price List has no on-demand Linux price for %s in %s; set "
				 "prices.hourly.%s",
				 type, c->q->region, type);
	return rc;
}

/* One node kind: machine type mt (its GPUs for gce: gpus of gpu_type). */
static int line_price(struct qctx *c, struct pbx_price_line *l, int gpus, const char *gpu_type)
{
	const struct pbx_prices *p = &c->cfg->prices;
	const struct pbx_price_override *o =
		l->spot ? override(p->spot_hourly, p->nspot_hourly, l->machine_type)
			: override(p->hourly, p->nhourly, l->machine_type);
	int64_t base = 0, gpu = 0;
	int rc = 0;
	l->each = -1;
	if (o)
		base = o->nanos;
	else if (c->aws)
		rc = aws_machine(c, l->machine_type, l->spot, &base, &l->why);
	else
		rc = gce_machine(c, l->machine_type, l->spot, &base, &l->why);
	if (rc == 0 && !c->aws && gpus > 0 && !gpu_type) {
		l->why = xasprintf("gpu_type is not set");
		rc = 1;
	}
	if (rc == 0 && !c->aws && gpus > 0)
		rc = gce_gpu(c, gpu_type, l->spot, &gpu, &l->why);
	if (rc == 0 && pbx_money_muladd(gpu, gpus, base, &l->each) < 0) {
		l->each = -1;
		l->why = xasprintf("%s with %d GPU(s) costs more than pbx takes", l->machine_type,
				   gpus);
		rc = 1;
	}
	if (rc == 0)
		l->why = xstrdup(o ? "prices: override" : "catalogue");
	return rc < 0 ? -1 : 0;
}

static int quote_where(const struct pbx_config *cfg, const struct pbx_cluster_template *t,
		       struct pbx_price_quote *q, struct pbx_err *err)
{
	char *region = NULL;
	snprintf(q->cloud, sizeof(q->cloud), "%s", t->cloud);
	snprintf(q->currency, sizeof(q->currency), "%s",
		 cfg->prices.currency ? cfg->prices.currency : "USD");
	if (!strcmp(t->cloud, "gce")) {
		if (!cfg->gce.zone)
			return pbx_err_setc(err, PBX_EXIT_USAGE,
					    "%s: clouds.gce.zone is not set: "
					    "prices are per region",
					    cfg->path);
		snprintf(q->region, sizeof(q->region), "%.*s",
			 (int)(strrchr(cfg->gce.zone, '-')
				       ? strrchr(cfg->gce.zone, '-') - cfg->gce.zone
				       : (long)strlen(cfg->gce.zone)),
			 cfg->gce.zone);
		return 0;
	}
	if (!strcmp(t->cloud, "aws")) {
		region = cfg->aws.region ? xstrdup(cfg->aws.region)
					 : aws_region_find(cfg->aws.profile);
		if (!region)
			return pbx_err_setc(err, PBX_EXIT_USAGE,
					    "no AWS region: set clouds.aws.region");
		snprintf(q->region, sizeof(q->region), "%s", region);
		free(region);
		return 0;
	}
	return pbx_err_setc(err, PBX_EXIT_USAGE, "cloud %s is not priced", t->cloud);
}

int pbx_price_quote(struct pbx_store *st, const struct pbx_config *cfg,
		    const struct pbx_cluster_template *t, int offline, struct pbx_price_quote *q,
		    struct pbx_err *err)
{
	struct qctx c;
	size_t i;
	memset(q, 0, sizeof(*q));
	memset(&c, 0, sizeof(c));
	if (!strcmp(t->cloud, "local")) { /* processes on this machine: free */
		snprintf(q->cloud, sizeof(q->cloud), "local");
		return 0;
	}
	if (quote_where(cfg, t, q, err) < 0)
		return -1;
	c = (struct qctx){ .st = st,
			   .cfg = cfg,
			   .q = q,
			   .offline = offline,
			   .err = err,
			   .aws = !strcmp(t->cloud, "aws"),
			   .max_age = cfg->prices.max_age ? cfg->prices.max_age
							  : PBX_PRICES_MAX_AGE_DEFAULT_S };
	q->lines = xcalloc(t->ngroups + 1, sizeof(*q->lines));
	q->lines[0] = (struct pbx_price_line){ "head", t->head_machine_type, 1, 0, -1, NULL };
	if (!q->lines[0].machine_type)
		q->lines[0].machine_type = c.aws ? AWS_HEAD_TYPE : GCE_HEAD_MACHINE;
	q->n = 1;
	if (line_price(&c, &q->lines[0], 0, NULL) < 0)
		return -1;
	for (i = 0; i < t->ngroups; i++) {
		const struct pbx_node_group *g = &t->groups[i];
		struct pbx_price_line *l = &q->lines[q->n++];
		*l =
			(struct pbx_price_line){ g->name, g->machine_type, g->count, g->spot, -1,
						 NULL };
		if (line_price(&c, l, g->gpus, g->gpu_type) < 0)
			return -1;
	}
	q->total = 0;
	for (i = 0; i < q->n; i++)
		if (q->total < 0 || q->lines[i].each < 0 ||
		    pbx_money_muladd(q->lines[i].each, q->lines[i].count, q->total, &q->total) < 0)
			q->total = -1; /* unknown, or more than pbx adds up */
	return 0;
}
