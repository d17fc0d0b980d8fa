/*
 * model_internal.h - helpers shared by the report model's files: what a
 * --where/--sort key names, and the grid of cells that every renderer
 * (text and HTML) prints.
 */
#ifndef PBX_RESULTS_MODEL_INTERNAL_H
#define PBX_RESULTS_MODEL_INTERNAL_H

#include "results/report.h"

enum pbx_key_kind {
	PBX_KEY_PARAM,
	PBX_KEY_METRIC,
	PBX_KEY_STATE,
	PBX_KEY_RUNTIME,
	PBX_KEY_TASK,
	PBX_KEY_NODE_HOURS,
	PBX_KEY_COST
};

struct pbx_key {
	enum pbx_key_kind kind;
	size_t i; /* parameter or metric_names index */
};

/* Parameters first, then "state", "runtime", "task", "node_hours", "cost",
 * then metrics. */
int pbx_report_key(const struct pbx_report *r, const char *name, struct pbx_key *k);
/* A metric whose best value is its minimum ("loss", "err" in the name). */
int pbx_metric_lower_is_better(const char *name);

/* Frees what a task owns (not the struct itself). */
void pbx_report_task_free(const struct pbx_report *r, struct pbx_report_task *t);

/* query.c: filters, sorts and groups r->tasks as the options say; -1 with
 * a usage error. */
int pbx_report_where(struct pbx_report *r, const char *const *exprs, size_t n, struct pbx_err *err);
int pbx_report_sort(struct pbx_report *r, const char *spec, struct pbx_err *err);
void pbx_report_group(struct pbx_report *r);

enum pbx_cell_kind {
	PBX_CELL_NONE,  /* unknown / missing */
	PBX_CELL_TEXT,  /* a string */
	PBX_CELL_PARAM, /* a parameter value: a number in JSON when it parses as one */
	PBX_CELL_INT,
	PBX_CELL_REAL,
};

struct pbx_cell {
	enum pbx_cell_kind kind;
	const char *text; /* TEXT, PARAM: borrowed from the report */
	int64_t i;
	double d;
};

/* Rows x columns of cells: one row per task, or per group when grouped.
 * Column names are owned by the grid. */
struct pbx_grid {
	size_t ncols, nrows;
	char **cols;
	int *numeric;           /* column holds only numbers (right-aligned) */
	const char **group;     /* the heading a column sits under (HTML): a
				   metric's name, or "summary"; NULL: none */
	const char **sub;       /* its own heading under it ("final", a key) */
	struct pbx_cell *cells; /* row-major */
};

void pbx_grid_build(const struct pbx_report *r, struct pbx_grid *g);
void pbx_grid_free(struct pbx_grid *g);
static inline const struct pbx_cell *pbx_grid_cell(const struct pbx_grid *g, size_t row, size_t col)
{
	return &g->cells[row * g->ncols + col];
}

/* Text of a cell: exact (CSV, JSON) or short (table, Markdown, HTML);
 * "" for NONE.  Returns the report's own string for TEXT and PARAM, else
 * buf (at least 32 bytes). */
const char *pbx_cell_str(const struct pbx_cell *c, int exact, char *buf, size_t size);

/* Rendering, one function per format. */
int pbx_render_table(const struct pbx_report *r, FILE *f);
int pbx_render_csv(const struct pbx_report *r, FILE *f);
int pbx_render_md(const struct pbx_report *r, FILE *f);
int pbx_render_json(const struct pbx_report *r, FILE *f);
int pbx_render_html(const struct pbx_report *r, FILE *f);

#endif
