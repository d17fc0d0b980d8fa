/*
 * test_results.c - metrics.jsonl parsing (warnings asserted exactly),
 * ingestion into a temporary store (idempotent), and the report in every
 * text format compared byte for byte with tests/results/expected/.
 *
 *   test_results EXPECTED_DIR          run the tests (TAP)
 *   test_results --make-store DIR      only build DIR/pbx.db (for html.sh)
 *   PBX_RESULTS_REGEN=1 test_results EXPECTED_DIR   rewrite expected files
 */
#include "common/tap.h"
#include "fixture.h"

#include "results/metrics.h"
#include "results/report.h"
#include "results/svg.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *expected_dir;
static char tmp_dir[] = "/tmp/pbx-results-XXXXXX";

/* ------------------------------------------------------------ parsing */

static size_t parse(const char *text, size_t len, struct pbx_metric **pts, struct pbx_buf *w)
{
	size_t n;
	pbx_buf_reset(w);
	pbx_metrics_parse("m.jsonl", text, len, 7, pts, &n, w);
	return n;
}

static void test_parse_task0(void)
{
	struct pbx_buf w = PBX_BUF_INIT;
	struct pbx_metric *p;
	char *text = fixture_metrics_text(0);
	size_t n = parse(text, strlen(text), &p, &w);
	ok(n == 9, "task 0: 9 points (got %zu)", n);
	is_str(w.buf,
	       "m.jsonl:2: invalid JSON: '[' or '{' expected near 'not'\n"
	       "m.jsonl:3: \"loss\" is not a number, skipped\n"
	       "m.jsonl:4: not a JSON object, line skipped\n"
	       "m.jsonl:5: no \"step\" (nor \"epoch\" or \"iteration\"), line skipped\n"
	       "m.jsonl:6: \"step\" must be an integer >= 0, line skipped\n",
	       "task 0: warnings name file, line and problem");
	ok(n == 9 && p[0].idx == 7 && p[0].step == 0 && !strcmp(p[0].name, "loss") &&
		   p[0].value == 1 && !p[0].is_null,
	   "first point: task 7 loss 1 at step 0");
	ok(n == 9 && p[5].step == 15 && !strcmp(p[5].name, "loss") && p[5].is_null,
	   "NaN is a null point");
	ok(n == 9 && p[8].step == 20 && !strcmp(p[8].name, "acc") && p[8].value == 0.8,
	   "long form: acc 0.8 at step 20; the partial last line is ignored");
	pbx_metrics_free(p, n);
	pbx_buf_release(&w);
	free(text);
}

/* A line without "step" counts by "epoch", else "iteration", which is
 * then not a metric; "step" wins over both. */
static void test_parse_epoch(void)
{
	static const char text[] = "{\"epoch\": 3, \"loss\": 0.5}\n"
				   "{\"iteration\": 7, \"acc\": 0.9}\n"
				   "{\"step\": 9, \"epoch\": 2, \"loss\": 0.4}\n"
				   "{\"epoch\": -1, \"loss\": 1}\n";
	struct pbx_buf w = PBX_BUF_INIT;
	struct pbx_metric *p;
	size_t n = parse(text, sizeof(text) - 1, &p, &w);
	ok(n == 4, "epoch and iteration lines give points (got %zu)", n);
	ok(n == 4 && p[0].step == 3 && !strcmp(p[0].name, "loss") && p[1].step == 7 &&
		   !strcmp(p[1].name, "acc"),
	   "epoch 3 and iteration 7 are the steps, not metrics");
	ok(n == 4 && p[2].step == 9 && !strcmp(p[2].name, "epoch") && p[2].value == 2 &&
		   p[3].step == 9 && !strcmp(p[3].name, "loss"),
	   "with a step, epoch is a metric like any other");
	is_str(w.buf, "m.jsonl:4: \"epoch\" must be an integer >= 0, line skipped\n",
	       "a negative epoch is refused by its name");
	pbx_metrics_free(p, n);
	pbx_buf_release(&w);
}

static void test_parse_edges(void)
{
	static const char bom[] = "\xef\xbb\xbf{\"step\":1,\"a\":2}\r\n";
	static const char nan[] = "{\"step\":1,\"NaN\":NaN,\"s\":\"NaN\",\"i\":-Infinity,"
				  "\"b\":true,\"x\":NaNa}\n{\"step\":2,\"NaN_x\":Infinity}\n";
	static const char lng[] = "{\"step\":3,\"name\":\"acc\",\"value\":\"x\"}\n"
				  "{\"step\":3,\"name\":7,\"value\":1}\n"
				  "{\"step\":3,\"name\":\"\",\"value\":1}\n"
				  "{\"step\":4,\"name\":\"acc\",\"value\":null,\"time\":\"t\"}\n"
				  "{\"step\":4.5,\"a\":1}\n{\"step\":1,\"a\":1,\"a\":2}\n";
	struct pbx_buf w = PBX_BUF_INIT, many = PBX_BUF_INIT;
	struct pbx_metric *p;
	size_t n, i;
	n = parse(bom, sizeof(bom) - 1, &p, &w);
	ok(n == 1 && p[0].value == 2 && !w.len, "byte order mark and CRLF are accepted");
	pbx_metrics_free(p, n);
	n = parse(nan, sizeof(nan) - 1, &p, &w);
	is_str(w.buf, "m.jsonl:1: invalid JSON: invalid token near 'NaNa'\n",
	       "NaN only as a whole token outside strings");
	ok(n == 1 && !strcmp(p[0].name, "NaN_x") && p[0].is_null, "Infinity is a null point");
	pbx_metrics_free(p, n);
	n = parse(nan, 56, &p, &w);
	ok(n == 0 && !w.len, "text without a newline is a partial line: nothing, no warning");
	pbx_metrics_free(p, n);
	n = parse(lng, sizeof(lng) - 1, &p, &w);
	is_str(w.buf,
	       "m.jsonl:1: \"value\" is not a number, line skipped\n"
	       "m.jsonl:2: \"name\" is not a string, line skipped\n"
	       "m.jsonl:3: metric name must be 1 to 256 bytes, line skipped\n"
	       "m.jsonl:5: \"step\" must be an integer >= 0, line skipped\n"
	       "m.jsonl:6: invalid JSON: duplicate object key near '\"a\"'\n",
	       "long form problems");
	ok(n == 1 && p[0].step == 4 && p[0].is_null && !strcmp(p[0].name, "acc"),
	   "long form: null value, other keys ignored");
	pbx_metrics_free(p, n);
	for (i = 0; i < 25; i++)
		pbx_buf_adds(&many, "x\n");
	n = parse(many.buf, many.len, &p, &w);
	ok(n == 0 && strstr(w.buf, "m.jsonl:20: ") && !strstr(w.buf, "m.jsonl:21: ") &&
		   strstr(w.buf, "\nm.jsonl: 5 more problems not shown\n"),
	   "at most 20 warnings a file");
	pbx_metrics_free(p, n);
	pbx_buf_release(&w);
	pbx_buf_release(&many);
}

static void test_nan_strings(void)
{
	static const char t[] = "{\"step\":1,\"NaN\":NaN,\"s\":\"NaN \\\" NaN\",\"i\":-Infinity}\n";
	struct pbx_buf w = PBX_BUF_INIT;
	struct pbx_metric *p;
	size_t n = parse(t, sizeof(t) - 1, &p, &w);
	ok(n == 2 && !strcmp(p[0].name, "NaN") && p[0].is_null && !strcmp(p[1].name, "i") &&
		   p[1].is_null,
	   "NaN in keys and strings stays text; -Infinity is null");
	is_str(w.buf, "m.jsonl:1: \"s\" is not a number, skipped\n", "string values warn");
	pbx_metrics_free(p, n);
	pbx_buf_release(&w);
}

/* ----------------------------------------------------------- ingestion */

static void test_ingest(struct fixture *fx)
{
	struct pbx_buf w = PBX_BUF_INIT, want = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	size_t i, total = 0, again = 0, added;
	char path[512];
	for (i = 0; i < FIX_NTASKS; i++)
		total += fx->added[i];
	ok(total == 73, "first ingest stores 73 points (got %zu)", total);
	snprintf(path, sizeof(path), "%s/metrics/0.jsonl", fx->dir);
	pbx_buf_addf(&want,
		     "%s:2: invalid JSON: '[' or '{' expected near 'not'\n"
		     "%s:3: \"loss\" is not a number, skipped\n"
		     "%s:4: not a JSON object, line skipped\n"
		     "%s:5: no \"step\" (nor \"epoch\" or \"iteration\"), line skipped\n"
		     "%s:6: \"step\" must be an integer >= 0, line skipped\n",
		     path, path, path, path, path);
	is_str(fx->warnings.buf, want.buf, "ingest warnings name the file and line");
	for (i = 0; i < FIX_NTASKS; i++) {
		snprintf(path, sizeof(path), "%s/metrics/%zu.jsonl", fx->dir, i);
		if (pbx_results_ingest(fx->st, fx->submission, (int64_t)i, path, &added, &w, &err) <
		    0)
			printf("# %s\n", err.msg);
		again += added;
	}
	ok(again == 0, "a second ingest adds no point (got %zu)", again);
	ok(pbx_results_ingest(fx->st, fx->submission, 0, "/nonexistent/m.jsonl", &added, &w, &err) <
			   0 &&
		   strstr(err.msg, "/nonexistent/m.jsonl"),
	   "a missing file is an error naming it");
	pbx_buf_release(&w);
	pbx_buf_release(&want);
}

/* ------------------------------------------------------------- reports */

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

/* Compares with expected/NAME byte for byte; prints a diff on mismatch. */
static void compare(const char *name, const char *got)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_buf want = PBX_BUF_INIT;
	char *path = xasprintf("%s/%s", expected_dir, name), *gotp, *cmd;
	int same;
	if (getenv("PBX_RESULTS_REGEN"))
		pbx_write_file_atomic(path, got, strlen(got), 0644, &err);
	same = pbx_read_file(path, &want, &err) == 0 && !strcmp(want.buf, got);
	ok(same, "%s matches byte for byte", name);
	if (!same) {
		gotp = xasprintf("%s/%s", tmp_dir, name);
		pbx_write_file_atomic(gotp, got, strlen(got), 0600, &err);
		cmd = xasprintf("diff -u '%s' '%s' | sed 's/^/# /'", path, gotp);
		if (system(cmd) == -1)
			printf("# cannot run diff\n");
		free(cmd);
		free(gotp);
	}
	pbx_buf_release(&want);
	free(path);
}

static void report_case(struct fixture *fx, const char *base, const struct pbx_report_opts *o,
			int all_formats)
{
	static const struct {
		const char *ext;
		enum pbx_report_format f;
	} fmts[] = { { "csv", PBX_REPORT_CSV },
		     { "json", PBX_REPORT_JSON },
		     { "md", PBX_REPORT_MD },
		     { "txt", PBX_REPORT_TABLE } };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_report *r;
	size_t i;
	if (!ok(pbx_report_build(fx->st, "sweep-demo", o, &r, &err) == 0, "%s: report builds",
		base)) {
		printf("# %s\n", err.msg);
		return;
	}
	for (i = 0; i < (all_formats ? 4 : 1); i++) {
		char *name = xasprintf("%s.%s", base, fmts[i].ext), *text = render(r, fmts[i].f);
		json_t *j =
			fmts[i].f == PBX_REPORT_JSON ? json_loads(text ? text : "", 0, NULL) : NULL;
		if (fmts[i].f == PBX_REPORT_JSON)
			ok(json_is_object(j), "%s is valid JSON", name);
		json_decref(j);
		compare(name, text ? text : "");
		free(text);
		free(name);
	}
	pbx_report_free(r);
}

static void test_reports(struct fixture *fx)
{
	static const char *const groups[] = { "lr,width" };
	static const char *const where[] = { "state=completed", "loss<0.5", "width!=32" };
	static const char *const metrics[] = { "loss" };
	struct pbx_report_opts o = { 0 };
	report_case(fx, "tasks", &o, 1);
	o.group_by = groups;
	o.ngroup_by = 1;
	o.sort = "loss";
	report_case(fx, "grouped", &o, 1);
	memset(&o, 0, sizeof(o));
	o.where = where;
	o.nwhere = 3;
	o.metrics = metrics;
	o.nmetrics = 1;
	o.sort = "lr";
	report_case(fx, "filtered", &o, 0);
	memset(&o, 0, sizeof(o));
	o.sort = "acc:desc";
	report_case(fx, "sorted", &o, 0);
}

static void bad_opts(struct fixture *fx, const struct pbx_report_opts *o, const char *want,
		     const char *what)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_report *r = NULL;
	int rc = pbx_report_build(fx->st, NULL, o, &r, &err);
	ok(rc < 0 && err.code == PBX_EXIT_USAGE, "%s: a usage error", what);
	is_str(err.msg, want, what);
	pbx_report_free(r);
}

static void test_errors(struct fixture *fx)
{
	static const char *const m[] = { "nosuch" }, *const g[] = { "lr,nosuch" },
				 *const g2[] = { "lr" }, *const w1[] = { "lr" },
				 *const w2[] = { "state<3" }, *const w3[] = { "loss<abc" },
				 *const w4[] = { "zzz=1" };
	struct pbx_report_opts o = { 0 };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_report *r = NULL;
	o.metrics = m, o.nmetrics = 1;
	bad_opts(fx, &o, "no metric named 'nosuch' in 0123456789ab (its metrics: acc, loss)",
		 "unknown metric");
	memset(&o, 0, sizeof(o));
	o.group_by = g, o.ngroup_by = 1;
	bad_opts(fx, &o, "--group-by: no parameter named 'nosuch'", "unknown group parameter");
	o.group_by = NULL, o.ngroup_by = 0, o.where = w1, o.nwhere = 1;
	bad_opts(fx, &o,
		 "--where 'lr': expected KEY=VALUE, KEY!=VALUE or KEY<NUMBER "
		 "(also >, <=, >=)",
		 "where without operator");
	o.where = w2;
	bad_opts(fx, &o, "--where 'state<3': state takes = or !=", "state ordering");
	o.where = w3;
	bad_opts(fx, &o, "--where 'loss<abc': 'abc' is not a number", "metric needs a number");
	o.where = w4;
	bad_opts(fx, &o, "--where 'zzz=1': not a parameter, metric, state, runtime or task",
		 "unknown where key");
	memset(&o, 0, sizeof(o));
	o.sort = "state", o.group_by = g2, o.ngroup_by = 1;
	bad_opts(fx, &o, "--sort 'state': groups sort by a --group-by parameter or a metric",
		 "groups cannot sort by state");
	memset(&o, 0, sizeof(o));
	o.sort = "loss:up";
	bad_opts(fx, &o, "--sort 'loss:up': expected KEY, KEY:asc or KEY:desc", "bad sort order");
	ok(pbx_report_build(fx->st, "nosuch", NULL, &r, &err) < 0 && err.code == PBX_EXIT_NOTFOUND,
	   "unknown package: not found");
}

/* One 64 KiB parameter value: the terminal table cuts the cell (every
 * line stays short), CSV keeps the value whole.  Changes the fixture: run
 * last. */
static void test_long_cell(struct fixture *fx)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_report_opts o = { 0 };
	struct pbx_report *r = NULL;
	char *big = xmalloc(65537), *sql, *table = NULL, *csv = NULL, *line;
	size_t longest = 0;
	memset(big, 'v', 65536);
	big[65536] = '\0';
	sql = xasprintf("UPDATE tasks SET params_json = '{\"lr\":\"%s\",\"width\":\"16\","
			"\"repeat\":\"0\"}' WHERE idx = 3",
			big);
	ok(pbx_store_exec(fx->st, sql, &err) == 0, "a 64 KiB parameter value: %s", err.msg);
	if (ok(pbx_report_build(fx->st, "sweep-demo", &o, &r, &err) == 0, "report builds")) {
		table = render(r, PBX_REPORT_TABLE);
		csv = render(r, PBX_REPORT_CSV);
	}
	for (line = table; line && *line;) {
		char *nl = strchr(line, '\n');
		size_t l = nl ? (size_t)(nl - line) : strlen(line);
		if (l > longest)
			longest = l;
		line = nl ? nl + 1 : line + l;
	}
	ok(table && longest < 300, "every table line stays short (longest %zu bytes)", longest);
	ok(table && strstr(table, "vvvvvvvvvv...") != NULL, "the long cell ends with '...'");
	ok(csv && strstr(csv, big) != NULL, "CSV keeps the whole value");
	pbx_report_free(r);
	free(table);
	free(csv);
	free(sql);
	free(big);
}

/* An axis's padding never takes it past the data's sign: a loss falling
 * to 0.01 gets no negative ticks, nor a metric below 0 positive ones. */
static void test_axis_sign(void)
{
	struct pbx_scale s;
	pbx_scale_linear(&s, 0.01, 1, 0.05, 0, 100, 6);
	ok(s.lo >= 0 && s.nticks > 0 && s.ticks[0] >= 0, "data in [0.01, 1]: the axis starts at %g",
	   s.lo);
	pbx_scale_linear(&s, -1, -0.01, 0.05, 0, 100, 6);
	ok(s.hi <= 0 && s.ticks[s.nticks - 1] <= 0, "data in [-1, -0.01]: the axis ends at %g",
	   s.hi);
	pbx_scale_linear(&s, -1, 1, 0.05, 0, 100, 6);
	ok(s.lo < -1 && s.hi > 1, "data across 0: padded both ways (%g, %g)", s.lo, s.hi);
}

int main(int argc, char **argv)
{
	struct fixture fx;
	struct pbx_err err = PBX_ERR_INIT;
	if (argc == 3 && !strcmp(argv[1], "--make-store"))
		return fixture_make(&fx, argv[2]) < 0 ? 1 : (fixture_free(&fx), 0);
	if (argc != 2) {
		fprintf(stderr, "usage: test_results EXPECTED_DIR | --make-store DIR\n");
		return 2;
	}
	expected_dir = argv[1];
	test_parse_task0();
	test_parse_epoch();
	test_parse_edges();
	test_nan_strings();
	test_axis_sign();
	if (!mkdtemp(tmp_dir) || !ok(fixture_make(&fx, tmp_dir) == 0, "fixture store"))
		return tap_done() | 1;
	test_ingest(&fx);
	test_reports(&fx);
	test_errors(&fx);
	test_long_cell(&fx);
	fixture_free(&fx);
	pbx_rm_rf(tmp_dir, &err);
	return tap_done();
}
