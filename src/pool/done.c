/*
 * done.c - which sweep points of an experiment a pool already holds done
 * (`pbx parrun --skip-done POOL`): a task pulled from the pool (`pbx pull`)
 * of an experiment of the same name, COMPLETED, whose parameters (the
 * repeat included) are the point's.  Parameters are compared as canonical
 * JSON (keys sorted), each point looked up in the sorted pooled set, so a
 * class's 10,000-point sweep against a 10,000-task pool is quick.
 */
#include "pool/pool_internal.h"
#include "experiment/experiment.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* params_json with its keys sorted, compact; NULL when it is not a JSON
 * object.  Caller frees. */
static char *params_canonical(const char *params_json)
{
	json_t *o = json_loads(params_json, 0, NULL);
	char *s = json_is_object(o) ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	return s;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The canonical parameters of pool url's COMPLETED tasks of experiment
 * `name`, sorted, into *keys (caller frees each and the array). */
static int done_keys(struct pbx_store *st, const char *url, const char *name, char ***keys,
		     size_t *nkeys, struct pbx_err *err)
{
	struct pbx_pool_task *v;
	size_t n, i;
	if (pbx_store_pool_tasks(st, url, &v, &n, err) < 0)
		return -1;
	*keys = xcalloc(n + 1, sizeof(**keys));
	*nkeys = 0;
	for (i = 0; i < n; i++) {
		char *k;
		if (strcmp(v[i].experiment, name) != 0 || strcmp(v[i].state, "COMPLETED") != 0)
			continue;
		if ((k = params_canonical(v[i].params_json)))
			(*keys)[(*nkeys)++] = k;
	}
	pbx_pool_tasks_free(v, n);
	qsort(*keys, *nkeys, sizeof(**keys), str_cmp);
	return 0;
}

long pbx_pool_points_done(struct pbx_store *st, const char *url, const struct pbx_experiment *e,
			  unsigned char *done, struct pbx_err *err)
{
	char *pool = pbx_pool_url_normal(url, err), **keys = NULL;
	size_t nkeys = 0, i;
	long n = 0;
	if (!pool)
		return -1;
	if (done_keys(st, pool, e->name, &keys, &nkeys, err) < 0) {
		free(pool);
		return -1;
	}
	for (i = 0; i < e->npoints; i++) {
		char *json = pbx_experiment_point_json(e, i), *k = params_canonical(json);
		if (k && nkeys && bsearch(&k, keys, nkeys, sizeof(*keys), str_cmp)) {
			done[i] = 1;
			n++;
		}
		free(k);
		free(json);
	}
	for (i = 0; i < nkeys; i++)
		free(keys[i]);
	free(keys);
	free(pool);
	return n;
}
