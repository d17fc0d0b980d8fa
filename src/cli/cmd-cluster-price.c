/*
 * cmd-cluster-price.c - `pbx cluster price NAME`: what a cluster costs an
 * hour, by node group, from the cloud's price catalogue
 * (src/cluster/price.c); and the same note before a start
 * (pbx_cli_cluster_price_note) and the money formats that list and show
 * share (cluster_cli.h).
 */
#include "cli/cluster_cli.h"
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "util/money.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- price */

/* What the prices leave out (docs/cost.md). */
static const char *const price_excluded[] = { "disks", "network egress", "external IP addresses",
					      "Cloud NAT / NAT gateways", NULL };

/* A line of the price text: to stdout, or as information on stderr. */
static void price_emit(int to_stdout, const char *line)
{
	if (to_stdout)
		printf("%s\n", line);
	else
		pbx_info("%s", line);
}

void pbx_cli_price_amount(int64_t nanos, char out[32])
{
	if (nanos < 0)
		snprintf(out, 32, "?");
	else
		pbx_money_format(nanos, 4, out, 32);
}

/* The quote as text: a line per node kind, the total, what is left out. */
static void price_text_lines(const char *name, const struct pbx_price_quote *q, int to_stdout)
{
	char line[512], each[32], sum[32], date[64] = "from prices: only";
	size_t i;
	if (q->fetched) {
		time_t t = (time_t)q->fetched;
		strftime(date, sizeof(date), "catalogue of %Y-%m-%d %H:%M UTC", gmtime(&t));
	}
	snprintf(line, sizeof(line), "price of cluster %s an hour (%s %s, %s; %s%s):", name,
		 q->cloud, q->region, q->currency, date, q->stale ? ", stale" : "");
	price_emit(to_stdout, line);
	for (i = 0; i < q->n; i++) {
		const struct pbx_price_line *l = &q->lines[i];
		pbx_cli_price_amount(l->each, each);
		pbx_cli_price_amount(l->each < 0 ? -1 : l->each * l->count, sum);
		snprintf(line, sizeof(line), "  %-12s %-18s %s %3d x %9s = %9s%s%s", l->group,
			 l->machine_type, l->spot ? "spot" : "    ", l->count, each, sum,
			 l->each < 0 ? "  unknown: " : "", l->each < 0 && l->why ? l->why : "");
		price_emit(to_stdout, line);
	}
	pbx_cli_price_amount(q->total, sum);
	snprintf(line, sizeof(line), "  %-55s%9s %s/h", "total", sum, q->currency);
	price_emit(to_stdout, line);
	snprintf(line, sizeof(line), "  not included: %s, %s, %s, %s", price_excluded[0],
		 price_excluded[1], price_excluded[2], price_excluded[3]);
	price_emit(to_stdout, line);
	if (q->warning)
		pbx_warning("%s", q->warning);
}

static void price_print_text(const char *name, const struct pbx_price_quote *q, int to_stdout)
{
	char line[300];
	if (!strcmp(q->cloud, "local")) {
		snprintf(line, sizeof(line),
			 "cluster %s runs as processes on this machine: no cloud "
			 "price",
			 name);
		price_emit(to_stdout, line);
		return;
	}
	price_text_lines(name, q, to_stdout);
}

json_t *pbx_cli_price_money(int64_t nanos)
{
	return nanos < 0 ? json_null() : json_real((double)nanos / 1e9);
}

static json_t *price_json(const char *name, const struct pbx_price_quote *q)
{
	json_t *o = json_object(), *lines = json_array(), *ex = json_array();
	size_t i;
	json_object_set_new(o, "cluster", json_string(name));
	json_object_set_new(o, "cloud", json_string(q->cloud));
	json_object_set_new(o, "region", json_string(q->region));
	json_object_set_new(o, "currency", json_string(q->currency));
	json_object_set_new(o, "fetched", q->fetched ? json_integer(q->fetched) : json_null());
	json_object_set_new(o, "stale", json_boolean(q->stale));
	for (i = 0; i < q->n; i++) {
		const struct pbx_price_line *l = &q->lines[i];
		json_t *g = json_pack("{s:s, s:s, s:i, s:b, s:o, s:o}", "group", l->group,
				      "machine_type", l->machine_type, "count", l->count, "spot",
				      l->spot, "each", pbx_cli_price_money(l->each), "hourly",
				      pbx_cli_price_money(l->each < 0 ? -1 : l->each * l->count));
		json_object_set_new(g, l->each < 0 ? "unknown" : "source",
				    json_string(l->why ? l->why : ""));
		json_array_append_new(lines, g);
	}
	json_object_set_new(o, "groups", lines);
	json_object_set_new(o, "hourly", pbx_cli_price_money(q->total));
	for (i = 0; price_excluded[i]; i++)
		json_array_append_new(ex, json_string(price_excluded[i]));
	json_object_set_new(o, "not_included", ex);
	json_object_set_new(o, "warning", q->warning ? json_string(q->warning) : json_null());
	return o;
}

/* The budget of the template cluster tg is (or would be) built from, 0
 * when none, and what the cluster has spent so far (*spent, 0 for a new
 * one). */
static int64_t price_budget(struct pbx_ctx *ctx, const struct pbx_cluster_target *tg,
			    int64_t *spent)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_spend sp;
	*spent = 0;
	if (tg->known && pbx_cluster_spend_of(ctx->store, tg->row.id, time(NULL), &sp, &err) == 0)
		*spent = sp.spent;
	return tg->t ? tg->t->budget : 0;
}

/* "  budget 250.00 USD: 12.0000 spent, about 21.7 h of this cluster left" */
static void price_budget_text(struct pbx_ctx *ctx, const struct pbx_cluster_target *tg,
			      const struct pbx_price_quote *q, int to_stdout)
{
	char line[256], budget[32], spent_text[32], hours[48] = "";
	int64_t spent, b = price_budget(ctx, tg, &spent);
	if (b <= 0 || !strcmp(q->cloud, "local"))
		return;
	pbx_money_format(b, 2, budget, sizeof(budget));
	pbx_money_format(spent, 4, spent_text, sizeof(spent_text));
	if (q->total > 0)
		snprintf(hours, sizeof(hours), ", about %.1f h of this cluster left",
			 spent >= b ? 0.0 : (double)(b - spent) / (double)q->total);
	snprintf(line, sizeof(line), "  budget %s %s: %s spent%s", budget, q->currency, spent_text,
		 hours);
	price_emit(to_stdout, line);
}

/* Before a start: the price an hour on stderr (quiet with -q); a price
 * that cannot be had is a warning, never a reason not to start. */
void pbx_cli_cluster_price_note(struct pbx_ctx *ctx, const struct pbx_cluster_target *tg)
{
	struct pbx_price_quote q;
	struct pbx_err err = PBX_ERR_INIT;
	if (ctx->quiet)
		return;
	if (pbx_cluster_price(ctx->store, ctx->cfg, tg, 0, &q, &err) < 0) {
		if (err.code != PBX_EXIT_NOTFOUND) /* no template: start says so */
			pbx_warning("no price for cluster %s: %s", tg->name, err.msg);
	} else if (strcmp(q.cloud, "local")) {
		price_print_text(tg->name, &q, 0);
		price_budget_text(ctx, tg, &q, 0);
	}
	pbx_price_quote_free(&q);
}

struct price_opts {
	const char *tmpl;
	int json, offline;
};

static const struct pbx_option cluster_price_opts[] = {
	PBX_OPT_STRING('t', "template", "TEMPLATE", struct price_opts, tmpl,
		       "price TEMPLATE instead of the template named NAME"),
	PBX_OPT_FLAG('j', "json", struct price_opts, json,
		     "one JSON object: cloud, region, currency, fetched, stale, groups "
		     "[{group, machine_type, count, spot, each, hourly}], hourly, not_included,\n"
		     "budget (the template's, or null) and spent (by the cluster so far)"),
	PBX_OPT_FLAG('o', "offline", struct price_opts, offline,
		     "use the cached prices only, however old; fetch nothing"),
	PBX_OPT_END,
};

static int cmd_cluster_price_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct price_opts po = { 0 };
	struct pbx_price_quote q;
	struct pbx_cluster_target tg;
	struct pbx_err err = PBX_ERR_INIT;
	int rc, first;
	if ((rc = pbx_opts_parse(&pbx_cmd_cluster_price, argc, argv, &po, &first)))
		return rc;
	if (pbx_cluster_target_resolve(ctx->store, ctx->cfg, argv[first], po.tmpl, &tg, &err) < 0)
		return pbx_report(&err);
	if (pbx_cluster_price(ctx->store, ctx->cfg, &tg, po.offline, &q, &err) < 0) {
		pbx_price_quote_free(&q);
		pbx_cluster_target_release(&tg);
		return pbx_report(&err);
	}
	if (po.json) {
		json_t *o = price_json(argv[first], &q);
		int64_t spent, budget = price_budget(ctx, &tg, &spent);
		char *text;
		json_object_set_new(o, "budget",
				    budget > 0 ? pbx_cli_price_money(budget) : json_null());
		json_object_set_new(o, "spent", pbx_cli_price_money(spent));
		text = json_dumps(o,
				  JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
		printf("%s\n", text ? text : "null");
		free(text);
		json_decref(o);
		if (q.warning)
			pbx_warning("%s", q.warning);
	} else {
		price_print_text(argv[first], &q, 1);
		price_budget_text(ctx, &tg, &q, 1);
	}
	pbx_price_quote_free(&q);
	pbx_cluster_target_release(&tg);
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_price = {
	.name = "price",
	.summary = "show what a cluster costs an hour, by node group",
	.usage = "pbx cluster price [-t TEMPLATE] [-j] [-o] NAME",
	.description = "Prices cluster NAME as `start` would build it: the head and each node\n"
		       "group, on-demand or spot as the template says, from the cloud's own\n"
		       "price catalogue (Compute Engine: the Cloud Billing Catalog API; EC2: the\n"
		       "Price List Query API), cached in the store and fetched again when older\n"
		       "than prices.max_age (7 days); `prices:` in the configuration overrides\n"
		       "any entry.  Disks, network egress, external addresses and NAT are not\n"
		       "included.  `start` and `start --dry-run` show the same before anything\n"
		       "is made.  See docs/cost.md.",
	.args = "CLUSTER|TEMPLATE",
	.options = cluster_price_opts,
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_price_exec,
};
