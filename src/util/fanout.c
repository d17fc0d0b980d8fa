/*
 * fanout.c - bounded parallel calls: up to `concurrency` worker threads
 * take the next index from a shared counter until all n calls are done.
 */
#include "util/fanout.h"
#include "util/xalloc.h"

#include <pthread.h>
#include <stdlib.h>

struct fanout {
	pthread_mutex_t lock;
	size_t next, n;
	int failed;
	int (*fn)(void *ctx, size_t i, struct pbx_err *err);
	void *ctx;
	struct pbx_err *errs;
};

/* The next index to run, or n when none is left. */
static size_t fanout_take(struct fanout *f)
{
	size_t i;
	pthread_mutex_lock(&f->lock);
	i = f->next < f->n ? f->next++ : f->n;
	pthread_mutex_unlock(&f->lock);
	return i;
}

static void *fanout_worker(void *arg)
{
	struct fanout *f = arg;
	size_t i;
	while ((i = fanout_take(f)) < f->n) {
		struct pbx_err local = PBX_ERR_INIT;
		struct pbx_err *err = f->errs ? &f->errs[i] : &local;
		pbx_err_clear(err);
		if (f->fn(f->ctx, i, err) != 0) {
			pthread_mutex_lock(&f->lock);
			f->failed++;
			pthread_mutex_unlock(&f->lock);
		}
	}
	return NULL;
}

int pbx_fanout(size_t n, int concurrency, int (*fn)(void *ctx, size_t i, struct pbx_err *err),
	       void *ctx, struct pbx_err *errs)
{
	struct fanout f = { PTHREAD_MUTEX_INITIALIZER, 0, n, 0, fn, ctx, errs };
	size_t nthreads = concurrency > 0 ? (size_t)concurrency : 1, started = 0, i;
	pthread_t *th;
	if (nthreads > n)
		nthreads = n;
	th = xcalloc(nthreads ? nthreads : 1, sizeof(*th));
	for (i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, fanout_worker, &f) == 0)
			started++;
		else
			break;
	if (!started && n)
		fanout_worker(&f); /* no threads to be had: run them here */
	for (i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	pthread_mutex_destroy(&f.lock);
	return f.failed;
}
