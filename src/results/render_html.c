/*
 * render_html.c - the report as one self-contained HTML page: inline CSS
 * and inline SVG only (no scripts, fonts, styles or images from
 * elsewhere).  Sections: package info; learning curves (one chart per
 * metric, one polyline.curve[data-task] per task, coloured by --color-by);
 * final value against each swept parameter (mean +- std over the tasks
 * sharing the value, g.errorbar[data-x]); the table of the text formats.
 */
#include "results/cost.h"
#include "results/model_internal.h"
#include "results/num.h"
#include "results/svg.h"

#include "util/buf.h"
#include "util/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CURVE_POINTS 800

static const char css[] =
	":root{--fg:#1f2328;--muted:#59636e;--line:#d8dee4;--soft:#f6f8fa}\n"
	"body{font-family:\"DejaVu Sans\",system-ui,-apple-system,\"Segoe UI\",Helvetica,Arial,"
	"sans-serif;color:var(--fg);background:#fff;margin:24px auto;max-width:1320px;"
	"padding:0 24px;line-height:1.45}\n"
	"h1{font-size:26px;margin:0 0 6px}h2{font-size:19px;margin:32px 0 12px;"
	"padding-bottom:6px;border-bottom:1px solid var(--line)}\n"
	".meta{color:var(--muted);font-size:14px;margin:0}.note{color:var(--muted);font-size:13px}\n"
	"code{font-family:\"DejaVu Sans Mono\",ui-monospace,monospace;font-size:13px;"
	"background:var(--soft);padding:1px 5px;border-radius:4px}\n"
	".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:16px}\n"
	"figure{margin:0;border:1px solid var(--line);border-radius:8px;padding:6px;background:#fff}\n"
	"svg{width:100%;height:auto;display:block;font-size:12px}\n"
	"svg text{fill:#3d444d}svg .charttitle{font-size:15px;font-weight:bold;fill:var(--fg)}\n"
	"svg .axislabel{font-size:13px}svg .legendtitle{font-weight:bold}\n"
	"svg line.grid{stroke:#e8ebef;stroke-width:1}svg line.tick{stroke:#8c959f}\n"
	"svg rect.frame{fill:none;stroke:#8c959f}svg line.swatch{stroke-width:3}\n"
	"svg .curve{fill:none;stroke-width:1.7;stroke-linejoin:round;opacity:.85}\n"
	"svg .curve:hover{stroke-width:3.5;opacity:1}svg .trend{fill:none;stroke-width:1.5;"
	"stroke-dasharray:5 4;opacity:.7}\n"
	"svg .point{fill:#fff;stroke-width:1.2;opacity:.7}svg .errorbar line{stroke-width:1.8}\n"
	"svg .interaction{fill:none;stroke-width:2;opacity:.85}\n"
	"svg .band{opacity:.18;stroke:none}svg .meancurve{fill:none;stroke-width:2.4}\n"
	"table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}\n"
	"th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;"
	"white-space:nowrap}th{background:var(--soft);position:sticky;top:0}\n"
	"th.metric{text-align:center;border-left:1px solid var(--line)}"
	"tr.stats th{top:25px;font-weight:normal;color:var(--muted)}\n"
	".num{text-align:right}tbody tr:hover td{background:var(--soft)}\n"
	".st-COMPLETED{color:#1a7f37}.st-FAILED,.st-TIMEOUT,.st-OUT_OF_MEMORY,.st-NODE_FAIL,"
	".st-MISSING{color:#cf222e;font-weight:bold}.st-RUNNING,.st-PENDING{color:#0969da}\n"
	".scroll{overflow-x:auto}\n"
	"#best .box{border:1px solid #d4a72c;background:#fff8c5;border-radius:8px;"
	"padding:10px 14px;font-size:15px}\n"
	"tr.best td{background:#fff8c5}\n";

/* Distinct values of parameter p among the shown tasks: numeric ones
 * ascending, others in order of first appearance.  *vals is borrowed
 * from the report; free the array only. */
static int cmp_numeric(const void *a, const void *b)
{
	double x = 0, y = 0;
	pbx_num_parse(*(const char *const *)a, &x);
	pbx_num_parse(*(const char *const *)b, &y);
	return (x > y) - (x < y);
}

static size_t distinct(const struct pbx_report *r, size_t p, const char ***vals)
{
	size_t t, i, n = 0;
	*vals = xcalloc(r->ntasks + 1, sizeof(char *));
	for (t = 0; t < r->ntasks; t++) {
		for (i = 0; i < n && strcmp((*vals)[i], r->tasks[t].values[p]); i++)
			;
		if (i == n)
			(*vals)[n++] = r->tasks[t].values[p];
	}
	if (r->param_numeric[p])
		qsort(*vals, n, sizeof(char *), cmp_numeric);
	return n;
}

static size_t value_index(const char *const *vals, size_t n, const char *v)
{
	size_t i;
	for (i = 0; i < n && strcmp(vals[i], v); i++)
		;
	return i;
}

static void esc(FILE *f, const char *s)
{
	pbx_xml_escape(f, s);
}

/* "lr=0.1, width=16, repeat=0" */
static char *task_label(const struct pbx_report *r, const struct pbx_report_task *t)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t p;
	for (p = 0; p < r->nparams; p++)
		pbx_buf_addf(&b, "%s%s=%s", p ? ", " : "", r->params[p], t->values[p]);
	return pbx_buf_detach(&b, NULL);
}

/* ------------------------------------------------------------- header */

static void html_head(const struct pbx_report *r, FILE *f)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
	      f);
	esc(f, r->name);
	fprintf(f, " (%s) - pbx report</title>\n<style>\n%s</style>\n</head>\n<body>\n",
		r->short_id, css);
}

static void html_states(const struct pbx_report *r, FILE *f)
{
	size_t t, u, n;
	for (t = 0; t < r->ntasks; t++) {
		for (u = 0; u < t && strcmp(r->tasks[u].state, r->tasks[t].state); u++)
			;
		if (u < t)
			continue;
		for (n = 0, u = t; u < r->ntasks; u++)
			n += !strcmp(r->tasks[u].state, r->tasks[t].state);
		fprintf(f, "%s%zu ", t ? ", " : ": ", n);
		esc(f, r->tasks[t].state);
	}
}

static void html_meta(const struct pbx_report *r, FILE *f)
{
	char when[64] = "";
	time_t created = (time_t)r->created;
	struct tm tm;
	if (r->created && gmtime_r(&created, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);
	fputs("<header>\n<h1>", f);
	esc(f, r->name);
	fprintf(f,
		"</h1>\n<p class=\"meta\">package <code title=\"%s\">%s</code> &middot; cluster "
		"<b>",
		r->package_id, r->short_id);
	esc(f, r->cluster);
	fprintf(f, "</b> &middot; created %s &middot; %zu of %zu tasks", when, r->ntasks,
		r->ntasks_total);
	html_states(r, f);
	if (r->cost_shown) {
		char cost[64], hours[32];
		pbx_cost_text(r->cost, r->currency, cost, sizeof(cost));
		pbx_node_hours_text(r->node_hours, hours, sizeof(hours));
		fprintf(f, " &middot; %s node-hours, cost ", hours);
		esc(f, r->cost >= 0 ? cost : "unknown");
	}
	fputs("</p>\n</header>\n", f);
}

/* ------------------------------------------------------ best configuration */

/* A task's configuration: its values of every parameter but repeat,
 * '\x1f'-joined.  Caller frees. */
static char *config_key(const struct pbx_report *r, const struct pbx_report_task *t)
{
	size_t p, len = 1;
	char *k;
	for (p = 0; p < r->nparams; p++)
		len += strlen(t->values[p]) + 1;
	k = xcalloc(len, 1);
	for (p = 0; p < r->nparams; p++)
		if (strcmp(r->params[p], "repeat") != 0) {
			strcat(k, t->values[p]);
			strcat(k, "\x1f");
		}
	return k;
}

struct best {
	char *key;        /* config_key of the best configuration, NULL: none */
	size_t first;     /* one of its tasks */
	size_t n;         /* its tasks with a final value (repeats) */
	double mean, std; /* of their final values of the first chosen metric */
};

/* The best configuration by the mean final value of the first chosen
 * metric over its repeats: the lowest for metrics named loss or err, else the
 * highest (the table's rule). */
static void best_find(const struct pbx_report *r, struct best *b)
{
	size_t m, t, u;
	int lower;
	memset(b, 0, sizeof(*b));
	if (!r->nmetrics || !r->ntasks)
		return;
	m = r->metrics[0];
	lower = pbx_metric_lower_is_better(r->metric_names[m]);
	for (t = 0; t < r->ntasks; t++) {
		char *key = config_key(r, &r->tasks[t]);
		double sum = 0, ss = 0, mean;
		size_t n = 0;
		for (u = 0; u < r->ntasks; u++) {
			char *k2 = config_key(r, &r->tasks[u]);
			if (!strcmp(k2, key) && r->tasks[u].stats[m].has_final) {
				sum += r->tasks[u].stats[m].final;
				n++;
			}
			free(k2);
		}
		if (!n || (b->key && !strcmp(b->key, key))) {
			free(key);
			continue;
		}
		mean = sum / (double)n;
		if (b->key && (lower ? mean >= b->mean : mean <= b->mean)) {
			free(key);
			continue;
		}
		for (u = 0; u < r->ntasks; u++) {
			char *k2 = config_key(r, &r->tasks[u]);
			if (!strcmp(k2, key) && r->tasks[u].stats[m].has_final)
				ss += pow(r->tasks[u].stats[m].final - mean, 2);
			free(k2);
		}
		free(b->key);
		b->key = key;
		b->first = t;
		b->n = n;
		b->mean = mean;
		b->std = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
	}
}

static void html_best(const struct pbx_report *r, const struct best *b, FILE *f)
{
	char mean[32], std[32];
	size_t p, shown = 0;
	if (!b->key)
		return;
	pbx_num_short(b->mean, mean, sizeof(mean));
	pbx_num_short(b->std, std, sizeof(std));
	fprintf(f, "<section id=\"best\">\n<h2>Best configuration</h2>\n<p class=\"box\" "
		   "data-metric=\"");
	esc(f, r->metric_names[r->metrics[0]]);
	fprintf(f, "\" data-mean=\"%.17g\" data-std=\"%.17g\" data-n=\"%zu\">", b->mean, b->std,
		b->n);
	fprintf(f, "<b>%s",
		pbx_metric_lower_is_better(r->metric_names[r->metrics[0]]) ? "lowest" : "highest");
	fputs(" final ", f);
	esc(f, r->metric_names[r->metrics[0]]);
	fprintf(f, ": %s", mean);
	if (b->n > 1)
		fprintf(f, " &plusmn; %s", std);
	fprintf(f, "</b> (%zu task%s) with ", b->n, b->n == 1 ? "" : "s");
	for (p = 0; p < r->nparams; p++) {
		if (!strcmp(r->params[p], "repeat"))
			continue;
		fputs(shown++ ? ", " : "", f);
		fputs("<code>", f);
		esc(f, r->params[p]);
		fputs(" = ", f);
		esc(f, r->tasks[b->first].values[p]);
		fputs("</code>", f);
	}
	if (!shown)
		fputs("no parameter", f);
	fputs("</p>\n</section>\n", f);
}

/* ------------------------------------------------------- learning curves */

struct colouring {
	long param;
	size_t n;
	const char **vals;
	char (*hex)[8];
};

static void colouring_init(const struct pbx_report *r, struct colouring *c)
{
	size_t i;
	c->param = r->color_by;
	c->n = c->param >= 0 ? distinct(r, (size_t)c->param, &c->vals) : 0;
	if (c->param < 0)
		c->vals = xcalloc(1, sizeof(char *));
	c->hex = xcalloc(c->n + 1, sizeof(*c->hex));
	for (i = 0; i < c->n; i++)
		pbx_palette(i, c->n, c->hex[i]);
	if (!c->n)
		pbx_palette(0, 1, c->hex[0]);
}

static const char *colour_of(const struct colouring *c, const struct pbx_report_task *t)
{
	size_t i = c->param >= 0 ? value_index(c->vals, c->n, t->values[c->param]) : 0;
	return c->hex[i < c->n ? i : 0];
}

static void colouring_legend(const struct pbx_report *r, const struct colouring *c,
			     const struct pbx_chart *ch, FILE *f)
{
	const char **labels, **colors;
	size_t i;
	if (c->param < 0)
		return;
	labels = xcalloc(c->n + 1, sizeof(char *));
	colors = xcalloc(c->n + 1, sizeof(char *));
	for (i = 0; i < c->n; i++) {
		labels[i] = c->vals[i];
		colors[i] = c->hex[i];
	}
	pbx_svg_legend(f, ch, r->params[c->param], labels, colors, c->n);
	free(labels);
	free(colors);
}

static int curve_ranges(const struct pbx_report *r, size_t m, double *x, double *y)
{
	size_t t, i;
	int any = 0;
	for (t = 0; t < r->ntasks; t++) {
		const struct pbx_report_stat *s = &r->tasks[t].stats[m];
		for (i = 0; i < s->npoints; i++) {
			double sx = (double)s->steps[i], sy = s->values[i];
			if (!any) {
				x[0] = x[1] = sx;
				y[0] = y[1] = sy;
			}
			any = 1;
			x[0] = fmin(x[0], sx);
			x[1] = fmax(x[1], sx);
			y[0] = fmin(y[0], sy);
			y[1] = fmax(y[1], sy);
		}
	}
	return any;
}

static void curve_one(const struct pbx_report *r, const struct pbx_report_task *t, size_t m,
		      const struct pbx_chart *ch, const char *color, FILE *f)
{
	const struct pbx_report_stat *s = &t->stats[m];
	size_t stride = (s->npoints + MAX_CURVE_POINTS - 1) / MAX_CURVE_POINTS, i, k = 0;
	double *xs = xcalloc(s->npoints + 1, sizeof(double)),
	       *ys = xcalloc(s->npoints + 1, sizeof(double));
	char *label = task_label(r, t), *tip, attrs[48], val[32];
	for (i = 0; i < s->npoints; i++)
		if (i % (stride ? stride : 1) == 0 || i + 1 == s->npoints) {
			xs[k] = (double)s->steps[i];
			ys[k++] = s->values[i];
		}
	pbx_num_short(s->values[s->npoints - 1], val, sizeof(val));
	tip = xasprintf("task %lld: %s (%s %s at step %lld)", (long long)t->idx, label,
			r->metric_names[m], val, (long long)s->steps[s->npoints - 1]);
	snprintf(attrs, sizeof(attrs), "data-task=\"%lld\"", (long long)t->idx);
	pbx_svg_polyline(f, ch, xs, ys, k, "curve", attrs, color, tip);
	pbx_svg_dot(f, ch, xs[k - 1], ys[k - 1], 2.5, color, 0, tip);
	free(tip);
	free(label);
	free(xs);
	free(ys);
}

/* The axes of a chart by step: steps linear, values log when they span
 * more than two decades (the per-task and the mean curves alike). */
static void curve_axes(struct pbx_chart *ch, const double xr[2], const double yr[2])
{
	pbx_chart_init(ch);
	pbx_scale_linear(&ch->x, xr[0], xr[1], 0, ch->left, ch->right, 6);
	if (pbx_scale_wants_log(yr[0], yr[1]))
		pbx_scale_log(&ch->y, yr[0], yr[1], ch->bottom, ch->top);
	else
		pbx_scale_linear(&ch->y, yr[0], yr[1], 0.05, ch->bottom, ch->top, 6);
}

static void curve_chart(const struct pbx_report *r, size_t m, const struct colouring *col, FILE *f)
{
	struct pbx_chart ch;
	double xr[2], yr[2];
	char *title;
	size_t t;
	if (!curve_ranges(r, m, xr, yr))
		return;
	curve_axes(&ch, xr, yr);
	title = xasprintf("%s by step", r->metric_names[m]);
	fputs("<figure>\n", f);
	pbx_chart_begin(f, &ch, "learning-curves", title, "step", r->metric_names[m]);
	for (t = 0; t < r->ntasks; t++)
		if (r->tasks[t].stats[m].npoints)
			curve_one(r, &r->tasks[t], m, &ch, colour_of(col, &r->tasks[t]), f);
	colouring_legend(r, col, &ch, f);
	pbx_chart_end(f);
	fputs("</figure>\n", f);
	free(title);
}

/* The steps any task of colour group g (every task when there is no
 * colouring) has a point of metric m at, ascending, into *steps; their
 * count.  Caller frees *steps. */
static size_t group_steps(const struct pbx_report *r, const struct colouring *col, size_t g,
			  size_t m, int64_t **steps)
{
	size_t t, i, n = 0, k;
	*steps = NULL;
	for (t = 0; t < r->ntasks; t++) {
		const struct pbx_report_stat *s = &r->tasks[t].stats[m];
		if (col->param >= 0 && strcmp(r->tasks[t].values[col->param], col->vals[g]) != 0)
			continue;
		for (i = 0; i < s->npoints; i++) {
			for (k = 0; k < n && (*steps)[k] != s->steps[i]; k++)
				;
			if (k < n)
				continue;
			*steps = xreallocarray(*steps, n + 1, sizeof(**steps));
			for (k = n++; k > 0 && (*steps)[k - 1] > s->steps[i]; k--)
				(*steps)[k] = (*steps)[k - 1];
			(*steps)[k] = s->steps[i];
		}
	}
	return n;
}

/* Group g's mean curve of metric m with its band (mean ± std over the
 * group's tasks that have a point at each step). */
static void mean_curve(const struct pbx_report *r, const struct colouring *col, size_t g, size_t m,
		       const struct pbx_chart *ch, const char *color, FILE *f)
{
	int64_t *steps;
	size_t n = group_steps(r, col, g, m, &steps), i, t, k = 0;
	double *x = xcalloc(n + 1, sizeof(double)), *mu = xcalloc(n + 1, sizeof(double)),
	       *lo = xcalloc(n + 1, sizeof(double)), *hi = xcalloc(n + 1, sizeof(double));
	char attrs[48], *tip;
	for (i = 0; i < n; i++) {
		double sum = 0, ss = 0, v;
		size_t c = 0, j;
		for (int pass = 0; pass < 2; pass++)
			for (t = 0; t < r->ntasks; t++) {
				const struct pbx_report_stat *s = &r->tasks[t].stats[m];
				if (col->param >= 0 &&
				    strcmp(r->tasks[t].values[col->param], col->vals[g]) != 0)
					continue;
				for (j = 0; j < s->npoints && s->steps[j] != steps[i]; j++)
					;
				if (j == s->npoints)
					continue;
				v = s->values[j];
				if (pass == 0) {
					sum += v;
					c++;
				} else {
					ss += (v - sum / (double)c) * (v - sum / (double)c);
				}
			}
		if (!c)
			continue;
		x[k] = (double)steps[i];
		mu[k] = sum / (double)c;
		lo[k] = mu[k] - (c > 1 ? sqrt(ss / (double)(c - 1)) : 0);
		hi[k] = mu[k] + (c > 1 ? sqrt(ss / (double)(c - 1)) : 0);
		k++;
	}
	snprintf(attrs, sizeof(attrs), "data-group=\"%zu\"", g);
	pbx_svg_band(f, ch, x, lo, hi, k, color, attrs);
	tip = col->param >= 0 ? xasprintf("mean %s with %s = %s (± std)", r->metric_names[m],
					  r->params[col->param], col->vals[g])
			      : xasprintf("mean %s (± std)", r->metric_names[m]);
	if (k)
		pbx_svg_polyline(f, ch, x, mu, k, "meancurve", attrs, color, tip);
	free(tip);
	free(steps);
	free(x);
	free(mu);
	free(lo);
	free(hi);
}

/* Beside the per-task curves: each colour group's mean curve with its
 * ± std band, on the same axes. */
static void mean_chart(const struct pbx_report *r, size_t m, const struct colouring *col, FILE *f)
{
	struct pbx_chart ch;
	double xr[2], yr[2];
	char *title;
	size_t g, ng = col->param >= 0 ? col->n : 1;
	if (!curve_ranges(r, m, xr, yr))
		return;
	curve_axes(&ch, xr, yr);
	title = xasprintf("mean %s by step (± std)", r->metric_names[m]);
	fputs("<figure>\n", f);
	pbx_chart_begin(f, &ch, "mean-curves", title, "step", r->metric_names[m]);
	for (g = 0; g < ng; g++) {
		char c0[8];
		mean_curve(r, col, g, m, &ch, col->param >= 0 ? col->hex[g] : pbx_palette(0, 1, c0),
			   f);
	}
	colouring_legend(r, col, &ch, f);
	pbx_chart_end(f);
	fputs("</figure>\n", f);
	free(title);
}

static void html_curves(const struct pbx_report *r, FILE *f)
{
	struct colouring col;
	size_t m;
	if (!r->nmetrics)
		return;
	colouring_init(r, &col);
	fputs("<section id=\"curves\">\n<h2>Learning curves</h2>\n<div class=\"charts\">\n", f);
	for (m = 0; m < r->nmetrics; m++) {
		curve_chart(r, r->metrics[m], &col, f);
		mean_chart(r, r->metrics[m], &col, f);
	}
	fputs("</div>\n</section>\n", f);
	free(col.vals);
	free(col.hex);
}

/* --------------------------------------------------- final vs parameter */

struct xpoint {
	double x; /* data coordinate: the value or its category */
	size_t n;
	double mean, std; /* std < 0 when n < 2 */
};

static void xpoint_stats(const struct pbx_report *r, size_t p, size_t m, const char *v,
			 struct xpoint *xp)
{
	double sum = 0, ss = 0;
	size_t t;
	xp->n = 0;
	for (t = 0; t < r->ntasks; t++)
		if (!strcmp(r->tasks[t].values[p], v) && r->tasks[t].stats[m].has_final) {
			sum += r->tasks[t].stats[m].final;
			xp->n++;
		}
	xp->mean = xp->n ? sum / (double)xp->n : 0;
	for (t = 0; t < r->ntasks; t++)
		if (!strcmp(r->tasks[t].values[p], v) && r->tasks[t].stats[m].has_final)
			ss += pow(r->tasks[t].stats[m].final - xp->mean, 2);
	xp->std = xp->n > 1 ? sqrt(ss / (double)(xp->n - 1)) : -1;
}

/* Numeric parameters with this many values or fewer are charted evenly
 * spaced, in order (a grid sweep's points), unless --linear-x/--log-x. */
#define PARAM_FEW_VALUES 6

/* The x scale: categories (text values; a few numeric ones, in order),
 * else numbers: log from one decade up (all > 0), else linear; --log-x and
 * --linear-x choose (r->x_scale). */
static void param_xscale(const struct pbx_report *r, size_t p, const char **vals, size_t n,
			 struct pbx_chart *ch, struct xpoint *xp)
{
	size_t i;
	double lo = 0, hi = 0;
	int cats = !r->param_numeric[p] || (r->x_scale == PBX_XSCALE_AUTO && n <= PARAM_FEW_VALUES);
	for (i = 0; i < n; i++) {
		xp[i].x = (double)i;
		if (!cats)
			pbx_num_parse(vals[i], &xp[i].x);
	}
	if (!cats) {
		lo = xp[0].x;
		hi = xp[n - 1].x;
	}
	if (cats) {
		pbx_scale_cat(&ch->x, n, ch->left, ch->right);
		ch->xcats = vals;
	} else if (lo > 0 && (r->x_scale == PBX_XSCALE_LOG ||
			      (r->x_scale == PBX_XSCALE_AUTO && hi / lo >= 10))) {
		pbx_scale_log(&ch->x, lo, hi, ch->left, ch->right);
	} else {
		pbx_scale_linear(&ch->x, lo, hi, 0.05, ch->left, ch->right, 7);
	}
}

static void param_yscale(const struct pbx_report *r, size_t p, size_t m, const struct xpoint *xp,
			 size_t n, struct pbx_chart *ch)
{
	double lo = INFINITY, hi = -INFINITY;
	size_t i, t;
	for (i = 0; i < n; i++)
		if (xp[i].n && xp[i].std > 0) {
			lo = fmin(lo, xp[i].mean - xp[i].std);
			hi = fmax(hi, xp[i].mean + xp[i].std);
		}
	for (t = 0; t < r->ntasks; t++)
		if (r->tasks[t].stats[m].has_final) {
			lo = fmin(lo, r->tasks[t].stats[m].final);
			hi = fmax(hi, r->tasks[t].stats[m].final);
		}
	(void)p;
	pbx_scale_linear(&ch->y, lo, hi, 0.05, ch->bottom, ch->top, 6);
}

static void param_points(const struct pbx_report *r, size_t p, size_t m, const char **vals,
			 const struct xpoint *xp, size_t n, const struct pbx_chart *ch, FILE *f)
{
	char color[8], val[32], *label, *tip;
	size_t t, i;
	pbx_palette(0, 1, color);
	for (t = 0; t < r->ntasks; t++) {
		const struct pbx_report_task *task = &r->tasks[t];
		if (!task->stats[m].has_final)
			continue;
		i = value_index(vals, n, task->values[p]);
		label = task_label(r, task);
		pbx_num_short(task->stats[m].final, val, sizeof(val));
		tip = xasprintf("task %lld: %s (final %s %s)", (long long)task->idx, label,
				r->metric_names[m], val);
		pbx_svg_dot(f, ch, xp[i].x, task->stats[m].final, 3, "#6e7781", 1, tip);
		free(tip);
		free(label);
	}
}

static void param_bars(const struct pbx_report *r, size_t p, size_t m, const char **vals,
		       const struct xpoint *xp, size_t n, const struct pbx_chart *ch, FILE *f)
{
	double *xs = xcalloc(n + 1, sizeof(double)), *ys = xcalloc(n + 1, sizeof(double));
	char color[8], mean[32], std[32], *tip;
	size_t i, k = 0;
	pbx_palette(0, 1, color);
	for (i = 0; i < n; i++)
		if (xp[i].n) {
			xs[k] = xp[i].x;
			ys[k++] = xp[i].mean;
		}
	if (k > 1)
		pbx_svg_polyline(f, ch, xs, ys, k, "trend", "", color, "mean");
	for (i = 0; i < n; i++) {
		if (!xp[i].n)
			continue;
		pbx_num_short(xp[i].mean, mean, sizeof(mean));
		pbx_num_short(xp[i].std > 0 ? xp[i].std : 0, std, sizeof(std));
		tip = xp[i].n > 1 ? xasprintf("%s = %s: %s mean %s ± %s (n = %zu)", r->params[p],
					      vals[i], r->metric_names[m], mean, std, xp[i].n)
				  : xasprintf("%s = %s: %s %s (n = 1)", r->params[p], vals[i],
					      r->metric_names[m], mean);
		pbx_svg_errorbar(f, ch, xp[i].x, xp[i].mean, xp[i].std, color, vals[i], tip);
		free(tip);
	}
	free(xs);
	free(ys);
}

/* The second parameter of an interaction chart for p: --color-by when it
 * is another swept one, else the first other swept parameter (not
 * repeat), with 2 to 8 values; -1 when there is none. */
static long param_second(const struct pbx_report *r, size_t p)
{
	size_t q;
	if (r->color_by >= 0 && (size_t)r->color_by != p &&
	    strcmp(r->params[r->color_by], "repeat") != 0 && r->param_nvalues[r->color_by] >= 2 &&
	    r->param_nvalues[r->color_by] <= 8)
		return r->color_by;
	for (q = 0; q < r->nparams; q++)
		if (q != p && strcmp(r->params[q], "repeat") != 0 && r->param_nvalues[q] >= 2 &&
		    r->param_nvalues[q] <= 8)
			return (long)q;
	return -1;
}

/* One line per value w of parameter q: the mean final value of metric m
 * at each x of p over the tasks with q = w (the interaction, which the
 * mean over q hides).  Their colours and labels into colors[]/labels[]
 * (nq of them; labels owned by the caller). */
static void param_interaction(const struct pbx_report *r, size_t p, size_t q, size_t m,
			      const char **vals, const struct xpoint *xp, size_t n,
			      const struct pbx_chart *ch, char (*hex)[8], char **labels, FILE *f)
{
	const char **qvals;
	size_t nq = distinct(r, q, &qvals), j, i, t;
	double *xs = xcalloc(n + 1, sizeof(double)), *ys = xcalloc(n + 1, sizeof(double));
	for (j = 0; j < nq; j++) {
		char *attrs, *tip;
		size_t k = 0;
		for (i = 0; i < n; i++) {
			double sum = 0;
			size_t c = 0;
			for (t = 0; t < r->ntasks; t++)
				if (!strcmp(r->tasks[t].values[p], vals[i]) &&
				    !strcmp(r->tasks[t].values[q], qvals[j]) &&
				    r->tasks[t].stats[m].has_final) {
					sum += r->tasks[t].stats[m].final;
					c++;
				}
			if (c) {
				xs[k] = xp[i].x;
				ys[k++] = sum / (double)c;
			}
		}
		pbx_palette(j + 1, nq + 1, hex[j]); /* 0 is the mean's */
		labels[j] = xasprintf("%s = %s", r->params[q], qvals[j]);
		attrs = xasprintf("data-by=\"%zu\"", j);
		tip = xasprintf("mean final %s with %s", r->metric_names[m], labels[j]);
		if (k)
			pbx_svg_polyline(f, ch, xs, ys, k, "interaction", attrs, hex[j], tip);
		free(attrs);
		free(tip);
	}
	free(xs);
	free(ys);
	free(qvals);
}

static void param_chart(const struct pbx_report *r, size_t p, size_t m, FILE *f)
{
	static const char *const labels[] = { "mean ± std", "one task" };
	const char *colors[2];
	struct pbx_chart ch;
	const char **vals;
	size_t n = distinct(r, p, &vals), i;
	struct xpoint *xp = xcalloc(n + 1, sizeof(*xp));
	char c0[8], *title, *ylabel, *xlabel;
	long q;
	pbx_chart_init(&ch);
	param_xscale(r, p, vals, n, &ch, xp);
	for (i = 0; i < n; i++)
		xpoint_stats(r, p, m, vals[i], &xp[i]);
	param_yscale(r, p, m, xp, n, &ch);
	title = xasprintf("final %s by %s", r->metric_names[m], r->params[p]);
	ylabel = xasprintf("final %s", r->metric_names[m]);
	xlabel = xasprintf("%s%s", r->params[p], ch.x.kind == PBX_SCALE_LOG ? " (log scale)" : "");
	fputs("<figure>\n", f);
	pbx_chart_begin(f, &ch, "param-chart", title, xlabel, ylabel);
	param_points(r, p, m, vals, xp, n, &ch, f);
	param_bars(r, p, m, vals, xp, n, &ch, f);
	colors[0] = pbx_palette(0, 1, c0);
	colors[1] = "#6e7781";
	q = param_second(r, p);
	if (q >= 0) {
		size_t nq = r->param_nvalues[q], j;
		char(*hex)[8] = xcalloc(nq + 2, sizeof(*hex));
		char **qlabels = xcalloc(nq + 2, sizeof(char *));
		const char **all = xcalloc(nq + 2, sizeof(char *)),
			   **allc = xcalloc(nq + 2, sizeof(char *));
		param_interaction(r, p, (size_t)q, m, vals, xp, n, &ch, hex, qlabels, f);
		all[0] = labels[0];
		allc[0] = colors[0];
		all[1] = labels[1];
		allc[1] = colors[1];
		for (j = 0; j < nq; j++) {
			all[j + 2] = qlabels[j];
			allc[j + 2] = hex[j];
		}
		pbx_svg_legend(f, &ch, "", all, allc, nq + 2);
		for (j = 0; j < nq; j++)
			free(qlabels[j]);
		free(qlabels);
		free(hex);
		free(all);
		free(allc);
	} else {
		pbx_svg_legend(f, &ch, "", labels, colors, 2);
	}
	pbx_chart_end(f);
	fputs("</figure>\n", f);
	free(title);
	free(ylabel);
	free(xlabel);
	free(xp);
	free(vals);
}

/* Charted parameters: --x, else every one with more than one value
 * except repeat. */
static int param_charted(const struct pbx_report *r, size_t p)
{
	if (r->x_param >= 0)
		return (long)p == r->x_param;
	return r->param_nvalues[p] > 1 && strcmp(r->params[p], "repeat");
}

static void html_params(const struct pbx_report *r, FILE *f)
{
	size_t p, m, any = 0;
	for (p = 0; p < r->nparams; p++)
		any += param_charted(r, p);
	if (!any || !r->nmetrics || !r->ntasks)
		return;
	fputs("<section id=\"params\">\n<h2>Final values by parameter</h2>\n"
	      "<div class=\"charts\">\n",
	      f);
	for (p = 0; p < r->nparams; p++)
		for (m = 0; param_charted(r, p) && m < r->nmetrics; m++)
			param_chart(r, p, r->metrics[m], f);
	fputs("</div>\n</section>\n", f);
}

/* ----------------------------------------------------------------- table */

static void html_row(const struct pbx_grid *g, size_t row, int best, FILE *f)
{
	char buf[64];
	size_t c;
	fputs(best ? "<tr class=\"best\">" : "<tr>", f);
	for (c = 0; c < g->ncols; c++) {
		const struct pbx_cell *cell = pbx_grid_cell(g, row, c);
		if (g->numeric[c])
			fputs("<td class=\"num\">", f);
		else if (!strcmp(g->cols[c], "state") && cell->kind == PBX_CELL_TEXT)
			fprintf(f, "<td class=\"st-%s\">",
				strspn(cell->text, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") ==
						strlen(cell->text)
					? cell->text
					: "x");
		else
			fputs("<td>", f);
		esc(f, pbx_cell_str(cell, 0, buf, sizeof(buf)));
		fputs("</td>", f);
	}
	fputs("</tr>\n", f);
}

/* Whether table row `row` is a task of the best configuration (rows are
 * tasks when the table is not grouped). */
static int row_is_best(const struct pbx_report *r, const struct best *b, size_t row)
{
	char *key;
	int yes;
	if (!b->key || r->ngroup_by || row >= r->ntasks)
		return 0;
	key = config_key(r, &r->tasks[row]);
	yes = !strcmp(key, b->key);
	free(key);
	return yes;
}

/* The header in two rows, so that a wide table stays narrow: each
 * metric's name once over its statistics' columns ("final", "best"; or
 * "mean" ... "n"), "summary" over summary.json's keys; every other column
 * spans both rows. */
static void html_table_head(const struct pbx_grid *g, FILE *f)
{
	size_t c, k;
	fputs("<thead><tr>", f);
	for (c = 0; c < g->ncols; c = k) {
		for (k = c + 1; g->group[c] && k < g->ncols && g->group[k] &&
				!strcmp(g->group[k], g->group[c]);
		     k++)
			;
		if (!g->group[c]) {
			fputs(g->numeric[c] ? "<th rowspan=\"2\" class=\"num\">"
					    : "<th rowspan=\"2\">",
			      f);
			esc(f, g->cols[c]);
		} else {
			fprintf(f, "<th colspan=\"%zu\" class=\"metric\">", k - c);
			esc(f, g->group[c]);
		}
		fputs("</th>", f);
	}
	fputs("</tr>\n<tr class=\"stats\">", f);
	for (c = 0; c < g->ncols; c++)
		if (g->group[c]) {
			fputs("<th class=\"num\">", f);
			esc(f, g->sub[c]);
			fputs("</th>", f);
		}
	fputs("</tr></thead>\n", f);
}

static void html_table(const struct pbx_report *r, const struct best *b, FILE *f)
{
	struct pbx_grid g;
	size_t row;
	pbx_grid_build(r, &g);
	fprintf(f, "<section id=\"table\">\n<h2>%s</h2>\n<div class=\"scroll\"><table>\n",
		r->ngroup_by ? "Groups" : "Tasks");
	html_table_head(&g, f);
	fputs("<tbody>\n", f);
	for (row = 0; row < g.nrows; row++)
		html_row(&g, row, row_is_best(r, b, row), f);
	fputs("</tbody>\n</table></div>\n<p class=\"note\">final: the value at a task's last step; "
	      "best: the minimum for metrics named *loss* or *err*, the maximum otherwise; "
	      "runtime in seconds; std is the sample standard deviation.",
	      f);
	if (r->cost_shown)
		fputs(" node_hours: the task's time x its share of its node (its GPUs over the "
		      "node's, else the whole node); cost: an estimate, node_hours x the node's "
		      "price an hour.",
		      f);
	fputs("</p>\n</section>\n", f);
	pbx_grid_free(&g);
}

int pbx_render_html(const struct pbx_report *r, FILE *f)
{
	struct best b;
	best_find(r, &b);
	html_head(r, f);
	html_meta(r, f);
	html_best(r, &b, f);
	html_curves(r, f);
	html_params(r, f);
	html_table(r, &b, f);
	free(b.key);
	fputs("<footer class=\"note\">generated by pbx report</footer>\n</body>\n</html>\n", f);
	return ferror(f) ? -1 : 0;
}
