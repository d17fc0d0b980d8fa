/*
 * fetch.c - fetching the price catalogues over src/http with each cloud's
 * credentials: every page of the Compute Engine service's SKUs from the
 * Cloud Billing Catalog API (an OAuth token of src/cloud/gce/auth with
 * the cloud-billing.readonly scope), and GetProducts of the Price List
 * Query API (JSON 1.1, SigV4 for service "pricing" with
 * src/cloud/aws/sigv4).  Where they are asked: pbx_price_gce_base /
 * pbx_price_aws_base.  The replies are read by parse.c.
 */
#include "cloud/price/price.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cloud/aws/aws.h"
#include "cloud/gce/auth.h"
#include "cloud/gce/gce.h"
#include "http/http.h"
#include "util/xalloc.h"

#define PRICE_PAGES_MAX 200 /* a catalogue longer than this is refused */

/* scheme://host[:port]/ of `url` into *origin and host[:port] into *host
 * (either may be NULL; caller frees); *loopback set for an emulator. */
static int url_origin(const char *url, char **origin, char **host, int *loopback)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *h = NULL, *port = NULL;
	int rc = -1;
	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK) {
		int has_port = curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK && port;
		char *hp = has_port ? xasprintf("%s:%s", h, port) : xstrdup(h);
		if (origin)
			*origin = xasprintf("%s://%s/", scheme, hp);
		if (loopback)
			*loopback = !strncmp(h, "127.", 4) || !strcmp(h, "localhost") ||
				    !strcmp(h, "[::1]");
		if (host)
			*host = hp;
		else
			free(hp);
		rc = 0;
	}
	curl_free(scheme);
	curl_free(h);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

/* The configured URL (made to end in '/'), else an emulator's origin,
 * else the cloud's own. */
static char *price_base(const char *configured, const char *endpoint, const char *cloud)
{
	char *origin = NULL;
	int loop = 0;
	if (configured) {
		size_t len = strlen(configured);
		return len && configured[len - 1] == '/' ? xstrdup(configured)
							 : xasprintf("%s/", configured);
	}
	if (endpoint && url_origin(endpoint, &origin, NULL, &loop) == 0 && loop)
		return origin;
	free(origin);
	return xstrdup(cloud);
}

char *pbx_price_gce_base(const struct pbx_config *cfg)
{
	return price_base(cfg->gce.billing_endpoint, cfg->gce.endpoint, PBX_GCE_BILLING_ENDPOINT);
}

char *pbx_price_aws_base(const struct pbx_config *cfg)
{
	return price_base(cfg->aws.pricing_endpoint, cfg->aws.endpoint, PBX_AWS_PRICING_ENDPOINT);
}

/* ------------------------------------------------------ Compute Engine */

struct gce_fetch {
	struct pbx_http *http;
	struct pbx_gce_auth *auth;
};

/* One GET with the bearer token (a fresh one once after a 401). */
static int gce_get(struct gce_fetch *f, const char *url, struct pbx_http_resp *resp,
		   struct pbx_err *err)
{
	int attempt, rc = -1;
	for (attempt = 0; attempt < 2; attempt++) {
		const char *hdrs[2] = { NULL, NULL };
		struct pbx_http_req r = {
			.method = "GET", .url = url, .headers = hdrs, .retryable = gce_retryable
		};
		char *auth = NULL;
		if (pbx_gce_auth_header(f->auth, &auth, err) < 0)
			return -1;
		hdrs[0] = auth;
		rc = pbx_http_do(f->http, &r, resp, err);
		pbx_gce_auth_free_header(auth);
		if (rc < 0 || resp->status != 401)
			break;
		pbx_gce_auth_invalidate(f->auth);
	}
	return rc;
}

static char *gce_page_url(const char *base, const char *currency, const char *token)
{
	char *enc = token ? curl_easy_escape(NULL, token, 0) : NULL, *url;
	url = xasprintf("%sv1/services/%s/skus?currencyCode=%s&pageSize=5000%s%s", base,
			PBX_GCE_BILLING_SERVICE, currency, enc ? "&pageToken=" : "",
			enc ? enc : "");
	curl_free(enc);
	return url;
}

static int gce_pages(struct gce_fetch *f, const char *base, const char *region,
		     const char *currency, struct pbx_price_item **v, size_t *n,
		     struct pbx_err *err)
{
	char *token = NULL, msg[600];
	int pages = 0, rc = 0;
	do {
		struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
		char *url = gce_page_url(base, currency, token), *next = NULL;
		free(token);
		token = NULL;
		rc = gce_get(f, url, &resp, err);
		if (rc == 0 && resp.status != 200) {
			if (gce_error_text(resp.body.buf, resp.body.len, msg, sizeof(msg)) < 0)
				snprintf(msg, sizeof(msg), "no error message");
			rc = pbx_err_set(err, "HTTP %ld: %s", resp.status, msg);
		} else if (rc == 0) {
			rc = pbx_price_gce_parse(resp.body.buf, resp.body.len, region, currency, v,
						 n, &next, err);
			if (rc < 0)
				pbx_err_prefix(err, "page %d", pages + 1);
		}
		pbx_buf_release(&resp.body);
		free(url);
		token = next;
		if (rc == 0 && ++pages >= PRICE_PAGES_MAX && token)
			rc = pbx_err_set(err, "more than %d pages", PRICE_PAGES_MAX);
	} while (rc == 0 && token);
	free(token);
	return rc;
}

int pbx_price_gce_fetch(struct pbx_store *st, const struct pbx_config *cfg, const char *region,
			const char *currency, struct pbx_price_item **v, size_t *n,
			struct pbx_err *err)
{
	struct pbx_http_opts o = { .service = "gce-billing", .max_attempts = 4 };
	struct gce_fetch f = { NULL, NULL };
	char *base = pbx_price_gce_base(cfg);
	int rc;
	*v = NULL;
	*n = 0;
	rc = pbx_http_open(&o, &f.http, err);
	if (rc == 0 && st)
		pbx_http_set_log(f.http, pbx_cloud_http_log, st, 0);
	if (rc == 0)
		rc = pbx_gce_auth_open(cfg->gce.credentials, f.http, &f.auth, err);
	if (rc == 0) {
		pbx_gce_auth_set_scope(f.auth, PBX_GCE_BILLING_SCOPE);
		rc = gce_pages(&f, base, region, currency, v, n, err);
	}
	if (rc < 0) {
		char *shown = pbx_http_redact_url(base);
		pbx_err_prefix(err, "Cloud Billing Catalog %s, Compute Engine SKUs", shown);
		free(shown);
		pbx_price_items_free(*v, *n);
		*v = NULL;
		*n = 0;
	}
	pbx_gce_auth_close(f.auth);
	pbx_http_close(f.http);
	free(base);
	return rc;
}

/* ----------------------------------------------------------------- EC2 */

struct aws_fetch {
	struct pbx_http *http;
	struct aws_creds creds;
	char *base, *host;
};

static json_t *aws_filter(const char *field, const char *value)
{
	return json_pack("{s:s, s:s, s:s}", "Type", "TERM_MATCH", "Field", field, "Value", value);
}

static char *aws_body(const char *region, const char *type, const char *token)
{
	json_t *filters = json_array(), *o;
	char *body;
	json_array_append_new(filters, aws_filter("instanceType", type));
	json_array_append_new(filters, aws_filter("regionCode", region));
	json_array_append_new(filters, aws_filter("operatingSystem", "Linux"));
	json_array_append_new(filters, aws_filter("tenancy", "Shared"));
	json_array_append_new(filters, aws_filter("preInstalledSw", "NA"));
	json_array_append_new(filters, aws_filter("capacitystatus", "Used"));
	o = json_pack("{s:s, s:o, s:s, s:i}", "ServiceCode", "AmazonEC2", "Filters", filters,
		      "FormatVersion", "aws_v1", "MaxResults", 100);
	if (token)
		json_object_set_new(o, "NextToken", json_string(token));
	body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return body;
}

/* One signed GetProducts call. */
static int aws_post(struct aws_fetch *f, const char *body, struct pbx_http_resp *resp,
		    struct pbx_err *err)
{
	struct aws_json_call c = { f->http,
				   &f->creds,
				   f->base,
				   f->host,
				   PBX_AWS_PRICING_REGION,
				   "pricing",
				   "AWSPriceListService.GetProducts" };
	return aws_json_post(&c, body, resp, err);
}

static int aws_pages(struct aws_fetch *f, const char *region, const char *type,
		     struct pbx_price_item **v, size_t *n, struct pbx_err *err)
{
	char *token = NULL, msg[512];
	int pages = 0, rc = 0;
	do {
		struct pbx_http_resp resp = PBX_HTTP_RESP_INIT;
		char *body = aws_body(region, type, token), *next = NULL;
		free(token);
		token = NULL;
		rc = aws_post(f, body, &resp, err);
		if (rc == 0 && resp.status != 200) {
			aws_json_error(resp.body.buf, resp.body.len, msg, sizeof(msg));
			rc = pbx_err_set(err, "HTTP %ld %s", resp.status, msg);
		} else if (rc == 0) {
			rc = pbx_price_aws_parse(resp.body.buf, resp.body.len, v, n, &next, err);
		}
		pbx_buf_release(&resp.body);
		free(body);
		token = next;
		if (rc == 0 && ++pages >= PRICE_PAGES_MAX && token)
			rc = pbx_err_set(err, "more than %d pages", PRICE_PAGES_MAX);
	} while (rc == 0 && token);
	free(token);
	return rc;
}

int pbx_price_aws_fetch(struct pbx_store *st, const struct pbx_config *cfg, const char *region,
			const char *type, struct pbx_price_item **v, size_t *n, struct pbx_err *err)
{
	struct pbx_http_opts o = { .service = "aws-pricing", .max_attempts = 4 };
	struct aws_fetch f;
	struct aws_creds_opts co = { cfg->aws.profile, NULL };
	int rc;
	memset(&f, 0, sizeof(f));
	*v = NULL;
	*n = 0;
	f.base = pbx_price_aws_base(cfg);
	rc = pbx_http_open(&o, &f.http, err);
	if (rc == 0 && st)
		pbx_http_set_log(f.http, pbx_cloud_http_log, st, 0);
	if (rc == 0 && url_origin(f.base, NULL, &f.host, NULL) < 0)
		rc = pbx_err_setc(err, PBX_EXIT_USAGE, "not a URL: %s", f.base);
	co.http = f.http;
	if (rc == 0)
		rc = aws_creds_find(&co, &f.creds, err);
	if (rc == 0)
		rc = aws_pages(&f, region, type, v, n, err);
	if (rc < 0) {
		pbx_err_prefix(err, "Price List GetProducts for %s in %s", type, region);
		pbx_price_items_free(*v, *n);
		*v = NULL;
		*n = 0;
	}
	aws_creds_free(&f.creds);
	pbx_http_close(f.http);
	free(f.base);
	free(f.host);
	return rc;
}

/* ------------------------------------------------------------ EC2 spot */

/* A context of the EC2 provider with what aws_call needs only (no
 * template, no login): the endpoint, region, credentials, a handle. */
static int spot_open(struct pbx_store *st, const struct pbx_config *cfg, const char *region,
		     struct pbx_cluster_spec *s, struct aws *a, struct pbx_err *err)
{
	struct pbx_http_opts o = { .service = "ec2", .max_attempts = 4 };
	struct aws_creds_opts co = { cfg->aws.profile, NULL };
	const char *ep = cfg->aws.endpoint;
	memset(s, 0, sizeof(*s));
	memset(a, 0, sizeof(*a));
	s->cfg = cfg;
	s->store = st;
	a->s = s;
	a->region = xstrdup(region);
	a->endpoint = ep ? xasprintf("%s%s", ep, ep[strlen(ep) - 1] == '/' ? "" : "/")
			 : xasprintf("https://ec2.%s.amazonaws.com/", region);
	if (url_origin(a->endpoint, NULL, &a->host, NULL) < 0)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "not a URL: %s", a->endpoint);
	if (pbx_http_open(&o, &a->http, err) < 0)
		return -1;
	if (st)
		pbx_http_set_log(a->http, pbx_cloud_http_log, st, 0);
	co.http = a->http;
	return aws_creds_find(&co, &a->creds, err);
}

static void spot_close(struct aws *a)
{
	aws_creds_free(&a->creds);
	pbx_http_close(a->http);
	free(a->region);
	free(a->endpoint);
	free(a->host);
}

static int spot_pages(struct aws *a, const char *type, int64_t *max, int *found,
		      struct pbx_err *err)
{
	char now[32], *token = NULL;
	time_t t = time(NULL);
	int pages = 0, rc = 0;
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	do {
		struct aws_params p = { 0 };
		struct pbx_buf reply = PBX_BUF_INIT;
		char *next = NULL;
		aws_param(&p, "InstanceType.1", "%s", type);
		aws_param(&p, "ProductDescription.1", "Linux/UNIX");
		aws_param(&p, "StartTime", "%s", now);
		if (token)
			aws_param(&p, "NextToken", "%s", token);
		free(token);
		token = NULL;
		rc = aws_call(a, "DescribeSpotPriceHistory", &p, &reply, NULL, err);
		if (rc == 0)
			rc = pbx_price_spot_parse(reply.buf, reply.len, type, max, found, &next,
						  err);
		aws_params_free(&p);
		pbx_buf_release(&reply);
		token = next;
		if (rc == 0 && ++pages >= PRICE_PAGES_MAX && token)
			rc = pbx_err_set(err, "more than %d pages", PRICE_PAGES_MAX);
	} while (rc == 0 && token);
	free(token);
	return rc;
}

int pbx_price_aws_spot_fetch(struct pbx_store *st, const struct pbx_config *cfg, const char *region,
			     const char *type, struct pbx_price_item **v, size_t *n,
			     struct pbx_err *err)
{
	struct pbx_cluster_spec s;
	struct aws a;
	int64_t max = 0;
	int found = 0, rc;
	char item[96];
	*v = NULL;
	*n = 0;
	rc = spot_open(st, cfg, region, &s, &a, err);
	if (rc == 0)
		rc = spot_pages(&a, type, &max, &found, err);
	spot_close(&a);
	if (rc < 0)
		return pbx_err_prefix(err, "EC2 spot price of %s in %s", type, region);
	if (found) {
		*v = xcalloc(1, sizeof(**v));
		snprintf(item, sizeof(item), "type:%.80s", type);
		(*v)[0] = (struct pbx_price_item){ xstrdup(item), 1, max, "USD" };
		*n = 1;
	}
	return 0;
}
