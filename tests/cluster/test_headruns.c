/*
 * test_headruns.c - the head's node runs (src/cluster/headruns.c,
 * headruns_parse.c; docs/cost.md, "Spend"): the reply `pbx cluster runs`
 * prints on a cloud cluster's head is read strictly (each fault refuses
 * the whole reply, naming the field; more runs or bytes than the bounds
 * are refused unread), fitted to this machine's clock and cut to the
 * times the head ran; the merge makes the head's runs the store's for the
 * nodes that may sleep, keeping the price of each run it replaces,
 * pricing the new ones from the quote, removing the others and leaving
 * the head's and the always-on nodes' runs alone, in an order the store's
 * one open run a node allows, and changes nothing a second time; what the
 * head's pbx prints reads back whole; spend_sync leaves the nodes the
 * head's runs own alone.
 */
#include "common/tap.h"
#include "common/headruns_fixture.h"
#include "common/tmpdir.h"

#include "cluster/cluster.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

#define UID HEADRUNS_UID

static struct pbx_config *cfg;
static const struct pbx_cluster_template *tmpl;

/* Parses `text` as cluster hr's reply. */
static int parse(const char *text, struct pbx_head_run **v, size_t *n, struct pbx_err *err)
{
	pbx_err_clear(err);
	return pbx_head_runs_parse(text, strlen(text), "hr", UID, tmpl, v, n, err);
}

/* A reply with `runs` (a JSON array's inside). */
static char *reply(const char *runs)
{
	return xasprintf("{\"version\":1,\"cluster\":\"hr\",\"id\":\"" UID "\",\"runs\":[%s]}",
			 runs);
}

static void test_parse_good(void)
{
	char *text = reply("{\"node\":\"node3\",\"started\":1000,\"ended\":1100},"
			   "{\"node\":\"node2\",\"started\":1005,\"ended\":null},"
			   "{\"node\":\"node3\",\"started\":1100,\"ended\":1100}");
	struct pbx_head_run *v = NULL;
	size_t n = 0;
	struct pbx_err err = PBX_ERR_INIT;
	ok(parse(text, &v, &n, &err) == 0 && n == 3, "a good reply: 3 runs (%s)", err.msg);
	if (n == 3)
		ok(!strcmp(v[0].node, "node2") && v[0].started == 1005 && v[0].ended == 0 &&
			   !strcmp(v[1].node, "node3") && v[1].started == 1000 &&
			   v[1].ended == 1100 && v[2].started == 1100 && v[2].ended == 1100,
		   "sorted by node, then start; an open run ends 0; runs may touch");
	free(v);
	free(text);
	text = reply("");
	ok(parse(text, &v, &n, &err) == 0 && n == 0 && !v, "no runs: fine (%s)", err.msg);
	free(text);
}

/* Each reply must be refused with an error containing `want`. */
static void test_parse_bad(void)
{
	static const struct {
		const char *runs; /* NULL: `whole` is the reply */
		const char *whole, *want;
	} cases[] = {
		{ NULL, "", "not JSON" },
		{ NULL, "[]", "not a JSON object" },
		{ NULL, "{\"version\":1,\"cluster\":\"hr\",\"id\":\"" UID "\",\"runs\":[]} x",
		  "not JSON" },
		{ NULL,
		  "{\"version\":1,\"version\":1,\"cluster\":\"hr\",\"id\":\"" UID "\",\"runs\":[]}",
		  "not JSON" },
		{ NULL, "{\"version\":2,\"cluster\":\"hr\",\"id\":\"" UID "\",\"runs\":[]}",
		  "version" },
		{ NULL, "{\"version\":\"1\",\"cluster\":\"hr\",\"id\":\"" UID "\",\"runs\":[]}",
		  "version" },
		{ NULL, "{\"version\":1,\"cluster\":\"hx\",\"id\":\"" UID "\",\"runs\":[]}",
		  "cluster: not hr" },
		{ NULL, "{\"version\":1,\"cluster\":\"hr\",\"id\":\"x\",\"runs\":[]}", "id: not" },
		{ NULL, "{\"version\":1,\"cluster\":\"hr\",\"id\":\"" UID "\"}", "runs: missing" },
		{ NULL, "{\"version\":1,\"cluster\":\"hr\",\"id\":\"" UID "\",\"runs\":{}}",
		  "runs: not an array" },
		{ NULL, "{\"version\":1,\"cluster\":\"hr\",\"id\":\"" UID "\",\"runs\":[],\"x\":1}",
		  "unknown field" },
		{ "1", NULL, "runs[0]: not a JSON object" },
		{ "{\"node\":\"node2\",\"started\":1}", NULL, "runs[0].ended: missing" },
		{ "{\"node\":\"node2\",\"started\":1,\"ended\":2,\"price\":9}", NULL,
		  "runs[0]: an unknown field" },
		{ "{\"node\":\"head\",\"started\":1,\"ended\":2}", NULL, "runs[0].node" },
		{ "{\"node\":\"node1\",\"started\":1,\"ended\":2}", NULL, "runs[0].node" },
		{ "{\"node\":\"node4\",\"started\":1,\"ended\":2}", NULL, "runs[0].node" },
		{ "{\"node\":\"node02\",\"started\":1,\"ended\":2}", NULL, "runs[0].node" },
		{ "{\"node\":\"node\",\"started\":1,\"ended\":2}", NULL, "runs[0].node" },
		{ "{\"node\":\"node99999999999999999999\",\"started\":1,\"ended\":2}", NULL,
		  "runs[0].node" },
		{ "{\"node\":\"node2\\u0000\",\"started\":1,\"ended\":2}", NULL, "not JSON" },
		{ "{\"node\":2,\"started\":1,\"ended\":2}", NULL, "runs[0].node" },
		{ "{\"node\":\"node2\",\"started\":0,\"ended\":2}", NULL, "runs[0].started" },
		{ "{\"node\":\"node2\",\"started\":-5,\"ended\":2}", NULL, "runs[0].started" },
		{ "{\"node\":\"node2\",\"started\":1.5,\"ended\":2}", NULL, "runs[0].started" },
		{ "{\"node\":\"node2\",\"started\":\"1\",\"ended\":2}", NULL, "runs[0].started" },
		{ "{\"node\":\"node2\",\"started\":1099511627777,\"ended\":null}", NULL,
		  "runs[0].started" },
		{ "{\"node\":\"node2\",\"started\":10,\"ended\":9}", NULL, "runs[0].ended" },
		{ "{\"node\":\"node2\",\"started\":10,\"ended\":10.5}", NULL, "runs[0].ended" },
		{ "{\"node\":\"node2\",\"started\":10,\"ended\":true}", NULL, "runs[0].ended" },
		{ "{\"node\":\"node2\",\"started\":1000,\"ended\":1100},"
		  "{\"node\":\"node2\",\"started\":1050,\"ended\":1200}",
		  NULL, "overlap" },
		{ "{\"node\":\"node2\",\"started\":1000,\"ended\":null},"
		  "{\"node\":\"node2\",\"started\":1100,\"ended\":1200}",
		  NULL, "overlap" },
		{ "{\"node\":\"node2\",\"started\":1000,\"ended\":null},"
		  "{\"node\":\"node2\",\"started\":1100,\"ended\":null}",
		  NULL, "overlap" },
	};
	size_t i, bad = 0;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *text = cases[i].runs ? reply(cases[i].runs) : xstrdup(cases[i].whole);
		struct pbx_err err = PBX_ERR_INIT;
		struct pbx_head_run *v = (void *)1;
		size_t n = 7;
		if (parse(text, &v, &n, &err) == 0 || v || n || !strstr(err.msg, cases[i].want) ||
		    strncmp(err.msg, "the head's node runs: ", 22) != 0) {
			tap_diag("case %zu: got '%s', want '%s'", i, err.msg, cases[i].want);
			bad++;
		}
		free(text);
	}
	ok(bad == 0, "%zu faulty replies each refused whole, naming the field", i);
}

static void test_parse_bounds(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_head_run *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0, i;
	char *text, *big;
	for (i = 0; i <= PBX_HEAD_RUNS_MAX; i++)
		pbx_buf_addf(&b, "%s{\"node\":\"node2\",\"started\":%zu,\"ended\":%zu}",
			     i ? "," : "", i + 1, i + 1);
	text = reply(b.buf);
	ok(pbx_head_runs_parse(text, strlen(text), "hr", UID, tmpl, &v, &n, &err) < 0 &&
		   strstr(err.msg, "runs: more than"),
	   "more than %d runs: refused (%s)", PBX_HEAD_RUNS_MAX, err.msg);
	free(text);
	pbx_buf_release(&b);
	big = xcalloc(PBX_HEAD_RUNS_BYTES_MAX + 1, 1);
	memset(big, ' ', PBX_HEAD_RUNS_BYTES_MAX);
	ok(pbx_head_runs_parse(big, PBX_HEAD_RUNS_BYTES_MAX + 1, "hr", UID, tmpl, &v, &n, &err) <
			   0 &&
		   strstr(err.msg, "more than"),
	   "a reply over %u bytes: refused unread (%s)", PBX_HEAD_RUNS_BYTES_MAX, err.msg);
	free(big);
	ok(pbx_head_runs_parse("{}", 2, "hr", UID, NULL, &v, &n, &err) < 0,
	   "no template: refused (%s)", err.msg);
}

static void test_fit(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_head_run v[3] = {
		{ "node2", 900, 1100 },  /* begins 100 s before the cluster */
		{ "node2", 1100, 5100 }, /* ends 100 s after now */
		{ "node3", 5050, 0 },    /* open, begins 50 s after now */
	};
	struct pbx_head_run far = { "node2", 1000, 5000 + PBX_HEAD_RUNS_SKEW_S + 1 };
	struct pbx_head_run early = { "node2", 1000 - PBX_HEAD_RUNS_SKEW_S - 1, 1200 };
	ok(pbx_head_runs_fit(v, 3, 1000, 5000, &err) == 0 && v[0].started == 1000 &&
		   v[0].ended == 1100 && v[1].started == 1100 && v[1].ended == 5000 &&
		   v[2].started == 5000 && v[2].ended == 0,
	   "times within the skew are clamped into [creation, now]; open stays open");
	ok(pbx_head_runs_fit(&far, 1, 1000, 5000, &err) < 0 && strstr(err.msg, "ahead"),
	   "a time further ahead is refused (%s)", err.msg);
	ok(pbx_head_runs_fit(&early, 1, 1000, 5000, &err) < 0 &&
		   strstr(err.msg, "before the cluster was made"),
	   "a time further before the cluster is refused (%s)", err.msg);
}

/* "NODE:STARTED-ENDED ..." of v[0..n); caller frees. */
static char *head_runs_text(const struct pbx_head_run *v, size_t n)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i;
	for (i = 0; i < n; i++)
		pbx_buf_addf(&b, "%s%s:%lld-%lld", i ? " " : "", v[i].node, (long long)v[i].started,
			     (long long)v[i].ended);
	pbx_buf_addc(&b, '\0');
	return pbx_buf_detach(&b, NULL);
}

/* Runs are cut to the times the head ran (the store's head runs): split
 * across an off time, dropped outside, open only while the head is. */
static void test_clip(void)
{
	static const struct pbx_head_run on[] = { { "head", 100, 200 }, { "head", 300, 0 } };
	static const struct pbx_head_run in[] = {
		{ "node2", 50, 150 },  { "node2", 180, 320 }, { "node2", 400, 400 },
		{ "node3", 200, 300 }, { "node3", 250, 250 }, { "node3", 350, 0 },
	};
	struct pbx_head_run *v = xmalloc(sizeof(in));
	size_t n = 6;
	char *got;
	memcpy(v, in, sizeof(in));
	pbx_head_runs_clip(&v, &n, on, 2);
	got = head_runs_text(v, n);
	is_str(got, "node2:100-150 node2:180-200 node2:300-320 node2:400-400 node3:350-0",
	       "clipped to the head's runs: split, dropped, an instant kept where it lies");
	free(got);
	pbx_head_runs_clip(&v, &n, on, 0);
	ok(n == 5, "without runs of the head nothing is cut (%zu)", n);
	free(v);
	v = NULL;
	n = 0;
	pbx_head_runs_clip(&v, &n, on, 2);
	ok(n == 0, "no runs: none");
	free(v);
}

/* "NODE:STARTED-ENDED:NANOS:CURRENCY ..." of cluster id's runs, by node
 * then start; caller frees. */
static char *runs_text(struct pbx_store *st, int64_t id)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_node_run *v = NULL;
	size_t n = 0, i, k;
	if (pbx_store_runs_list(st, id, &v, &n, &err) < 0)
		return xstrdup(err.msg);
	for (k = 0; k < 4; k++) { /* head, node1, node2, node3 */
		static const char *const names[] = { "head", "node1", "node2", "node3" };
		for (i = 0; i < n; i++)
			if (!strcmp(v[i].node, names[k]))
				pbx_buf_addf(&b, "%s%s:%lld-%lld:%lld:%s", b.len ? " " : "",
					     v[i].node, (long long)v[i].started,
					     (long long)v[i].ended, (long long)v[i].nanos,
					     v[i].currency);
	}
	pbx_node_runs_free(v, n);
	pbx_buf_addc(&b, '\0');
	return pbx_buf_detach(&b, NULL);
}

static void run(struct pbx_store *st, int64_t id, const char *node, int64_t s, int64_t e,
		int64_t nanos)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_store_run_add(st, id, node, s, e, nanos, "USD", &err) < 0)
		tap_diag("run_add: %s", err.msg);
}

/* A quote of head 3600, node group 7200 an hour, USD. */
static void quote(struct pbx_price_quote *q, struct pbx_price_line lines[2])
{
	memset(q, 0, sizeof(*q));
	memset(lines, 0, 2 * sizeof(*lines));
	lines[0].group = "head";
	lines[0].each = 3600000000000LL;
	lines[1].group = "node";
	lines[1].each = 7200000000000LL;
	q->lines = lines;
	q->n = 2;
	snprintf(q->currency, sizeof(q->currency), "USD");
}

static void test_merge(struct pbx_store *st)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_price_quote q;
	struct pbx_price_line lines[2];
	struct pbx_head_run v[] = {
		{ "node2", 1000, 1400 }, /* the view saw it late, and its end late */
		{ "node3", 1500, 1600 }, /* the view never saw it */
		{ "node3", 1990, 0 },    /* up now; the view opened it at 2000 */
	};
	size_t changed = 99;
	int64_t id;
	char *got;
	quote(&q, lines);
	REQUIRE(pbx_store_cluster_create(st, "m1", UID "m1", "gce", "{}", 1, &id, &err) == 0);
	run(st, id, "head", 900, 0, 3600000000000LL);
	run(st, id, "node1", 900, 0, 7200000000000LL);
	run(st, id, "node2", 1010, 1500, 111);
	run(st, id, "node2", 3000, 3100, 333); /* the head has no such run */
	run(st, id, "node3", 2000, 0, 222);
	ok(pbx_head_runs_merge(st, id, tmpl, &q, v, 3, 4000, &changed, &err) == 0 && changed == 4,
	   "merged: 2 runs changed, 1 removed, 1 added (%zu; %s)", changed, err.msg);
	got = runs_text(st, id);
	is_str(got,
	       "head:900-0:3600000000000:USD node1:900-0:7200000000000:USD "
	       "node2:1000-1400:111:USD node3:1500-1600:7200000000000:USD node3:1990-0:222:USD",
	       "the head's runs of the nodes that may sleep, prices kept; the new one priced "
	       "from the quote; the head's and node1's stay");
	free(got);
	ok(pbx_head_runs_merge(st, id, tmpl, &q, v, 3, 4100, &changed, &err) == 0 && changed == 0,
	   "a second merge changes nothing (%zu)", changed);
	ok(pbx_head_runs_merge(st, id, tmpl, NULL, v, 1, 4200, &changed, &err) == 0 && changed == 2,
	   "a reply with node2's run only: node3's go (%zu)", changed);
	got = runs_text(st, id);
	is_str(got,
	       "head:900-0:3600000000000:USD node1:900-0:7200000000000:USD "
	       "node2:1000-1400:111:USD",
	       "  and only node2's is left beside the head's and node1's");
	free(got);
	ok(pbx_head_runs_merge(st, id, tmpl, NULL, v + 1, 2, 4300, &changed, &err) == 0 &&
		   changed == 3,
	   "without a quote: node2's goes, node3's two come (%zu)", changed);
	got = runs_text(st, id);
	is_str(got,
	       "head:900-0:3600000000000:USD node1:900-0:7200000000000:USD "
	       "node3:1500-1600:-1: node3:1990-0:-1:",
	       "  unpriced");
	free(got);
}

/* The store's open run is claimed by a head run that ended, while the
 * head has a newer open one: the store keeps one open run a node. */
static void test_merge_order(struct pbx_store *st)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_price_quote q;
	struct pbx_price_line lines[2];
	struct pbx_head_run v[] = { { "node2", 990, 1500 }, { "node2", 1600, 0 } };
	size_t changed = 0;
	int64_t id;
	char *got;
	quote(&q, lines);
	REQUIRE(pbx_store_cluster_create(st, "m2", UID "m2", "gce", "{}", 2, &id, &err) == 0);
	run(st, id, "node2", 1000, 0, 555);
	ok(pbx_head_runs_merge(st, id, tmpl, &q, v, 2, 2000, &changed, &err) == 0 && changed == 2,
	   "an open run of the store's becomes the head's ended one (%s)", err.msg);
	got = runs_text(st, id);
	is_str(got, "node2:990-1500:555:USD node2:1600-0:7200000000000:USD",
	       "  and the head's open run is added after it");
	free(got);
}

/* What the head's pbx prints (pbx_head_runs_json) reads back whole, with
 * the runs of the head and of node1 (always up) left out. */
static void test_json(struct pbx_store *st)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_head_run *v = NULL;
	char *json = NULL;
	size_t n = 0;
	int64_t id;
	REQUIRE(pbx_store_cluster_create(st, "hr", UID, "gce", "{}", 3, &id, &err) == 0);
	run(st, id, "head", 100, 0, -1);
	run(st, id, "node1", 100, 0, -1);
	run(st, id, "node2", 200, 300, -1);
	run(st, id, "node3", 250, 0, -1);
	ok(pbx_head_runs_json(st, cfg, "hr", &json, &err) == 0, "the head's reply: %s",
	   json ? json : err.msg);
	ok(json && pbx_head_runs_parse(json, strlen(json), "hr", UID, tmpl, &v, &n, &err) == 0 &&
		   n == 2 && !strcmp(v[0].node, "node2") && v[0].ended == 300 &&
		   !strcmp(v[1].node, "node3") && v[1].ended == 0,
	   "reads back: node2's and node3's runs only (%s)", err.msg);
	free(v);
	free(json);
	ok(pbx_head_runs_json(st, cfg, "nosuch", &json, &err) < 0 && err.code == PBX_EXIT_NOTFOUND,
	   "an unknown cluster: not found (%s)", err.msg);
}

/* Node `name` of cluster id in `state`. */
static void node(struct pbx_store *st, int64_t id, const char *name, const char *state)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_node_row r;
	memset(&r, 0, sizeof(r));
	r.cluster_id = id;
	r.name = (char *)name;
	r.role = (char *)(strcmp(name, "head") ? "compute" : "head");
	r.address = (char *)"10.0.0.1";
	r.ssh_port = 22;
	r.root = (char *)"";
	r.state = (char *)state;
	if (pbx_store_node_put(st, &r, &err) < 0)
		tap_diag("node_put: %s", err.msg);
}

/* spend_sync after a merge (c->head_runs): node2, up in the store (the
 * view learnt it) but ended on the head, gets no new run, and node3's
 * open run stays though the store has it asleep; without the merge both
 * change as before. */
static void test_sync(struct pbx_store *st)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster c;
	int64_t id;
	char *got;
	REQUIRE(pbx_store_cluster_create(st, "sy", UID "sy", "gce", "{}", 4, &id, &err) == 0);
	pbx_store_cluster_set_state(st, id, "up", &err);
	node(st, id, "head", "up");
	node(st, id, "node1", "up");
	node(st, id, "node2", "up");
	node(st, id, "node3", "asleep");
	run(st, id, "head", 100, 0, 1);
	run(st, id, "node1", 100, 0, 2);
	run(st, id, "node2", 200, 300, 3);
	run(st, id, "node3", 250, 0, 4);
	memset(&c, 0, sizeof(c));
	c.store = st;
	REQUIRE(pbx_store_cluster_get(st, "sy", &c.row, &err) == 0);
	c.cfg = cfg;
	c.spec.t = tmpl;
	c.opened_at = 1000;
	c.here = -1;
	c.head_runs = 1;
	pbx_cluster_spend_sync(&c, 1000);
	got = runs_text(st, id);
	is_str(got, "head:100-0:1:USD node1:100-0:2:USD node2:200-300:3:USD node3:250-0:4:USD",
	       "after the head's runs, sync leaves the nodes that may sleep alone");
	free(got);
	c.head_runs = 0;
	pbx_cluster_spend_sync(&c, 1000);
	got = runs_text(st, id);
	is_str(got,
	       "head:100-0:1:USD node1:100-0:2:USD node2:200-300:3:USD "
	       "node2:1000-0:7200000000000:USD node3:250-1000:4:USD",
	       "without them, sync goes by the store's states");
	free(got);
	pbx_cluster_row_free(&c.row);
}

int main(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_store *st = NULL;
	char *dir = tmpdir_new("headruns"), *db = xasprintf("%s/pbx.db", dir), *rm;
	REQUIREF(pbx_config_parse("config.yaml", headruns_config_yaml, strlen(headruns_config_yaml),
				  &cfg, &err) == 0,
		 "the test's configuration: %s", err.msg);
	tmpl = pbx_config_template(cfg, "hr");
	REQUIRE(tmpl != NULL);
	test_parse_good();
	test_parse_bad();
	test_parse_bounds();
	test_fit();
	test_clip();
	REQUIREF(pbx_store_open(db, &st, &err) == 0, "store: %s", err.msg);
	test_merge(st);
	test_merge_order(st);
	test_json(st);
	test_sync(st);
	pbx_store_close(st);
	pbx_config_free(cfg);
	rm = xasprintf("rm -rf '%s'", dir);
	if (system(rm) != 0)
		tap_diag("cleanup of %s failed", dir);
	free(rm);
	free(db);
	free(dir);
	return tap_done();
}
