/*
 * report.h - `pbx report` as a library: build a report model of one
 * package's tasks from the store (parameters, per-metric final and best
 * values, curves, --where filters, --sort order, --group-by aggregates),
 * then render it to a FILE* as a table, CSV, JSON, Markdown or HTML.
 *
 * Definitions (documented in pbx-report(1)):
 *   final  the value at a task's largest step (null when that point is null)
 *   best   over the non-null points, the minimum for metrics whose name
 *          contains "loss" or "err" (any case), the maximum otherwise
 *   runtime end_time - start_time in seconds, unknown unless both are set
 *   node_hours, cost  the task's node-hours and estimated cost (cost.h),
 *          shown when the submission's cluster has node runs (pbx records
 *          what it spends: gce, aws); cost is in `currency`, unknown when
 *          its node's price is
 * Group aggregates are over the non-null final values of a group's tasks:
 * n, mean, sample standard deviation (n - 1; unknown for n = 1), min, max.
 *
 * Memory: pbx_report_build returns a model owned by the caller
 * (pbx_report_free).  Options are borrowed during the call only.
 */
#ifndef PBX_RESULTS_REPORT_H
#define PBX_RESULTS_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "store/experiments.h"
#include "util/err.h"

enum pbx_report_format {
	PBX_REPORT_TABLE,
	PBX_REPORT_CSV,
	PBX_REPORT_JSON,
	PBX_REPORT_MD,
	PBX_REPORT_HTML,
};

struct pbx_report_opts {
	const char *const *metrics; /* --metric: columns and charts; none = all */
	size_t nmetrics;
	const char *const *group_by; /* --group-by: parameter names, entries may hold commas */
	size_t ngroup_by;
	const char *const *where; /* --where expressions, ANDed */
	size_t nwhere;
	const char *sort;     /* "KEY", "KEY:asc" or "KEY:desc"; NULL = task order */
	const char *x;        /* HTML: the one parameter charted; NULL = every swept one */
	const char *color_by; /* HTML: curve colours; NULL = first swept parameter */
	int x_scale;          /* HTML: parameter axes: PBX_XSCALE_* */
	/* --summary: the harvested summary.json's top-level numbers as columns
	 * (summary.c): NULL none, "" every key some shown task has (the first
	 * PBX_REPORT_SUMMARY_MAX), else a comma-separated list of keys */
	const char *summary;
};
#define PBX_REPORT_SUMMARY_MAX 20

/* How the HTML report lays out a numeric parameter's axis (--log-x,
 * --linear-x; render_html.c, param_xscale). */
enum {
	PBX_XSCALE_AUTO,   /* 6 values or fewer: evenly spaced, in order; else log
			      from one decade up (all > 0), else linear */
	PBX_XSCALE_LOG,    /* log (linear when a value is not > 0) */
	PBX_XSCALE_LINEAR, /* linear */
};

/* A metric's summary for one task. */
struct pbx_report_stat {
	int has_final, has_best;
	double final, best;
	size_t npoints; /* non-null points in the curve */
	int64_t *steps; /* the curve: non-null points by step */
	double *values;
};

struct pbx_report_task {
	int64_t idx;
	char **values; /* one per parameter, "" when the task lacks it */
	char *state;
	int64_t runtime;               /* seconds, -1 when unknown */
	double node_hours;             /* -1 when unknown (no cost model) */
	int64_t cost;                  /* 1e-9 units of report->currency, -1 when unknown */
	struct pbx_report_stat *stats; /* one per entry of report->metric_names */
	double *summary;               /* one per report->summary_keys */
	unsigned char *has_summary;    /* its summary.json has that number */
};

struct pbx_report_agg {
	size_t n;
	double mean, std, min, max; /* std meaningful when n > 1 */
};

struct pbx_report_group {
	char **values; /* one per group-by parameter */
	size_t ntasks;
	size_t *tasks;               /* indexes into report->tasks */
	struct pbx_report_agg *aggs; /* one per chosen metric (report->metrics) */
	double node_hours;           /* the group's tasks' sum */
	int64_t cost;                /* the group's tasks' sum; -1 when one is unknown */
	char *disagree;              /* pooled reports: the metrics whose publishers disagree
			   beyond their spread, comma-separated; NULL: none */
	struct pbx_report_agg *summary_aggs; /* one per report->summary_keys */
};

struct pbx_report {
	char *package_id, *short_id, *name, *cluster;
	int64_t submission_id, created;
	size_t nparams;
	char **params;         /* parameter names, in params_json order */
	int *param_numeric;    /* every value of the parameter is a number */
	size_t *param_nvalues; /* distinct values among the shown tasks */
	size_t nmetric_names;
	char **metric_names; /* every metric of the submission, sorted */
	size_t nmetrics;
	size_t *metrics;               /* chosen: indexes into metric_names */
	size_t ntasks, ntasks_total;   /* shown (after --where), all */
	struct pbx_report_task *tasks; /* shown tasks in --sort order */
	size_t ngroup_by;
	size_t *group_by; /* indexes into params; 0 = no grouping */
	size_t ngroups;
	struct pbx_report_group *groups;
	long x_param;        /* --x as a parameter index, -1 = every swept one */
	long color_by;       /* parameter index, -1 = none */
	int x_scale;         /* PBX_XSCALE_*: from the options */
	int cost_shown;      /* node_hours and cost columns (the cluster
					 has node runs) */
	double node_hours;   /* the experiment's: every task, shown or not */
	int64_t cost;        /* likewise, 1e-9 units; -1 when unknown */
	char currency[8];    /* "" when no task has a price */
	int disagree_shown;  /* grouped rows get a "disagree" column (a pooled
			       report, src/pool/disagree.c) */
	char **summary_keys; /* --summary's keys, in column order */
	size_t nsummary;
	/* the experiment's environment: (its status line as `pbx state` last
	 * read it, "READY KEY" / "FAILED REASON"; and the environment.txt a
	 * harvested task brought home: key, Python or image, lock); NULL when
	 * none */
	char *environment, *environment_txt;
};

/* Builds the report of package `ref` (id prefix or experiment name, see
 * pbx_store_package_find; NULL = the newest package) from its newest
 * submission.  Errors: unknown package or no submission (PBX_EXIT_NOTFOUND),
 * bad options such as an unknown metric or parameter (PBX_EXIT_USAGE). */
int pbx_report_build(struct pbx_store *st, const char *ref, const struct pbx_report_opts *o,
		     struct pbx_report **out, struct pbx_err *err);
/* The same from rows already read (used by pbx_report_build and tests). */
int pbx_report_from_rows(const struct pbx_package_row *pkg, const struct pbx_submission_row *sub,
			 const struct pbx_task_row *tasks, size_t ntasks,
			 const struct pbx_metric *pts, size_t npts, const struct pbx_report_opts *o,
			 struct pbx_report **out, struct pbx_err *err);
/* The same with the tasks' cost (results/cost.h: cost->tasks[i] is that of
 * tasks[i]; borrowed; NULL = none, as pbx_report_from_rows). */
struct pbx_cost;
int pbx_report_from_rows_cost(const struct pbx_package_row *pkg,
			      const struct pbx_submission_row *sub,
			      const struct pbx_task_row *tasks, size_t ntasks,
			      const struct pbx_metric *pts, size_t npts,
			      const struct pbx_cost *cost, const struct pbx_report_opts *o,
			      struct pbx_report **out, struct pbx_err *err);
void pbx_report_free(struct pbx_report *r);
/* --summary (summary.c): reads each shown task's harvested summary.json
 * ($PBX_HOME/results/PKG/IDX/summary.json) and fills the report's summary
 * keys, the tasks' values and the groups' aggregates.  A key named in
 * o->summary that no shown task has is an error (PBX_EXIT_USAGE). */
int pbx_report_summary(struct pbx_report *r, const struct pbx_report_opts *o, struct pbx_err *err);

/* "table", "csv", "json", "md" (or "markdown"), "html": 0, else -1. */
int pbx_report_format_parse(const char *s, enum pbx_report_format *f);
/* Renders to `out`; -1 with err when writing fails. */
int pbx_report_render(const struct pbx_report *r, enum pbx_report_format f, FILE *out,
		      struct pbx_err *err);

#endif
