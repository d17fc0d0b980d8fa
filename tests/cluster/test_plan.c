/*
 * test_plan.c - the pure plans of src/cluster (cluster_plan.h), with no
 * store, SSH or clock: which nodes SLURM's power saving may put to sleep
 * and make anew, and a start's plan of them (slurm_sleep_plan.c); which
 * heads run pbx (head_plan.c); the spend and budget arithmetic
 * (spend_plan.c), with its edges: zero, negative and unpriced values, sums
 * and times too big for an int64_t, a budget exactly met; the template as
 * the cluster was sized and its record's fields, the SSH exposure line
 * (template_json.c); a cluster's record read as hostile input
 * (record_parse.c; the head's runs have tests/cluster/test_headruns.c).
 */
#include "common/tap.h"

#include "cluster/cluster_internal.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NANO 1000000000LL /* one unit of currency */

/* node1..node4 (node1 always runs), gpu1..gpu2 (Spot, always run). */
static struct pbx_node_group groups[] = {
	{ .name = "node", .count = 4, .min = 1 },
	{ .name = "gpu", .count = 2, .min = -1, .spot = true, .gpus = 1 },
};
static struct pbx_cluster_template tmpl = {
	.name = "pl",
	.cloud = "gce",
	.groups = groups,
	.ngroups = 2,
	.autostop = 600,
};

static void test_sleep_plan(void)
{
	struct pbx_cluster_template none = tmpl;
	struct pbx_node_group always[] = { { .name = "node", .count = 4, .min = -1 } };
	int k = -1;
	CHECK(pbx_power_group(&tmpl, "node3", &k) == &groups[0] && k == 3);
	CHECK(pbx_power_group(&tmpl, "gpu2", &k) == &groups[1] && k == 2);
	CHECK(pbx_power_group(&tmpl, "head", &k) == NULL && k == 0);
	CHECK(pbx_power_group(NULL, "node3", &k) == NULL && k == 0);
	CHECK(!pbx_power_may_sleep(&tmpl, "node1")); /* within min: */
	CHECK(pbx_power_may_sleep(&tmpl, "node2") && pbx_power_may_sleep(&tmpl, "node4"));
	CHECK(!pbx_power_may_sleep(&tmpl, "gpu2")); /* no min: */
	CHECK(!pbx_power_may_sleep(&tmpl, "head") && !pbx_power_may_sleep(&tmpl, "node0x"));
	CHECK(!pbx_power_may_sleep(NULL, "node2"));
	/* made anew: a node that may sleep, and a Spot node that always runs */
	CHECK(pbx_power_remade(&tmpl, "node2") && pbx_power_remade(&tmpl, "gpu1"));
	CHECK(!pbx_power_remade(&tmpl, "node1"));
	CHECK(!pbx_power_remade(&tmpl, "node5")); /* past the group's count */
	CHECK(!pbx_power_remade(&tmpl, "gpu3") && !pbx_power_remade(&tmpl, "head"));
	none.groups = always;
	none.ngroups = 1;
	CHECK(!pbx_power_remade(&none, "node2") && !pbx_power_may_sleep(&none, "node2"));
}

static void test_power_plan(void)
{
	struct pbx_cluster c;
	struct pbx_node_row rows[4];
	const char *names[] = { "head", "node1", "node2", "gpu1" };
	size_t i;
	memset(&c, 0, sizeof(c));
	memset(rows, 0, sizeof(rows));
	c.spec.t = &tmpl;
	for (i = 0; i < 4; i++) {
		rows[i].name = xstrdup(names[i]);
		rows[i].role = xstrdup(i ? "compute" : "head");
		rows[i].state = xstrdup(PBX_NODE_NOT_CREATED);
	}
	pbx_power_plan(&c, rows, 4);
	CHECK_STR(rows[0].state, PBX_NODE_NOT_CREATED);
	CHECK_STR(rows[1].state, PBX_NODE_NOT_CREATED);
	CHECK_STR(rows[2].state, PBX_NODE_ASLEEP);
	CHECK_STR(rows[3].state, PBX_NODE_NOT_CREATED);
	pbx_power_plan(&c, rows, 0); /* nothing planned: nothing done */
	for (i = 0; i < 4; i++)
		pbx_node_row_release(&rows[i]);
}

static void test_head_plan(void)
{
	struct pbx_cluster c;
	struct pbx_cluster_template t = tmpl;
	memset(&c, 0, sizeof(c));
	c.row.cloud = "gce";
	CHECK(!pbx_head_deletes(&c) && !pbx_head_runs_pbx(&c)); /* no template */
	c.spec.t = &t;
	CHECK(!pbx_head_deletes(&c));
	CHECK(pbx_head_runs_pbx(&c)); /* power saving on a cloud */
	c.row.cloud = "local";
	CHECK(!pbx_head_runs_pbx(&c)); /* the local cloud's: this pbx */
	t.autostop_delete = true;
	CHECK(pbx_head_deletes(&c) && pbx_head_runs_pbx(&c));
}

static void test_spend_states(void)
{
	CHECK(pbx_spend_state_runs("up") && pbx_spend_state_runs(PBX_NODE_WAKING));
	CHECK(!pbx_spend_state_runs(NULL));
	CHECK(!pbx_spend_state_runs(PBX_NODE_NOT_CREATED));
	CHECK(!pbx_spend_state_runs("deleted"));
	CHECK(!pbx_spend_state_runs(PBX_NODE_ASLEEP));
}

static void test_node_price(void)
{
	struct pbx_price_line lines[] = {
		{ .group = "head", .each = 100 },
		{ .group = "node", .each = 50 },
		{ .group = "gpu", .each = -1 },
	};
	struct pbx_price_quote q;
	memset(&q, 0, sizeof(q));
	q.lines = lines;
	q.n = 3;
	CHECK(pbx_spend_node_price(&q, &tmpl, "head", "head") == 100);
	CHECK(pbx_spend_node_price(&q, &tmpl, "node3", "compute") == 50);
	CHECK(pbx_spend_node_price(&q, &tmpl, "gpu1", "compute") == -1);
	CHECK(pbx_spend_node_price(&q, &tmpl, "other1", "compute") == -1);
	CHECK(pbx_spend_node_price(&q, NULL, "node3", "compute") == -1);
	CHECK(pbx_spend_node_price(NULL, &tmpl, "head", "head") == -1);
	q.n = 0;
	CHECK(pbx_spend_node_price(&q, &tmpl, "head", "head") == -1);
}

static void test_run_times(void)
{
	struct pbx_cluster c;
	struct pbx_node_stop stops[] = { { "node2", 500 } }, starts[] = { { "node2", 900 } };
	struct pbx_node_run runs[] = {
		{ .node = "node2", .started = 100, .ended = 800 },
		{ .node = "node3", .started = 100, .ended = 950 },
	};
	memset(&c, 0, sizeof(c));
	c.stopped_at = 400;
	c.stops = stops;
	c.nstops = 1;
	CHECK(pbx_spend_stopped_at(&c, "node2") == 500);
	CHECK(pbx_spend_stopped_at(&c, "node3") == 400);
	c.stopped_at = 0;
	CHECK(pbx_spend_stopped_at(&c, "node3") == 0);
	c.opened_at = 1000;
	CHECK(pbx_spend_run_from(&c, runs, 2, "node3", 2000) == 1000);
	c.opened_at = 0;
	CHECK(pbx_spend_run_from(&c, runs, 2, "node3", 2000) == 2000);
	c.opened_at = 3000; /* after now: now */
	CHECK(pbx_spend_run_from(&c, runs, 2, "node3", 2000) == 2000);
	c.opened_at = 1000;
	c.starts = starts;
	c.nstarts = 1;
	/* the cloud says node2 started at 900, after its last run ended */
	CHECK(pbx_spend_run_from(&c, runs, 2, "node2", 2000) == 900);
	runs[0].ended = 950; /* never before a run of it ended */
	CHECK(pbx_spend_run_from(&c, runs, 2, "node2", 2000) == 1000);
}

static void test_run_cost(void)
{
	CHECK(pbx_spend_run_cost(3600, NANO) == NANO);
	CHECK(pbx_spend_run_cost(1800, 3 * NANO) == 3 * NANO / 2);
	CHECK(pbx_spend_run_cost(0, NANO) == 0);
	CHECK(pbx_spend_run_cost(-10, NANO) == 0);
	CHECK(pbx_spend_run_cost(3600, 0) == 0);
	CHECK(pbx_spend_run_cost(3600, -1) == 0);
	CHECK(pbx_spend_run_cost(1, 1800) == 1); /* 0.5: rounded up */
	CHECK(pbx_spend_run_cost(1, 1799) == 0);
	/* ten years of a node at 1000 a hour: exact */
	CHECK(pbx_spend_run_cost(10LL * 365 * 86400, 1000 * NANO) == 87600000 * NANO);
	CHECK(pbx_spend_run_cost(INT64_MAX, INT64_MAX) == INT64_MAX);
	CHECK(pbx_spend_run_cost(INT64_MAX / 2, 3600) == INT64_MAX / 2);
}

static void test_spend_add(void)
{
	struct pbx_spend s;
	struct pbx_node_run open = { .node = "node2", .started = 100, .nanos = NANO };
	struct pbx_node_run unpriced = { .node = "node3", .started = 0, .ended = 60, .nanos = -1 };
	struct pbx_node_run backwards = {
		.node = "node4", .started = 500, .ended = 400, .nanos = 7
	};
	struct pbx_node_run big = {
		.node = "node4", .started = 0, .ended = INT64_MAX, .nanos = NANO
	};
	memset(&s, 0, sizeof(s));
	strcpy(open.currency, "USD");
	strcpy(backwards.currency, "EUR");
	pbx_spend_add_run(&s, &open, 3700);
	CHECK(s.seconds == 3600 && s.spent == NANO && s.hourly == NANO);
	CHECK(s.runs == 1 && s.running == 1 && s.unpriced == 0);
	CHECK_STR(s.currency, "USD");
	pbx_spend_add_run(&s, &unpriced, 3700);
	CHECK(s.seconds == 3660 && s.spent == NANO && s.unpriced == 1 && s.running == 1);
	pbx_spend_add_run(&s, &backwards, 3700); /* ended before it began: no time */
	CHECK(s.seconds == 3660 && s.spent == NANO && s.hourly == NANO && s.runs == 3);
	CHECK_STR(s.currency, "USD"); /* the first priced run's */
	pbx_spend_add_run(&s, &big, 0);
	CHECK(s.spent == INT64_MAX && s.seconds == INT64_MAX); /* stops, never wraps */
	pbx_spend_add_run(&s, &big, 0);
	CHECK(s.spent == INT64_MAX && s.seconds == INT64_MAX);
	memset(&s, 0, sizeof(s));
	pbx_spend_add_run(&s, &unpriced, 0);
	CHECK(s.spent == 0 && s.currency[0] == 0 && s.unpriced == 1);
}

static void test_budget(void)
{
	struct pbx_budget b;
	char text[160];
	CHECK(pbx_budget_percent(0, 10 * NANO) == 0);
	CHECK(pbx_budget_percent(10 * NANO, 0) == 0);  /* no budget */
	CHECK(pbx_budget_percent(10 * NANO, -5) == 0); /* none either */
	CHECK(pbx_budget_percent(10 * NANO, 10 * NANO) == 100);
	CHECK(pbx_budget_percent(10 * NANO - 1, 10 * NANO) == 99); /* rounded down */
	CHECK(pbx_budget_percent(8 * NANO - 1, 10 * NANO) == 79);
	CHECK(pbx_budget_percent(8 * NANO, 10 * NANO) == PBX_BUDGET_WARN_PERCENT);
	CHECK(pbx_budget_percent(-5 * NANO, 10 * NANO) == -50);
	CHECK(pbx_budget_percent(INT64_MAX, 1) == INT_MAX);
	CHECK(pbx_budget_percent(INT64_MIN, 1) == INT_MIN);
	memset(&b, 0, sizeof(b));
	b.budget = 10 * NANO;
	b.spend.spent = 10 * NANO;
	CHECK(pbx_budget_spent(&b)); /* exactly met: spent */
	b.spend.spent = 10 * NANO - 1;
	CHECK(!pbx_budget_spent(&b));
	b.spend.spent = INT64_MAX;
	CHECK(pbx_budget_spent(&b));
	b.spend.spent = 12345600000LL;
	b.percent = pbx_budget_percent(b.spend.spent, b.budget);
	strcpy(b.spend.currency, "USD");
	pbx_budget_text(&b, text, sizeof(text));
	CHECK_STR(text, "12.3456 of its budget 10.00 USD (123%)");
	b.spend.currency[0] = 0;
	pbx_budget_text(&b, text, sizeof(text));
	CHECK_STR(text, "12.3456 of its budget 10.00 (123%)");
}

static void test_deadline(void)
{
	/* 10 left at 1 an hour: 10 hours, less the margin */
	CHECK(pbx_budget_deadline(1000, 10 * NANO, 0, NANO, 120) == 1000 + 36000 - 120);
	CHECK(pbx_budget_deadline(1000, 10 * NANO, 5 * NANO, NANO, 0) == 1000 + 18000);
	CHECK(pbx_budget_deadline(1000, 10 * NANO, 10 * NANO, NANO, 120) == 1000); /* met */
	CHECK(pbx_budget_deadline(1000, 10 * NANO, 11 * NANO, NANO, 120) == 1000);
	CHECK(pbx_budget_deadline(1000, 10 * NANO, 0, 0, 120) == 1000);       /* no price */
	CHECK(pbx_budget_deadline(1000, 10 * NANO, 0, -1, 120) == 1000);      /* nor this */
	CHECK(pbx_budget_deadline(1000, NANO, 0, 3600 * NANO, 120) == 1000);  /* 1 s < margin */
	CHECK(pbx_budget_deadline(1000, NANO, 0, 7 * NANO, 0) == 1000 + 514); /* 514.28: down */
	CHECK(pbx_budget_deadline(1000, NANO, -NANO, NANO, 0) == 1000 + 7200);
	CHECK(pbx_budget_deadline(1000, INT64_MAX, 0, 1, 120) == INT64_MAX); /* too far */
	CHECK(pbx_budget_deadline(1000, INT64_MAX, INT64_MIN, 1, 0) == INT64_MAX);
	CHECK(pbx_budget_deadline(1000, 10 * NANO, 0, NANO, -100) == 1000 + 36100);
	CHECK(pbx_budget_deadline(INT64_MAX - 10, 10 * NANO, 0, NANO, -100) == INT64_MAX);
}

static void test_template_sized(void)
{
	struct pbx_cluster_template out;
	struct pbx_node_group *g = NULL;
	char *json = pbx_template_json(&tmpl), *resized, *auto_s, *bad;
	REQUIRE(json != NULL);
	pbx_template_sized(&tmpl, json, &out, &g);
	CHECK(out.ngroups == 2 && out.groups == g && g[0].count == 4 && g[1].count == 2);
	CHECK(out.autostop == 600 && out.name == tmpl.name);
	free(g);
	resized = pbx_template_json_resized(json, "node", 2);
	auto_s = pbx_template_json_autostop(resized, 60);
	pbx_template_sized(&tmpl, auto_s, &out, &g);
	CHECK(g[0].count == 2 && g[1].count == 2 && out.autostop == 60);
	CHECK(groups[0].count == 4); /* the config's template is left alone */
	free(g);
	pbx_template_sized(&tmpl, NULL, &out, &g); /* no record: as configured */
	CHECK(g[0].count == 4 && out.autostop == 600);
	free(g);
	pbx_template_sized(&tmpl, "not json", &out, &g);
	CHECK(g[0].count == 4 && out.autostop == 600);
	free(g);
	pbx_template_sized(&tmpl, "{\"autostop_override\":-5}", &out, &g);
	CHECK(out.autostop == 600); /* out of range: the template's */
	free(g);
	CHECK(pbx_template_json_autostop("[1]", 60) == NULL);
	bad = pbx_template_json_resized(json, "nosuch", 9);
	pbx_template_sized(&tmpl, bad, &out, &g);
	CHECK(g[0].count == 4 && g[1].count == 2);
	free(g);
	free(bad);
	free(auto_s);
	free(resized);
	free(json);
}

static void test_template_fields(void)
{
	const char *key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA+/= me@laptop";
	char *json = pbx_template_json(&tmpl), *with, *without, *got, *line;
	CHECK(pbx_pubkey_line_ok(key));
	CHECK(pbx_pubkey_line_ok("ssh-rsa AAAA"));
	CHECK(!pbx_pubkey_line_ok(NULL) && !pbx_pubkey_line_ok(""));
	CHECK(!pbx_pubkey_line_ok("ssh-rsa AAAA\nssh-rsa BBBB"));
	CHECK(!pbx_pubkey_line_ok("ssh-rsa"));
	CHECK(!pbx_pubkey_line_ok("SSH-RSA AAAA"));
	CHECK(!pbx_pubkey_line_ok("ssh-rsa AA!A"));
	line = xcalloc(PBX_PUBKEY_LINE_MAX + 2, 1);
	memcpy(line, "ssh-rsa ", 8);
	memset(line + 8, 'A', PBX_PUBKEY_LINE_MAX - 8);
	CHECK(pbx_pubkey_line_ok(line)); /* just fits */
	line[PBX_PUBKEY_LINE_MAX] = 'A';
	CHECK(!pbx_pubkey_line_ok(line));
	free(line);
	with = pbx_template_json_user_key(json, key);
	got = pbx_template_user_key(with);
	CHECK_STR(got, key);
	free(got);
	without = pbx_template_json_user_key(with, NULL);
	CHECK(pbx_template_user_key(without) == NULL);
	free(without);
	free(with);
	with = pbx_template_json_user_key(json, "no key!");
	CHECK(pbx_template_user_key(with) == NULL); /* read only when it is one */
	free(with);
	CHECK(pbx_template_budget_until(json) == 0);
	with = pbx_template_json_budget_until(json, 1716000000);
	CHECK(pbx_template_budget_until(with) == 1716000000);
	without = pbx_template_json_budget_until(with, 0);
	CHECK(pbx_template_budget_until(without) == 0);
	free(without);
	free(with);
	CHECK(pbx_template_budget_until("{\"budget_until\":-5}") == 0);
	CHECK(pbx_template_budget_until("{\"budget_until\":\"5\"}") == 0);
	CHECK(pbx_template_budget_until(NULL) == 0);
	CHECK(pbx_template_json_budget_until("nope", 5) == NULL);
	free(json);
}

static void test_exposure(void)
{
	static const struct {
		const char *json, *want;
	} cases[] = {
		{ "{\"cloud\":\"local\"}", "loopback addresses of this machine only" },
		{ "{\"cloud\":\"gce\"}", "reaches the head from anywhere (0.0.0.0/0;" },
		{ "{\"cloud\":\"gce\",\"ssh_from\":[\"10.0.0.0/8\",\"192.0.2.0/24\"]}",
		  "from 10.0.0.0/8, 192.0.2.0/24; compute nodes have no external address" },
		{ "{\"cloud\":\"gce\",\"compute_external_ips\":true}",
		  "reaches every node (compute_external_ips)" },
		{ "{\"cloud\":\"aws\",\"ssh_from\":[\"192.0.2.0/24\"]}",
		  "security group from 192.0.2.0/24" },
		{ "not json", "SSH (port 22) from anywhere" },
	};
	size_t i;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *line = pbx_template_ssh_exposure(cases[i].json);
		CHECKF(line && strstr(line, cases[i].want), "exposure %zu: %s", i, line);
		free(line);
	}
	CHECK(pbx_head_runs_node_ok(&tmpl, "node2") && pbx_head_runs_node_ok(&tmpl, "node4"));
	CHECK(!pbx_head_runs_node_ok(&tmpl, "node5")); /* past the count */
	CHECK(!pbx_head_runs_node_ok(&tmpl, "node1") && !pbx_head_runs_node_ok(&tmpl, "gpu1"));
	CHECK(!pbx_head_runs_node_ok(&tmpl, "node0000002"));
}

/* A record of cluster rp with a head whose address is `addr`, and the
 * field "more" when `more`; caller frees. */
static char *record(const char *addr, int more)
{
	json_t *r = json_pack(
		"{s:i, s:{s:s, s:s, s:s, s:s, s:s, s:n, s:i, s:i}, s:[{s:s, s:s, s:s, s:i, s:i, "
		"s:n, s:s, s:s, s:n, s:n}], s:[]}",
		"version", 1, "cluster", "name", "rp", "uid", "c3c2479a9cd6e780118288ae1679249d",
		"cloud", "gce", "state", "up", "template_json",
		"{\"name\":\"rp\",\"cloud\":\"gce\",\"node_groups\":[{\"name\":\"node\"}]}",
		"template_name", "slot", 0, "created", 1700000000, "nodes", "name", "head", "role",
		"head", "address", addr, "ssh_port", 22, "gpus", 0, "instance_id", "root", "/",
		"state", "up", "zone", "public_address", "pins");
	char *s;
	if (more)
		json_object_set_new(r, "more", json_integer(1));
	s = json_dumps(r, JSON_COMPACT);
	json_decref(r);
	return s;
}

static void test_record_parse(void)
{
	struct pbx_cluster_record rec;
	struct pbx_err err = PBX_ERR_INIT;
	char *text = record("10.0.0.2", 0);
	int rc = pbx_cluster_record_parse(text, strlen(text), "rec", &rec, &err);
	CHECKF(rc == 0, "a good record (%s)", err.msg);
	if (rc == 0) {
		CHECK_STR(rec.row.name, "rp");
		CHECK(rec.nnodes == 1 && rec.npins == 0 && rec.row.created == 1700000000);
		CHECK_STR(rec.nodes[0].address, "10.0.0.2");
		pbx_cluster_record_release(&rec);
	}
	free(text);
	text = record("1.2.3.4; rm", 0);
	pbx_err_clear(&err);
	CHECK(pbx_cluster_record_parse(text, strlen(text), "rec", &rec, &err) < 0);
	CHECKF(strstr(err.msg, "rec: nodes[0].address") && !strstr(err.msg, "rm"),
	       "the field named, its value never echoed: %s", err.msg);
	free(text);
	text = record("10.0.0.2", 1);
	pbx_err_clear(&err);
	CHECK(pbx_cluster_record_parse(text, strlen(text), "rec", &rec, &err) < 0);
	free(text);
	pbx_err_clear(&err);
	CHECK(pbx_cluster_record_parse("[]", 2, "rec", &rec, &err) < 0);
}

int main(void)
{
	test_sleep_plan();
	test_power_plan();
	test_head_plan();
	test_spend_states();
	test_node_price();
	test_run_times();
	test_run_cost();
	test_spend_add();
	test_budget();
	test_deadline();
	test_template_sized();
	test_template_fields();
	test_exposure();
	test_record_parse();
	return tap_done();
}
