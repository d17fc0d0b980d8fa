/*
 * disagree.c - the pooled report's flag on points whose publishers
 * disagree beyond their spread (`pbx report --pool -g ...`).
 *
 * In one group (a sweep point pooled over publishers) and for one metric,
 * publishers a and b disagree when
 *
 *     |mean_a - mean_b| > 3 * s * sqrt(1/n_a + 1/n_b)
 *
 * over their tasks' non-null final values, where s is the group's pooled
 * within-publisher standard deviation, sqrt(sum (n_p - 1) s_p^2 /
 * sum (n_p - 1)) over the publishers with two values or more.  With no such
 * publisher the spread is unknown and nobody is compared; with s = 0 (every
 * repeat alike) any difference beyond rounding counts.  A group's
 * `disagree` names the metrics flagged, comma-separated.
 */
#include "pool/pool_internal.h"
#include "util/buf.h"
#include "util/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int pool_sides_disagree(const struct pool_side *s, size_t ns)
{
	double ss = 0, df = 0, sd;
	size_t a, b;
	for (a = 0; a < ns; a++)
		if (s[a].n > 1) {
			ss += s[a].m2;
			df += (double)(s[a].n - 1);
		}
	if (df == 0)
		return 0; /* the spread is unknown */
	sd = sqrt(ss / df);
	for (a = 0; a < ns; a++)
		for (b = a + 1; b < ns; b++) {
			double d = fabs(s[a].mean - s[b].mean);
			double tol = 1e-9 * fmax(1.0, fmax(fabs(s[a].mean), fabs(s[b].mean)));
			if (d > tol &&
			    d > 3 * sd * sqrt(1.0 / (double)s[a].n + 1.0 / (double)s[b].n))
				return 1;
		}
	return 0;
}

/* Adds value v to side s (Welford's running mean and squared deviations). */
static void side_add(struct pool_side *s, double v)
{
	double d = v - s->mean;
	s->n++;
	s->mean += d / (double)s->n;
	s->m2 += d * (v - s->mean);
}

/* The sides of group g for chosen metric m (one per publisher) into s,
 * which holds g->ntasks entries; how many. */
static size_t sides_of(const struct pbx_report *r, const struct pbx_report_group *g, size_t m,
		       size_t pub_param, struct pool_side *s)
{
	size_t k, j, ns = 0;
	for (k = 0; k < g->ntasks; k++) {
		const struct pbx_report_task *t = &r->tasks[g->tasks[k]];
		const struct pbx_report_stat *st = &t->stats[r->metrics[m]];
		const char *who = t->values[pub_param];
		if (!st->has_final || !isfinite(st->final))
			continue;
		for (j = 0; j < ns && strcmp(s[j].publisher, who) != 0; j++)
			;
		if (j == ns) {
			memset(&s[ns], 0, sizeof(s[ns]));
			s[ns++].publisher = who;
		}
		side_add(&s[j], st->final);
	}
	return ns;
}

void pool_mark_disagreements(struct pbx_report *r)
{
	size_t g, m, p;
	for (p = 0; p < r->nparams && strcmp(r->params[p], "publisher") != 0; p++)
		;
	if (p == r->nparams || !r->ngroup_by)
		return;
	r->disagree_shown = 1;
	for (g = 0; g < r->ngroups; g++) {
		struct pbx_report_group *grp = &r->groups[g];
		struct pool_side *s = xcalloc(grp->ntasks + 1, sizeof(*s));
		struct pbx_buf names = PBX_BUF_INIT;
		for (m = 0; m < r->nmetrics; m++)
			if (pool_sides_disagree(s, sides_of(r, grp, m, p, s)))
				pbx_buf_addf(&names, "%s%s", names.len ? "," : "",
					     r->metric_names[r->metrics[m]]);
		grp->disagree = names.len ? pbx_buf_detach(&names, NULL) : NULL;
		pbx_buf_release(&names);
		free(s);
	}
}
