/*
 * pool.c - connection reuse keyed by "user@host:port" (+ pin name and jump
 * connection).
 *
 * A mutex guards the entry list, but connecting happens outside it: the
 * first caller for a key inserts a "connecting" entry and connects; callers
 * for the same key wait on a condition variable, callers for other keys go
 * on.  A connection found broken is retired (kept until the pool is freed,
 * since other threads may still hold it) and a new one is made.
 */
#include "ssh/ssh_internal.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pool_entry {
	char *key;
	struct pbx_ssh *conn; /* NULL while connecting */
	int connecting;
	struct pool_entry *next;
};

struct pbx_ssh_pool {
	pthread_mutex_t lock;
	pthread_cond_t cv; /* broadcast when a connect attempt ends */
	struct pbx_hostkeys hk;
	struct pool_entry *head;
	struct pbx_ssh **retired; /* broken connections, closed at pool_free */
	size_t nretired;
};

struct pbx_ssh_pool *pbx_ssh_pool_new(const struct pbx_hostkeys *hk)
{
	struct pbx_ssh_pool *p = xcalloc(1, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (hk)
		p->hk = *hk;
	return p;
}

static char *pool_key(const struct pbx_ssh_target *t)
{
	return xasprintf("%s@%s:%d|%s|%p", t->user ? t->user : "", t->host ? t->host : "",
			 t->port > 0 ? t->port : 22, t->name ? t->name : "", (void *)t->via);
}

static struct pool_entry *pool_find(struct pbx_ssh_pool *p, const char *key)
{
	struct pool_entry *e;
	for (e = p->head; e; e = e->next)
		if (!strcmp(e->key, key))
			return e;
	return NULL;
}

static void pool_unlink(struct pbx_ssh_pool *p, struct pool_entry *gone)
{
	struct pool_entry **pp;
	for (pp = &p->head; *pp; pp = &(*pp)->next)
		if (*pp == gone) {
			*pp = gone->next;
			break;
		}
	free(gone->key);
	free(gone);
}

static int conn_broken(struct pbx_ssh *s)
{
	int broken;
	pbx_ssh_lock(s);
	broken = s->broken;
	pbx_ssh_unlock(s);
	return broken;
}

static void pool_retire(struct pbx_ssh_pool *p, struct pool_entry *e)
{
	p->retired = xreallocarray(p->retired, p->nretired + 1, sizeof(*p->retired));
	p->retired[p->nretired++] = e->conn;
	pool_unlink(p, e);
}

/* Connects for a new entry (lock released meanwhile). */
static int pool_connect(struct pbx_ssh_pool *p, const struct pbx_ssh_target *t, char *key,
			struct pbx_ssh **out, struct pbx_err *err)
{
	struct pool_entry *e = xcalloc(1, sizeof(*e));
	int rc;
	e->key = key;
	e->connecting = 1;
	e->next = p->head;
	p->head = e;
	pthread_mutex_unlock(&p->lock);
	rc = pbx_ssh_connect(t, &p->hk, out, err);
	pthread_mutex_lock(&p->lock);
	e->connecting = 0;
	if (rc == 0)
		e->conn = *out;
	else
		pool_unlink(p, e);
	pthread_cond_broadcast(&p->cv);
	return rc;
}

int pbx_ssh_pool_get(struct pbx_ssh_pool *p, const struct pbx_ssh_target *t, struct pbx_ssh **out,
		     struct pbx_err *err)
{
	char *key = pool_key(t);
	struct pool_entry *e;
	int rc = 0;
	*out = NULL;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		e = pool_find(p, key);
		if (!e)
			break;
		if (e->connecting) {
			pthread_cond_wait(&p->cv, &p->lock);
			continue;
		}
		if (!conn_broken(e->conn)) {
			*out = e->conn;
			break;
		}
		pool_retire(p, e);
	}
	if (*out)
		free(key);
	else
		rc = pool_connect(p, t, key, out, err); /* takes key */
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* Index of a connection in all[0..n) that no other one uses as its jump
 * host, so it can be closed first. */
static size_t pool_leaf(struct pbx_ssh **all, size_t n)
{
	size_t i, k;
	for (i = 0; i < n; i++) {
		for (k = 0; k < n && all[k]->via != all[i]; k++)
			;
		if (k == n)
			return i;
	}
	return 0; /* a cycle cannot happen; be safe anyway */
}

void pbx_ssh_pool_free(struct pbx_ssh_pool *p)
{
	struct pbx_ssh **all;
	size_t n = 0, i;
	struct pool_entry *e;
	if (!p)
		return;
	for (e = p->head; e; e = e->next)
		n++;
	all = xcalloc(n + p->nretired + 1, sizeof(*all));
	n = 0;
	while (p->head) {
		if (p->head->conn)
			all[n++] = p->head->conn;
		pool_unlink(p, p->head);
	}
	for (i = 0; i < p->nretired; i++)
		all[n++] = p->retired[i];
	while (n) {
		i = pool_leaf(all, n);
		pbx_ssh_close(all[i]);
		all[i] = all[--n];
	}
	free(all);
	free(p->retired);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
