/*
 * parse.c - the price catalogues' replies, read with jansson: a page of
 * the Cloud Billing Catalog API's services.skus.list and a Price List
 * Query API GetProducts reply (whose PriceList entries are JSON texts of
 * their own).  Replies are untrusted: every field is checked for type,
 * and these functions are fuzzed (tests/fuzz/fuzz_gce_price.c,
 * fuzz_aws_price.c).  Which SKUs mean what is in docs/cost.md.
 */
#include "cloud/price/price.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloud/aws/aws.h"
#include "util/money.h"
#include "util/xalloc.h"

static void item_add(struct pbx_price_item **v, size_t *n, const char *item, int spot,
		     int64_t nanos, const char *currency)
{
	struct pbx_price_item *p;
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	p = &(*v)[(*n)++];
	p->item = xstrdup(item);
	p->spot = spot;
	p->nanos = nanos;
	snprintf(p->currency, sizeof(p->currency), "%s", currency);
}

/* ------------------------------------------------------ Compute Engine */

/* Google's Money: units (an int64 as a string) and nanos (0..999999999). */
static int gce_money(json_t *price, const char *currency, int64_t *nanos)
{
	json_t *units = json_object_get(price, "units"), *ns = json_object_get(price, "nanos");
	const char *cc = json_string_value(json_object_get(price, "currencyCode"));
	char *end;
	long long u = 0, f = 0;
	if (!cc || strcmp(cc, currency))
		return -1;
	if (units) {
		const char *s = json_string_value(units);
		if (!s || !*s)
			return -1;
		u = strtoll(s, &end, 10);
		if (*end || u < 0 || u > PBX_PRICE_MAX / PBX_NANO)
			return -1;
	}
	if (ns) {
		if (!json_is_integer(ns))
			return -1;
		f = json_integer_value(ns);
		if (f < 0 || f >= PBX_NANO)
			return -1;
	}
	if ((int64_t)(u * PBX_NANO + f) > PBX_PRICE_MAX)
		return -1;
	*nanos = (int64_t)(u * PBX_NANO + f);
	return 0;
}

/* The SKU's current price: pricingInfo[0]'s first tier, in usageUnit
 * `unit`. */
static int gce_sku_price(json_t *sku, const char *unit, const char *currency, int64_t *nanos)
{
	json_t *info = json_array_get(json_object_get(sku, "pricingInfo"), 0);
	json_t *expr = json_object_get(info, "pricingExpression");
	json_t *tier = json_array_get(json_object_get(expr, "tieredRates"), 0);
	const char *u = json_string_value(json_object_get(expr, "usageUnit"));
	json_t *start = json_object_get(tier, "startUsageAmount");
	if (!u || strcmp(u, unit) || !json_is_object(tier) ||
	    (start && (!json_is_number(start) || json_number_value(start) != 0)))
		return -1;
	return gce_money(json_object_get(tier, "unitPrice"), currency, nanos);
}

static int has_region(json_t *regions, const char *region)
{
	size_t i;
	json_t *r;
	json_array_foreach(regions, i, r) if (json_is_string(r) &&
					      !strcmp(json_string_value(r), region)) return 1;
	return 0;
}

/* What a SKU's description prices, into item (64 bytes), with the unit
 * its price is in; 0 when it is none of pbx's.  Descriptions read
 * "[Spot Preemptible |Preemptible ]NAME[ attached to ...] running in
 * PLACE", NAME being "FAMILY [Predefined |AMD ]Instance Core|Ram" or
 * "Nvidia ... GPU". */
static int gce_sku_item(const char *desc, char item[64], const char **unit)
{
	static const char *const prefixes[] = { "Spot Preemptible ", "Preemptible ", NULL };
	static const char *const kinds[] = { " Instance Core",
					     " Predefined Instance Core",
					     " AMD Instance Core",
					     " Instance Ram",
					     " Predefined Instance Ram",
					     " AMD Instance Ram",
					     NULL };
	char name[128];
	const char *cut;
	size_t i, len, flen;
	for (i = 0; prefixes[i]; i++)
		if (!strncmp(desc, prefixes[i], strlen(prefixes[i])))
			desc += strlen(prefixes[i]);
	cut = strstr(desc, " attached to ");
	if (!cut)
		cut = strstr(desc, " running in ");
	len = cut ? (size_t)(cut - desc) : strlen(desc);
	if (len == 0 || len >= sizeof(name))
		return 0;
	memcpy(name, desc, len);
	name[len] = '\0';
	if (!strncmp(name, "Nvidia ", 7) && len > 11 && !strcmp(name + len - 4, " GPU")) {
		name[len - 4] = '\0';
		for (i = 0; name[i]; i++)
			name[i] = name[i] == ' ' ? '-' : (char)tolower((unsigned char)name[i]);
		/* the 80 GB A100's accelerator type drops "tesla" */
		snprintf(item, 64, "gpu:%.56s",
			 !strcmp(name, "nvidia-tesla-a100-80gb") ? "nvidia-a100-80gb" : name);
		*unit = "h";
		return 1;
	}
	flen = strcspn(name, " ");
	if (flen < 2 || flen > 4 || !isalpha((unsigned char)name[0]) ||
	    !isdigit((unsigned char)name[1]))
		return 0;
	for (i = 0; kinds[i]; i++) {
		if (strcmp(name + flen, kinds[i]))
			continue;
		name[flen] = '\0';
		for (size_t k = 0; k < flen; k++)
			name[k] = (char)tolower((unsigned char)name[k]);
		*unit = strstr(kinds[i], "Core") ? "h" : "GiBy.h";
		snprintf(item, 64, "%s:%.8s", (*unit)[0] == 'h' ? "core" : "ram", name);
		return 1;
	}
	return 0;
}

/* One SKU: 0 (kept or not pbx's), -1 with err when malformed. */
static int gce_sku(json_t *sku, size_t idx, const char *region, const char *currency,
		   struct pbx_price_item **v, size_t *n, struct pbx_err *err)
{
	json_t *cat = json_object_get(sku, "category");
	const char *desc = json_string_value(json_object_get(sku, "description"));
	const char *usage = json_string_value(json_object_get(cat, "usageType"));
	json_t *regions = json_object_get(sku, "serviceRegions");
	const char *unit = NULL;
	char item[64];
	int64_t nanos;
	if (!desc || !usage || !json_is_array(regions))
		return pbx_err_set(err,
				   "SKU %zu has no description, category.usageType or "
				   "serviceRegions",
				   idx);
	if ((strcmp(usage, "OnDemand") && strcmp(usage, "Preemptible")) ||
	    !has_region(regions, region) || !gce_sku_item(desc, item, &unit))
		return 0;
	if (gce_sku_price(sku, unit, currency, &nanos) < 0)
		return pbx_err_set(err, "SKU %zu (%.80s): no price per %s in %s in pricingInfo",
				   idx, desc, unit, currency);
	item_add(v, n, item, !strcmp(usage, "Preemptible"), nanos, currency);
	return 0;
}

int pbx_price_gce_parse(const char *text, size_t len, const char *region, const char *currency,
			struct pbx_price_item **v, size_t *n, char **next, struct pbx_err *err)
{
	json_t *root = json_loadb(text ? text : "", len, 0, NULL), *skus, *sku, *tok;
	size_t i;
	int rc = 0;
	*next = NULL;
	skus = json_object_get(root, "skus");
	if (!json_is_array(skus)) {
		json_decref(root);
		return pbx_err_set(err, "not a SKU list (no skus array)");
	}
	json_array_foreach(skus, i, sku)
	{
		if ((rc = gce_sku(sku, i, region, currency, v, n, err)) < 0)
			break;
	}
	tok = json_object_get(root, "nextPageToken");
	if (rc == 0 && tok && !json_is_string(tok))
		rc = pbx_err_set(err, "nextPageToken is not a string");
	if (rc == 0 && json_string_length(tok) > 0)
		*next = xstrdup(json_string_value(tok));
	json_decref(root);
	return rc;
}

/* ----------------------------------------------------------------- EC2 */

/* The only price dimension of the only OnDemand offer: USD per Hrs. */
static int aws_on_demand(json_t *product, int64_t *nanos)
{
	json_t *offers = json_object_get(json_object_get(product, "terms"), "OnDemand");
	json_t *offer, *dims, *dim;
	const char *key, *unit, *usd;
	if (!json_is_object(offers) || json_object_size(offers) != 1)
		return -1;
	json_object_foreach(offers, key, offer)
	{
		dims = json_object_get(offer, "priceDimensions");
		if (!json_is_object(dims) || json_object_size(dims) != 1)
			return -1;
		json_object_foreach(dims, key, dim)
		{
			unit = json_string_value(json_object_get(dim, "unit"));
			usd = json_string_value(
				json_object_get(json_object_get(dim, "pricePerUnit"), "USD"));
			if (!unit || strcmp(unit, "Hrs") || !usd || pbx_price_parse(usd, nanos) < 0)
				return -1;
		}
	}
	return 0;
}

static int aws_entry(json_t *entry, size_t idx, struct pbx_price_item **v, size_t *n,
		     struct pbx_err *err)
{
	const char *s = json_string_value(entry);
	json_t *product = s ? json_loads(s, 0, NULL) : NULL;
	const char *type = json_string_value(
		json_object_get(json_object_get(json_object_get(product, "product"), "attributes"),
				"instanceType"));
	char item[96];
	int64_t nanos;
	int rc = 0;
	if (!s)
		rc = pbx_err_set(err, "PriceList entry %zu is not a JSON string", idx);
	else if (!type || !*type || strlen(type) > 64)
		rc = pbx_err_set(err, "PriceList entry %zu has no product.attributes.instanceType",
				 idx);
	else if (aws_on_demand(product, &nanos) < 0)
		rc = pbx_err_set(err,
				 "PriceList entry %zu (%s): no single OnDemand price in USD "
				 "per Hrs",
				 idx, type);
	if (rc == 0) {
		snprintf(item, sizeof(item), "type:%s", type);
		item_add(v, n, item, 0, nanos, "USD");
	}
	json_decref(product);
	return rc;
}

int pbx_price_aws_parse(const char *text, size_t len, struct pbx_price_item **v, size_t *n,
			char **next, struct pbx_err *err)
{
	json_t *root = json_loadb(text ? text : "", len, 0, NULL), *list, *e, *tok;
	size_t i;
	int rc = 0;
	*next = NULL;
	list = json_object_get(root, "PriceList");
	if (!json_is_array(list)) {
		json_decref(root);
		return pbx_err_set(err, "not a GetProducts reply (no PriceList array)");
	}
	json_array_foreach(list, i, e)
	{
		if ((rc = aws_entry(e, i, v, n, err)) < 0)
			break;
	}
	tok = json_object_get(root, "NextToken");
	if (rc == 0 && tok && !json_is_string(tok) && !json_is_null(tok))
		rc = pbx_err_set(err, "NextToken is not a string");
	if (rc == 0 && json_string_length(tok) > 0)
		*next = xstrdup(json_string_value(tok));
	json_decref(root);
	return rc;
}

/* ------------------------------------------------------------ EC2 spot */

static void strs_free(char **v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The highest spotPrice of instance type `type` among the items. */
static int spot_max(char **types, char **prices, size_t n, const char *type, int64_t *max,
		    int *found, struct pbx_err *err)
{
	size_t i;
	int64_t x;
	for (i = 0; i < n; i++) {
		if (strcmp(types[i], type))
			return pbx_err_set(err, "spot price %zu is of instance type %.64s, not %s",
					   i, types[i], type);
		if (pbx_price_parse(prices[i], &x) < 0)
			return pbx_err_set(err, "spot price %zu is not an amount: '%.32s'", i,
					   prices[i]);
		if (!*found || x > *max)
			*max = x;
		*found = 1;
	}
	return 0;
}

int pbx_price_spot_parse(const char *xml, size_t len, const char *type, int64_t *max, int *found,
			 char **next, struct pbx_err *err)
{
	char **types = NULL, **prices = NULL, *set;
	size_t nt = 0, np = 0;
	int rc;
	*next = NULL;
	set = aws_xml_text(xml, len, "spotPriceHistorySet");
	if (!set)
		return pbx_err_set(err,
				   "not a DescribeSpotPriceHistory reply (no spotPriceHistorySet)");
	free(set);
	aws_xml_texts(xml, len, "spotPriceHistorySet", "instanceType", &types, &nt);
	aws_xml_texts(xml, len, "spotPriceHistorySet", "spotPrice", &prices, &np);
	if (nt != np)
		rc = pbx_err_set(err, "spot price items without an instanceType or a spotPrice");
	else
		rc = spot_max(types, prices, nt, type, max, found, err);
	strs_free(types, nt);
	strs_free(prices, np);
	if (rc == 0) {
		*next = aws_xml_text(xml, len, "nextToken");
		if (*next && !**next) {
			free(*next);
			*next = NULL;
		}
	}
	return rc;
}
