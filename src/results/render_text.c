/*
 * render_text.c - the report's tabular formats: an aligned terminal table,
 * CSV (RFC 4180 quoting, LF line ends), Markdown (pipe table) and JSON
 * (jansson).  All print the grid of grid.c.
 */
#include "results/model_internal.h"
#include "results/num.h"

#include "util/xalloc.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CELL_BUF 64

static int done(FILE *f)
{
	return ferror(f) ? -1 : 0;
}

/* ----------------------------------------------------------------- table */

/* The terminal table cuts longer cells to this many bytes (on a UTF-8
 * character boundary) and ends them with "..."; CSV, JSON, Markdown and
 * HTML keep every value whole. */
#define TABLE_CELL_MAX 40

/* A copy of s fit for a table cell: control characters shown as '?', cut
 * to TABLE_CELL_MAX bytes.  Caller frees. */
static char *table_text(const char *s)
{
	size_t len = strlen(s), keep = len;
	char *out, *p;
	if (len > TABLE_CELL_MAX) {
		keep = TABLE_CELL_MAX - 3;
		while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80)
			keep--; /* not inside a UTF-8 sequence */
	}
	out = xmalloc(keep + 4);
	memcpy(out, s, keep);
	strcpy(out + keep, keep < len ? "..." : "");
	for (p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return out;
}

/* Table cells: missing values as '-'. */
static char *table_cell(const struct pbx_cell *c)
{
	char buf[CELL_BUF];
	return table_text(c->kind == PBX_CELL_NONE ? "-" : pbx_cell_str(c, 0, buf, sizeof(buf)));
}

static void table_line(FILE *f, const struct pbx_grid *g, char **cells, const size_t *w)
{
	size_t c;
	for (c = 0; c < g->ncols; c++) {
		int pad = (int)(w[c] - strlen(cells[c]));
		if (g->numeric[c])
			fprintf(f, "%*s%s", pad, "", cells[c]);
		else
			fprintf(f, "%s%*s", cells[c], c + 1 < g->ncols ? pad : 0, "");
		fputs(c + 1 < g->ncols ? "  " : "\n", f);
	}
}

static void table_print(FILE *f, const struct pbx_grid *g, char **cells)
{
	size_t *w = xcalloc(g->ncols + 1, sizeof(size_t)), r, c;
	for (r = 0; r <= g->nrows; r++)
		for (c = 0; c < g->ncols; c++)
			if (strlen(cells[r * g->ncols + c]) > w[c])
				w[c] = strlen(cells[r * g->ncols + c]);
	for (r = 0; r <= g->nrows; r++)
		table_line(f, g, &cells[r * g->ncols], w);
	free(w);
}

int pbx_render_table(const struct pbx_report *r, FILE *f)
{
	struct pbx_grid g;
	size_t i, n;
	char **cells;
	pbx_grid_build(r, &g);
	n = (g.nrows + 1) * g.ncols;
	cells = xcalloc(n + 1, sizeof(char *));
	for (i = 0; i < g.ncols; i++)
		cells[i] = table_text(g.cols[i]);
	for (i = g.ncols; i < n; i++)
		cells[i] = table_cell(&g.cells[i - g.ncols]);
	table_print(f, &g, cells);
	for (i = 0; i < n; i++)
		free(cells[i]);
	free(cells);
	pbx_grid_free(&g);
	return done(f);
}

/* ------------------------------------------------------------------- CSV */

static void csv_field(FILE *f, const char *s)
{
	if (!s[strcspn(s, ",\"\r\n")]) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

int pbx_render_csv(const struct pbx_report *r, FILE *f)
{
	struct pbx_grid g;
	char buf[CELL_BUF];
	size_t row, c;
	pbx_grid_build(r, &g);
	for (c = 0; c < g.ncols; c++) {
		csv_field(f, g.cols[c]);
		fputc(c + 1 < g.ncols ? ',' : '\n', f);
	}
	for (row = 0; row < g.nrows; row++)
		for (c = 0; c < g.ncols; c++) {
			csv_field(f, pbx_cell_str(pbx_grid_cell(&g, row, c), 1, buf, sizeof(buf)));
			fputc(c + 1 < g.ncols ? ',' : '\n', f);
		}
	pbx_grid_free(&g);
	return done(f);
}

/* -------------------------------------------------------------- Markdown */

static void md_field(FILE *f, const char *s)
{
	fputs("| ", f);
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", f);
		else if (*s == '\n' || *s == '\r')
			fputc(' ', f);
		else
			fputc(*s, f);
	}
	fputc(' ', f);
}

int pbx_render_md(const struct pbx_report *r, FILE *f)
{
	struct pbx_grid g;
	char buf[CELL_BUF];
	size_t row, c;
	pbx_grid_build(r, &g);
	for (c = 0; c < g.ncols; c++)
		md_field(f, g.cols[c]);
	fputs("|\n", f);
	for (c = 0; c < g.ncols; c++)
		fputs(g.numeric[c] ? "| ---: " : "| --- ", f);
	fputs("|\n", f);
	for (row = 0; row < g.nrows; row++) {
		for (c = 0; c < g.ncols; c++)
			md_field(f, pbx_cell_str(pbx_grid_cell(&g, row, c), 0, buf, sizeof(buf)));
		fputs("|\n", f);
	}
	pbx_grid_free(&g);
	return done(f);
}

/* ------------------------------------------------------------------ JSON */

/* jansson escapes the strings; numbers are written here so that each is
 * the shortest text that reads back to the same double (jansson's
 * fixed precision would print 0.81 as 0.81000000000000005). */
static void json_str(FILE *f, const char *s)
{
	json_t *j = json_string(s);
	char *text = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	fputs(text ? text : "\"\\ufffd\"", f);
	free(text);
	json_decref(j);
}

static void json_real_out(FILE *f, double d)
{
	char buf[CELL_BUF];
	if (!isfinite(d)) {
		fputs("null", f);
		return;
	}
	pbx_num_exact(d, buf, sizeof(buf));
	fputs(buf, f);
}

/* A parameter value: a JSON number when the text is one. */
static void json_param(FILE *f, const char *s)
{
	double d;
	char *end;
	long long ll;
	if (!pbx_num_parse(s, &d)) {
		json_str(f, s);
		return;
	}
	if (!s[strspn(s, "-0123456789")]) {
		ll = strtoll(s, &end, 10);
		if (!*end && (double)ll == d) {
			fprintf(f, "%lld", ll);
			return;
		}
	}
	json_real_out(f, d);
}

static void json_cell(FILE *f, const struct pbx_cell *c)
{
	switch (c->kind) {
	case PBX_CELL_TEXT:
		json_str(f, c->text);
		return;
	case PBX_CELL_PARAM:
		json_param(f, c->text);
		return;
	case PBX_CELL_INT:
		fprintf(f, "%lld", (long long)c->i);
		return;
	case PBX_CELL_REAL:
		json_real_out(f, c->d);
		return;
	case PBX_CELL_NONE:
		break;
	}
	fputs("null", f);
}

static void json_names(FILE *f, const char *key, char *const *names, const size_t *idx, size_t n)
{
	size_t i;
	fprintf(f, "  \"%s\": [", key);
	for (i = 0; i < n; i++) {
		fputs(i ? ", " : "", f);
		json_str(f, names[idx ? idx[i] : i]);
	}
	fputs("],\n", f);
}

static void json_field(FILE *f, const char *key, const char *value)
{
	fprintf(f, "  \"%s\": ", key);
	json_str(f, value);
	fputs(",\n", f);
}

/* The experiment's node_hours, cost (in currency units, exact; null when
 * unknown), cost_nanos (the same in 1e-9 units) and currency. */
static void json_cost(FILE *f, const struct pbx_report *r)
{
	fputs("  \"node_hours\": ", f);
	json_real_out(f, r->node_hours);
	fputs(",\n  \"cost\": ", f);
	if (r->cost >= 0)
		json_real_out(f, (double)r->cost / 1e9);
	else
		fputs("null", f);
	if (r->cost >= 0)
		fprintf(f, ",\n  \"cost_nanos\": %lld", (long long)r->cost);
	else
		fputs(",\n  \"cost_nanos\": null", f);
	fputs(",\n  \"currency\": ", f);
	if (r->currency[0])
		json_str(f, r->currency);
	else
		fputs("null", f);
	fputs(",\n", f);
}

/* "environment": null, or {"state" (READY, FAILED or null), "key" or
 * "reason", and from a harvested task's environment.txt "record": its
 * lines (key, Python or image, the lock)}. */
static void json_environment(FILE *f, const struct pbx_report *r)
{
	const char *st = r->environment, *p;
	int first = 1;
	fputs("  \"environment\": ", f);
	if (!st && !r->environment_txt) {
		fputs("null,\n", f);
		return;
	}
	if (st && !strncmp(st, "READY ", 6)) {
		fputs("{\"state\": \"READY\", \"key\": ", f);
		json_str(f, st + 6);
	} else if (st && !strncmp(st, "FAILED ", 7)) {
		fputs("{\"state\": \"FAILED\", \"reason\": ", f);
		json_str(f, st + 7);
	} else {
		fputs("{\"state\": null", f);
	}
	fputs(", \"record\": [", f);
	for (p = r->environment_txt; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		char *line = xstrndup(p, l);
		if (l) {
			fputs(first ? "" : ", ", f);
			json_str(f, line);
			first = 0;
		}
		free(line);
		p = nl ? nl + 1 : p + l;
	}
	fputs("]},\n", f);
}

int pbx_render_json(const struct pbx_report *r, FILE *f)
{
	struct pbx_grid g;
	size_t row, c;
	pbx_grid_build(r, &g);
	fputs("{\n", f);
	json_field(f, "package", r->short_id);
	json_field(f, "id", r->package_id);
	json_field(f, "name", r->name);
	json_field(f, "cluster", r->cluster);
	fprintf(f, "  \"tasks\": %zu,\n  \"tasks_total\": %zu,\n", r->ntasks, r->ntasks_total);
	if (r->cost_shown)
		json_cost(f, r);
	json_environment(f, r);
	json_names(f, "metrics", r->metric_names, r->metrics, r->nmetrics);
	json_names(f, "group_by", r->params, r->group_by, r->ngroup_by);
	json_names(f, "columns", g.cols, NULL, g.ncols);
	fputs("  \"rows\": [", f);
	for (row = 0; row < g.nrows; row++) {
		fputs(row ? ",\n    {" : "\n    {", f);
		for (c = 0; c < g.ncols; c++) {
			fputs(c ? ", " : "", f);
			json_str(f, g.cols[c]);
			fputs(": ", f);
			json_cell(f, pbx_grid_cell(&g, row, c));
		}
		fputs("}", f);
	}
	fputs(g.nrows ? "\n  ]\n}\n" : "]\n}\n", f);
	pbx_grid_free(&g);
	return done(f);
}

/* ---------------------------------------------------------------- format */

int pbx_report_format_parse(const char *s, enum pbx_report_format *f)
{
	static const struct {
		const char *name;
		enum pbx_report_format f;
	} names[] = { { "table", PBX_REPORT_TABLE }, { "csv", PBX_REPORT_CSV },
		      { "json", PBX_REPORT_JSON },   { "md", PBX_REPORT_MD },
		      { "markdown", PBX_REPORT_MD }, { "html", PBX_REPORT_HTML } };
	size_t i;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i].name)) {
			*f = names[i].f;
			return 0;
		}
	return -1;
}

int pbx_report_render(const struct pbx_report *r, enum pbx_report_format f, FILE *out,
		      struct pbx_err *err)
{
	static int (*const render[])(const struct pbx_report *,
				     FILE *) = { pbx_render_table, pbx_render_csv, pbx_render_json,
						 pbx_render_md, pbx_render_html };
	if (render[f](r, out) < 0 || fflush(out) != 0)
		return pbx_err_set(err, "cannot write the report");
	return 0;
}
