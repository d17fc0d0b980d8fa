/*
 * test_price.c - src/cloud/price without a network: the billing
 * catalogue's SKU pages and GetProducts replies (kept, skipped, refused),
 * exact amounts (util/money), machine-type sizes, and the hourly quote of
 * a template with GPUs and spot from a cache filled here (offline), with
 * `prices:` overrides.  The fetchers are tested against the emulators by
 * tests/cli/t0470-prices.sh.
 */
#include "common/tap.h"
#include "cloud/price/price.h"
#include "config/config.h"
#include "util/money.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SKU(desc, usage, region, unit, units, nanos)                                              \
	"{\"description\": \"" desc "\", \"category\": {\"resourceFamily\": \"Compute\", "        \
	"\"usageType\": \"" usage "\"}, \"serviceRegions\": [\"" region "\"], \"pricingInfo\": "  \
	"[{\"pricingExpression\": {\"usageUnit\": \"" unit "\", \"tieredRates\": [{"              \
	"\"startUsageAmount\": 0, \"unitPrice\": {\"currencyCode\": \"USD\", \"units\": \"" units \
	"\", \"nanos\": " nanos "}}]}}]}"

static const char gce_page[] = "{\"skus\": [" SKU("N1 Predefined Instance Core running in Americas", "OnDemand", "us-central1", "h", "0", "31611000") "," SKU(
	"Spot Preemptible N1 Predefined Instance Ram running in Americas", "Preemptible",
	"us-central1", "GiBy.h", "0",
	"800000") "," SKU("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas",
			  "Preemptible", "us-central1", "h", "0",
			  "140000000") "," SKU("Nvidia Tesla A100 80GB GPU running in Americas",
					       "OnDemand", "us-central1", "h", "3",
					       "500000000") "," SKU("N2D AMD Instance Core running in Americas",
								    "OnDemand", "us-central1", "h",
								    "0",
								    "27000000") "," SKU("N1 Predefined Instance Core running in EMEA",
											"OnDemand",
											"europe-west4",
											"h", "0",
											"1") "," SKU("Commitment v1: Cpu in Americas for 1 Year",
												     "Commit1Yr",
												     "us-central1",
												     "h",
												     "0",
												     "1") "," SKU("Custom Instance Core running in Americas",
														  "OnDemand",
														  "us-central1",
														  "h",
														  "0",
														  "1") "], \"nextPageToken\": \"abc\"}";

static void test_gce_parse(void)
{
	struct pbx_price_item *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	ok(pbx_price_gce_parse(gce_page, strlen(gce_page), "us-central1", "USD", &v, &n, &next,
			       &err) == 0,
	   "a SKU page parses: %s", err.msg);
	ok(n == 5, "5 SKUs are pbx's (not another region, a commitment, a custom type): %zu", n);
	if (n == 5) {
		is_str(v[0].item, "core:n1", "N1 Predefined Instance Core");
		ok(v[0].nanos == 31611000 && !v[0].spot, "its price, on-demand");
		is_str(v[1].item, "ram:n1", "spot N1 RAM");
		ok(v[1].spot && v[1].nanos == 800000, "spot, per GiB-hour");
		is_str(v[2].item, "gpu:nvidia-tesla-t4", "a spot T4 (\"attached to Spot\")");
		is_str(v[3].item, "gpu:nvidia-a100-80gb", "the 80 GB A100's accelerator type");
		ok(v[3].nanos == 3500000000LL, "units and nanos");
		is_str(v[4].item, "core:n2d", "N2D AMD");
	}
	is_str(next, "abc", "nextPageToken");
	pbx_price_items_free(v, n);
	free(next);

	v = NULL;
	n = 0;
	ok(pbx_price_gce_parse("{\"services\": []}", 16, "us-central1", "USD", &v, &n, &next,
			       &err) < 0,
	   "no skus array: refused");
	is_str(err.msg, "not a SKU list (no skus array)", "saying so");
	ok(pbx_price_gce_parse(gce_page, strlen(gce_page), "us-central1", "EUR", &v, &n, &next,
			       &err) < 0,
	   "a price in another currency than asked: refused");
	pbx_price_items_free(v, n);
	v = NULL;
	n = 0;
	ok(pbx_price_gce_parse("{\"skus\": [{\"description\": 3}]}", 30, "us-central1", "USD", &v,
			       &n, &next, &err) < 0,
	   "a SKU with a number for a description: refused");
	ok(pbx_price_gce_parse("", 0, "us-central1", "USD", &v, &n, &next, &err) < 0,
	   "an empty reply: refused");
	pbx_price_items_free(v, n);
}

/* Money at the parser's bounds: units up to 1e6 taken, above refused (a
 * price of 1e9 units once made the quote overflow). */
static void test_gce_parse_bounds(void)
{
	static const char at_max[] =
		"{\"skus\": [" SKU("N1 Predefined Instance Core running in Americas", "OnDemand",
				   "us-central1", "h", "1000000", "0") "]}";
	static const char above[] =
		"{\"skus\": [" SKU("N1 Predefined Instance Core running in Americas", "OnDemand",
				   "us-central1", "h", "1000000", "1") "]}";
	static const char huge[] =
		"{\"skus\": [" SKU("N1 Predefined Instance Core running in Americas", "OnDemand",
				   "us-central1", "h", "1000000000", "999999999") "]}";
	struct pbx_price_item *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	ok(pbx_price_gce_parse(at_max, strlen(at_max), "us-central1", "USD", &v, &n, &next, &err) ==
			   0 &&
		   n == 1 && v[0].nanos == PBX_PRICE_MAX,
	   "1e6 units: taken (%s)", err.msg);
	pbx_price_items_free(v, n);
	v = NULL;
	n = 0;
	ok(pbx_price_gce_parse(above, strlen(above), "us-central1", "USD", &v, &n, &next, &err) <
			   0 ||
		   n == 0,
	   "1e6 units and a nano: not taken");
	pbx_price_items_free(v, n);
	v = NULL;
	n = 0;
	ok(pbx_price_gce_parse(huge, strlen(huge), "us-central1", "USD", &v, &n, &next, &err) < 0 ||
		   n == 0,
	   "1e9 units: not taken");
	pbx_price_items_free(v, n);
	free(next);
}

static void test_aws_parse(void)
{
	static const char reply[] =
		"{\"FormatVersion\": \"aws_v1\", \"NextToken\": \"t2\", \"PriceList\": [\"{\\\"product\\\": "
		"{\\\"attributes\\\": {\\\"instanceType\\\": \\\"g4dn.xlarge\\\"}}, \\\"terms\\\": "
		"{\\\"OnDemand\\\": {\\\"X.JRTCKXETXF\\\": {\\\"priceDimensions\\\": "
		"{\\\"X.JRTCKXETXF.6YS6EN2CT7\\\": {\\\"unit\\\": \\\"Hrs\\\", \\\"pricePerUnit\\\": "
		"{\\\"USD\\\": \\\"0.5260000000\\\"}}}}}}}\"]}";
	static const char object_entry[] = "{\"PriceList\": [{\"product\": {}}]}";
	struct pbx_price_item *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	ok(pbx_price_aws_parse(reply, strlen(reply), &v, &n, &next, &err) == 0,
	   "a GetProducts reply parses: %s", err.msg);
	ok(n == 1 && !strcmp(v[0].item, "type:g4dn.xlarge") && v[0].nanos == 526000000,
	   "g4dn.xlarge at 0.526 USD an hour");
	is_str(next, "t2", "NextToken");
	free(next);
	pbx_price_items_free(v, n);
	v = NULL;
	n = 0;
	ok(pbx_price_aws_parse(object_entry, strlen(object_entry), &v, &n, &next, &err) < 0,
	   "a PriceList entry that is an object, not a JSON string: refused");
	is_str(err.msg, "PriceList entry 0 is not a JSON string", "saying so");
	ok(pbx_price_aws_parse("{}", 2, &v, &n, &next, &err) < 0, "no PriceList: refused");
	pbx_price_items_free(v, n);
}

static void test_spot_parse(void)
{
	static const char reply[] =
		"<DescribeSpotPriceHistoryResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
		"<spotPriceHistorySet><item><instanceType>g4dn.xlarge</instanceType>"
		"<spotPrice>0.157800</spotPrice><availabilityZone>us-east-1a</availabilityZone></item>"
		"<item><instanceType>g4dn.xlarge</instanceType><spotPrice>0.162100</spotPrice>"
		"<availabilityZone>us-east-1b</availabilityZone></item></spotPriceHistorySet>"
		"<nextToken>n2</nextToken></DescribeSpotPriceHistoryResponse>";
	static const char empty[] = "<DescribeSpotPriceHistoryResponse><spotPriceHistorySet/>"
				    "</DescribeSpotPriceHistoryResponse>";
	static const char other[] = "<R><spotPriceHistorySet><item><instanceType>m5.large"
				    "</instanceType><spotPrice>1</spotPrice></item>"
				    "</spotPriceHistorySet></R>";
	struct pbx_err err = PBX_ERR_INIT;
	int64_t max = 0;
	int found = 0;
	char *next = NULL;
	ok(pbx_price_spot_parse(reply, strlen(reply), "g4dn.xlarge", &max, &found, &next, &err) ==
		   0,
	   "a spot price history parses: %s", err.msg);
	ok(found && max == 162100000, "the highest zone's price: 0.1621");
	is_str(next, "n2", "nextToken");
	free(next);
	found = 0;
	ok(pbx_price_spot_parse(empty, strlen(empty), "g4dn.xlarge", &max, &found, &next, &err) ==
			   0 &&
		   !found && !next,
	   "an empty history: no price");
	ok(pbx_price_spot_parse(other, strlen(other), "g4dn.xlarge", &max, &found, &next, &err) < 0,
	   "a price of another type: refused (%s)", err.msg);
	ok(pbx_price_spot_parse("<a/>", 4, "g4dn.xlarge", &max, &found, &next, &err) < 0,
	   "another reply: refused");
}

static void test_money_and_types(void)
{
	int64_t x = 0;
	char out[32];
	struct pbx_gce_type ty;
	ok(pbx_money_parse("0.0475", &x) == 0 && x == 47500000, "0.0475");
	ok(pbx_money_parse("12", &x) == 0 && x == 12 * PBX_NANO, "12");
	ok(pbx_money_parse("0.5260000000", &x) == 0 && x == 526000000, "trailing zeros past 9");
	ok(pbx_money_parse("-1", &x) < 0 && pbx_money_parse("1e3", &x) < 0 &&
		   pbx_money_parse(".5", &x) < 0 && pbx_money_parse("0.0000000001", &x) < 0 &&
		   pbx_money_parse("", &x) < 0,
	   "signs, exponents, bare fractions, 10 places refused");
	/* the bounds: a price at most 1e6 units, products checked */
	ok(pbx_price_parse("1000000", &x) == 0 && x == PBX_PRICE_MAX,
	   "a price of 1e6: the most taken");
	ok(pbx_price_parse("1000000.000000001", &x) < 0 && pbx_price_parse("999999999", &x) < 0,
	   "a price above 1e6: refused");
	ok(pbx_money_muladd(PBX_PRICE_MAX, 1000, 0, &x) == 0 && x == PBX_PRICE_MAX * 1000,
	   "1e6 x 1000 nodes adds up");
	x = 7;
	ok(pbx_money_muladd(PBX_PRICE_MAX, 12582912, 512, &x) < 0 && x == 7,
	   "1e6 a GiB x 12 TiB passes the most pbx adds up: refused, nothing written");
	ok(pbx_money_muladd(INT64_MAX, 2, 0, &x) < 0 && pbx_money_muladd(1, 1, INT64_MAX, &x) < 0 &&
		   pbx_money_muladd(-1, 1, 0, &x) < 0,
	   "overflowing or negative factors: refused");
	pbx_money_format(1004000000, 4, out, sizeof(out));
	is_str(out, "1.0040", "1.004 with 4 places");
	pbx_money_format(123456, 4, out, sizeof(out));
	is_str(out, "0.0001", "rounded half up");
	ok(pbx_gce_type_lookup("n1-standard-8", &ty) == 0 && ty.cpus == 8 && ty.mem_mb == 30720,
	   "n1-standard-8: 8 vCPUs, 30 GiB");
	ok(pbx_gce_type_lookup("a2-highgpu-2g", &ty) == 0 && ty.cpus == 24 && ty.gpus == 2 &&
		   !strcmp(ty.gpu_type, "nvidia-tesla-a100"),
	   "a2-highgpu-2g: 24 vCPUs, 2 A100");
	ok(pbx_gce_type_lookup("g2-standard-24", &ty) == 0 && ty.gpus == 2, "g2-standard-24: 2 L4");
	ok(pbx_gce_type_lookup("e2-micro", &ty) < 0 &&
		   pbx_gce_type_lookup("n2-custom-4-8192", &ty) < 0,
	   "shared-core and custom types are not known");
}

static const char config_text[] =
	"clusters:\n"
	"  g1:\n"
	"    cloud: gce\n"
	"    login_user: pbx\n"
	"    image: debian-12\n"
	"    head: { machine_type: e2-standard-2 }\n"
	"    node_groups:\n"
	"      - { name: gpu, count: 2, machine_type: n1-standard-8, gpus: 2, gpu_type: nvidia-tesla-t4,"
	" spot: true }\n"
	"      - { name: cpu, count: 1, machine_type: e2-standard-8 }\n"
	"      - { name: odd, count: 1, machine_type: e2-micro }\n"
	"clouds:\n"
	"  gce: { project: p, zone: us-central1-a, billing_endpoint: \"http://127.0.0.1:1/\" }\n";

static void fill_cache(struct pbx_store *st)
{
	struct pbx_price_item v[] = {
		{ "core:e2", 0, 20000000, "USD" },
		{ "ram:e2", 0, 2500000, "USD" },
		{ "core:n1", 1, 6000000, "USD" },
		{ "ram:n1", 1, 800000, "USD" },
		{ "gpu:nvidia-tesla-t4", 1, 140000000, "USD" },
	};
	struct pbx_err err = PBX_ERR_INIT;
	ok(pbx_store_prices_put(st, "gce", "us-central1", "skus:USD", (int64_t)time(NULL), v,
				sizeof(v) / sizeof(v[0]), &err) == 0,
	   "cache filled: %s", err.msg);
}

static void test_quote(const char *dir)
{
	struct pbx_config *cfg = NULL;
	struct pbx_store *st = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_price_quote q;
	char *db = NULL;
	db = xasprintf("%s/pbx.db", dir);
	ok(pbx_config_parse("config.yaml", config_text, strlen(config_text), &cfg, &err) == 0,
	   "config: %s", err.msg);
	ok(pbx_store_open(db, &st, &err) == 0, "store: %s", err.msg);
	if (!cfg || !st)
		return;
	ok(pbx_price_quote(st, cfg, &cfg->templates[0], 1, &q, &err) < 0 &&
		   err.code == PBX_EXIT_NOTFOUND,
	   "offline with nothing cached: not found (%s)", err.msg);
	pbx_price_quote_free(&q);
	fill_cache(st);
	ok(pbx_price_quote(st, cfg, &cfg->templates[0], 1, &q, &err) == 0, "quote: %s", err.msg);
	ok(q.n == 4 && q.lines[0].each == 60000000, "head e2-standard-2: 0.06");
	ok(q.n == 4 && q.lines[1].each == 352000000 && q.lines[1].count == 2,
	   "2 spot n1-standard-8 with 2 T4: 0.352 each");
	ok(q.n == 4 && q.lines[2].each == 240000000, "e2-standard-8: 0.24");
	ok(q.n == 4 && q.lines[3].each == -1 && strstr(q.lines[3].why, "prices.hourly.e2-micro"),
	   "e2-micro unknown, saying what to set: %s", q.n == 4 ? q.lines[3].why : "");
	ok(q.total == -1, "so the total is unknown");
	pbx_price_quote_free(&q);

	/* the override prices e2-micro and replaces the T4's price */
	cfg->prices.hourly = calloc(1, sizeof(*cfg->prices.hourly));
	cfg->prices.hourly[0] = (struct pbx_price_override){ strdup("e2-micro"), 8400000, 1 };
	cfg->prices.nhourly = 1;
	cfg->prices.gpu_hourly = calloc(1, sizeof(*cfg->prices.gpu_hourly));
	cfg->prices.gpu_hourly[0] =
		(struct pbx_price_override){ strdup("nvidia-tesla-t4"), 200000000, 1 };
	cfg->prices.ngpu_hourly = 1;
	ok(pbx_price_quote(st, cfg, &cfg->templates[0], 1, &q, &err) == 0, "quote: %s", err.msg);
	ok(q.total == 60000000 + 2 * 472000000LL + 240000000 + 8400000,
	   "with overrides: exactly 1.2524 an hour (%lld)", (long long)q.total);
	pbx_price_quote_free(&q);

	/* a cached price at the bound: its products pass what pbx adds up,
	 * and the line is unknown instead of overflowing */
	{
		struct pbx_price_item big[] = {
			{ "core:e2", 0, 20000000, "USD" },
			{ "ram:e2", 0, 2500000, "USD" },
			{ "core:n1", 1, 6000000, "USD" },
			{ "ram:n1", 1, PBX_PRICE_MAX, "USD" },
			{ "gpu:nvidia-tesla-t4", 1, 140000000, "USD" },
		};
		ok(pbx_store_prices_put(st, "gce", "us-central1", "skus:USD", (int64_t)time(NULL),
					big, sizeof(big) / sizeof(big[0]), &err) == 0,
		   "cache: a spot n1 RAM price of 1e6 a GiB");
		ok(pbx_price_quote(st, cfg, &cfg->templates[0], 1, &q, &err) == 0, "quote: %s",
		   err.msg);
		ok(q.n == 4 && q.lines[1].each == -1 && q.lines[1].why &&
			   strstr(q.lines[1].why, "cost more than pbx takes"),
		   "30 GiB at 1e6: the line is unknown, saying why: %s",
		   q.n == 4 && q.lines[1].why ? q.lines[1].why : "");
		ok(q.total == -1, "and so is the total (no overflow)");
		pbx_price_quote_free(&q);
	}
	pbx_store_close(st);
	pbx_config_free(cfg);
	unlink(db);
	free(db);
	db = xasprintf("%s/pbx.db-wal", dir);
	unlink(db);
	free(db);
	db = xasprintf("%s/pbx.db-shm", dir);
	unlink(db);
	free(db);
}

int main(void)
{
	char dir[] = "/tmp/pbx-test-price-XXXXXX";
	test_gce_parse();
	test_gce_parse_bounds();
	test_aws_parse();
	test_spot_parse();
	test_money_and_types();
	if (mkdtemp(dir)) {
		test_quote(dir);
		rmdir(dir);
	}
	return tap_done();
}
