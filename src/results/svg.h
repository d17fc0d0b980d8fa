/*
 * svg.h - chart primitives for the HTML report, printed as inline SVG:
 * scales (linear with "nice" ticks, log10 with decade ticks, categorical),
 * a chart frame with gridlines, tick labels and axis labels, polylines,
 * error bars, legends, a colour-blind-safe palette and XML escaping.
 *
 * Nothing here allocates; strings are borrowed for the call only.
 */
#ifndef PBX_RESULTS_SVG_H
#define PBX_RESULTS_SVG_H

#include <stddef.h>
#include <stdio.h>

#define PBX_SCALE_MAX_TICKS 24

enum pbx_scale_kind { PBX_SCALE_LINEAR, PBX_SCALE_LOG, PBX_SCALE_CAT };

struct pbx_scale {
	enum pbx_scale_kind kind;
	double lo, hi; /* domain (LOG: the values, powers of ten; CAT: 0..n) */
	double p0, p1; /* pixel range */
	size_t nticks;
	double ticks[PBX_SCALE_MAX_TICKS];
	double step; /* LINEAR: tick spacing */
};

/* A linear scale covering [lo, hi] widened by `pad` (a fraction of the
 * range) on each side, with about `target` ticks at 1, 2 or 5 times a
 * power of ten. */
void pbx_scale_linear(struct pbx_scale *s, double lo, double hi, double pad, double p0, double p1,
		      size_t target);
/* A log10 scale from the decade below lo to the decade above hi (lo > 0). */
void pbx_scale_log(struct pbx_scale *s, double lo, double hi, double p0, double p1);
/* n categories, value i at the middle of band i. */
void pbx_scale_cat(struct pbx_scale *s, size_t n, double p0, double p1);
double pbx_scale_map(const struct pbx_scale *s, double v);
/* The label of tick v. */
void pbx_scale_label(const struct pbx_scale *s, double v, char *buf, size_t size);
/* Whether values spanning [lo, hi] want a log scale: all > 0, > 2 decades. */
int pbx_scale_wants_log(double lo, double hi);

struct pbx_chart {
	double width, height;            /* the viewBox */
	double left, right, top, bottom; /* the plot area */
	struct pbx_scale x, y;
	const char *const *xcats; /* CAT x: the labels */
};

/* A chart of the standard size: plot area on the left, legend space right. */
void pbx_chart_init(struct pbx_chart *c);
/* <svg> with a <title>, the heading, gridlines, ticks and axis labels. */
void pbx_chart_begin(FILE *f, const struct pbx_chart *c, const char *cls, const char *title,
		     const char *xlabel, const char *ylabel);
void pbx_chart_end(FILE *f);
/* A polyline of n points (data coordinates) with class `cls`, an extra
 * attribute string `attrs` (may be ""), a colour and a <title> tooltip. */
void pbx_svg_polyline(FILE *f, const struct pbx_chart *c, const double *x, const double *y,
		      size_t n, const char *cls, const char *attrs, const char *color,
		      const char *tooltip);
/* A filled band between lo[i] and hi[i] at x[i] (i < n, x ascending):
 * <polygon class="band">, in `color`, see-through. */
void pbx_svg_band(FILE *f, const struct pbx_chart *c, const double *x, const double *lo,
		  const double *hi, size_t n, const char *color, const char *attrs);
/* A dot at (x, y) with a tooltip; `hollow` draws a ring. */
void pbx_svg_dot(FILE *f, const struct pbx_chart *c, double x, double y, double r,
		 const char *color, int hollow, const char *tooltip);
/* <g class="errorbar" data-x="LABEL">: mean +- std (std < 0: no bar). */
void pbx_svg_errorbar(FILE *f, const struct pbx_chart *c, double x, double mean, double std,
		      const char *color, const char *xlabel, const char *tooltip);
/* The legend right of the plot area: a title (may be "") and a swatch and
 * a label per entry. */
void pbx_svg_legend(FILE *f, const struct pbx_chart *c, const char *title,
		    const char *const *labels, const char *const *colors, size_t n);

/* Colour i of n: Okabe-Ito for n <= 8, else viridis sampled evenly.
 * Writes "#rrggbb" into buf[8] and returns it. */
const char *pbx_palette(size_t i, size_t n, char buf[8]);
/* Writes s with &, <, >, " and ' escaped and control characters dropped. */
void pbx_xml_escape(FILE *f, const char *s);

#endif
