/*
 * sweep.c - expanding `sweep` into points.
 *
 * The sweep is a product of factors, each a small table (names x rows):
 * every key of `grid` is its own factor (one name, one row per value);
 * `zip` is one factor (its keys, one row per position); `list` is one
 * factor (the keys of its first entry, one row per entry); `random` is one
 * factor (its params, one row per sample); repeats > 1 adds a last factor
 * "repeat" with rows "0".."R-1".  Points enumerate the product with the
 * first factor varying slowest, so point i's row in each factor comes from
 * writing i in mixed radix.  Absent factors contribute nothing (one empty
 * row), so an experiment without a sweep has exactly one point.
 *
 * Every value string is copied once into the experiment's pool and shared
 * by all points; all points' params live in one block.
 */
#include "experiment/experiment_internal.h"
#include "util/xalloc.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pbx_exp_factor {
	size_t nnames, nrows;
	char **names; /* pool strings */
	char **vals;  /* nrows * nnames, row-major, pool */
};

struct pbx_exp_sweep {
	struct pbx_exp_priv *x;
	struct pbx_exp_factor *f;
	size_t nf;
	/* every name so far with its node, for duplicate checks */
	const struct pbx_ynode **name_nodes;
	size_t nnames;
	struct pbx_err *err;
};

/* ------------------------------------------------------------------ */
/* Factors and names                                                   */

static struct pbx_exp_factor *sweep_factor(struct pbx_exp_sweep *s, size_t nnames, size_t nrows)
{
	struct pbx_exp_factor *f;
	s->f = xreallocarray(s->f, s->nf + 1, sizeof(*s->f));
	f = &s->f[s->nf++];
	f->nnames = nnames;
	f->nrows = nrows;
	f->names = xcalloc(nnames ? nnames : 1, sizeof(char *));
	f->vals = xreallocarray(NULL, nnames * nrows > 0 ? nnames * nrows : 1, sizeof(char *));
	return f;
}

static void sweep_release(struct pbx_exp_sweep *s)
{
	size_t i;
	for (i = 0; i < s->nf; i++) {
		free(s->f[i].names);
		free(s->f[i].vals);
	}
	free(s->f);
	free(s->name_nodes);
}

/* Checks a parameter name (a mapping key) and returns its pool copy. */
static char *sweep_name(struct pbx_exp_sweep *s, const struct pbx_ynode *key)
{
	size_t i;
	if (!pbx_exp_param_name_ok(key->value, key->len)) {
		pbx_ynode_error(key, s->err, "parameter names must match [a-z_][a-z0-9_]{0,31}");
		return NULL;
	}
	if (!strcmp(key->value, "repeat")) {
		pbx_ynode_error(key, s->err,
				"the parameter name 'repeat' is reserved "
				"(use sweep.repeats)");
		return NULL;
	}
	for (i = 0; i < s->nnames; i++) {
		if (strcmp(s->name_nodes[i]->value, key->value))
			continue;
		pbx_ynode_error(key, s->err, "parameter '%s' is already defined at line %d",
				key->value, s->name_nodes[i]->line);
		return NULL;
	}
	s->name_nodes = xreallocarray(s->name_nodes, s->nnames + 1, sizeof(*s->name_nodes));
	s->name_nodes[s->nnames++] = key;
	return pbx_exp_pool_add(s->x, key->value, key->len);
}

/* Checks a value node and returns its pool copy. */
static char *sweep_value(struct pbx_exp_sweep *s, const struct pbx_ynode *n)
{
	if (pbx_exp_scalar(n, s->err) < 0)
		return NULL;
	return pbx_exp_pool_add(s->x, n->value, n->len);
}

/* A non-empty sequence; returns 0 or -1. */
static int sweep_values_seq(struct pbx_exp_sweep *s, const struct pbx_ynode *n)
{
	if (pbx_ynode_expect_seq(n, s->err) < 0)
		return -1;
	if (!n->nitems)
		return pbx_ynode_error(n, s->err, "must not be empty");
	return 0;
}

/* ------------------------------------------------------------------ */
/* grid, zip, list                                                     */

static int sweep_grid(struct pbx_exp_sweep *s, const struct pbx_ynode *grid)
{
	size_t i, r;
	if (pbx_ynode_expect_map(grid, s->err) < 0)
		return -1;
	for (i = 0; i < grid->npairs; i++) {
		const struct pbx_ypair *p = &grid->pairs[i];
		struct pbx_exp_factor *f;
		char *name = sweep_name(s, p->key);
		if (!name || sweep_values_seq(s, p->value) < 0)
			return -1;
		f = sweep_factor(s, 1, p->value->nitems);
		f->names[0] = name;
		for (r = 0; r < f->nrows; r++)
			if (!(f->vals[r] = sweep_value(s, p->value->items[r])))
				return -1;
	}
	return 0;
}

static int sweep_zip(struct pbx_exp_sweep *s, const struct pbx_ynode *zip)
{
	struct pbx_exp_factor *f;
	size_t i, r, rows = 0;
	if (pbx_ynode_expect_map(zip, s->err) < 0)
		return -1;
	if (!zip->npairs)
		return pbx_ynode_error(zip, s->err, "must not be empty");
	for (i = 0; i < zip->npairs; i++) {
		const struct pbx_ynode *v = zip->pairs[i].value;
		if (sweep_values_seq(s, v) < 0)
			return -1;
		if (i && v->nitems != rows)
			return pbx_ynode_error(v, s->err,
					       "has %zu values but %s has %zu "
					       "(zip lists must have the same length)",
					       v->nitems, zip->pairs[0].key->value, rows);
		rows = v->nitems;
	}
	f = sweep_factor(s, zip->npairs, rows);
	for (i = 0; i < zip->npairs; i++) {
		if (!(f->names[i] = sweep_name(s, zip->pairs[i].key)))
			return -1;
		for (r = 0; r < rows; r++)
			if (!(f->vals[r * f->nnames + i] =
				      sweep_value(s, zip->pairs[i].value->items[r])))
				return -1;
	}
	return 0;
}

/* Finds `name` among the keys of list entry `m`; error when absent. */
static const struct pbx_ynode *sweep_list_get(struct pbx_exp_sweep *s, const struct pbx_ynode *m,
					      const char *name)
{
	const struct pbx_ynode *v = pbx_ymap_get(m, name);
	if (!v)
		pbx_ynode_error(m, s->err,
				"lacks '%s' (every entry must give the same "
				"parameters as the first)",
				name);
	return v;
}

static int sweep_list_row(struct pbx_exp_sweep *s, struct pbx_exp_factor *f,
			  const struct pbx_ynode *m, size_t r)
{
	size_t i;
	if (pbx_ynode_expect_map(m, s->err) < 0)
		return -1;
	if (m->npairs != f->nnames) {
		for (i = 0; i < m->npairs; i++)
			if (!pbx_ymap_get(m->parent->items[0], m->pairs[i].key->value))
				return pbx_ynode_error(m->pairs[i].key, s->err,
						       "not given in the first entry (every "
						       "entry must give the same parameters)");
	}
	for (i = 0; i < f->nnames; i++) {
		const struct pbx_ynode *v = sweep_list_get(s, m, f->names[i]);
		if (!v || !(f->vals[r * f->nnames + i] = sweep_value(s, v)))
			return -1;
	}
	return 0;
}

static int sweep_list(struct pbx_exp_sweep *s, const struct pbx_ynode *list)
{
	const struct pbx_ynode *first;
	struct pbx_exp_factor *f;
	size_t i;
	if (sweep_values_seq(s, list) < 0)
		return -1;
	first = list->items[0];
	if (pbx_ynode_expect_map(first, s->err) < 0)
		return -1;
	if (!first->npairs)
		return pbx_ynode_error(first, s->err, "must not be empty");
	f = sweep_factor(s, first->npairs, list->nitems);
	for (i = 0; i < first->npairs; i++)
		if (!(f->names[i] = sweep_name(s, first->pairs[i].key)))
			return -1;
	for (i = 0; i < list->nitems; i++)
		if (sweep_list_row(s, f, list->items[i], i) < 0)
			return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* random (see random.c) and repeats                                   */

static int sweep_random(struct pbx_exp_sweep *s, const struct pbx_ynode *random)
{
	const struct pbx_ynode *params;
	struct pbx_exp_factor *f;
	char **names, **vals = NULL;
	size_t i, nrows = 0;
	if (pbx_exp_random_params(random, &params, s->err) < 0)
		return -1;
	names = xcalloc(params->npairs, sizeof(*names));
	for (i = 0; i < params->npairs; i++) {
		if (!(names[i] = sweep_name(s, params->pairs[i].key))) {
			free(names);
			return -1;
		}
	}
	if (pbx_exp_random_sample(s->x, random, params, &nrows, &vals, s->err) < 0) {
		free(names);
		return -1;
	}
	f = sweep_factor(s, params->npairs, nrows);
	free(f->vals);
	free(f->names);
	f->vals = vals;
	f->names = names;
	return 0;
}

static int sweep_repeats(struct pbx_exp_sweep *s, const struct pbx_ynode *n)
{
	struct pbx_exp_factor *f;
	long r = 1;
	size_t i;
	char num[32];
	if (n && pbx_ynode_int(n, 1, PBX_EXPERIMENT_MAX_POINTS, &r, s->err) < 0)
		return -1;
	s->x->pub.repeats = (size_t)r;
	if (r == 1)
		return 0;
	f = sweep_factor(s, 1, (size_t)r);
	f->names[0] = pbx_exp_pool_add(s->x, "repeat", 6);
	for (i = 0; i < (size_t)r; i++) {
		int len = snprintf(num, sizeof(num), "%zu", i);
		f->vals[i] = pbx_exp_pool_add(s->x, num, (size_t)len);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* The product                                                         */

static int sweep_count(struct pbx_exp_sweep *s, const struct pbx_ynode *at, size_t *npoints,
		       size_t *nparams)
{
	size_t i, n = 1;
	*nparams = 0;
	for (i = 0; i < s->nf; i++) {
		*nparams += s->f[i].nnames;
		if (s->f[i].nrows > PBX_EXPERIMENT_MAX_POINTS / n)
			return pbx_ynode_error(at, s->err, "expands to more than %d points",
					       PBX_EXPERIMENT_MAX_POINTS);
		n *= s->f[i].nrows;
	}
	if (*nparams && n > PBX_EXPERIMENT_MAX_CELLS / *nparams)
		return pbx_ynode_error(at, s->err,
				       "expands to more than %d values "
				       "(points x parameters)",
				       PBX_EXPERIMENT_MAX_CELLS);
	*npoints = n;
	return 0;
}

static void sweep_fill(struct pbx_exp_sweep *s, size_t npoints, size_t nparams)
{
	struct pbx_experiment *e = &s->x->pub;
	size_t p, k, j;
	s->x->block = xreallocarray(NULL, npoints * nparams > 0 ? npoints * nparams : 1,
				    sizeof(struct pbx_param));
	e->points = xreallocarray(NULL, npoints, sizeof(*e->points));
	e->npoints = npoints;
	for (p = 0; p < npoints; p++) {
		struct pbx_param *out = s->x->block + p * nparams + nparams;
		size_t rem = p;
		e->points[p].params = s->x->block + p * nparams;
		e->points[p].nparams = nparams;
		for (k = s->nf; k-- > 0;) {
			const struct pbx_exp_factor *f = &s->f[k];
			size_t row = rem % f->nrows;
			rem /= f->nrows;
			out -= f->nnames;
			for (j = 0; j < f->nnames; j++) {
				out[j].name = f->names[j];
				out[j].value = f->vals[row * f->nnames + j];
				out[j].len = strlen(out[j].value);
			}
		}
	}
}

static const char *const pbx_sweep_keys[] = {
	"grid", "zip", "list", "random", "repeats", NULL,
};

static int sweep_parts(struct pbx_exp_sweep *s, const struct pbx_ynode *sweep)
{
	const struct pbx_ynode *n;
	if (!sweep)
		return sweep_repeats(s, NULL);
	if (pbx_ynode_expect_map(sweep, s->err) < 0 ||
	    pbx_ymap_check_keys(sweep, pbx_sweep_keys, s->err) < 0)
		return -1;
	if ((n = pbx_ymap_get(sweep, "grid")) && sweep_grid(s, n) < 0)
		return -1;
	if ((n = pbx_ymap_get(sweep, "zip")) && sweep_zip(s, n) < 0)
		return -1;
	if ((n = pbx_ymap_get(sweep, "list")) && sweep_list(s, n) < 0)
		return -1;
	if ((n = pbx_ymap_get(sweep, "random")) && sweep_random(s, n) < 0)
		return -1;
	return sweep_repeats(s, pbx_ymap_get(sweep, "repeats"));
}

int pbx_exp_sweep(struct pbx_exp_priv *x, const struct pbx_ynode *sweep, struct pbx_err *err)
{
	struct pbx_exp_sweep s = { x, NULL, 0, NULL, 0, err };
	size_t npoints = 0, nparams = 0;
	int rc = sweep_parts(&s, sweep);
	if (rc == 0)
		rc = sweep_count(&s, sweep, &npoints, &nparams);
	if (rc == 0)
		sweep_fill(&s, npoints, nparams);
	sweep_release(&s);
	return rc;
}
