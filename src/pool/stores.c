/*
 * stores.c - a few stores opened on one pool, for parallel uploads and
 * downloads (each store has its own HTTP handle, which serialises its own
 * requests), handed to threads one at a time; and the progress count the
 * threads share.
 */
#include "pool/pool_internal.h"
#include "util/xalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pool_stores {
	pthread_mutex_t mu;
	pthread_cond_t freed;
	struct pbx_objstore **v;
	int *busy;
	int n;
	size_t done;
	uint64_t bytes;
};

int pool_stores_open(const char *url, const struct pbx_config *cfg, int n, struct pool_stores **out,
		     char *identity, size_t size, struct pbx_err *err)
{
	struct pool_stores *p = xcalloc(1, sizeof(*p));
	int i;
	p->v = xcalloc((size_t)n, sizeof(*p->v));
	p->busy = xcalloc((size_t)n, sizeof(*p->busy));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->freed, NULL);
	for (i = 0; i < n; i++) {
		if (pbx_objstore_open(url, cfg, &p->v[i], err) < 0) {
			pool_stores_close(p);
			return -1;
		}
		p->n++;
	}
	snprintf(identity, size, "%s", pbx_objstore_identity(p->v[0]));
	*out = p;
	return 0;
}

void pool_stores_close(struct pool_stores *p)
{
	int i;
	if (!p)
		return;
	for (i = 0; i < p->n; i++)
		pbx_objstore_close(p->v[i]);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->freed);
	free(p->v);
	free(p->busy);
	free(p);
}

struct pbx_objstore *pool_stores_first(struct pool_stores *p)
{
	return p->v[0];
}

struct pbx_objstore *pool_stores_take(struct pool_stores *p)
{
	struct pbx_objstore *s = NULL;
	int i;
	pthread_mutex_lock(&p->mu);
	while (!s) {
		for (i = 0; i < p->n && !s; i++)
			if (!p->busy[i]) {
				p->busy[i] = 1;
				s = p->v[i];
			}
		if (!s)
			pthread_cond_wait(&p->freed, &p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return s;
}

void pool_stores_give(struct pool_stores *p, struct pbx_objstore *s)
{
	int i;
	pthread_mutex_lock(&p->mu);
	for (i = 0; i < p->n; i++)
		if (p->v[i] == s)
			p->busy[i] = 0;
	pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->mu);
}

void pool_stores_progress(struct pool_stores *p, size_t total, uint64_t bytes,
			  pbx_pool_progress_fn fn, void *ctx)
{
	pthread_mutex_lock(&p->mu);
	p->done++;
	p->bytes += bytes;
	if (fn)
		fn(ctx, p->done, total, p->bytes);
	pthread_mutex_unlock(&p->mu);
}
