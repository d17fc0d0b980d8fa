/*
 * svg.c - scales, ticks and SVG drawing for the HTML report (see svg.h).
 * Nice ticks: the tick spacing is 1, 2 or 5 times a power of ten, chosen
 * so that about `target` ticks cover the padded range.
 */
#include "results/svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A nice number near x: rounded (1, 2, 5, 10) or its ceiling. */
static double nice_num(double x, int round_it)
{
	double e = floor(log10(x)), f = x / pow(10, e), nf;
	if (round_it)
		nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
	else
		nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
	return nf * pow(10, e);
}

void pbx_scale_linear(struct pbx_scale *s, double lo, double hi, double pad, double p0, double p1,
		      size_t target)
{
	double range, v, w;
	if (!(hi > lo)) {
		w = lo == 0 ? 1 : fabs(lo) * 0.1;
		lo -= w;
		hi += w;
	}
	w = (hi - lo) * pad;
	/* the padding never takes an axis past the data's sign: no loss
	 * below 0, no negative learning rate */
	lo = lo >= 0 && lo - w < 0 ? 0 : lo - w;
	hi = hi <= 0 && hi + w > 0 ? 0 : hi + w;
	range = nice_num(hi - lo, 0);
	s->kind = PBX_SCALE_LINEAR;
	s->step = nice_num(range / (double)(target > 1 ? target - 1 : 1), 1);
	s->lo = floor(lo / s->step) * s->step;
	s->hi = ceil(hi / s->step) * s->step;
	s->p0 = p0;
	s->p1 = p1;
	s->nticks = 0;
	for (v = s->lo; v <= s->hi + s->step * 0.5 && s->nticks < PBX_SCALE_MAX_TICKS; v += s->step)
		s->ticks[s->nticks++] = fabs(v) < s->step * 1e-9 ? 0 : v;
}

void pbx_scale_log(struct pbx_scale *s, double lo, double hi, double p0, double p1)
{
	double e0 = floor(log10(lo)), e1 = ceil(log10(hi)), e, every;
	if (e1 <= e0)
		e1 = e0 + 1;
	every = ceil((e1 - e0 + 1) / PBX_SCALE_MAX_TICKS);
	s->kind = PBX_SCALE_LOG;
	s->lo = pow(10, e0);
	s->hi = pow(10, e1);
	s->p0 = p0;
	s->p1 = p1;
	s->nticks = 0;
	for (e = e0; e <= e1 && s->nticks < PBX_SCALE_MAX_TICKS; e += every)
		s->ticks[s->nticks++] = pow(10, e);
}

void pbx_scale_cat(struct pbx_scale *s, size_t n, double p0, double p1)
{
	size_t i;
	s->kind = PBX_SCALE_CAT;
	s->lo = 0;
	s->hi = (double)n;
	s->p0 = p0;
	s->p1 = p1;
	s->nticks = 0;
	for (i = 0; i < n && i < PBX_SCALE_MAX_TICKS; i++)
		s->ticks[s->nticks++] = (double)i;
}

double pbx_scale_map(const struct pbx_scale *s, double v)
{
	double t;
	if (s->kind == PBX_SCALE_LOG)
		t = (log10(v) - log10(s->lo)) / (log10(s->hi) - log10(s->lo));
	else if (s->kind == PBX_SCALE_CAT)
		t = (v + 0.5) / (s->hi > 0 ? s->hi : 1);
	else
		t = (v - s->lo) / (s->hi - s->lo);
	return s->p0 + t * (s->p1 - s->p0);
}

void pbx_scale_label(const struct pbx_scale *s, double v, char *buf, size_t size)
{
	int decimals;
	if (s->kind != PBX_SCALE_LINEAR || v == 0 || fabs(v) >= 1e6 || fabs(v) < 1e-4) {
		snprintf(buf, size, "%g", v);
		return;
	}
	decimals = (int)-floor(log10(s->step) + 1e-9);
	snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 0, v);
}

int pbx_scale_wants_log(double lo, double hi)
{
	return lo > 0 && hi / lo > 100;
}

/* ---------------------------------------------------------------- chart */

void pbx_chart_init(struct pbx_chart *c)
{
	memset(c, 0, sizeof(*c));
	c->width = 640;
	c->height = 380;
	c->left = 74;
	c->right = 468;
	c->top = 44;
	c->bottom = 316;
}

void pbx_xml_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '&')
			fputs("&amp;", f);
		else if (ch == '<')
			fputs("&lt;", f);
		else if (ch == '>')
			fputs("&gt;", f);
		else if (ch == '"')
			fputs("&quot;", f);
		else if (ch == '\'')
			fputs("&#39;", f);
		else if (ch >= 0x20 && ch != 0x7f)
			fputc(ch, f);
		else if (ch == '\n' || ch == '\t')
			fputc(' ', f);
	}
}

static void text_at(FILE *f, double x, double y, const char *cls, const char *anchor, const char *s)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"%s\" text-anchor=\"%s\">", x, y, cls,
		anchor);
	pbx_xml_escape(f, s);
	fputs("</text>\n", f);
}

static void chart_xticks(FILE *f, const struct pbx_chart *c)
{
	char label[64];
	size_t i;
	for (i = 0; i < c->x.nticks; i++) {
		double px = pbx_scale_map(&c->x, c->x.ticks[i]);
		if (c->x.kind != PBX_SCALE_CAT)
			fprintf(f,
				"<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
				px, c->top, px, c->bottom);
		fprintf(f,
			"<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
			px, c->bottom, px, c->bottom + 5);
		if (c->x.kind == PBX_SCALE_CAT)
			snprintf(label, sizeof(label), "%.20s", c->xcats[i]);
		else
			pbx_scale_label(&c->x, c->x.ticks[i], label, sizeof(label));
		text_at(f, px, c->bottom + 19, "ticklabel", "middle", label);
	}
}

static void chart_yticks(FILE *f, const struct pbx_chart *c)
{
	char label[64];
	size_t i;
	for (i = 0; i < c->y.nticks; i++) {
		double py = pbx_scale_map(&c->y, c->y.ticks[i]);
		fprintf(f,
			"<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
			c->left, py, c->right, py);
		fprintf(f,
			"<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
			c->left - 5, py, c->left, py);
		pbx_scale_label(&c->y, c->y.ticks[i], label, sizeof(label));
		text_at(f, c->left - 8, py + 4, "ticklabel", "end", label);
	}
}

void pbx_chart_begin(FILE *f, const struct pbx_chart *c, const char *cls, const char *title,
		     const char *xlabel, const char *ylabel)
{
	fprintf(f,
		"<svg class=\"%s\" viewBox=\"0 0 %.0f %.0f\" "
		"role=\"img\">\n<title>",
		cls, c->width, c->height);
	pbx_xml_escape(f, title);
	fputs("</title>\n", f);
	text_at(f, c->left, 24, "charttitle", "start", title);
	chart_yticks(f, c);
	chart_xticks(f, c);
	fprintf(f, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
		c->left, c->top, c->right - c->left, c->bottom - c->top);
	text_at(f, (c->left + c->right) / 2, c->height - 16, "axislabel", "middle", xlabel);
	fprintf(f,
		"<text class=\"axislabel\" text-anchor=\"middle\" "
		"transform=\"translate(18 %.1f) rotate(-90)\">",
		(c->top + c->bottom) / 2);
	pbx_xml_escape(f, ylabel);
	fputs("</text>\n", f);
}

void pbx_chart_end(FILE *f)
{
	fputs("</svg>\n", f);
}

static void tooltip(FILE *f, const char *s)
{
	fputs("<title>", f);
	pbx_xml_escape(f, s);
	fputs("</title>", f);
}

void pbx_svg_polyline(FILE *f, const struct pbx_chart *c, const double *x, const double *y,
		      size_t n, const char *cls, const char *attrs, const char *color,
		      const char *tip)
{
	size_t i;
	fprintf(f, "<polyline class=\"%s\" %s stroke=\"%s\" points=\"", cls, attrs, color);
	for (i = 0; i < n; i++)
		fprintf(f, "%s%.1f,%.1f", i ? " " : "", pbx_scale_map(&c->x, x[i]),
			pbx_scale_map(&c->y, y[i]));
	fputs("\">", f);
	tooltip(f, tip);
	fputs("</polyline>\n", f);
}

void pbx_svg_dot(FILE *f, const struct pbx_chart *c, double x, double y, double r,
		 const char *color, int hollow, const char *tip)
{
	fprintf(f, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" %s=\"%s\">",
		hollow ? "point" : "dot", pbx_scale_map(&c->x, x), pbx_scale_map(&c->y, y), r,
		hollow ? "stroke" : "fill", color);
	tooltip(f, tip);
	fputs("</circle>\n", f);
}

void pbx_svg_errorbar(FILE *f, const struct pbx_chart *c, double x, double mean, double std,
		      const char *color, const char *xlabel, const char *tip)
{
	double px = pbx_scale_map(&c->x, x), py = pbx_scale_map(&c->y, mean);
	fputs("<g class=\"errorbar\" data-x=\"", f);
	pbx_xml_escape(f, xlabel);
	fprintf(f, "\" stroke=\"%s\">", color);
	tooltip(f, tip);
	if (std > 0) {
		double y0 = pbx_scale_map(&c->y, mean - std), y1 = pbx_scale_map(&c->y, mean + std);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", px, y0, px,
			y1);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", px - 6, y0,
			px + 6, y0);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", px - 6, y1,
			px + 6, y1);
	}
	fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/></g>\n", px, py, color);
}

#define LEGEND_MAX 14

void pbx_svg_legend(FILE *f, const struct pbx_chart *c, const char *title,
		    const char *const *labels, const char *const *colors, size_t n)
{
	double x = c->right + 18, y = c->top + 4;
	char more[32];
	size_t i;
	if (*title)
		text_at(f, x, y + 8, "legendtitle", "start", title);
	else
		y -= 20;
	for (i = 0; i < n && i < LEGEND_MAX; i++) {
		double ly = y + 28 + 20 * (double)i;
		fprintf(f,
			"<line class=\"swatch\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			"stroke=\"%s\"/>\n",
			x, ly - 4, x + 22, ly - 4, colors[i]);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"legend\">", x + 30, ly);
		pbx_xml_escape(f, labels[i]);
		fputs("</text>\n", f);
	}
	if (n > LEGEND_MAX) {
		snprintf(more, sizeof(more), "... %zu more", n - LEGEND_MAX);
		text_at(f, x + 30, y + 28 + 20 * LEGEND_MAX, "legend", "start", more);
	}
}

/* -------------------------------------------------------------- colours */

static const char *const okabe_ito[] = { "#0072B2", "#E69F00", "#009E73", "#D55E00",
					 "#CC79A7", "#56B4E9", "#000000", "#F0E442" };
static const unsigned char viridis[][3] = {
	{ 68, 1, 84 }, { 59, 82, 139 }, { 33, 145, 140 }, { 94, 201, 98 }, { 253, 231, 37 }
};

const char *pbx_palette(size_t i, size_t n, char buf[8])
{
	double t, k;
	size_t a;
	int ch[3], j;
	if (n <= 8) {
		snprintf(buf, 8, "%s", okabe_ito[i % 8]);
		return buf;
	}
	t = (double)i / (double)(n - 1) * 4;
	a = t >= 4 ? 3 : (size_t)t;
	k = t - (double)a;
	for (j = 0; j < 3; j++)
		ch[j] = (int)lround(viridis[a][j] + k * (viridis[a + 1][j] - viridis[a][j]));
	snprintf(buf, 8, "#%02x%02x%02x", ch[0] & 0xff, ch[1] & 0xff, ch[2] & 0xff);
	return buf;
}

void pbx_svg_band(FILE *f, const struct pbx_chart *c, const double *x, const double *lo,
		  const double *hi, size_t n, const char *color, const char *attrs)
{
	size_t i;
	if (n < 2)
		return;
	fprintf(f, "<polygon class=\"band\" %s fill=\"%s\" points=\"", attrs ? attrs : "", color);
	for (i = 0; i < n; i++)
		fprintf(f, "%s%.1f,%.1f", i ? " " : "", pbx_scale_map(&c->x, x[i]),
			pbx_scale_map(&c->y, hi[i]));
	for (i = n; i-- > 0;)
		fprintf(f, " %.1f,%.1f", pbx_scale_map(&c->x, x[i]), pbx_scale_map(&c->y, lo[i]));
	fputs("\"/>\n", f);
}
