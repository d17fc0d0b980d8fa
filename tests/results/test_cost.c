/*
 * test_cost.c - node-hours and estimated cost of tasks (src/results/cost.h):
 * the share of a node from sbatch options (GPUs, --nodes, --exclusive, the
 * older argv form), the price of the node run covering a task's start,
 * rounding half up in 1e-9 units, RUNNING tasks (until now, no later than
 * their node's run), unknown prices, a local cluster (no runs); then the
 * results fixture's store with node runs added: `pbx report`'s per-task
 * node_hours and cost, their exact sum, --sort cost and --group-by sums.
 */
#include "common/tap.h"
#include "fixture.h"

#include "results/cost.h"
#include "results/report.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

static char tmp_dir[] = "/tmp/pbx-cost-XXXXXX";

/* A submission's stored sbatch options (pbx_sbatch_opts_json's form). */
#define RES(options) "{\"options\":[" options "],\"throttle\":0,\"launcher\":\"auto\"}"

/* secs x num x price / (den x 3600), rounded half up, in plain integers
 * (the test's values are small). */
static int64_t want_nanos(int64_t secs, int64_t num, int64_t den, int64_t price)
{
	int64_t p = secs * num * price, q = den * 3600;
	return p / q + (2 * (p % q) >= q);
}

static struct pbx_task_row task(int64_t idx, const char *state, const char *node, int64_t start,
				int64_t end)
{
	struct pbx_task_row t;
	memset(&t, 0, sizeof(t));
	t.idx = idx;
	t.state = (char *)state;
	t.node = (char *)node;
	t.start_time = start;
	t.end_time = end;
	t.exit_code = -1;
	return t;
}

static const char tmpl[] =
	"{\"name\":\"g\",\"cloud\":\"gce\",\"node_groups\":[{\"name\":\"gpu\",\"count\":2,"
	"\"gpus\":4},{\"name\":\"cpu\",\"count\":1,\"gpus\":0}]}";

static void test_shares_and_prices(void)
{
	struct pbx_node_row nodes[2];
	struct pbx_node_run runs[] = {
		{ 1, "gpu1", 1000, 2000, 2000000000LL, "USD" }, /* 2 USD/h until 2000 */
		{ 2, "gpu1", 2000, 0, 3000000000LL, "USD" },    /* then 3 USD/h, open */
		{ 3, "gpu2", 1000, 2800, 1, "USD" },            /* 1e-9 USD/h */
		{ 4, "cpu1", 1000, 0, -1, "" },                 /* price unknown */
	};
	struct pbx_task_row t[] = {
		task(0, "COMPLETED", "gpu1", 1500, 1500 + 3600), /* run 1, 1 h x 1/4 */
		task(1, "COMPLETED", "gpu1", 2000, 2007),        /* run 2 from its start */
		task(2, "RUNNING", "gpu1", 2500, 0),             /* until now (3000) */
		task(3, "PENDING", NULL, 0, 0),                  /* never started */
		task(4, "COMPLETED", "gpu2", 1000, 8200),        /* 7200 x 1/4 x 1e-9: 0.5 -> 1 */
		task(5, "COMPLETED", "gpu9", 2000, 2100),        /* no run covers it */
		task(6, "RUNNING", "gpu2", 2000, 0),             /* its run ended at 2800 */
		task(7, "NODE_FAIL", "gpu1", 2100, 0),           /* ended without an end time */
	};
	struct pbx_cost_inputs in;
	struct pbx_cost c;
	int64_t sum = 0;
	size_t i;
	memset(nodes, 0, sizeof(nodes));
	nodes[0].name = "gpu1";
	nodes[0].gpus = 4;
	nodes[1].name = "cpu1";
	memset(&in, 0, sizeof(in));
	in.template_json = tmpl;
	in.nodes = nodes;
	in.nnodes = 2;
	in.runs = runs;
	in.nruns = 4;
	in.resources_json = RES("[\"gres\",\"gpu:1\"],[\"time\",\"10\"]");
	pbx_cost_compute(&in, t, 8, 3000, &c);
	ok(c.tracked && c.n == 8, "a cluster with node runs is tracked");
	ok(c.tasks[0].seconds == 3600 && c.tasks[0].share_num == 1 && c.tasks[0].share_den == 4 &&
		   c.tasks[0].node_hours == 0.25 && c.tasks[0].nanos == 500000000 &&
		   !strcmp(c.tasks[0].currency, "USD"),
	   "gpu:1 of a 4-GPU node for an hour at 2/h: 0.25 node-hours, 0.5 USD");
	ok(c.tasks[1].nanos == want_nanos(7, 1, 4, 3000000000LL) && c.tasks[1].nanos == 1458333,
	   "a task starting when a run begins takes that run's price (%lld)",
	   (long long)c.tasks[1].nanos);
	ok(c.tasks[2].seconds == 500 && c.tasks[2].nanos == 104166667,
	   "a RUNNING task counts until now, rounded half up (%lld)", (long long)c.tasks[2].nanos);
	ok(c.tasks[3].seconds == 0 && c.tasks[3].node_hours == 0 && c.tasks[3].nanos == 0,
	   "a task that never started costs 0");
	ok(c.tasks[4].share_den == 4 && c.tasks[4].nanos == 1,
	   "the node's GPUs from its group in the template; 0.5e-9 rounds up to 1e-9");
	ok(c.tasks[5].nanos == -1 && c.tasks[5].node_hours > 0 && !c.tasks[5].currency[0],
	   "no run covering the start: cost unknown, node-hours known");
	ok(c.tasks[6].seconds == 800, "a RUNNING task counts no later than its node's run's end");
	ok(c.tasks[7].seconds == 0 && c.tasks[7].nanos == 0,
	   "a task that ended without an end time counts 0");
	ok(c.nanos == -1 && c.unpriced == 1 && !strcmp(c.currency, "USD"),
	   "one unknown task makes the experiment's cost unknown");
	pbx_cost_free(&c);

	/* every task priced: the sum is exact */
	pbx_cost_compute(&in, t, 5, 3000, &c);
	for (i = 0; i < 5; i++)
		sum += c.tasks[i].nanos;
	ok(c.nanos == sum && c.nanos == 500000000 + 1458333 + 104166667 + 0 + 1 && c.unpriced == 0,
	   "the experiment's cost is the exact sum of its tasks' (%lld)", (long long)c.nanos);
	ok(c.node_hours == 0.25 + 7 / 14400.0 + 500 / 14400.0 + 7200 / 14400.0,
	   "node-hours summed");
	pbx_cost_free(&c);

	/* a CPU-only task takes the whole node; unknown price: unknown cost */
	in.resources_json = RES("[\"cpus-per-task\",\"2\"]");
	t[0].node = "cpu1";
	t[0].start_time = 1500;
	t[0].end_time = 1500 + 1800;
	pbx_cost_compute(&in, t, 1, 3000, &c);
	ok(c.tasks[0].whole && c.tasks[0].share_num == 1 && c.tasks[0].share_den == 1 &&
		   c.tasks[0].node_hours == 0.5 && c.tasks[0].nanos == -1 && c.unpriced == 1 &&
		   c.nanos == -1 && !c.currency[0],
	   "no GPUs asked: the whole node (its CPUs are not recorded); price unknown");
	pbx_cost_free(&c);

	/* a CPU task on a GPU node: the whole node too */
	t[0].node = "gpu1";
	pbx_cost_compute(&in, t, 1, 3000, &c);
	ok(c.tasks[0].whole && c.tasks[0].nanos == 1000000000,
	   "a CPU task on a GPU node: whole node");
	pbx_cost_free(&c);

	/* --nodes=2 with gpu:2 each: 4 of 4 GPUs; --exclusive: whole nodes */
	in.resources_json = RES("[\"nodes\",\"2-3\"],[\"gres\",\"gpu:t4:2\"]");
	pbx_cost_compute(&in, t, 1, 3000, &c);
	ok(c.tasks[0].share_num == 4 && c.tasks[0].share_den == 4 && c.tasks[0].nanos == 1000000000,
	   "--nodes=2-3 --gres=gpu:t4:2: 4 of a node's 4 GPUs");
	pbx_cost_free(&c);
	in.resources_json = RES("[\"gres\",\"gpu:1\"],[\"exclusive\",\"\"]");
	pbx_cost_compute(&in, t, 1, 3000, &c);
	ok(c.tasks[0].whole && c.tasks[0].share_num == 1 && c.tasks[0].nanos == 1000000000,
	   "--exclusive: the whole node");
	pbx_cost_free(&c);
	in.resources_json = RES("[\"ntasks\",\"3\"],[\"gpus-per-task\",\"1\"]");
	pbx_cost_compute(&in, t, 1, 3000, &c);
	ok(c.tasks[0].share_num == 3 && c.tasks[0].share_den == 4 && c.tasks[0].nanos == 750000000,
	   "--ntasks=3 --gpus-per-task=1: 3 of 4 GPUs");
	pbx_cost_free(&c);
	in.resources_json = "[\"--gres=gpu:2\"]"; /* a store from before the typed options */
	pbx_cost_compute(&in, t, 1, 3000, &c);
	ok(c.tasks[0].share_num == 2 && c.tasks[0].share_den == 4, "the older argv form is read");
	pbx_cost_free(&c);

	/* a local cluster: no runs, node-hours only */
	in.nruns = 0;
	t[0].end_time = 1500 + 3600;
	pbx_cost_compute(&in, t, 2, 3000, &c);
	ok(!c.tracked && c.tasks[0].nanos == -1 && c.tasks[0].node_hours == 0.5 && c.nanos == -1 &&
		   !c.currency[0] && c.unpriced == 2,
	   "a cluster without runs: node-hours, no cost");
	pbx_cost_free(&c);
}

static void test_mixed_currencies(void)
{
	struct pbx_node_run runs[] = {
		{ 1, "n1", 0, 0, 1000000000LL, "USD" },
		{ 2, "n2", 0, 0, 1000000000LL, "EUR" },
	};
	struct pbx_task_row t[] = { task(0, "COMPLETED", "n1", 10, 3610),
				    task(1, "COMPLETED", "n2", 10, 3610) };
	struct pbx_cost_inputs in;
	struct pbx_cost c;
	memset(&in, 0, sizeof(in));
	in.runs = runs;
	in.nruns = 2;
	pbx_cost_compute(&in, t, 2, 5000, &c);
	ok(c.tasks[0].nanos == 1000000000 && !strcmp(c.tasks[1].currency, "EUR") && c.nanos == -1 &&
		   !c.currency[0],
	   "two currencies: each task priced, no total");
	pbx_cost_free(&c);
}

static void test_text(void)
{
	char buf[64];
	pbx_cost_text(1234567890, "USD", buf, sizeof(buf));
	is_str(buf, "1.2346 USD", "cost text: 4 decimals and the currency");
	pbx_cost_text(-1, "USD", buf, sizeof(buf));
	is_str(buf, "-", "unknown cost: -");
	pbx_node_hours_text(0.125, buf, sizeof(buf));
	is_str(buf, "0.12", "node-hours: 2 decimals");
}

static char *render(const struct pbx_report *r, enum pbx_report_format f)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (pbx_report_render(r, f, mem, &err) < 0)
		printf("# render: %s\n", err.msg);
	fclose(mem);
	return text;
}

/* The fixture's 12 tasks ran on node0 from 1700000000 + i for 60 + 5i s
 * (task 10 is RUNNING); its node's runs: 1.5/h until 1700000005, then
 * 2.000000001/h until 1700001000. */
static int64_t fixture_want(int i)
{
	int64_t start = 1700000000 + i;
	int64_t secs = i == 10 ? 1700001000 - start : 60 + 5 * i;
	return want_nanos(secs, 1, 1, i < 5 ? 1500000000LL : 2000000001LL);
}

static void test_report(struct fixture *fx)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_report_opts o;
	struct pbx_report *r = NULL;
	struct pbx_submission_row *subs = NULL;
	const char *group[] = { "lr" };
	int64_t cluster = 0, want = 0;
	size_t nsubs = 0, i, bad = 0;
	char *json, needle[96];
	memset(&o, 0, sizeof(o));
	ok(pbx_report_build(fx->st, NULL, &o, &r, &err) == 0 && !r->cost_shown,
	   "a cluster without node runs: no cost columns");
	pbx_report_free(r);
	if (pbx_store_submissions_of(fx->st, FIX_PACKAGE, &subs, &nsubs, &err) == 0 && nsubs)
		cluster = subs[0].cluster_id;
	pbx_submission_rows_free(subs, nsubs);
	ok(pbx_store_run_open(fx->st, cluster, "node0", 1699990000, 1500000000, "USD", &err) == 0 &&
		   pbx_store_exec(fx->st, "UPDATE node_runs SET ended = 1700000005", &err) == 0 &&
		   pbx_store_run_open(fx->st, cluster, "node0", 1700000005, 2000000001, "USD",
				      &err) == 0 &&
		   pbx_store_exec(fx->st,
				  "UPDATE node_runs SET ended = 1700001000 WHERE ended IS NULL",
				  &err) == 0,
	   "node runs added");
	if (!ok(pbx_report_build(fx->st, NULL, &o, &r, &err) == 0, "report built: %s", err.msg))
		return;
	ok(r->cost_shown && !strcmp(r->currency, "USD"), "node runs: cost columns, in USD");
	for (i = 0; i < r->ntasks; i++) {
		int64_t w = fixture_want((int)r->tasks[i].idx);
		want += w;
		if (r->tasks[i].cost != w) {
			bad++;
			printf("# task %lld: cost %lld, want %lld\n", (long long)r->tasks[i].idx,
			       (long long)r->tasks[i].cost, (long long)w);
		}
	}
	ok(r->ntasks == 12 && bad == 0, "each task's cost is elapsed x price, rounded half up");
	ok(r->cost == want, "the experiment's cost is their exact sum (%lld)", (long long)want);
	json = render(r, PBX_REPORT_JSON);
	snprintf(needle, sizeof(needle), "\"cost_nanos\": %lld,\n  \"currency\": \"USD\"",
		 (long long)want);
	ok(json && strstr(json, needle) && strstr(json, "\"runtime\", \"node_hours\", \"cost\"]") &&
		   strstr(json,
			  "\"runtime\": 60, \"node_hours\": 0.016666666666666666, \"cost\": 0.025}"),
	   "JSON: the totals, and node_hours and cost after runtime in every row");
	free(json);
	pbx_report_free(r);

	o.sort = "cost:desc";
	if (ok(pbx_report_build(fx->st, NULL, &o, &r, &err) == 0, "--sort cost:desc"))
		ok(r->tasks[0].idx == 10 && r->tasks[1].idx == 11,
		   "the RUNNING task first, then 11");
	pbx_report_free(r);
	o.sort = NULL;
	o.where = (const char *const[]){ "cost>0.05" };
	o.nwhere = 1;
	if (ok(pbx_report_build(fx->st, NULL, &o, &r, &err) == 0, "--where cost>0.05: %s", err.msg))
		ok(r->ntasks == 5 && r->cost == want,
		   "5 tasks cost more than 0.05; the total stays the experiment's");
	pbx_report_free(r);
	o.where = NULL;
	o.nwhere = 0;
	o.group_by = group;
	o.ngroup_by = 1;
	if (ok(pbx_report_build(fx->st, NULL, &o, &r, &err) == 0, "--group-by lr")) {
		int64_t g0 = 0;
		for (i = 0; i < 4; i++)
			g0 += fixture_want((int)i);
		ok(r->ngroups == 3 && r->groups[0].cost == g0 &&
			   r->groups[0].cost + r->groups[1].cost + r->groups[2].cost == want,
		   "group sums are exact and add up to the total");
		json = render(r, PBX_REPORT_CSV);
		ok(json && strstr(json, ",node_hours,cost\n"),
		   "grouped CSV ends with node_hours, cost");
		free(json);
	}
	pbx_report_free(r);
}

int main(void)
{
	struct fixture fx;
	struct pbx_err err = PBX_ERR_INIT;
	test_shares_and_prices();
	test_mixed_currencies();
	test_text();
	if (!mkdtemp(tmp_dir) || !ok(fixture_make(&fx, tmp_dir) == 0, "fixture store"))
		return tap_done() | 1;
	test_report(&fx);
	fixture_free(&fx);
	pbx_rm_rf(tmp_dir, &err);
	return tap_done();
}
