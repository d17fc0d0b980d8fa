/*
 * cmd-report.c - `pbx report [PKG]`: one package's results from the store
 * (no network) as a table, CSV, JSON, Markdown or a self-contained HTML
 * page with learning curves.  The work is in src/results (report.h).
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "pool/pool.h"
#include "results/report.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct pbx_cmd *report_cmd(void);

struct report_args {
	struct pbx_report_opts o;
	struct pbx_opt_list metrics, group_by, where;
	const char *format, *output, *sort, *x, *color_by, *pool, *summary;
	int log_x, linear_x;
};

static const struct pbx_option report_opts[] = {
	PBX_OPT_STRING('f', "format", "FORMAT", struct report_args, format,
		       "table (default; aligned columns, values longer than 40 bytes\n"
		       "cut and ended with \"...\"), csv (RFC 4180 quoting, exact\n"
		       "numbers, whole values), json, md (a Markdown pipe table) or\n"
		       "html (one self-contained page with charts); with -o the\n"
		       "default follows the file's extension"),
	PBX_OPT_STRING('o', "output", "FILE", struct report_args, output,
		       "write FILE atomically instead of standard output"),
	PBX_OPT_LIST('m', "metric", "NAME", struct report_args, metrics,
		     "the metrics to show and chart (repeatable; default all)"),
	PBX_OPT_LIST('g', "group-by", "PARAMS", struct report_args, group_by,
		     "one row per combination of these parameters, aggregating the\n"
		     "others (usually repeat): tasks, then per metric the mean, std\n"
		     "(sample, n-1; empty for n = 1), min, max and n of the final values"),
	PBX_OPT_LIST('w', "where", "EXPR", struct report_args, where,
		     "keep tasks where PARAM=VALUE, PARAM!=VALUE, state=STATE,\n"
		     "METRIC<NUMBER (also >, <=, >=, =, != on a metric's final value,\n"
		     "runtime, task, node_hours or cost); repeat to AND several"),
	PBX_OPT_STRING('s', "sort", "KEY[:desc]", struct report_args, sort,
		       "order by a parameter (numerically when all its values are\n"
		       "numbers), a metric's final value (group mean when grouped),\n"
		       "state, runtime, task, node_hours or cost; missing values last"),
	PBX_OPT_STRING(0, "x", "PARAM", struct report_args, x,
		       "html: chart final values against PARAM only (default every\n"
		       "parameter with more than one value, except repeat)"),
	PBX_OPT_STRING(0, "color-by", "PARAM", struct report_args, color_by,
		       "html: colour the learning curves by PARAM (default the first\n"
		       "parameter with more than one value)"),
	PBX_OPT_FLAG(0, "log-x", struct report_args, log_x,
		     "html: numeric parameters on a log axis (default: 6 values or\n"
		     "fewer evenly spaced in order; more on a log axis when they span a\n"
		     "decade or more, all above 0; else linear)"),
	PBX_OPT_FLAG(0, "linear-x", struct report_args, linear_x,
		     "html: numeric parameters on a linear axis, at their values"),
	PBX_OPT_STRING(0, "pool", "URL", struct report_args, pool,
		       "report the results pulled from pool URL (gs://BUCKET/PREFIX or\n"
		       "s3://...; 'pbx pull URL' first): every publisher's tasks of\n"
		       "experiment PKG (an experiment name or package id prefix; default\n"
		       "the one pulled last), with \"publisher\" the first parameter;\n"
		       "with -g, a \"disagree\" column names the metrics on which a row's\n"
		       "publishers differ by over 3 standard errors of their pooled spread"),
	PBX_OPT_OPTIONAL(0, "summary", "KEYS", struct report_args, summary,
			 "columns of the numbers each task's program wrote in its summary.json\n"
			 "(harvested): every numeric top-level key (at most 20), or those of\n"
			 "--summary=KEY,KEY; grouped, their mean"),
	PBX_OPT_END,
};

/* -f, else the extension of -o, else a table. */
static int report_format(const struct report_args *a, enum pbx_report_format *f)
{
	const char *dot = a->output ? strrchr(a->output, '.') : NULL;
	*f = PBX_REPORT_TABLE;
	if (a->format)
		return pbx_report_format_parse(a->format, f);
	if (dot && !strcmp(dot, ".htm"))
		*f = PBX_REPORT_HTML;
	else if (dot)
		pbx_report_format_parse(dot + 1, f);
	return 0;
}

/* Parses argv into a; 0, or the usage error's exit code. */
static int report_parse(int argc, char **argv, struct report_args *a, int *first)
{
	int rc = pbx_opts_parse(report_cmd(), argc, argv, a, first);
	a->o.metrics = a->metrics.v;
	a->o.nmetrics = a->metrics.n;
	a->o.group_by = a->group_by.v;
	a->o.ngroup_by = a->group_by.n;
	a->o.where = a->where.v;
	a->o.nwhere = a->where.n;
	a->o.sort = a->sort;
	a->o.x = a->x;
	a->o.color_by = a->color_by;
	a->o.summary = a->summary;
	a->o.x_scale = a->log_x      ? PBX_XSCALE_LOG
		       : a->linear_x ? PBX_XSCALE_LINEAR
				     : PBX_XSCALE_AUTO;
	if (rc == 0 && a->log_x && a->linear_x)
		rc = pbx_usage_error(report_cmd(), "--log-x and --linear-x do not go together");
	if (rc == 0 && a->summary && a->pool)
		rc = pbx_usage_error(report_cmd(), "--summary does not go with --pool yet");
	return rc;
}

/* Renders to memory, then writes FILE atomically (or stdout). */
static int report_write(const struct pbx_report *r, enum pbx_report_format f, const char *path)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *text = NULL;
	size_t len = 0;
	FILE *mem;
	int rc;
	if (!path && !isatty(STDOUT_FILENO))
		return pbx_report_render(r, f, stdout, &err) < 0 ? pbx_report(&err) : 0;
	mem = open_memstream(&text, &len);
	if (!mem) {
		pbx_error("cannot render the report: out of memory");
		return PBX_EXIT_FAIL;
	}
	rc = pbx_report_render(r, f, mem, &err);
	fclose(mem);
	if (rc == 0 && !path) /* a terminal: metric and parameter names are the tasks' */
		pbx_cli_passthrough(NULL, 1, text, len);
	else if (rc == 0)
		rc = pbx_write_file_atomic(path, text, len, 0644, &err);
	free(text);
	if (rc < 0)
		return pbx_report(&err);
	if (path)
		pbx_info("wrote %s", path);
	else
		pbx_cli_passthrough_end();
	return 0;
}

/* A report with no metric, of a package nothing of which is home yet: says
 * what brings the results (a package whose tasks write no metrics.jsonl
 * was harvested and says nothing). */
static void report_nothing_home(struct pbx_ctx *ctx, const struct pbx_report *r)
{
	struct pbx_harvested *h = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	if (pbx_store_harvested_list(ctx->store, r->submission_id, &h, &n, &err) == 0 && n == 0)
		pbx_info("nothing of %s is home yet: 'pbx harvest %s' brings the tasks' results "
			 "and metrics",
			 r->short_id, r->short_id);
	pbx_harvested_free(h, n);
}

static int cmd_report_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct report_args a = { 0 };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_report *r = NULL;
	enum pbx_report_format f;
	int rc, first;
	if ((rc = report_parse(argc, argv, &a, &first)))
		;
	else if (report_format(&a, &f) < 0)
		rc = pbx_usage_error(report_cmd(),
				     "unknown format '%s' (table, csv, json, md, html)", a.format);
	else if ((a.pool ? pbx_pool_report(ctx->store, a.pool, first < argc ? argv[first] : NULL,
					   &a.o, &r, &err)
			 : pbx_report_build(ctx->store, first < argc ? argv[first] : NULL, &a.o, &r,
					    &err)) < 0)
		rc = pbx_report(&err);
	else
		rc = report_write(r, f, a.output);
	if (r && !rc && !r->nmetric_names && !a.pool)
		report_nothing_home(ctx, r);
	pbx_report_free(r);
	pbx_opt_list_free(&a.metrics);
	pbx_opt_list_free(&a.group_by);
	pbx_opt_list_free(&a.where);
	return rc;
}

const struct pbx_cmd pbx_cmd_report = {
	.name = "report",
	.summary = "tables and charts of an experiment's metrics",
	.usage =
		"pbx report [-f FORMAT] [-o FILE] [-m METRIC]... [-w EXPR]... [-s KEY[:desc]] [PKG]\n"
		"pbx report -g P1,P2 [OPTIONS] [PKG]\n"
		"pbx report -f html [--x PARAM] [--color-by PARAM] [OPTIONS] [PKG]\n"
		"pbx report --pool URL [OPTIONS] [EXPERIMENT]",
	.description =
		"Reports the tasks of package PKG (a package id prefix or an experiment\n"
		"name; the newest package without PKG) from its newest submission, using\n"
		"only the store.  One row per task: task, the parameters, then for each\n"
		"metric its final value (the value at the task's largest step) and best\n"
		"value (the minimum for metrics whose name contains \"loss\" or \"err\", in\n"
		"any case, the maximum otherwise), the state and the runtime in seconds.\n"
		"\n"
		"COST.  When the submission's cluster records what it spends (gce, aws:\n"
		"its nodes' runs and prices, see 'pbx cluster show'), each row also has\n"
		"node_hours (the task's time, until now while RUNNING, x its share of its\n"
		"node: the GPUs it asked for over the node's, else the whole node) and\n"
		"cost (node_hours x the price an hour of its node when the task started,\n"
		"in the cluster's currency; null, \"-\" in a table, when that price is\n"
		"unknown); a group row has their sums.  Only a task's last attempt\n"
		"counts.\n"
		"\n"
		"JSON output is an object with \"package\", \"id\", \"name\", \"cluster\",\n"
		"\"tasks\" (shown), \"tasks_total\", \"metrics\", \"group_by\", \"columns\" and\n"
		"\"rows\": one object per row keyed by the columns, numbers as numbers,\n"
		"null where a value is unknown.  Grouped columns are the group\n"
		"parameters, tasks, and METRIC.mean, .std, .min, .max, .n per metric.\n"
		"With cost columns the object also has the experiment's \"node_hours\",\n"
		"\"cost\" and \"cost_nanos\" (1e-9 units, the exact sum of its tasks';\n"
		"null when one is unknown) and \"currency\", over all its tasks.\n"
		"\n"
		"The HTML page opens with the best configuration: the parameters (all\n"
		"but repeat) whose mean final value of the first metric over their\n"
		"repeats is best (lowest for loss/err metrics, else highest), with its\n"
		"std and tasks, highlighted in the table too.  Then a learning curve\n"
		"chart per metric (one line per task,\n"
		"coloured by --color-by) and beside it each colour's mean curve with its\n"
		"± std band, a chart of the final value against each swept\n"
		"parameter (mean and standard deviation over the tasks sharing a value,\n"
		"and one line per value of a second swept parameter: --color-by, else\n"
		"the first other one with 2 to 8 values;\n"
		"6 numeric values or fewer evenly spaced in order, more on a log axis\n"
		"from one decade up; --log-x, --linear-x choose; no axis goes past the\n"
		"data's sign) and the table.\n"
		"\n"
		"METRICS FILES.  A task's metrics.jsonl holds one JSON object per line:\n"
		"  {\"step\": 100, \"loss\": 0.31, \"acc\": 0.92}\n"
		"  {\"step\": 100, \"name\": \"loss\", \"value\": 0.31}\n"
		"\"step\" is an integer >= 0 (a line without one counts by \"epoch\", else\n"
		"by \"iteration\").  In the first form every other key with a\n"
		"number value is a metric of that name; null, NaN, Infinity and -Infinity\n"
		"are stored as missing points; keys with other values are skipped with a\n"
		"warning.  An object with both \"name\" (a string) and \"value\" (a number or\n"
		"null) is the second form; its other keys are ignored.  Names are 1 to 256\n"
		"bytes.  Blank lines are skipped, malformed lines are skipped with a\n"
		"warning FILE:LINE: PROBLEM, and a last line without a newline is a write\n"
		"in progress and is ignored.  A point already stored (same task, metric\n"
		"and step) is kept, so reading a file again adds only new points.",
	.args = "PACKAGE",
	.options = report_opts,
	.examples = "pbx report sweep-demo\n"
		    "pbx report -g lr,width -m loss -s loss sweep-demo\n"
		    "pbx report -w state=COMPLETED -w 'loss<0.5' -f csv sweep-demo\n"
		    "pbx report -o report.html --color-by width sweep-demo\n"
		    "pbx report --pool gs://stats285-f26/hw3 -g lr sweep-demo",
	.flags = PBX_NEED_STORE,
	.min_args = 0,
	.max_args = 1,
	.exec = cmd_report_exec,
};

static const struct pbx_cmd *report_cmd(void)
{
	return &pbx_cmd_report;
}
