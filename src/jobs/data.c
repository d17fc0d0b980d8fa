/*
 * data.c - staging the experiment's `data:` sources on a cluster once per
 * source, reused by every package (see data.h and docs/data.md): list the
 * source page by page, compare with the cluster's manifest, download what
 * changed with the user's credentials (or read it from the local
 * directory) while the listing goes on, push it in one tar with the
 * removals and the new manifest.  A head with its own identity stages its
 * cloud's buckets itself: its pbx runs the same steps there
 * (stage_on_head).
 */
#define _GNU_SOURCE /* fopencookie, syncfs */
#include "jobs/data.h"
#include "jobs/datacache.h"
#include "jobs/data_hashes.h"
#include "cluster/cluster_plan.h"
#include "experiment/tar.h"
#include "jobs/jobs_internal.h"
#include "objstore/objstore.h"
#include "util/crc32c.h"
#include "util/fs.h"
#include "util/fanout.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DATA_MANIFEST  ".pbx-data-manifest"
#define DATA_MAX_DEPTH 256

/* ------------------------------------------------------------- lists */

struct dentry {
	char *name; /* relative to the source */
	uint64_t size;
	char *version;
	int got;        /* a queued object: its download is in the cache's files */
	uint64_t shown; /* a lane's copy: bytes of it the progress showed as
			   they arrived (atomic: a read's ranges add to it) */
};

struct dlist {
	struct dentry *v;
	size_t n, alloc;
};

static void dlist_add(struct dlist *l, const char *name, uint64_t size, const char *version)
{
	if (l->n == l->alloc) {
		l->alloc = l->alloc ? 2 * l->alloc : 64;
		l->v = xreallocarray(l->v, l->alloc, sizeof(*l->v));
	}
	l->v[l->n].name = xstrdup(name);
	l->v[l->n].size = size;
	l->v[l->n].got = 0;
	l->v[l->n].shown = 0;
	l->v[l->n++].version = xstrdup(version ? version : "");
}

static void dlist_free(struct dlist *l)
{
	size_t i;
	for (i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].version);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int dentry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dentry *)a)->name, ((const struct dentry *)b)->name);
}

static void dlist_sort(struct dlist *l)
{
	if (l->n)
		qsort(l->v, l->n, sizeof(*l->v), dentry_cmp);
}

/* The first entry of sorted l whose name is >= name (l->n when none). */
static size_t dlist_lower(const struct dlist *l, const char *name)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(l->v[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct dentry *dlist_find(const struct dlist *l, const char *name)
{
	size_t k = dlist_lower(l, name);
	return k < l->n && !strcmp(l->v[k].name, name) ? &l->v[k] : NULL;
}

/* With PBX_STATS set, prints when a phase of source `key`'s staging
 * ended, in seconds since *t0 (to stderr; thread-safe). */
static void data_phase(const struct timespec *t0, const char *key, const char *what)
{
	struct timespec now;
	if (!getenv("PBX_STATS") || !*getenv("PBX_STATS"))
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	fprintf(stderr, "pbx: data %s: %s at %.3f s\n", key, what,
		(double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9);
}

/* ---------------------------------------------------------- manifest */

static void manifest_text(const struct dlist *l, struct pbx_buf *out)
{
	size_t i;
	for (i = 0; i < l->n; i++) {
		json_t *o = json_pack("{s:s, s:I, s:s}", "name", l->v[i].name, "size",
				      (json_int_t)l->v[i].size, "version", l->v[i].version);
		char *s = json_dumps(o, JSON_COMPACT);
		pbx_buf_adds(out, s);
		pbx_buf_addc(out, '\n');
		free(s);
		json_decref(o);
	}
}

/* One manifest line into l; a line that does not read is left out (its
 * file is then sent again). */
static void manifest_line(const char *p, size_t n, struct dlist *l)
{
	json_t *o = json_loadb(p, n, 0, NULL);
	const char *name = NULL, *version = NULL;
	json_int_t size = -1;
	if (o &&
	    !json_unpack(o, "{s:s, s:I, s:s}", "name", &name, "size", &size, "version", &version) &&
	    size >= 0 && pbx_objstore_name_safe(name))
		dlist_add(l, name, (uint64_t)size, version);
	json_decref(o);
}

static void manifest_parse(const char *p, size_t len, struct dlist *l)
{
	while (len) {
		const char *nl = memchr(p, '\n', len);
		size_t n = nl ? (size_t)(nl - p) : len;
		if (n)
			manifest_line(p, n, l);
		p += nl ? n + 1 : n;
		len -= nl ? n + 1 : n;
	}
	dlist_sort(l);
}

/* ----------------------------------------------------- checking names */

/* A name safe and not reserved: checked on each page as it comes, before
 * any of its objects is read or sent. */
static int name_check(const char *nm, const char *key, struct pbx_err *err)
{
	if (!pbx_objstore_name_safe(nm))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "data %s: object '%s' has a name pbx will not turn "
				    "into a path (empty, '.', '..' or '//' parts, a leading "
				    "'/' or control bytes): nothing was staged",
				    key, nm);
	if (!strncmp(nm, ".pbx-data", 9))
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "data %s: object '%s': names starting .pbx-data are "
				    "pbx's",
				    key, nm);
	return 0;
}

/* Every name checked above, none twice, none both a file and a directory
 * of another ("a" and "a/b").  l is sorted: the whole listing. */
static int names_check(const struct dlist *l, const char *key, struct pbx_err *err)
{
	size_t i;
	for (i = 0; i < l->n; i++) {
		const char *nm = l->v[i].name;
		char *probe;
		size_t k;
		if (name_check(nm, key, err) < 0)
			return -1;
		if (i + 1 < l->n && !strcmp(nm, l->v[i + 1].name))
			return pbx_err_setc(err, PBX_EXIT_USAGE, "data %s: object '%s' twice", key,
					    nm);
		probe = xasprintf("%s/", nm);
		k = dlist_lower(l, probe);
		if (k < l->n && !strncmp(l->v[k].name, probe, strlen(probe))) {
			free(probe);
			return pbx_err_setc(err, PBX_EXIT_USAGE,
					    "data %s: object '%s' is a file and also a directory "
					    "of '%s'",
					    key, nm, l->v[k].name);
		}
		free(probe);
	}
	return 0;
}

/* ---------------------------------------------------------- listing */

struct walk {
	const char *root; /* the real path of the directory */
	const char *key;
	struct dlist *l;
	struct pbx_data_hashes *hashes; /* remembered between stagings */
	struct pbx_err *err;
};

/* A regular file (or a link to one inside the root) into the list. */
static int walk_file(struct walk *w, const char *rel, const char *full)
{
	char hex[65];
	struct stat st;
	errno = 0;
	if (stat(full, &st) < 0 ||
	    pbx_data_hashes_sha256(w->hashes, rel, full, &st, hex, w->err) < 0)
		return pbx_err_set(w->err, "data %s: cannot read %s: %s", w->key, full,
				   errno ? strerror(errno) : w->err->msg);
	if (w->l->n >= PBX_DATA_MAX_OBJECTS)
		return pbx_err_setc(w->err, PBX_EXIT_USAGE, "data %s: more than %d files", w->key,
				    PBX_DATA_MAX_OBJECTS);
	dlist_add(w->l, rel, (uint64_t)st.st_size, hex);
	return 0;
}

/* A symbolic link: followed when it names a regular file inside the root. */
static int walk_link(struct walk *w, const char *rel, const char *full)
{
	char *real = realpath(full, NULL);
	size_t n = strlen(w->root);
	struct stat st;
	int inside = real && !strncmp(real, w->root, n) && real[n] == '/';
	int rc;
	if (!inside || stat(real, &st) < 0 || !S_ISREG(st.st_mode))
		rc = pbx_err_setc(w->err, PBX_EXIT_USAGE,
				  "data %s: %s is a symbolic link %s: pbx stages regular files "
				  "only",
				  w->key, full,
				  inside ? "to something but a file" : "leaving the directory");
	else
		rc = walk_file(w, rel, real);
	free(real);
	return rc;
}

static int walk_dir(struct walk *w, const char *rel, int depth);

static int walk_entry(struct walk *w, const char *rel, int depth)
{
	char *full = xasprintf("%s/%s", w->root, rel);
	struct stat st;
	int rc;
	errno = 0;
	if (lstat(full, &st) < 0)
		rc = pbx_err_set(w->err, "data %s: cannot stat %s: %s", w->key, full,
				 strerror(errno));
	else if (S_ISDIR(st.st_mode))
		rc = walk_dir(w, rel, depth + 1);
	else if (S_ISREG(st.st_mode))
		rc = walk_file(w, rel, full);
	else if (S_ISLNK(st.st_mode))
		rc = walk_link(w, rel, full);
	else
		rc = pbx_err_setc(w->err, PBX_EXIT_USAGE,
				  "data %s: %s is not a regular file or directory", w->key, full);
	free(full);
	return rc;
}

static int walk_dir(struct walk *w, const char *rel, int depth)
{
	char *full = rel ? xasprintf("%s/%s", w->root, rel) : xstrdup(w->root);
	DIR *d = depth > DATA_MAX_DEPTH ? NULL : opendir(full);
	struct dirent *de;
	int rc = 0;
	if (!d)
		rc = pbx_err_set(w->err, "data %s: cannot open directory %s: %s", w->key, full,
				 depth > DATA_MAX_DEPTH ? "nested too deep" : strerror(errno));
	while (rc == 0 && d && (de = readdir(d))) {
		char *child;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		child = rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		rc = walk_entry(w, child, depth);
		free(child);
	}
	if (d)
		closedir(d);
	free(full);
	return rc;
}

/* ------------------------------------------------------------- diff */

/* Whether e is new or changed against the cluster's manifest `have`. */
static int changed(const struct dlist *have, const struct dentry *e)
{
	const struct dentry *h = dlist_find(have, e->name);
	return !h || h->size != e->size || strcmp(h->version, e->version);
}

/* The entries of have that sorted src lacks, into *removed. */
static void removals(const struct dlist *src, const struct dlist *have, struct dlist *removed)
{
	size_t i;
	for (i = 0; i < have->n; i++)
		if (!dlist_find(src, have->v[i].name))
			dlist_add(removed, have->v[i].name, have->v[i].size, have->v[i].version);
}

/* -------------------------------------------------------------- queue */

#define QUEUE_NONE ((size_t)-1)

/* The changed objects, in listing order, added as each page comes and
 * taken by the download lanes: one queue, not a share per lane, so that a
 * lane that drew a large object does not hold up the small ones. */
struct queue {
	struct dlist l;          /* owned; versions updated by the lanes */
	size_t next;             /* the first entry no lane took */
	int over;                /* the listing ended: nothing more comes */
	int stop;                /* a lane failed, or the stream broke */
	unsigned long downloads; /* objects read from the store */
	pthread_mutex_t mu;      /* all of the above; never held while sending */
	pthread_cond_t cv;       /* an entry came, or over or stop was set */
};

static void queue_add(struct queue *q, const struct dentry *e)
{
	pthread_mutex_lock(&q->mu);
	dlist_add(&q->l, e->name, e->size, e->version);
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

/* Nothing more comes (stop: and lanes stop now). */
static void queue_end(struct queue *q, int stop)
{
	pthread_mutex_lock(&q->mu);
	q->over = 1;
	q->stop |= stop;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

static int queue_stopped(struct queue *q)
{
	int stop;
	pthread_mutex_lock(&q->mu);
	stop = q->stop;
	pthread_mutex_unlock(&q->mu);
	return stop;
}

/* Waits for the next entry: its index, *e a copy (its strings are the
 * queue's), or QUEUE_NONE once the queue is over and empty, or stopped. */
static size_t queue_take(struct queue *q, struct dentry *e)
{
	size_t i = QUEUE_NONE;
	pthread_mutex_lock(&q->mu);
	while (!q->stop && !q->over && q->next >= q->l.n)
		pthread_cond_wait(&q->cv, &q->mu);
	if (!q->stop && q->next < q->l.n) {
		i = q->next++;
		*e = q->l.v[i];
	}
	pthread_mutex_unlock(&q->mu);
	return i;
}

/* ------------------------------------------------------ one staging */

/* What staging one source works with. */
struct stage {
	const struct pbx_data_opts *o;
	struct pbx_data_result *r;
	const char *local;      /* the real path of a local source, or NULL */
	struct pbx_objstore *s; /* a store source */
	char *token;            /* its listing's next page (NULL: the first, or none) */
	int listed, checked;    /* every page read; then the whole listing checked */
	struct dlist src, have; /* listed; the cluster's manifest */
	struct dlist removed;   /* in have, not in src (once checked) */
	struct queue q;         /* src's new or changed objects */
	struct dlist cache;     /* $PBX_HOME/data/ID's manifest */
	char *cache_dir;
	int link_local;     /* the push's script sees this machine's files (pbx on
			   the head, a local cluster): what the cache holds
			   is linked from there (pbx_cluster_head_sees_here) */
	struct timespec t0; /* the staging's start, for PBX_STATS */
	int waited;         /* for another staging of the source (its lock) */
	struct pbx_err *err;
};

/* Whether the cache's manifest says its file of e is the same object. */
static int cache_same(const struct stage *g, const struct dentry *e)
{
	const struct dentry *c = dlist_find(&g->cache, e->name);
	return c && c->size == e->size && !strcmp(c->version, e->version);
}

/* The cache's copy of e when it is the same object; 1 when body has it. */
static int cache_hit(struct stage *g, const struct dentry *e, struct pbx_buf *body)
{
	struct pbx_err ignored = PBX_ERR_INIT;
	char *path;
	int ok;
	pbx_buf_reset(body);
	if (!cache_same(g, e))
		return 0;
	path = xasprintf("%s/files/%s", g->cache_dir, e->name);
	ok = pbx_read_file(path, body, &ignored) == 0 && body->len == e->size;
	free(path);
	return ok;
}

/* The same for a large object, left in its file (`path`): 1 when that
 * file is the object's size. */
static int cache_hit_file(const struct stage *g, const struct dentry *e, const char *path)
{
	struct stat st;
	return cache_same(g, e) && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_size == e->size;
}

/* A new temporary file beside `path` (the cache's file of an object),
 * its directories made when missing (not tried first: one call per
 * object): its descriptor and *tmp (caller frees, renames or unlinks), or
 * -1 with err.  Thread-safe. */
static int cache_tmpfile(const char *path, char **tmp, struct pbx_err *err)
{
	char *dir, *slash;
	int fd = pbx_tmpfile_beside(path, tmp, err);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	dir = xstrdup(path);
	slash = strrchr(dir, '/');
	*slash = '\0';
	if (pbx_mkdir_p(dir, 0700, err) == 0)
		fd = pbx_tmpfile_beside(path, tmp, err);
	free(dir);
	return fd;
}

/* Writes a downloaded object's bytes into the cache's files: 0, or -1
 * (best effort: the push does not need it).  A temporary file renamed, so
 * a name holds a whole object; not synced one by one: stage_cache_save
 * syncs the file system once before the cache's manifest names them.
 * Thread-safe. */
static int cache_write(const struct stage *g, const struct dentry *e, const struct pbx_buf *body)
{
	struct pbx_err ignored = PBX_ERR_INIT;
	char *path = xasprintf("%s/files/%s", g->cache_dir, e->name), *tmp = NULL;
	int rc = -1, fd = cache_tmpfile(path, &tmp, &ignored);
	if (fd >= 0) {
		rc = pbx_write_all(fd, body->buf, body->len);
		if (close(fd) < 0 || rc < 0 || rename(tmp, path) < 0) {
			unlink(tmp);
			rc = -1;
		}
	}
	free(tmp);
	free(path);
	return rc;
}

/* Records in the cache's manifest that it holds e: updated in place, or
 * added to `added` (sorted into the manifest once, by cache_note_end: one
 * sort per object made a first staging of n objects quadratic). */
static void cache_note(struct stage *g, const struct dentry *e, struct dlist *added)
{
	struct dentry *c = dlist_find(&g->cache, e->name);
	if (c) {
		free(c->version);
		c->version = xstrdup(e->version);
		c->size = e->size;
	} else {
		dlist_add(added, e->name, e->size, e->version);
	}
}

/* Moves `added`'s entries into the cache's manifest, sorted. */
static void cache_note_end(struct stage *g, struct dlist *added)
{
	size_t i;
	for (i = 0; i < added->n; i++) {
		dlist_add(&g->cache, added->v[i].name, added->v[i].size, added->v[i].version);
	}
	dlist_sort(&g->cache);
	dlist_free(added);
}

static void hex_bytes(const char *hex, unsigned char out[32])
{
	size_t i;
	for (i = 0; i < 32; i++) {
		unsigned v = 0;
		sscanf(hex + 2 * i, "%2x", &v);
		out[i] = (unsigned char)v;
	}
}

/* ---------------------------------------------------------- listing */

/* The next page of the store's listing into g->src. */
static int list_store_page(struct stage *g, struct pbx_err *err)
{
	const struct pbx_objstore_url *u = pbx_objstore_where(g->s);
	struct pbx_object *v = NULL;
	size_t n = 0, i, plen = strlen(u->prefix);
	if (pbx_objstore_list_page(g->s, u->prefix, &g->token, &v, &n, err) < 0)
		return pbx_err_prefix(err, "data %s", g->r->key);
	g->listed = !g->token;
	for (i = 0; i < n; i++) {
		const char *rel = v[i].name + plen;
		size_t rl = strlen(rel);
		if (strncmp(v[i].name, u->prefix, plen) || !rl ||
		    (rel[rl - 1] == '/' && v[i].size == 0))
			continue; /* the prefix itself, or a "folder" placeholder */
		dlist_add(&g->src, rel, v[i].size, v[i].version);
	}
	pbx_objects_free(v, n);
	return 0;
}

/* A local source's whole walk into g->src, each file's sha256 read only
 * when it changed since the last staging (data_hashes.h). */
static int walk_local(struct stage *g, struct pbx_err *err)
{
	char *path = xasprintf("%s/data/%s/.pbx-hashes", pbx_home(), g->r->id);
	struct walk w = { g->local, g->r->key, &g->src, pbx_data_hashes_load(path), err };
	char what[96];
	int rc = walk_dir(&w, NULL, 0);
	pbx_data_hashes_save(w.hashes);
	snprintf(what, sizeof(what), "walked (%zu files read, %zu unchanged)",
		 pbx_data_hashes_read(w.hashes), pbx_data_hashes_reused(w.hashes));
	data_phase(&g->t0, g->r->key, what);
	pbx_data_hashes_free(w.hashes);
	free(path);
	g->listed = 1;
	return rc;
}

/* The next page of the listing (a local source: the whole walk) into
 * g->src, each name checked, the new or changed objects queued. */
static int stage_page(struct stage *g, struct pbx_err *err)
{
	size_t from = g->src.n, i;
	int rc;
	if (g->local) {
		rc = walk_local(g, err);
	} else {
		rc = list_store_page(g, err);
	}
	if (rc == 0 && g->src.n > PBX_DATA_MAX_OBJECTS)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "data %s: more than %d objects", g->r->key,
				    PBX_DATA_MAX_OBJECTS);
	for (i = from; rc == 0 && i < g->src.n; i++) {
		const struct dentry *e = &g->src.v[i];
		rc = name_check(e->name, g->r->key, err);
		g->r->objects++;
		g->r->bytes += e->size;
		if (rc == 0 && changed(&g->have, e))
			queue_add(&g->q, e);
	}
	return rc;
}

/* Once every page is read: the whole listing sorted and checked, and what
 * the source no longer has into g->removed.  Once. */
static int stage_listed(struct stage *g, struct pbx_err *err)
{
	if (g->checked)
		return 0;
	g->checked = 1;
	dlist_sort(&g->src);
	if (names_check(&g->src, g->r->key, err) < 0)
		return -1;
	removals(&g->src, &g->have, &g->removed);
	data_phase(&g->t0, g->r->key, "listed");
	return 0;
}

/* The versions the lanes found (an object rewritten since its page was
 * listed) into the listing, for the manifest; the lanes are done. */
static void stage_versions(struct stage *g)
{
	size_t i;
	for (i = 0; i < g->q.l.n; i++) {
		struct dentry *d = dlist_find(&g->src, g->q.l.v[i].name);
		if (d && strcmp(d->version, g->q.l.v[i].version)) {
			free(d->version);
			d->version = xstrdup(g->q.l.v[i].version);
		}
	}
}

/* ------------------------------------------------------------ the stream */

#ifndef DATA_LANES
#define DATA_LANES 8 /* parallel downloads of one staging, a store each (-D for a benchmark) */
#endif
/* Objects up to this size are read into memory, larger ones into the
 * download cache's file as they come (at most 8 x 8 MiB held). */
#define DATA_IN_MEMORY_MAX ((uint64_t)8 << 20)

/*
 * One staging's tar, streamed to the head while it is made (no archive in
 * memory, the push overlapping the listing and the downloads): a feeder
 * thread reads the listing's remaining pages, their changed objects going
 * to the queue, while DATA_LANES lanes take them from it (one request
 * after another took 10,000 small objects 2.4 times as long as rclone's 4
 * transfers: BENCHMARKS.md), each writing its object as member files/NAME
 * once it is whole and checked - from the cache or the local directory
 * when they have it, else downloaded.  When the listing is over, checked
 * whole and every object came, the feeder writes the member "remove"
 * (NUL-separated names) and the member "manifest" last: the head's script
 * refuses a stream without it, so a cut or failed staging changes nothing
 * there.  The main thread runs that script with the other end of a socket
 * pair on its stdin.
 */
struct feed {
	struct stage *g;
	int fd;               /* the feeder's end of the socket pair */
	struct pbx_tar tar;   /* onto fd (fopencookie), written under mu */
	struct pbx_err twerr; /* the tar's errors */
	pthread_mutex_t mu;   /* tar, done, bytes_moved, the progress call */
	size_t done;
	uint64_t shown;         /* bytes the progress shows: of the objects
				  counted, and of those arriving (atomic) */
	int64_t shown_ms;       /* when the progress was last shown (atomic) */
	int shown_all;          /* the last progress (done == total) was shown */
	struct dentry *sending; /* the object whose file member is being written,
				   its bytes counted as sent (under mu) */
	int resending;          /* sending's download counted its bytes: they are
				   shown apart, as `sent` (under mu) */
	uint64_t sent;
	int write_failed;      /* a send failed: the push stopped reading */
	struct pbx_buf linked; /* objects the script takes from the
				  cache (link_local): names, NUL after each */
	pthread_mutex_t dmu;   /* deferred */
	struct dlist deferred; /* objects the cache holds whole, to send from
				  there when the tar is free: a lane that found
				  it busy (a large object coming) went on */
	int lanes_rc;          /* the lanes' result; lanes_err says why */
	struct pbx_err lanes_err;
	int rc; /* the feeder's result; err says why */
	struct pbx_err err;
};

/* fopencookie's write: send() that gives EPIPE, never SIGPIPE. */
static ssize_t feed_send(void *cookie, const char *buf, size_t len)
{
	struct feed *f = cookie;
	size_t off = 0;
	while (off < len) {
		ssize_t n = send(f->fd, buf + off, len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			f->write_failed = 1;
			return off ? (ssize_t)off : -1;
		}
		off += (size_t)n;
	}
	return (ssize_t)off;
}

static int feed_close(void *cookie)
{
	struct feed *f = cookie;
	int rc = close(f->fd);
	f->fd = -1;
	return rc;
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The progress shown (under f->mu): done of the changed objects listed
 * so far; done == total only once the listing is over (a display ends its
 * line there), and then once. */
static void feed_show_locked(struct feed *f)
{
	struct queue *q = &f->g->q;
	size_t total;
	int over;
	pthread_mutex_lock(&q->mu);
	total = q->l.n; /* so far: the listing may go on */
	over = q->over && !q->stop;
	pthread_mutex_unlock(&q->mu);
	if (f->done == total && (!over || f->shown_all))
		return;
	f->shown_all = f->done == total;
	__atomic_store_n(&f->shown_ms, now_ms(), __ATOMIC_RELAXED);
	f->g->o->progress(f->g->o->ctx, f->g->r->key, f->done, total,
			  __atomic_load_n(&f->shown, __ATOMIC_RELAXED), f->resending ? f->sent : 0);
}

/* Object e is on its way (under f->mu): counted, the progress shown. */
static void feed_count_locked(struct feed *f, const struct dentry *e)
{
	uint64_t seen = __atomic_load_n(&e->shown, __ATOMIC_RELAXED);
	f->done++;
	f->g->r->bytes_moved += e->size;
	__atomic_add_fetch(&f->shown, e->size > seen ? e->size - seen : 0, __ATOMIC_RELAXED);
	if (f->g->o->progress)
		feed_show_locked(f);
}

/* A lane: its feed, its store (opened at its first download) and its copy
 * of the object it is on, whose bytes the store reports as they come. */
struct lane {
	struct feed *f;
	struct pbx_objstore *s;
	struct dentry e;
};

/* pbx_objstore_on_bytes's callback: n more bytes of the lane's object
 * arrived (on one of its range streams): shown at most 4 times a second,
 * never waiting for f->mu (a member's bytes may hold it for long). */
static void lane_on_bytes(void *ctx, uint64_t n)
{
	struct lane *l = ctx;
	struct feed *f = l->f;
	int64_t last = __atomic_load_n(&f->shown_ms, __ATOMIC_RELAXED), now = now_ms();
	__atomic_add_fetch(&l->e.shown, n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&f->shown, n, __ATOMIC_RELAXED);
	if (!f->g->o->progress || now - last < 250 || pthread_mutex_trylock(&f->mu) != 0)
		return;
	feed_show_locked(f);
	pthread_mutex_unlock(&f->mu);
}

/* The lane's store, opened at its first use: 0, or -1 with err. */
static int lane_store(struct lane *l, struct pbx_err *err)
{
	struct stage *g = l->f->g;
	if (l->s)
		return 0;
	if (pbx_objstore_open(g->r->key, g->o->cfg, &l->s, err) < 0)
		return pbx_err_prefix(err, "data %s", g->r->key);
	pbx_objstore_on_bytes(l->s, lane_on_bytes, l);
	return 0;
}

/* A member's end (under f->mu): rc < 0 stops the lanes and is the
 * stream's (the tar's message in err); else object e (NULL: none) is
 * counted. */
static int feed_member_end_locked(struct feed *f, struct dentry *e, int rc, struct pbx_err *err)
{
	f->sending = NULL;
	f->resending = 0;
	if (rc < 0) {
		queue_end(&f->g->q, 1);
		*err = f->twerr;
		return -1;
	}
	if (e)
		feed_count_locked(f, e);
	return 0;
}

/* Appends a member under f->mu: body's bytes, or those of file `file`
 * (not NULL: e's copy in the download cache, e->size bytes); a failure
 * stops the lanes and is the stream's (its message in err). */
static int feed_member_locked(struct feed *f, const char *name, const struct pbx_buf *body,
			      const char *file, struct dentry *e, struct pbx_err *err)
{
	struct queue *q = &f->g->q;
	int rc;
	if (queue_stopped(q))
		return pbx_err_set(err, "data %s: stopped", f->g->r->key);
	/* a file's bytes shown as they are sent: as the object's unless its
	 * download showed them, then apart (the push of what came) */
	f->sending = e && (file || f->g->local) ? e : NULL;
	f->resending = f->sending && __atomic_load_n(&e->shown, __ATOMIC_RELAXED) != 0;
	f->sent = 0;
	if (e && file) {
		rc = pbx_tar_file(&f->tar, name, 0444, file, e->size, NULL);
	} else if (e && f->g->local) {
		unsigned char sha[32];
		char *src = xasprintf("%s/%s", f->g->local, e->name);
		hex_bytes(e->version, sha);
		rc = pbx_tar_file(&f->tar, name, 0444, src, e->size, sha);
		free(src);
	} else {
		rc = pbx_tar_mem(&f->tar, name, e ? 0444 : 0600, body->buf ? body->buf : "",
				 body->len);
	}
	return feed_member_end_locked(f, e, rc, err);
}

/* pbx_tar's on_bytes, under f->mu (a member is written under it): n more
 * bytes of f->sending sent - a local source's file, a large object the
 * cache held: the object's bytes, as no download showed them; a large
 * object downloading or just downloaded: shown apart (`sending`) - shown
 * at most 4 times a second. */
static void feed_on_sent(void *ctx, unsigned long long n)
{
	struct feed *f = ctx;
	int first;
	if (!f->sending)
		return;
	/* the push of an object that came whole shows at once; one sent as it
	 * comes shows with its download, at the usual pace */
	first = f->resending && !f->sent &&
		__atomic_load_n(&f->sending->shown, __ATOMIC_RELAXED) >= f->sending->size;
	if (f->resending) {
		f->sent += n;
	} else {
		__atomic_add_fetch(&f->sending->shown, (uint64_t)n, __ATOMIC_RELAXED);
		__atomic_add_fetch(&f->shown, (uint64_t)n, __ATOMIC_RELAXED);
	}
	if (f->g->o->progress &&
	    (first || now_ms() - __atomic_load_n(&f->shown_ms, __ATOMIC_RELAXED) >= 250))
		feed_show_locked(f);
}

/* Changed object e as member files/NAME under f->mu: as
 * feed_member_locked. */
static int feed_object_locked(struct feed *f, struct dentry *e, const struct pbx_buf *body,
			      const char *file, struct pbx_err *err)
{
	char *member = xasprintf("files/%s", e->name);
	int rc = feed_member_locked(f, member, body, file, e, err);
	free(member);
	return rc;
}

/* The objects deferred so far, each from the cache's file of it, under
 * f->mu (the thread holding the tar sends them before letting it go). */
static int feed_drain_locked(struct feed *f, struct pbx_err *err)
{
	for (;;) {
		struct dlist d;
		size_t k;
		int rc = 0;
		pthread_mutex_lock(&f->dmu);
		d = f->deferred;
		memset(&f->deferred, 0, sizeof(f->deferred));
		pthread_mutex_unlock(&f->dmu);
		if (!d.n)
			return 0;
		for (k = 0; rc == 0 && k < d.n; k++) {
			char *path = xasprintf("%s/files/%s", f->g->cache_dir, d.v[k].name);
			rc = feed_object_locked(f, &d.v[k], NULL, path, err);
			free(path);
		}
		dlist_free(&d);
		if (rc < 0)
			return -1;
	}
}

/* With f->mu held: object e as feed_object_locked, then what was
 * deferred; f->mu released. */
static int feed_object_unlock(struct feed *f, struct dentry *e, const struct pbx_buf *body,
			      const char *file, struct pbx_err *err)
{
	int rc = feed_object_locked(f, e, body, file, err);
	if (rc == 0)
		rc = feed_drain_locked(f, err);
	pthread_mutex_unlock(&f->mu);
	return rc;
}

/* Changed object e as member files/NAME (body: its bytes, or file: the
 * download cache's file of it; both NULL for a local source's file,
 * read in place and its sha256 checked), then what was deferred. */
static int feed_object(struct feed *f, struct dentry *e, const struct pbx_buf *body,
		       const char *file, struct pbx_err *err)
{
	pthread_mutex_lock(&f->mu);
	return feed_object_unlock(f, e, body, file, err);
}

/* Object e, whole in the cache's file of it (body: its bytes): sent now
 * when the tar is free, else deferred - sent from the file by whoever
 * holds the tar, or at the end - so that the lane goes on downloading
 * while a large object is coming through the tar. */
static int feed_object_or_defer(struct feed *f, struct dentry *e, const struct pbx_buf *body,
				struct pbx_err *err)
{
	if (pthread_mutex_trylock(&f->mu) == 0)
		return feed_object_unlock(f, e, body, NULL, err);
	pthread_mutex_lock(&f->dmu);
	dlist_add(&f->deferred, e->name, e->size, e->version);
	pthread_mutex_unlock(&f->dmu);
	return 0;
}

/* Object e, whole in the cache, for the script to link from there
 * (link_local: no bytes through the stream). */
static int feed_linked(struct feed *f, const struct dentry *e, struct pbx_err *err)
{
	int rc = 0;
	pthread_mutex_lock(&f->mu);
	if (queue_stopped(&f->g->q)) {
		rc = pbx_err_set(err, "data %s: stopped", f->g->r->key);
	} else {
		pbx_buf_add(&f->linked, e->name, strlen(e->name) + 1);
		feed_count_locked(f, e);
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

/* A lane's download of object `name` (queued object i, e its copy) ended
 * with rc, meta what the store gave: a size other than the listing's is
 * "changed while it was read"; the version the store gave is recorded.
 * Returns rc, err prefixed with the source on failure. */
static int lane_got(struct feed *f, size_t i, struct dentry *e, int rc, const char *name,
		    struct pbx_object *meta, struct pbx_err *err)
{
	struct queue *q = &f->g->q;
	if (rc == 0 && meta->size != e->size)
		rc = pbx_err_set(err, "object '%s' changed while it was read", name);
	pthread_mutex_lock(&q->mu);
	q->downloads++;
	if (rc == 0 && meta->version && strcmp(meta->version, q->l.v[i].version)) {
		free(q->l.v[i].version); /* rewritten since the listing: record what came */
		q->l.v[i].version = xstrdup(meta->version);
	}
	e->version = q->l.v[i].version;
	pthread_mutex_unlock(&q->mu);
	pbx_object_release(meta);
	return rc < 0 ? pbx_err_prefix(err, "data %s", f->g->r->key) : 0;
}

/* One download of queued object i (e: its copy) into body, its CRC32C
 * checked by the store layer; the version the store gave is recorded.  A
 * large object (pbx_objstore_range_min: 64 MiB) comes in up to 4 ranges
 * at once on connections of the lane's store, while the other lanes go
 * on with the queue: at most DATA_LANES + 3 connections per lane reading
 * a large object (11 with one, as rclone's 4 transfers of which one reads
 * in 4 streams make 7). */
static int lane_get(struct feed *f, struct pbx_objstore *s, size_t i, struct dentry *e,
		    struct pbx_buf *body, struct pbx_err *err)
{
	struct pbx_object meta = { 0 };
	char *name = xasprintf("%s%s", pbx_objstore_where(s)->prefix, e->name);
	struct pbx_object listed = { name, e->size, e->version, 0, 0 };
	int rc;
	pbx_buf_reset(body);
	rc = pbx_objstore_get_listed(s, &listed, 0, body, &meta, err);
	if (rc == 0)
		meta.size = body->len;
	rc = lane_got(f, i, e, rc, name, &meta, err);
	free(name);
	return rc;
}

/* Large object i (e: its copy) downloaded by lane_get's rules into the
 * cache's file `path` as it comes (a temporary file renamed when whole
 * and checked): no object-sized buffer, no size cap.  The cache is not
 * optional here: a failure to write it is the staging's. */
static int lane_get_file(struct feed *f, struct pbx_objstore *s, size_t i, struct dentry *e,
			 const char *path, struct pbx_err *err)
{
	struct pbx_object meta = { 0 };
	char *name = xasprintf("%s%s", pbx_objstore_where(s)->prefix, e->name), *tmp = NULL;
	struct pbx_object listed = { name, e->size, e->version, 0, 0 };
	int rc = -1, fd = cache_tmpfile(path, &tmp, err);
	if (fd >= 0) {
		rc = pbx_objstore_get_listed_fd(s, &listed, fd, &meta, err);
		if (close(fd) < 0 && rc == 0)
			rc = pbx_err_set(err, "%s: %s", tmp, strerror(errno));
	}
	rc = lane_got(f, i, e, rc, name, &meta, err);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = pbx_err_set(err, "data %s: cannot keep %s in the download cache: %s",
				 f->g->r->key, path, strerror(errno));
	if (rc < 0 && tmp)
		unlink(tmp);
	free(tmp);
	free(name);
	return rc;
}

/* Queued object i is in the cache's files now. */
static void lane_kept(struct stage *g, size_t i)
{
	pthread_mutex_lock(&g->q.mu);
	g->q.l.v[i].got = 1;
	pthread_mutex_unlock(&g->q.mu);
}

/*
 * A large object sent on while it downloads (lane_stream): the lane's
 * read writes the cache's temporary file, ranges at once; a sender thread
 * writes member files/NAME from that file as its prefix comes into place
 * (pbx_objstore_on_ready), then what was deferred meanwhile.  The CRC32C
 * of the bytes it sent is checked against the object's once both are
 * over: a range read again after a corrupt start, or a read started again
 * for another version after bytes went, fails the staging (the stream
 * then never gets its manifest: nothing changes on the cluster).
 */
struct coming {
	struct feed *f;
	struct dentry *e;
	int fd; /* the temporary file, read */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t ready; /* bytes in place from the start (under mu) */
	uint64_t taken; /* bytes the sender took to send (under mu) */
	int voided;     /* the read started again after the sender took bytes */
	int over;       /* the read ended: 1, or -1 (it failed) */
	uint64_t off;   /* bytes sent (the sender's) */
	uint32_t crc;   /* of those */
	int rc;         /* the sender's result; err says why */
	struct pbx_err err;
};

/* pbx_objstore_on_ready's callback: the first n bytes are in place (0:
 * the read started again: void if the sender took some, else it waits
 * for the new version's). */
static void coming_ready(void *ctx, uint64_t n)
{
	struct coming *c = ctx;
	pthread_mutex_lock(&c->mu);
	if (n < c->ready && c->taken)
		c->voided = 1;
	c->ready = n;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* The read ended (ok: 1, else -1). */
static void coming_over(struct coming *c, int ok)
{
	pthread_mutex_lock(&c->mu);
	c->over = ok;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* pbx_tar_reader's read: the next bytes in place, waiting for them. */
static ssize_t coming_read(void *ctx, char *buf, size_t max, struct pbx_err *err)
{
	struct coming *c = ctx;
	const char *key = c->f->g->r->key;
	uint64_t avail;
	ssize_t n;
	pthread_mutex_lock(&c->mu);
	while (!c->voided && !c->over && c->ready <= c->off)
		pthread_cond_wait(&c->cv, &c->mu);
	avail = !c->voided && c->ready > c->off ? c->ready - c->off : 0;
	if (avail > max)
		avail = max;
	c->taken = c->off + avail;
	pthread_mutex_unlock(&c->mu);
	if (!avail) /* voided, or over short of the size (failed, or changed) */
		return pbx_err_set(err, "data %s: object '%s' %s", key, c->e->name,
				   c->voided
					   ? "changed while it was read and sent: nothing staged, "
					     "run the command again"
					   : "did not come whole");
	do
		n = pread(c->fd, buf, (size_t)avail, (off_t)c->off);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return pbx_err_set(err, "data %s: cannot read the download of '%s': %s", key,
				   c->e->name, n < 0 ? strerror(errno) : "short file");
	c->crc = pbx_crc32c(c->crc, buf, (size_t)n);
	c->off += (uint64_t)n;
	return n;
}

/* The sender thread: the member as the bytes come, its bytes shown apart
 * ("sending"), then what was deferred meanwhile. */
static void *coming_send(void *ctx)
{
	struct coming *c = ctx;
	struct feed *f = c->f;
	char *member = xasprintf("files/%s", c->e->name);
	pthread_mutex_lock(&f->mu);
	if (queue_stopped(&f->g->q)) {
		c->rc = pbx_err_set(&c->err, "data %s: stopped", f->g->r->key);
	} else {
		f->sending = c->e;
		f->resending = 1;
		f->sent = 0;
		c->rc = pbx_tar_reader(&f->tar, member, 0444, c->e->size, coming_read, c);
		c->rc = feed_member_end_locked(f, c->e, c->rc, &c->err);
	}
	if (c->rc == 0)
		c->rc = feed_drain_locked(f, &c->err);
	pthread_mutex_unlock(&f->mu);
	free(member);
	return NULL;
}

/* The sender's end: 0 when it sent the object whole and its bytes' CRC32C
 * is `crc` (the object's, the read being over and good), else -1. */
static int coming_end(struct coming *c, int read_rc, uint32_t crc, struct pbx_err *err)
{
	if (read_rc < 0)
		return -1; /* the read's error says why */
	if (c->rc < 0) {
		*err = c->err;
		return -1;
	}
	if (c->crc != crc)
		return pbx_err_setc(
			err, PBX_EXIT_SECURITY,
			"data %s: object '%s': the bytes sent while it downloaded are not "
			"the object's (CRC32C %08x sent, %08x read): refused, nothing staged",
			c->f->g->r->key, c->e->name, (unsigned)c->crc, (unsigned)crc);
	return 0;
}

/* Large object i (e: its copy) downloaded into the cache's file `path`
 * (lane_get_file's rules) and sent on as it comes (struct coming): the
 * push overlaps the download within the object.  The cache keeps it when
 * the read was good, even if the stream failed. */
static int lane_stream(struct lane *l, size_t i, const char *path, struct pbx_err *err)
{
	struct feed *f = l->f;
	struct dentry *e = &l->e;
	struct pbx_object meta = { 0 };
	char *name = xasprintf("%s%s", pbx_objstore_where(l->s)->prefix, e->name), *tmp = NULL;
	struct pbx_object listed = { name, e->size, e->version, 0, 0 };
	struct coming c = { .f = f, .e = e, .fd = -1 };
	pthread_t sender;
	uint32_t crc = 0;
	int rc = -1, fd = cache_tmpfile(path, &tmp, err), started = 0, kept = 0;
	pthread_mutex_init(&c.mu, NULL);
	pthread_cond_init(&c.cv, NULL);
	if (fd >= 0 && (c.fd = open(tmp, O_RDONLY | O_CLOEXEC)) < 0)
		pbx_err_set(err, "%s: %s", tmp, strerror(errno));
	if (c.fd >= 0 && !(started = pthread_create(&sender, NULL, coming_send, &c) == 0))
		pbx_err_set(err, "data %s: cannot start the push of '%s'", f->g->r->key, e->name);
	if (started) {
		pbx_objstore_on_ready(l->s, coming_ready, &c);
		rc = pbx_objstore_get_listed_fd(l->s, &listed, fd, &meta, err);
		pbx_objstore_on_ready(l->s, NULL, NULL);
		if (close(fd) < 0 && rc == 0)
			rc = pbx_err_set(err, "%s: %s", tmp, strerror(errno));
		fd = -1;
		crc = meta.crc32c;
		rc = lane_got(f, i, e, rc, name, &meta, err);
		if (rc == 0 && rename(tmp, path) < 0)
			rc = pbx_err_set(err, "data %s: cannot keep %s in the download cache: %s",
					 f->g->r->key, path, strerror(errno));
		if (rc == 0) {
			kept = 1;
			lane_kept(f->g, i);
		}
		coming_over(&c, rc == 0 ? 1 : -1);
		pthread_join(sender, NULL);
		rc = coming_end(&c, rc, crc, err);
	}
	if (fd >= 0)
		close(fd);
	if (c.fd >= 0)
		close(c.fd);
	if (tmp && !kept)
		unlink(tmp);
	pthread_mutex_destroy(&c.mu);
	pthread_cond_destroy(&c.cv);
	free(tmp);
	free(name);
	return rc;
}

/* A large object (over DATA_IN_MEMORY_MAX) into the stream from the
 * cache's file of it - there already, or downloaded into it first - or,
 * when the script runs on this machine (link_local), linked by it from
 * there (a hard link: no copy when the cache and the shared disk are one
 * file system, else one copy, never through the stream). */
static int lane_large(struct lane *l, size_t i, struct pbx_err *err)
{
	struct feed *f = l->f;
	struct stage *g = f->g;
	struct dentry *e = &l->e;
	char *path = xasprintf("%s/files/%s", g->cache_dir, e->name);
	int rc;
	if (cache_hit_file(g, e, path))
		rc = g->link_local ? feed_linked(f, e, err) : feed_object(f, e, NULL, path, err);
	else if (lane_store(l, err) < 0)
		rc = -1;
	else if (!g->link_local) /* sent to the head as it downloads */
		rc = lane_stream(l, i, path, err);
	else if ((rc = lane_get_file(f, l->s, i, e, path, err)) == 0) {
		lane_kept(g, i);
		rc = feed_linked(f, e, err);
	}
	free(path);
	return rc;
}

static int lane_cached_file(const struct stage *g, const struct dentry *e);

/* Queued object i (e: its copy) into the stream: from the local directory,
 * the cache, or downloaded (on the lane's store *s, opened at its first
 * download) and kept in the cache. */
static int lane_one(struct lane *l, size_t i, struct pbx_buf *body, struct pbx_err *err)
{
	struct feed *f = l->f;
	struct stage *g = f->g;
	struct dentry *e = &l->e;
	int rc;
	if (g->local)
		return feed_object(f, e, NULL, NULL, err);
	if (e->size > DATA_IN_MEMORY_MAX)
		return lane_large(l, i, err);
	if (g->link_local && lane_cached_file(g, e))
		return feed_linked(f, e, err);
	if (!g->link_local && cache_hit(g, e, body))
		return feed_object_or_defer(f, e, body, err);
	if (lane_store(l, err) < 0)
		return -1;
	rc = lane_get(f, l->s, i, e, body, err);
	if (rc < 0)
		return -1;
	if (cache_write(g, e, body) == 0) {
		lane_kept(g, i);
		/* the script takes it from there, or it may wait there */
		return g->link_local ? feed_linked(f, e, err)
				     : feed_object_or_defer(f, e, body, err);
	}
	return feed_object(f, e, body, NULL, err);
}

/* Whether the cache holds object e whole in its file. */
static int lane_cached_file(const struct stage *g, const struct dentry *e)
{
	char *path = xasprintf("%s/files/%s", g->cache_dir, e->name);
	int hit = cache_hit_file(g, e, path);
	free(path);
	return hit;
}

/* A lane: the queue's next object until the queue is over; a failure
 * stops the others. */
static int feed_lane(void *ctx, size_t k, struct pbx_err *err)
{
	struct lane l = { .f = ctx };
	struct pbx_buf body = PBX_BUF_INIT;
	size_t i;
	int rc = 0;
	(void)k;
	while (rc == 0 && (i = queue_take(&l.f->g->q, &l.e)) != QUEUE_NONE)
		rc = lane_one(&l, i, &body, err);
	if (rc < 0)
		queue_end(&l.f->g->q, 1);
	if (l.s)
		pbx_objstore_close(l.s);
	pbx_buf_release(&body);
	return rc;
}

/* The lanes' thread: DATA_LANES lanes (one for a local source) until the
 * queue is over; the first failure into f->lanes_err. */
static void *feed_lanes(void *ctx)
{
	struct feed *f = ctx;
	size_t lanes = f->g->local ? 1 : DATA_LANES, i;
	struct pbx_err *errs = xcalloc(lanes, sizeof(*errs));
	int failed = pbx_fanout(lanes, (int)lanes, feed_lane, f, errs);
	/* the lane that failed first stopped the others: its message, not
	 * theirs ("stopped"), unless the stream broke */
	for (i = 0; failed && i < lanes; i++)
		if (errs[i].msg[0] && !strstr(errs[i].msg, ": stopped")) {
			f->lanes_err = errs[i];
			break;
		}
	for (i = 0; failed && !f->lanes_err.msg[0] && i < lanes; i++)
		if (errs[i].msg[0])
			f->lanes_err = errs[i];
	f->lanes_rc = failed ? -1 : 0;
	free(errs);
	return NULL;
}

/* The feeder thread: the lanes started, the listing's remaining pages,
 * then once the lanes are done "remove" and "manifest"; the end of the
 * stream (the socket closed) in every case. */
static void *feed_run(void *ctx)
{
	struct feed *f = ctx;
	struct stage *g = f->g;
	struct pbx_buf text = PBX_BUF_INIT;
	pthread_t lanes;
	size_t i;
	int rc = 0, started = pthread_create(&lanes, NULL, feed_lanes, f) == 0;
	if (!started)
		rc = pbx_err_set(&f->err, "data %s: cannot start the downloads", g->r->key);
	while (rc == 0 && !g->listed && !queue_stopped(&g->q))
		rc = stage_page(g, &f->err);
	if (rc == 0 && g->listed)
		rc = stage_listed(g, &f->err);
	queue_end(&g->q, rc < 0);
	pthread_mutex_lock(&f->mu); /* the last object came before the listing ended */
	if (g->o->progress && f->done && f->done == g->q.l.n)
		feed_show_locked(f);
	pthread_mutex_unlock(&f->mu);
	if (started)
		pthread_join(lanes, NULL);
	if (rc == 0 && (f->lanes_rc < 0 || !g->listed)) {
		f->err = f->lanes_err;
		rc = -1;
	}
	data_phase(&g->t0, g->r->key, "downloads ended");
	for (i = 0; i < g->removed.n; i++)
		pbx_buf_add(&text, g->removed.v[i].name, strlen(g->removed.v[i].name) + 1);
	pthread_mutex_lock(&f->mu);
	if (rc == 0)
		rc = feed_drain_locked(f, &f->err);
	if (rc == 0 && f->linked.len)
		rc = feed_member_locked(f, "linked", &f->linked, NULL, NULL, &f->err);
	if (rc == 0)
		rc = feed_member_locked(f, "remove", &text, NULL, NULL, &f->err);
	if (rc == 0) { /* last: the downloads may have updated versions */
		stage_versions(g);
		pbx_buf_reset(&text);
		manifest_text(&g->src, &text);
		rc = feed_member_locked(f, "manifest", &text, NULL, NULL, &f->err);
	}
	if (rc == 0 && pbx_tar_end(&f->tar) < 0) {
		f->err = f->twerr;
		rc = -1;
	}
	pthread_mutex_unlock(&f->mu);
	if (fclose(f->tar.f) != 0 && rc == 0)
		rc = pbx_err_set(&f->err, "data %s: cannot send the tar: %s", g->r->key,
				 strerror(errno));
	pbx_buf_release(&text);
	f->rc = rc;
	return NULL;
}

/* The push, on the head: unpack beside ID/ (same file system); a stream
 * without its manifest (cut, or a download failed) changes nothing.  Then
 * remove what went, put the files in place - the unpacked tree renamed
 * into place when ID/ is empty (a first staging), else each file hard
 * linked over the old one (a name holds the old or the new file, whole) -
 * fix the modes, then the manifest, then the directories' modes.  The
 * names it puts in place are added to .ID.placing first, removed once the
 * manifest names them: a staging cut between the two (a task's file it
 * cannot chmod, a lost connection) leaves files no manifest names, which
 * the next one treats as staged in an unknown version (read_manifests):
 * sent again when listed, else removed.  One at a time per source
 * (flock).  The trap makes only T's directories writable:
 * its files may be links to ID/'s.  With linked_from (the head's own pbx
 * staging: its cache's files/ directory), the objects the member "linked"
 * names are taken from there into T first: hard links when the first one
 * links (one file system), else copies, by one cp for many. */
static void push_script(struct pbx_buf *s, const char *id, const char *linked_from)
{
	if (linked_from) { /* the objects the cache holds, linked (or copied) */
		pbx_buf_adds(s, "C=");
		pbx_shell_quote(s, linked_from);
		pbx_buf_addc(s, '\n');
	}
	pbx_buf_addf(
		s,
		"P=\"$PBX_SHARED/pbx/data\" D=\"$PBX_SHARED/pbx/data/%s\"\n"
		"mkdir -p \"$D\" || exit 1\n"
		"if command -v flock >/dev/null 2>&1; then exec 9>\"$P/.%s.lock\" && flock 9; fi\n"
		"T=$(mktemp -d \"$P/.in-%s.XXXXXX\") || exit 1\n"
		"trap 'find \"$T\" -type d ! -perm -u+w -exec chmod u+w {} + 2>/dev/null;"
		" rm -rf \"$T\"' EXIT\n"
		"tar -C \"$T\" --no-same-owner -xf - ||"
		" { echo \"cannot unpack the data in $T\" >&2; exit 1; }\n"
		"[ -f \"$T/manifest\" ] ||"
		" { echo \"the data stream ended before its manifest: nothing staged\" >&2; exit 1; }\n"
		"if [ -s \"$T/linked\" ]; then\n"
		"  mkdir -p \"$T/files\" && f=$(head -z -n 1 \"$T/linked\" | tr -d '\\000') || exit 1\n"
		"  if ln \"$C/$f\" \"$T/.probe\" 2>/dev/null; then rm -f \"$T/.probe\"; l=-l; else l=; fi\n"
		"  (cd \"$C\" && xargs -0 cp --parents $l -t \"$T/files\" --) <\"$T/linked\" ||"
		" { echo \"cannot take the data from the cache $C\" >&2; exit 1; }\n"
		"fi\n"
		"find \"$D\" -type d ! -perm -u+w -exec chmod u+w {} + || exit 1\n"
		"if [ -s \"$T/remove\" ]; then (cd \"$D\" && xargs -0 rm -f -- <\"$T/remove\") ||"
		" exit 1; fi\n"
		"find \"$D\" -mindepth 1 -depth -type d -empty -delete || exit 1\n"
		"if [ -d \"$T/files\" ]; then\n"
		"  (cd \"$T/files\" && find . -type f -printf '%%P\\n') >>\"$P/.%s.placing\" || exit 1\n"
		"  if rmdir \"$D\" 2>/dev/null; then mv \"$T/files\" \"$D\" || exit 1\n"
		"  else cp -Rlf \"$T/files/.\" \"$D/\" || exit 1; fi\n"
		"fi\n"
		"find \"$D\" -type f ! -perm 0444 -exec chmod 0444 {} + || exit 1\n"
		"chmod 0444 \"$T/manifest\" && mv -f \"$T/manifest\" \"$D/" DATA_MANIFEST
		"\" || exit 1\n"
		"rm -f \"$P/.%s.placing\"\n"
		"find \"$D\" -type d ! -perm 0555 -exec chmod 0555 {} + || exit 1\n"
		"chmod 755 \"$P\" 2>/dev/null\n"
		"echo PBX-DATA-OK\n",
		id, id, id, id, id);
}

/* The names a staging cut before its manifest put in place (the "P "
 * lines of read_manifests) that no manifest line names, into have as
 * staged in an unknown version: a listed one is sent again, one no
 * longer listed removed.  have sorted. */
static void placed_add(struct dlist *have, const struct dlist *placed)
{
	size_t i;
	for (i = 0; i < placed->n; i++)
		if (!dlist_find(have, placed->v[i].name) &&
		    (i == 0 || strcmp(placed->v[i].name, placed->v[i - 1].name)))
			dlist_add(have, placed->v[i].name, 0, "");
	dlist_sort(have);
}

void pbx_data_manifests_parse(const char *text, size_t len, struct pbx_data_result *res, size_t n,
			      pbx_data_entry_fn fn, void *ctx)
{
	struct dlist *have = xcalloc(n ? n : 1, sizeof(*have));
	struct dlist *placed = xcalloc(n ? n : 1, sizeof(*placed));
	const char *p = text;
	size_t i, k, cur = n;
	while (len) {
		const char *nl = memchr(p, '\n', len);
		size_t l = nl ? (size_t)(nl - p) : len;
		if (l == 9 + 16 && !strncmp(p, "PBX-DATA ", 9)) {
			for (cur = 0; cur < n && strncmp(res[cur].id, p + 9, 16); cur++)
				;
			if (cur < n)
				res[cur].staged_before = 1;
		} else if (cur < n && l == 13 && !strncmp(p, "PBX-DATA-NONE", 13)) {
			res[cur].staged_before = 0;
		} else if (cur < n && l > 2 && !strncmp(p, "P ", 2)) {
			char *name = xstrndup(p + 2, l - 2);
			if (pbx_objstore_name_safe(name))
				dlist_add(&placed[cur], name, 0, "");
			free(name);
		} else if (cur < n && l) {
			manifest_line(p, l, &have[cur]);
		}
		p += nl ? l + 1 : l;
		len -= nl ? l + 1 : l;
	}
	for (i = 0; i < n; i++) {
		dlist_sort(&have[i]);
		dlist_sort(&placed[i]);
		placed_add(&have[i], &placed[i]);
		for (k = 0; k < have[i].n; k++)
			fn(ctx, i, have[i].v[k].name, have[i].v[k].size, have[i].v[k].version);
		dlist_free(&placed[i]);
		dlist_free(&have[i]);
	}
	free(placed);
	free(have);
}

/* pbx_data_manifests_parse's fn for read_manifests: into have[i]. */
static void manifest_entry(void *ctx, size_t i, const char *name, uint64_t size,
			   const char *version)
{
	struct dlist *have = ctx;
	dlist_add(&have[i], name, size, version);
}

/* The cluster's manifests of every source, one round trip: "PBX-DATA ID"
 * then its lines, or "PBX-DATA-NONE" when it has none, then "P NAME" for
 * each name a staging cut before its manifest put in place (push_script's
 * .ID.placing; placed_add); pbx_data_manifests_parse reads the reply into
 * have (sorted).  A staged source's directory is touched: in use, `pbx
 * cluster gc` leaves it for an hour (the package naming it is pushed after
 * this). */
static int read_manifests(struct pbx_cluster *c, struct pbx_data_result *res, size_t n,
			  struct dlist *have, struct pbx_err *err)
{
	struct pbx_buf script = PBX_BUF_INIT;
	struct pbx_cluster_output out;
	size_t i;
	int rc;
	for (i = 0; i < n; i++)
		pbx_buf_addf(
			&script,
			"echo 'PBX-DATA %s'; f=\"$PBX_SHARED/pbx/data/%s/" DATA_MANIFEST "\"\n"
			"if [ -f \"$f\" ]; then cat \"$f\" || exit 1; echo; touch -c \"${f%%/*}\" 2>/dev/null\n"
			"else echo PBX-DATA-NONE; fi\n"
			"f=\"$PBX_SHARED/pbx/data/.%s.placing\"\n"
			"if [ -f \"$f\" ]; then sed 's/^/P /' \"$f\" || exit 1; fi\n",
			res[i].id, res[i].id, res[i].id);
	rc = pbx_cluster_run(c, 0, script.buf, NULL, &out, err);
	pbx_buf_release(&script);
	if (rc < 0)
		return pbx_err_prefix(err, "reading the data manifests on %s", c->row.name);
	pbx_data_manifests_parse(out.out.buf, out.out.len, res, n, manifest_entry, have);
	pbx_cluster_output_release(&out);
	return 0;
}

/* Loads the download cache's manifest ($PBX_HOME/data/ID). */
static void stage_cache(struct stage *g)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err ignored = PBX_ERR_INIT;
	char *path;
	g->cache_dir = xasprintf("%s/data/%s", pbx_home(), g->r->id);
	path = xasprintf("%s/" DATA_MANIFEST, g->cache_dir);
	if (pbx_read_file(path, &b, &ignored) == 0)
		manifest_parse(b.buf, b.len, &g->cache);
	pbx_buf_release(&b);
	free(path);
}

/* What sweep_one removes: temporary files (PATH.tmp.XXXXXX, from
 * pbx_tmpfile_beside) not written since this time, left by a staging
 * killed while it downloaded (one may be an object's size). */
static time_t sweep_before;

static int sweep_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	const char *t = strstr(path + ftw->base, ".tmp.");
	if (type == FTW_F && S_ISREG(st->st_mode) && t && strlen(t) == 11 &&
	    st->st_mtime < sweep_before)
		unlink(path);
	return 0;
}

/* Removes the cache's temporary files untouched for 10 minutes (a
 * download in progress writes its file all the time).  Not thread-safe. */
static void cache_sweep(const struct stage *g)
{
	char *files = xasprintf("%s/files", g->cache_dir);
	sweep_before = time(NULL) - 600;
	nftw(files, sweep_one, 16, FTW_PHYS);
	free(files);
}

static void stage_cache_save(struct stage *g)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err ignored = PBX_ERR_INIT;
	char *path = xasprintf("%s/" DATA_MANIFEST, g->cache_dir);
	int fd = open(g->cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) { /* the files cache_write left unsynced, before their manifest */
		syncfs(fd);
		close(fd);
	}
	manifest_text(&g->cache, &b);
	if (pbx_mkdir_p(g->cache_dir, 0700, &ignored) == 0)
		pbx_write_file_atomic(path, b.buf ? b.buf : "", b.len, 0600, &ignored);
	pbx_buf_release(&b);
	free(path);
}

/* Runs the push with the feeder making the stream; 0, or -1 with g->err:
 * the feeder's error (a download, naming the object) unless the stream
 * broke because the push ended, then the head's. */
static int push_stream(struct pbx_cluster *c, struct feed *f)
{
	static const cookie_io_functions_t io = { NULL, feed_send, NULL, feed_close };
	struct stage *g = f->g;
	struct pbx_buf script = PBX_BUF_INIT;
	struct pbx_cluster_output out;
	struct pbx_err perr = PBX_ERR_INIT;
	char *linked_from = NULL;
	pthread_t th;
	int sv[2], rc;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return pbx_err_set(g->err, "data %s: socketpair: %s", g->r->key, strerror(errno));
	f->fd = sv[1];
	f->tar.f = fopencookie(f, "w", io);
	if (f->tar.f) /* fewer, larger sends */
		setvbuf(f->tar.f, NULL, _IOFBF, 256 << 10);
	if (!f->tar.f || pthread_create(&th, NULL, feed_run, f) != 0) {
		if (f->tar.f)
			fclose(f->tar.f);
		else
			close(sv[1]);
		close(sv[0]);
		return pbx_err_set(g->err, "data %s: cannot start the stream", g->r->key);
	}
	if (g->link_local)
		linked_from = xasprintf("%s/files", g->cache_dir);
	push_script(&script, g->r->id, linked_from);
	rc = pbx_cluster_run_fd(c, 0, script.buf, sv[0], &out, &perr);
	data_phase(&g->t0, g->r->key, "the head's script ended");
	close(sv[0]); /* a feeder still writing gets EPIPE */
	pthread_join(th, NULL);
	pbx_buf_release(&script);
	free(linked_from);
	if (rc == 0)
		pbx_cluster_output_release(&out);
	if (f->rc < 0 && !f->write_failed) {
		*g->err = f->err;
		return -1;
	}
	if (rc < 0) {
		*g->err = perr;
		return pbx_err_prefix(g->err, "data %s: staging on %s", g->r->key, c->row.name);
	}
	if (f->rc < 0)
		*g->err = f->err;
	return f->rc;
}

/* The cache's manifest: the objects the lanes kept in its files. */
static void stage_cache_notes(struct stage *g)
{
	struct dlist added = { 0 };
	size_t i;
	for (i = 0; i < g->q.l.n; i++)
		if (g->q.l.v[i].got)
			cache_note(g, &g->q.l.v[i], &added);
	cache_note_end(g, &added);
	if (g->q.downloads)
		cache_sweep(g);
	stage_cache_save(g);
}

/* The rest of the listing, the changed files and the removals of g
 * streamed to the head as one tar, the downloads kept in the cache (also
 * when the staging fails: a retry downloads only what is missing). */
static int stage_push(struct pbx_cluster *c, struct stage *g)
{
	struct feed f;
	int rc;
	memset(&f, 0, sizeof(f));
	f.g = g;
	f.fd = -1;
	f.tar.mtime = (long long)time(NULL);
	f.tar.what = g->r->key;
	f.tar.err = &f.twerr;
	f.tar.on_bytes = feed_on_sent;
	f.tar.on_bytes_ctx = &f;
	pthread_mutex_init(&f.mu, NULL);
	pthread_mutex_init(&f.dmu, NULL);
	rc = push_stream(c, &f);
	pthread_mutex_destroy(&f.mu);
	pthread_mutex_destroy(&f.dmu);
	pbx_buf_release(&f.linked);
	dlist_free(&f.deferred);
	g->r->downloads += g->q.downloads;
	if (!g->local)
		stage_cache_notes(g);
	data_phase(&g->t0, g->r->key, "the cache saved");
	return rc;
}

/* Opens a store source and loads its download cache's manifest. */
static int stage_open(struct stage *g)
{
	if (g->local)
		return 0;
	stage_cache(g);
	if (pbx_objstore_open(g->r->key, g->o->cfg, &g->s, g->err) < 0)
		return pbx_err_prefix(g->err, "data %s", g->r->key);
	return 0;
}

/* Lists the source page by page until the first changed object (a source
 * that did not change costs its listing and nothing more), then, when
 * there is anything to do, the push: the feeder reads the other pages
 * while the lanes download. */
static int stage_one(struct pbx_cluster *c, struct stage *g)
{
	int push = c && !g->o->dry_run;
	struct timespec t1;
	size_t i;
	int rc;
	clock_gettime(CLOCK_MONOTONIC, &g->t0);
	rc = stage_open(g);
	while (rc == 0 && !g->listed && !(push && g->q.l.n))
		rc = stage_page(g, g->err);
	if (rc == 0 && g->listed)
		rc = stage_listed(g, g->err);
	if (rc == 0 && push && (!g->listed || g->q.l.n || g->removed.n || g->r->staged_before != 1))
		rc = stage_push(c, g);
	g->r->changed = g->q.l.n;
	g->r->removed = g->removed.n;
	for (i = 0; rc == 0 && !push && i < g->q.l.n; i++)
		g->r->bytes_moved += g->q.l.v[i].size;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	g->r->seconds =
		(double)(t1.tv_sec - g->t0.tv_sec) + (double)(t1.tv_nsec - g->t0.tv_nsec) / 1e9;
	return rc;
}

static void stage_waiting(void *ctx)
{
	struct stage *g = ctx;
	g->waited = 1;
	if (g->o->waiting)
		g->o->waiting(g->o->ctx, g->r->key);
}

/* stage_one holding the source's download cache (datacache.h): two
 * stagings of one source on this machine take turns, the second finding
 * the first one's downloads, and neither linking a file the other
 * replaced.  One that waited reads the cluster's manifest again: the
 * other may have staged it there.  A dry run reads the cache without
 * the lock. */
static int stage_locked(struct pbx_cluster *c, struct stage *g)
{
	int lock = -1, rc = 0;
	if (c && !g->o->dry_run) {
		lock = pbx_data_cache_lock(g->r->id, g->r->key, stage_waiting, g, g->err);
		if (lock < 0)
			return pbx_err_prefix(g->err, "data %s", g->r->key);
	}
	if (g->waited) {
		dlist_free(&g->have);
		rc = read_manifests(c, g->r, 1, &g->have, g->err);
	}
	if (rc == 0)
		rc = stage_one(c, g);
	pbx_data_cache_unlock(lock);
	return rc;
}

/* ------------------------------------------------- staged by the head */

char *pbx_data_result_json(const struct pbx_data_result *r)
{
	json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:f}", "id", r->id,
			      "key", r->key ? r->key : "", "objects", (json_int_t)r->objects,
			      "bytes", (json_int_t)r->bytes, "changed", (json_int_t)r->changed,
			      "removed", (json_int_t)r->removed, "bytes_moved",
			      (json_int_t)r->bytes_moved, "downloads", (json_int_t)r->downloads,
			      "staged_before", r->staged_before, "seconds", r->seconds);
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

int pbx_data_result_parse(const char *text, size_t len, struct pbx_data_result *r,
			  struct pbx_err *err)
{
	json_t *o = json_loadb(text ? text : "", len, 0, NULL);
	json_int_t v[6];
	const char *id = NULL;
	int before = -1, rc;
	double secs = 0;
	rc = o ? json_unpack(o, "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:F}", "id", &id,
			     "objects", &v[0], "bytes", &v[1], "changed", &v[2], "removed", &v[3],
			     "bytes_moved", &v[4], "downloads", &v[5], "staged_before", &before,
			     "seconds", &secs)
	       : -1;
	for (size_t i = 0; rc == 0 && i < 6; i++)
		if (v[i] < 0)
			rc = -1;
	if (rc < 0 || strcmp(id, r->id) != 0) {
		json_decref(o);
		return pbx_err_set(err, "data %s: the head's pbx did not report its staging",
				   r->key);
	}
	r->objects = (size_t)v[0];
	r->bytes = (uint64_t)v[1];
	r->changed = (size_t)v[2];
	r->removed = (size_t)v[3];
	r->bytes_moved = (uint64_t)v[4];
	r->downloads = (unsigned long)v[5];
	r->staged_before = before;
	r->seconds = secs;
	json_decref(o);
	return 0;
}

/* What the head's `cluster data` prints, read as it comes: its progress
 * lines shown (o->progress), its other lines (the report) kept. */
struct head_report {
	struct stage *g;
	struct pbx_buf line; /* the stdout line being read */
	struct pbx_buf out;  /* the lines that are not progress */
	struct pbx_buf err;  /* its stderr */
};

/* One whole stdout line. */
static void head_line(struct head_report *h, const char *p, size_t n)
{
	json_t *o = json_loadb(p, n, 0, NULL), *pr = json_object_get(o, "progress");
	json_int_t done = json_integer_value(json_object_get(pr, "done"));
	json_int_t total = json_integer_value(json_object_get(pr, "total"));
	json_int_t bytes = json_integer_value(json_object_get(pr, "bytes"));
	if (!json_is_object(pr)) {
		pbx_buf_add(&h->out, p, n);
		pbx_buf_addc(&h->out, '\n');
	} else if (h->g->o->progress && done >= 0 && total >= done && bytes >= 0) {
		h->g->o->progress(h->g->o->ctx, h->g->r->key, (size_t)done, (size_t)total,
				  (uint64_t)bytes, 0);
	}
	json_decref(o);
}

static void head_output(void *ctx, int stream, const char *data, size_t len)
{
	struct head_report *h = ctx;
	const char *nl;
	if (stream == 2) {
		pbx_buf_add(&h->err, data, len);
		return;
	}
	while (len && (nl = memchr(data, '\n', len))) {
		pbx_buf_add(&h->line, data, (size_t)(nl - data));
		head_line(h, h->line.buf ? h->line.buf : "", h->line.len);
		pbx_buf_reset(&h->line);
		len -= (size_t)(nl - data) + 1;
		data = nl + 1;
	}
	pbx_buf_add(&h->line, data, len);
}

/* Source g staged by c's head with its own identity: `pbx-head -q cluster
 * data NAME KEY` there (one SSH exec), its progress shown as it comes
 * (PBX_DATA_PROGRESS; a head's pbx that does not know it prints none)
 * and its one-line JSON report read back.  The bytes never cross this
 * machine, which needs no credential. */
static int stage_on_head(struct pbx_cluster *c, struct stage *g)
{
	struct pbx_buf script = PBX_BUF_INIT;
	struct head_report h = { g, PBX_BUF_INIT, PBX_BUF_INIT, PBX_BUF_INIT };
	char *head =
		xasprintf("%s/usr/local/sbin/pbx-head", c->nodes[0].root ? c->nodes[0].root : "");
	int rc, status = 0;
	pbx_buf_adds(&script, "PBX_DATA_PROGRESS=1 exec ");
	pbx_shell_quote(&script, head);
	pbx_buf_adds(&script, " -q cluster data ");
	pbx_shell_quote(&script, c->row.name);
	pbx_buf_addc(&script, ' ');
	pbx_shell_quote(&script, g->r->key);
	rc = pbx_cluster_exec_sh(c, 0, script.buf, head_output, &h, &status, g->err);
	if (h.line.len)
		head_line(&h, h.line.buf, h.line.len);
	pbx_buf_rtrim(&h.err);
	if (rc == 0 && status != 0)
		rc = pbx_err_set(g->err, "remote command on %s failed (status %d): %s", c->row.name,
				 status, h.err.buf ? h.err.buf : "");
	if (rc < 0) {
		pbx_err_prefix(g->err, "data %s: staging by the head of %s", g->r->key,
			       c->row.name);
	} else {
		pbx_buf_rtrim(&h.out);
		rc = pbx_data_result_parse(h.out.buf ? h.out.buf : "", h.out.len, g->r, g->err);
	}
	pbx_buf_release(&h.line);
	pbx_buf_release(&h.out);
	pbx_buf_release(&h.err);
	free(head);
	pbx_buf_release(&script);
	return rc;
}

static void stage_release(struct stage *g)
{
	if (g->s)
		pbx_objstore_close(g->s);
	free(g->token);
	dlist_free(&g->q.l);
	pthread_mutex_destroy(&g->q.mu);
	pthread_cond_destroy(&g->q.cv);
	dlist_free(&g->removed);
	dlist_free(&g->src);
	dlist_free(&g->have);
	dlist_free(&g->cache);
	free(g->cache_dir);
}

/* Keys and ids of every source (local ones must be directories now). */
static int stage_keys(const struct pbx_experiment *e, struct pbx_data_result *res,
		      struct pbx_err *err)
{
	size_t i;
	for (i = 0; i < e->ndata; i++) {
		res[i].to = e->data[i].to;
		res[i].staged_before = -1;
		if (pbx_experiment_data_key(e, i, &res[i].key, res[i].id, err) < 0)
			return -1;
	}
	return 0;
}

int pbx_data_stage(struct pbx_cluster *c, const struct pbx_experiment *e,
		   const struct pbx_data_opts *o, struct pbx_data_result **res, size_t *nres,
		   struct pbx_err *err)
{
	struct dlist *have;
	size_t i;
	int rc;
	*res = xcalloc(e->ndata ? e->ndata : 1, sizeof(**res));
	*nres = e->ndata;
	if (!e->ndata)
		return 0;
	have = xcalloc(e->ndata, sizeof(*have));
	rc = stage_keys(e, *res, err);
	if (rc == 0 && c)
		rc = read_manifests(c, *res, e->ndata, have, err);
	for (i = 0; i < e->ndata; i++) {
		struct stage g = { 0 };
		g.o = o;
		g.r = &(*res)[i];
		g.err = err;
		g.have = have[i];
		memset(&have[i], 0, sizeof(have[i]));
		g.local = !e->data[i].is_url && g.r->key ? g.r->key + 6 : NULL;
		g.link_local = c && pbx_cluster_head_sees_here(c);
		pthread_mutex_init(&g.q.mu, NULL);
		pthread_cond_init(&g.q.cv, NULL);
		if (rc == 0 && c && !o->dry_run && pbx_head_stages_data(c, g.r->key))
			rc = stage_on_head(c, &g);
		else if (rc == 0)
			rc = stage_locked(c, &g);
		stage_release(&g);
	}
	free(have);
	return rc;
}

void pbx_data_results_free(struct pbx_data_result *res, size_t n)
{
	size_t i;
	for (i = 0; res && i < n; i++)
		free(res[i].key);
	free(res);
}
