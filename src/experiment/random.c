/*
 * random.c - `sweep.random`: N samples of independent parameters, each
 * uniform, log-uniform, a uniform integer or a uniform choice.
 *
 * The generator is splitmix64 seeded with `seed` (default 0), and draws
 * happen sample by sample, parameter by parameter in file order, one 64-bit
 * draw each; so a given file always gives the same points, on any machine
 * (only IEEE arithmetic and libm's exp/log are involved).  Real values are
 * written with %.6g, or %.17g where the short form would leave [lo, hi].
 */
#include "experiment/experiment_internal.h"
#include "util/xalloc.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PBX_RANDOM_INT_MAX 1000000000000000L /* |int bounds| <= 1e15 */

enum pbx_random_kind { PBX_RUNIFORM, PBX_RLOGUNIFORM, PBX_RINT, PBX_RCHOICE };

struct random_spec {
	enum pbx_random_kind kind;
	double lo, hi;                   /* uniform, loguniform */
	long ilo, ihi;                   /* int */
	const struct pbx_ynode *choices; /* choice: a non-empty sequence */
};

static uint64_t random_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A uniform double in [0, 1). */
static double random_unit(uint64_t *state)
{
	return (double)(random_next(state) >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------------ */
/* The specification                                                   */

static int random_number(const struct pbx_ynode *n, double *out, struct pbx_err *err)
{
	char shown[PBX_YSHOW_SIZE], *end;
	if (n->type == PBX_YSCALAR && n->len && strlen(n->value) == n->len) {
		errno = 0;
		*out = strtod(n->value, &end);
		if (!errno && !*end && isfinite(*out) && !strchr(n->value, ' '))
			return 0;
	}
	if (n->type != PBX_YSCALAR)
		return pbx_ynode_error(n, err, "must be a number, got %s", pbx_ynode_kind(n));
	pbx_ynode_show(n, shown);
	return pbx_ynode_error(n, err, "must be a number, got '%s'", shown);
}

/* [lo, hi]: a sequence of exactly two items. */
static int random_pair(const struct pbx_ynode *n, struct pbx_err *err)
{
	if (pbx_ynode_expect_seq(n, err) < 0)
		return -1;
	if (n->nitems != 2)
		return pbx_ynode_error(n, err, "must be [lo, hi], got %zu values", n->nitems);
	return 0;
}

static int random_real(const struct pbx_ynode *n, struct random_spec *sp, struct pbx_err *err)
{
	if (random_pair(n, err) < 0 || random_number(n->items[0], &sp->lo, err) < 0 ||
	    random_number(n->items[1], &sp->hi, err) < 0)
		return -1;
	if (sp->hi < sp->lo)
		return pbx_ynode_error(n, err, "hi (%s) is less than lo (%s)", n->items[1]->value,
				       n->items[0]->value);
	if (sp->kind == PBX_RLOGUNIFORM && sp->lo <= 0)
		return pbx_ynode_error(n, err, "lo must be positive for loguniform, got %s",
				       n->items[0]->value);
	return 0;
}

static int random_int(const struct pbx_ynode *n, struct random_spec *sp, struct pbx_err *err)
{
	if (random_pair(n, err) < 0 ||
	    pbx_ynode_int(n->items[0], -PBX_RANDOM_INT_MAX, PBX_RANDOM_INT_MAX, &sp->ilo, err) <
		    0 ||
	    pbx_ynode_int(n->items[1], -PBX_RANDOM_INT_MAX, PBX_RANDOM_INT_MAX, &sp->ihi, err) < 0)
		return -1;
	if (sp->ihi < sp->ilo)
		return pbx_ynode_error(n, err, "hi (%ld) is less than lo (%ld)", sp->ihi, sp->ilo);
	return 0;
}

static int random_choice(const struct pbx_ynode *n, struct random_spec *sp, struct pbx_err *err)
{
	size_t i;
	if (pbx_ynode_expect_seq(n, err) < 0)
		return -1;
	if (!n->nitems)
		return pbx_ynode_error(n, err, "must not be empty");
	for (i = 0; i < n->nitems; i++)
		if (pbx_exp_scalar(n->items[i], err) < 0)
			return -1;
	sp->choices = n;
	return 0;
}

static const char *const pbx_random_kinds[] = {
	"uniform", "loguniform", "int", "choice", NULL,
};

static int random_spec(const struct pbx_ynode *n, struct random_spec *sp, struct pbx_err *err)
{
	const struct pbx_ynode *v;
	int k;
	if (pbx_ynode_expect_map(n, err) < 0 || pbx_ymap_check_keys(n, pbx_random_kinds, err) < 0)
		return -1;
	if (n->npairs != 1)
		return pbx_ynode_error(n, err,
				       "must give exactly one of uniform, loguniform, "
				       "int, choice");
	v = n->pairs[0].value;
	for (k = 0; strcmp(pbx_random_kinds[k], n->pairs[0].key->value); k++)
		;
	sp->kind = (enum pbx_random_kind)k;
	if (sp->kind == PBX_RUNIFORM || sp->kind == PBX_RLOGUNIFORM)
		return random_real(v, sp, err);
	if (sp->kind == PBX_RINT)
		return random_int(v, sp, err);
	return random_choice(v, sp, err);
}

static const char *const pbx_random_keys[] = { "samples", "seed", "params", NULL };

int pbx_exp_random_params(const struct pbx_ynode *random, const struct pbx_ynode **params,
			  struct pbx_err *err)
{
	if (pbx_ynode_expect_map(random, err) < 0 ||
	    pbx_ymap_check_keys(random, pbx_random_keys, err) < 0)
		return -1;
	*params = pbx_ymap_get(random, "params");
	if (!*params)
		return pbx_ymap_missing(random, "params", NULL, err);
	if (pbx_ynode_expect_map(*params, err) < 0)
		return -1;
	if (!(*params)->npairs)
		return pbx_ynode_error(*params, err, "must not be empty");
	return 0;
}

/* ------------------------------------------------------------------ */
/* Drawing                                                             */

/* %.6g unless that leaves [lo, hi]; returns the length. */
static int random_format(double v, double lo, double hi, char *buf, size_t size)
{
	int len = snprintf(buf, size, "%.6g", v);
	double back = strtod(buf, NULL);
	if (back < lo || back > hi)
		len = snprintf(buf, size, "%.17g", v);
	return len;
}

static char *random_draw(struct pbx_exp_priv *x, const struct random_spec *sp, uint64_t *state)
{
	char buf[64];
	int len;
	double v;
	if (sp->kind == PBX_RCHOICE) {
		const struct pbx_ynode *c =
			sp->choices->items[random_next(state) % sp->choices->nitems];
		return pbx_exp_pool_add(x, c->value, c->len);
	}
	if (sp->kind == PBX_RINT) {
		uint64_t span = (uint64_t)(sp->ihi - sp->ilo) + 1;
		len = snprintf(buf, sizeof(buf), "%ld",
			       sp->ilo + (long)(random_next(state) % span));
		return pbx_exp_pool_add(x, buf, (size_t)len);
	}
	if (sp->kind == PBX_RUNIFORM)
		v = sp->lo + (sp->hi - sp->lo) * random_unit(state);
	else
		v = exp(log(sp->lo) + (log(sp->hi) - log(sp->lo)) * random_unit(state));
	v = v < sp->lo ? sp->lo : v > sp->hi ? sp->hi : v;
	len = random_format(v, sp->lo, sp->hi, buf, sizeof(buf));
	return pbx_exp_pool_add(x, buf, (size_t)len);
}

static int random_counts(const struct pbx_ynode *random, long *samples, long *seed,
			 struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(random, "samples");
	if (!n)
		return pbx_ymap_missing(random, "samples", NULL, err);
	if (pbx_ynode_int(n, 1, PBX_EXPERIMENT_MAX_POINTS, samples, err) < 0)
		return -1;
	*seed = 0;
	n = pbx_ymap_get(random, "seed");
	return n ? pbx_ynode_int(n, 0, 9007199254740992L, seed, err) : 0;
}

int pbx_exp_random_sample(struct pbx_exp_priv *x, const struct pbx_ynode *random,
			  const struct pbx_ynode *params, size_t *nrows, char ***vals,
			  struct pbx_err *err)
{
	size_t np = params->npairs, i, r;
	struct random_spec *specs = xcalloc(np, sizeof(*specs));
	long samples, seed;
	uint64_t state;
	for (i = 0; i < np; i++)
		if (random_spec(params->pairs[i].value, &specs[i], err) < 0)
			goto fail;
	if (random_counts(random, &samples, &seed, err) < 0)
		goto fail;
	if (np > PBX_EXPERIMENT_MAX_CELLS / (size_t)samples) {
		pbx_ynode_error(random, err, "samples x params is more than %d values",
				PBX_EXPERIMENT_MAX_CELLS);
		goto fail;
	}
	state = (uint64_t)seed;
	*nrows = (size_t)samples;
	*vals = xreallocarray(NULL, *nrows * np, sizeof(char *));
	for (r = 0; r < *nrows; r++)
		for (i = 0; i < np; i++)
			(*vals)[r * np + i] = random_draw(x, &specs[i], &state);
	free(specs);
	return 0;
fail:
	free(specs);
	return -1;
}
