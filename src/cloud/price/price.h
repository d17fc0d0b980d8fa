/*
 * price.h - what a cluster costs an hour, before anything is made
 * (docs/cost.md).
 *
 * Prices come from the clouds' own catalogues, through src/http and each
 * cloud's credentials:
 *  - Compute Engine: the Cloud Billing Catalog API's SKUs of the Compute
 *    Engine service (fetch.c here), priced per vCPU-hour and GiB-hour of
 *    RAM of a machine family, and per GPU-hour; the vCPUs and memory of a
 *    machine type come from the table in types.c;
 *  - EC2: the Price List Query API's GetProducts (fetch.c here), one price
 *    per instance type an hour on-demand, and EC2's DescribeSpotPriceHistory
 *    for spot (the highest current price among the region's zones).
 * They are cached in the store (table prices, src/store/prices.c) with the
 * date fetched and fetched again when older than prices.max_age, so pbx
 * works offline from the cache; `prices:` in the configuration overrides
 * any entry.  Amounts are kept as integer nano-units of the currency
 * (Google's units + nanos), so sums are exact.
 *
 * The parsers (parse.c) read untrusted replies with jansson (the spot
 * history's XML with src/cloud/aws's libxml2 helpers) and are fuzzed
 * (tests/fuzz/fuzz_gce_price.c, fuzz_aws_price.c, fuzz_aws_spot.c).  Library code:
 * never prints, fills struct pbx_err.
 */
#ifndef PBX_CLOUD_PRICE_PRICE_H
#define PBX_CLOUD_PRICE_PRICE_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "store/store.h"
#include "util/err.h"

#define PBX_GCE_BILLING_ENDPOINT "https://cloudbilling.googleapis.com/"
#define PBX_GCE_BILLING_SERVICE  "6F81-5844-456A" /* Compute Engine */
#define PBX_GCE_BILLING_SCOPE    "https://www.googleapis.com/auth/cloud-billing.readonly"
#define PBX_AWS_PRICING_ENDPOINT "https://api.pricing.us-east-1.amazonaws.com/"
#define PBX_AWS_PRICING_REGION   "us-east-1"

/* Prices are struct pbx_price_item (store/store.h: the cache keeps them). */

/* ------------------------------------------------------------ parse.c */

/*
 * One page of services.skus.list: appends to *v the SKUs of the Compute
 * Engine catalogue pbx prices (usageType OnDemand or Preemptible, region
 * `region` among serviceRegions, a description naming a machine family's
 * Instance Core / Instance Ram or a GPU; see docs/cost.md), each priced
 * at its first tier in `currency`.  *next gets nextPageToken (caller
 * frees; NULL on the last page).  -1 with err when the text is not a SKU
 * page (no skus array, a SKU without the fields read, a malformed price);
 * *v may then hold part of the page: the caller frees and keeps nothing.
 */
int pbx_price_gce_parse(const char *text, size_t len, const char *region, const char *currency,
			struct pbx_price_item **v, size_t *n, char **next, struct pbx_err *err);

/*
 * A GetProducts reply: appends one "type:T" on-demand item for each
 * PriceList entry (a JSON string holding a product) whose instanceType is
 * T and whose single OnDemand price dimension is per hour (Hrs) in USD.
 * *next gets NextToken (caller frees) or NULL.  -1 with err when the text
 * is not a GetProducts reply or an entry is malformed.
 */
int pbx_price_aws_parse(const char *text, size_t len, struct pbx_price_item **v, size_t *n,
			char **next, struct pbx_err *err);

/*
 * A DescribeSpotPriceHistory reply (EC2 Query API, XML) for instance type
 * `type`: *max gets the highest spotPrice of its items (each availability
 * zone's current price) and *found is set when there was one (*max and
 * *found carry over from earlier pages).  *next gets nextToken (caller
 * frees) or NULL.  -1 with err when it is not such a reply, an item is of
 * another type, or a price is not an amount.
 */
int pbx_price_spot_parse(const char *xml, size_t len, const char *type, int64_t *max, int *found,
			 char **next, struct pbx_err *err);

/* ------------------------------------------------------------ types.c */

/* The vCPUs, memory (MiB) and built-in GPUs (type and count, e.g. a2's
 * A100s, g2's L4s) of a predefined Compute Engine machine type; -1 when
 * pbx does not know it (custom and shared-core types among them). */
struct pbx_gce_type {
	int cpus;
	long mem_mb;
	const char *gpu_type; /* static; NULL when none */
	int gpus;
};
int pbx_gce_type_lookup(const char *machine_type, struct pbx_gce_type *out);

/* ---------------------------------------------------------- cluster.c */

/* The price of one kind of node of a template. */
struct pbx_price_line {
	const char *group;        /* node group name, or "head"; owned by the template */
	const char *machine_type; /* owned by the template */
	int count;
	int spot;
	int64_t each; /* per node-hour; -1 when unknown */
	char *why;    /* what is unknown (each -1) or where the price came
				     from ("catalogue 2024-05-01", "prices.hourly"); owned */
};

struct pbx_price_quote {
	char cloud[8];
	char region[64];
	char currency[8];
	struct pbx_price_line *lines; /* head first, then the node groups */
	size_t n;
	int64_t total;   /* per hour; -1 when a line is unknown */
	int64_t fetched; /* oldest catalogue date used (unix s); 0 = none */
	int stale;       /* a cached catalogue older than max_age was
					   used (a refresh failed: `warning` says why) */
	char *warning;   /* NULL or a sentence */
};
void pbx_price_quote_free(struct pbx_price_quote *q);

/*
 * The hourly price of template t (cloud gce or aws; a local one's nodes
 * are processes on this machine: q->cloud "local", no lines, total 0) in
 * cfg's region and currency: per node group
 * (spot where the group says so) and for the head.  Uses the cache in
 * `st` while it is younger than prices.max_age, else fetches the
 * catalogue (caching it); with `offline` it never fetches.  A catalogue
 * that cannot be fetched falls back to an older cache (q->stale, with a
 * warning); nothing cached and nothing fetched is an error.  An item the
 * catalogue lacks leaves that line unknown (each -1, why says what to
 * set in prices:).  The caller frees *q (pbx_price_quote_free).
 */
int pbx_price_quote(struct pbx_store *st, const struct pbx_config *cfg,
		    const struct pbx_cluster_template *t, int offline, struct pbx_price_quote *q,
		    struct pbx_err *err);

/* ------------------------------------------------------------ fetch.c */

/* Fetches every page of the Compute Engine catalogue for `region` in
 * `currency` (cfg's credentials and billing endpoint); *v owned by the
 * caller.  Each fetcher sends its requests to the request log of `st`
 * (may be NULL) as events of no cluster. */
int pbx_price_gce_fetch(struct pbx_store *st, const struct pbx_config *cfg, const char *region,
			const char *currency, struct pbx_price_item **v, size_t *n,
			struct pbx_err *err);
/* Fetches the on-demand Linux price of `type` in `region` (cfg's
 * credentials and pricing endpoint); *v owned by the caller. */
int pbx_price_aws_fetch(struct pbx_store *st, const struct pbx_config *cfg, const char *region,
			const char *type, struct pbx_price_item **v, size_t *n,
			struct pbx_err *err);
/* Fetches the current Linux spot price of `type` in `region` from EC2's
 * DescribeSpotPriceHistory (clouds.aws.endpoint, else the region's EC2
 * endpoint): the highest among its availability zones, as one spot item
 * (none when EC2 lists no price); *v owned by the caller. */
int pbx_price_aws_spot_fetch(struct pbx_store *st, const struct pbx_config *cfg, const char *region,
			     const char *type, struct pbx_price_item **v, size_t *n,
			     struct pbx_err *err);

/* The base URL (ends in '/') pbx asks for prices: the configured
 * billing_endpoint / pricing_endpoint, else the host of an emulator's
 * `endpoint` (a loopback one), else the cloud's.  Caller frees. */
char *pbx_price_gce_base(const struct pbx_config *cfg);
char *pbx_price_aws_base(const struct pbx_config *cfg);

#endif
