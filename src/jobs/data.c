/*
 * data.c - staging the experiment's `data:` sources on a cluster once per
 * source, reused by every package (see data.h and docs/data.md): list the
 * source, compare with the cluster's manifest, download what changed with
 * the user's credentials (or read it from the local directory), push it
 * in one tar with the removals and the new manifest.
 */
#include "jobs/data.h"
#include "experiment/tar.h"
#include "jobs/jobs_internal.h"
#include "objstore/objstore.h"
#include "util/fs.h"
#include "util/fanout.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Every name safe, none reserved, none twice, none both a file and a
 * directory of another ("a" and "a/b").  l is sorted. */
static int names_check(const struct dlist *l, const char *key, struct pbx_err *err)
{
	size_t i;
	for (i = 0; i < l->n; i++) {
		const char *nm = l->v[i].name;
		char *probe;
		size_t k;
		if (!pbx_objstore_name_safe(nm))
			return pbx_err_setc(
				err, PBX_EXIT_USAGE,
				"data %s: object '%s' has a name pbx will not turn "
				"into a path (empty, '.', '..' or '//' parts, a leading "
				"'/' or control bytes): nothing was staged",
				key, nm);
		if (!strncmp(nm, ".pbx-data", 9))
			return pbx_err_setc(err, PBX_EXIT_USAGE,
					    "data %s: object '%s': names starting .pbx-data are "
					    "pbx's",
					    key, nm);
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

static int list_store(struct pbx_objstore *s, const char *key, struct dlist *l, struct pbx_err *err)
{
	const struct pbx_objstore_url *u = pbx_objstore_where(s);
	struct pbx_object *v = NULL;
	size_t n = 0, i, plen = strlen(u->prefix);
	if (pbx_objstore_list(s, u->prefix, &v, &n, err) < 0)
		return pbx_err_prefix(err, "data %s", key);
	if (n > PBX_DATA_MAX_OBJECTS) {
		pbx_objects_free(v, n);
		return pbx_err_setc(err, PBX_EXIT_USAGE, "data %s: %zu objects, more than %d", key,
				    n, PBX_DATA_MAX_OBJECTS);
	}
	for (i = 0; i < n; i++) {
		const char *rel = v[i].name + plen;
		size_t rl = strlen(rel);
		if (strncmp(v[i].name, u->prefix, plen) || !rl ||
		    (rel[rl - 1] == '/' && v[i].size == 0))
			continue; /* the prefix itself, or a "folder" placeholder */
		dlist_add(l, rel, v[i].size, v[i].version);
	}
	pbx_objects_free(v, n);
	return 0;
}

struct walk {
	const char *root; /* the real path of the directory */
	const char *key;
	struct dlist *l;
	struct pbx_err *err;
};

/* A regular file (or a link to one inside the root) into the list. */
static int walk_file(struct walk *w, const char *rel, const char *full)
{
	char hex[65];
	struct stat st;
	if (stat(full, &st) < 0 || pbx_sha256_file(full, hex, w->err) < 0)
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

/* Indexes of src entries new or changed against have; *removed gets the
 * entries of have that src lacks. */
static size_t *diff(const struct dlist *src, const struct dlist *have, size_t *nchg,
		    struct dlist *removed)
{
	size_t *chg = xcalloc(src->n ? src->n : 1, sizeof(size_t)), i;
	*nchg = 0;
	for (i = 0; i < src->n; i++) {
		const struct dentry *h = dlist_find(have, src->v[i].name);
		if (!h || h->size != src->v[i].size || strcmp(h->version, src->v[i].version))
			chg[(*nchg)++] = i;
	}
	for (i = 0; i < have->n; i++)
		if (!dlist_find(src, have->v[i].name))
			dlist_add(removed, have->v[i].name, have->v[i].size, have->v[i].version);
	return chg;
}

/* ------------------------------------------------------ one staging */

/* What staging one source works with. */
struct stage {
	const struct pbx_data_opts *o;
	struct pbx_data_result *r;
	const char *local;      /* the real path of a local source, or NULL */
	struct pbx_objstore *s; /* a store source */
	struct dlist src, have; /* listed; the cluster's manifest */
	struct dlist cache;     /* $PBX_HOME/data/ID's manifest */
	char *cache_dir;
	struct pbx_tar tar;
	struct pbx_err *err;
};

/* The cache's copy of e when it is the same object; 1 when body has it. */
static int cache_hit(struct stage *g, const struct dentry *e, struct pbx_buf *body)
{
	const struct dentry *c = dlist_find(&g->cache, e->name);
	struct pbx_err ignored = PBX_ERR_INIT;
	char *path;
	int ok;
	if (!c || c->size != e->size || strcmp(c->version, e->version))
		return 0;
	path = xasprintf("%s/files/%s", g->cache_dir, e->name);
	ok = pbx_read_file(path, body, &ignored) == 0 && body->len == e->size;
	free(path);
	return ok;
}

/* Writes a downloaded object's bytes into the cache's files: 0, or -1
 * (best effort: the push does not need it).  Thread-safe. */
static int cache_write(const struct stage *g, const struct dentry *e, const struct pbx_buf *body)
{
	struct pbx_err ignored = PBX_ERR_INIT;
	char *path = xasprintf("%s/files/%s", g->cache_dir, e->name), *slash;
	int rc = -1;
	slash = strrchr(path, '/');
	*slash = '\0';
	if (pbx_mkdir_p(path, 0700, &ignored) == 0) {
		*slash = '/';
		rc = pbx_write_file_atomic(path, body->buf, body->len, 0600, &ignored);
	}
	free(path);
	return rc;
}

/* Records in the cache's manifest that it holds e. */
static void cache_note(struct stage *g, const struct dentry *e)
{
	struct dentry *c = dlist_find(&g->cache, e->name);
	if (c) {
		free(c->version);
		c->version = xstrdup(e->version);
		c->size = e->size;
	} else {
		dlist_add(&g->cache, e->name, e->size, e->version);
		dlist_sort(&g->cache);
	}
}

/* Keeps a downloaded object in the cache (best effort). */
static void cache_put(struct stage *g, struct dentry *e, const struct pbx_buf *body)
{
	if (cache_write(g, e, body) == 0)
		cache_note(g, e);
}

/* Object e whole into body: from the cache, else from the store (its
 * CRC32C checked), then kept in the cache. */
static int fetch(struct stage *g, struct dentry *e, struct pbx_buf *body)
{
	struct pbx_object meta = { 0 };
	char *name;
	int rc;
	pbx_buf_reset(body);
	if (cache_hit(g, e, body))
		return 0;
	name = xasprintf("%s%s", pbx_objstore_where(g->s)->prefix, e->name);
	rc = pbx_objstore_get(g->s, name, 0, body, &meta, g->err);
	g->r->downloads++;
	if (rc < 0)
		pbx_err_prefix(g->err, "data %s", g->r->key);
	else if (body->len != e->size)
		rc = pbx_err_set(g->err, "data %s: object '%s' changed while it was read",
				 g->r->key, name);
	if (rc == 0 && meta.version && strcmp(meta.version, e->version)) {
		free(e->version); /* rewritten since the listing: record what came */
		e->version = xstrdup(meta.version);
	}
	pbx_object_release(&meta);
	free(name);
	if (rc == 0)
		cache_put(g, e, body);
	return rc;
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

/* Changed entry e as tar member files/NAME. */
static int tar_entry(struct stage *g, struct dentry *e, struct pbx_buf *body)
{
	char *member = xasprintf("files/%s", e->name);
	int rc;
	if (g->local) {
		char *src = xasprintf("%s/%s", g->local, e->name);
		unsigned char sha[32];
		hex_bytes(e->version, sha);
		rc = pbx_tar_file(&g->tar, member, 0444, src, e->size, sha);
		free(src);
	} else {
		rc = fetch(g, e, body);
		if (rc == 0)
			rc = pbx_tar_mem(&g->tar, member, 0444, body->buf, body->len);
	}
	free(member);
	return rc;
}

/* ------------------------------------------------------------ prefetch */

#define DATA_LANES 8 /* parallel downloads of one staging, a store each */

/* The changed objects not in the cache, downloaded DATA_LANES at a time
 * into the cache's files before the tar is built from them (one request
 * after another took 10,000 small objects 2.4 times as long as rclone's
 * 4 transfers: BENCHMARKS.md). */
struct prefetch {
	struct stage *g;
	struct dentry **todo;
	size_t n, lanes;
	unsigned char *got; /* todo[i] is in the cache's files */
	pthread_mutex_t mu; /* done, bytes, downloads, the progress call */
	size_t done, downloads;
	uint64_t bytes;
};

/* Lane k: todo[k], todo[k + lanes], ... on a store of its own. */
static int prefetch_lane(void *ctx, size_t k, struct pbx_err *err)
{
	struct prefetch *p = ctx;
	struct pbx_objstore *s = NULL;
	struct pbx_buf body = PBX_BUF_INIT;
	size_t i;
	int rc = pbx_objstore_open(p->g->r->key, p->g->o->cfg, &s, err);
	for (i = k; rc == 0 && i < p->n; i += p->lanes) {
		struct dentry *e = p->todo[i];
		struct pbx_object meta = { 0 };
		char *name = xasprintf("%s%s", pbx_objstore_where(s)->prefix, e->name);
		pbx_buf_reset(&body);
		rc = pbx_objstore_get(s, name, 0, &body, &meta, err);
		if (rc == 0 && body.len != e->size)
			rc = pbx_err_set(err, "object '%s' changed while it was read", name);
		if (rc == 0 && meta.version && strcmp(meta.version, e->version)) {
			free(e->version); /* rewritten since the listing: record what came */
			e->version = xstrdup(meta.version);
		}
		if (rc == 0 && cache_write(p->g, e, &body) == 0)
			p->got[i] = 1;
		pbx_object_release(&meta);
		free(name);
		pthread_mutex_lock(&p->mu);
		p->downloads++;
		if (rc == 0) {
			p->done++;
			p->bytes += e->size;
			if (p->g->o->progress)
				p->g->o->progress(p->g->o->ctx, p->g->r->key, p->done, p->n,
						  p->bytes);
		}
		pthread_mutex_unlock(&p->mu);
	}
	if (rc < 0)
		pbx_err_prefix(err, "data %s", p->g->r->key);
	if (s)
		pbx_objstore_close(s);
	pbx_buf_release(&body);
	return rc;
}

static int prefetch(struct stage *g, const size_t *chg, size_t nchg)
{
	struct prefetch p;
	struct pbx_err *errs;
	size_t i;
	int failed;
	memset(&p, 0, sizeof(p));
	p.g = g;
	p.todo = xcalloc(nchg + 1, sizeof(*p.todo));
	for (i = 0; i < nchg; i++) {
		struct dentry *e = &g->src.v[chg[i]];
		const struct dentry *c = dlist_find(&g->cache, e->name);
		if (!c || c->size != e->size || strcmp(c->version, e->version))
			p.todo[p.n++] = e;
	}
	if (p.n < 2) { /* one object or none: the tar's own fetch does it */
		free(p.todo);
		return 0;
	}
	p.lanes = p.n < DATA_LANES ? p.n : DATA_LANES;
	p.got = xcalloc(p.n, 1);
	pthread_mutex_init(&p.mu, NULL);
	errs = xcalloc(p.lanes, sizeof(*errs));
	failed = pbx_fanout(p.lanes, (int)p.lanes, prefetch_lane, &p, errs);
	for (i = 0; failed && i < p.lanes; i++)
		if (errs[i].msg[0]) {
			*g->err = errs[i];
			break;
		}
	for (i = 0; i < p.n; i++) /* one thread again: the manifest's list */
		if (p.got[i])
			cache_note(g, p.todo[i]);
	g->r->downloads += p.downloads;
	pthread_mutex_destroy(&p.mu);
	free(errs);
	free(p.got);
	free(p.todo);
	return failed ? -1 : 0;
}

/* The tar pushed: remove (NUL-separated names), the changed files, and
 * the manifest (after the files: downloads may update versions). */
static int tar_build(struct stage *g, const size_t *chg, size_t nchg, const struct dlist *removed)
{
	struct pbx_buf body = PBX_BUF_INIT, text = PBX_BUF_INIT;
	size_t i;
	int rc = 0;
	for (i = 0; i < removed->n; i++)
		pbx_buf_add(&text, removed->v[i].name, strlen(removed->v[i].name) + 1);
	rc = pbx_tar_mem(&g->tar, "remove", 0600, text.buf ? text.buf : "", text.len);
	for (i = 0; rc == 0 && i < nchg; i++) {
		rc = tar_entry(g, &g->src.v[chg[i]], &body);
		g->r->bytes_moved += g->src.v[chg[i]].size;
		if (rc == 0 && g->o->progress)
			g->o->progress(g->o->ctx, g->r->key, i + 1, nchg, g->r->bytes_moved);
	}
	pbx_buf_reset(&text);
	manifest_text(&g->src, &text);
	if (rc == 0)
		rc = pbx_tar_mem(&g->tar, "manifest", 0444, text.buf ? text.buf : "", text.len);
	if (rc == 0)
		rc = pbx_tar_end(&g->tar);
	pbx_buf_release(&body);
	pbx_buf_release(&text);
	return rc;
}

/* The push: unpack beside ID/ (same file system), remove what went, copy
 * the files in, fix the modes, then the manifest, then the directories'
 * modes.  One at a time per source (flock). */
static void push_script(struct pbx_buf *s, const char *id)
{
	pbx_buf_addf(
		s,
		"P=\"$PBX_SHARED/pbx/data\" D=\"$PBX_SHARED/pbx/data/%s\"\n"
		"mkdir -p \"$D\" || exit 1\n"
		"if command -v flock >/dev/null 2>&1; then exec 9>\"$P/.%s.lock\" && flock 9; fi\n"
		"T=$(mktemp -d \"$P/.in-%s.XXXXXX\") || exit 1\n"
		"trap 'chmod -R u+w \"$T\" 2>/dev/null; rm -rf \"$T\"' EXIT\n"
		"tar -C \"$T\" --no-same-owner -xf - ||"
		" { echo \"cannot unpack the data in $T\" >&2; exit 1; }\n"
		"find \"$D\" -type d ! -perm -u+w -exec chmod u+w {} + || exit 1\n"
		"if [ -s \"$T/remove\" ]; then (cd \"$D\" && xargs -0 rm -f -- <\"$T/remove\") ||"
		" exit 1; fi\n"
		"find \"$D\" -mindepth 1 -depth -type d -empty -delete || exit 1\n"
		"if [ -d \"$T/files\" ]; then cp -Rf \"$T/files/.\" \"$D/\" || exit 1; fi\n"
		"find \"$D\" -type f ! -perm 0444 -exec chmod 0444 {} + || exit 1\n"
		"chmod 0444 \"$T/manifest\" && mv -f \"$T/manifest\" \"$D/" DATA_MANIFEST
		"\" || exit 1\n"
		"find \"$D\" -type d ! -perm 0555 -exec chmod 0555 {} + || exit 1\n"
		"chmod 755 \"$P\" 2>/dev/null\n"
		"echo PBX-DATA-OK\n",
		id, id, id);
}

static int push(struct pbx_cluster *c, struct stage *g, const struct pbx_buf *tar)
{
	struct pbx_buf script = PBX_BUF_INIT;
	struct pbx_cluster_output out;
	int rc;
	push_script(&script, g->r->id);
	rc = pbx_cluster_run(c, 0, script.buf, tar, &out, g->err);
	pbx_buf_release(&script);
	if (rc < 0)
		return pbx_err_prefix(g->err, "data %s: staging on %s", g->r->key, c->row.name);
	pbx_cluster_output_release(&out);
	return 0;
}

/* The cluster's manifests of every source, one round trip: "PBX-DATA ID"
 * then its lines, or "PBX-DATA-NONE" when it has none. */
static int read_manifests(struct pbx_cluster *c, struct pbx_data_result *res, size_t n,
			  struct dlist *have, struct pbx_err *err)
{
	struct pbx_buf script = PBX_BUF_INIT;
	struct pbx_cluster_output out;
	const char *p;
	size_t i, len, cur = n;
	int rc;
	for (i = 0; i < n; i++)
		pbx_buf_addf(
			&script,
			"echo 'PBX-DATA %s'; f=\"$PBX_SHARED/pbx/data/%s/" DATA_MANIFEST "\"\n"
			"if [ -f \"$f\" ]; then cat \"$f\" || exit 1; echo; else echo PBX-DATA-NONE; fi\n",
			res[i].id, res[i].id);
	rc = pbx_cluster_run(c, 0, script.buf, NULL, &out, err);
	pbx_buf_release(&script);
	if (rc < 0)
		return pbx_err_prefix(err, "reading the data manifests on %s", c->row.name);
	for (p = out.out.buf, len = out.out.len; len;) {
		const char *nl = memchr(p, '\n', len);
		size_t l = nl ? (size_t)(nl - p) : len;
		if (l == 9 + 16 && !strncmp(p, "PBX-DATA ", 9)) {
			for (cur = 0; cur < n && strncmp(res[cur].id, p + 9, 16); cur++)
				;
			if (cur < n)
				res[cur].staged_before = 1;
		} else if (cur < n && l == 13 && !strncmp(p, "PBX-DATA-NONE", 13)) {
			res[cur].staged_before = 0;
		} else if (cur < n && l) {
			manifest_line(p, l, &have[cur]);
		}
		p += nl ? l + 1 : l;
		len -= nl ? l + 1 : l;
	}
	for (i = 0; i < n; i++)
		dlist_sort(&have[i]);
	pbx_cluster_output_release(&out);
	return 0;
}

/* Lists source g->r->key (a store or the local directory) into g->src. */
static int stage_list(struct stage *g)
{
	int rc;
	if (g->local) {
		struct walk w = { g->local, g->r->key, &g->src, g->err };
		rc = walk_dir(&w, NULL, 0);
	} else {
		rc = pbx_objstore_open(g->r->key, g->o->cfg, &g->s, g->err);
		if (rc < 0)
			pbx_err_prefix(g->err, "data %s", g->r->key);
		else
			rc = list_store(g->s, g->r->key, &g->src, g->err);
	}
	dlist_sort(&g->src);
	if (rc == 0)
		rc = names_check(&g->src, g->r->key, g->err);
	for (size_t i = 0; rc == 0 && i < g->src.n; i++) {
		g->r->objects++;
		g->r->bytes += g->src.v[i].size;
	}
	return rc;
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

static void stage_cache_save(struct stage *g)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err ignored = PBX_ERR_INIT;
	char *path = xasprintf("%s/" DATA_MANIFEST, g->cache_dir);
	manifest_text(&g->cache, &b);
	if (pbx_mkdir_p(g->cache_dir, 0700, &ignored) == 0)
		pbx_write_file_atomic(path, b.buf ? b.buf : "", b.len, 0600, &ignored);
	pbx_buf_release(&b);
	free(path);
}

/* The changed files and removals of g as one tar, pushed. */
static int stage_push(struct pbx_cluster *c, struct stage *g, const size_t *chg, size_t nchg,
		      const struct dlist *removed)
{
	struct pbx_buf tar = PBX_BUF_INIT;
	char *mem = NULL;
	size_t memlen = 0;
	int rc;
	g->tar.f = open_memstream(&mem, &memlen);
	g->tar.mtime = (long long)time(NULL);
	g->tar.what = g->r->key;
	g->tar.err = g->err;
	if (!g->tar.f)
		return pbx_err_set(g->err, "data %s: out of memory", g->r->key);
	rc = g->local ? 0 : prefetch(g, chg, nchg);
	if (rc == 0)
		rc = tar_build(g, chg, nchg, removed);
	if (!g->local)
		stage_cache_save(g);
	if (fclose(g->tar.f) != 0 && rc == 0)
		rc = pbx_err_set(g->err, "data %s: cannot build the tar", g->r->key);
	if (rc == 0) {
		pbx_buf_add(&tar, mem, memlen);
		rc = push(c, g, &tar);
	}
	free(mem);
	pbx_buf_release(&tar);
	return rc;
}

static int stage_one(struct pbx_cluster *c, struct stage *g)
{
	struct dlist removed = { 0 };
	size_t *chg = NULL, nchg = 0;
	struct timespec t0, t1;
	int rc;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = stage_list(g);
	if (rc == 0) {
		chg = diff(&g->src, &g->have, &nchg, &removed);
		g->r->changed = nchg;
		g->r->removed = removed.n;
	}
	if (rc == 0 && !g->local)
		stage_cache(g);
	if (rc == 0 && c && !g->o->dry_run && (nchg || removed.n || g->r->staged_before != 1))
		rc = stage_push(c, g, chg, nchg, &removed);
	if (rc == 0 && (g->o->dry_run || !c)) {
		for (size_t i = 0; i < nchg; i++)
			g->r->bytes_moved += g->src.v[chg[i]].size;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	g->r->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	free(chg);
	dlist_free(&removed);
	return rc;
}

static void stage_release(struct stage *g)
{
	if (g->s)
		pbx_objstore_close(g->s);
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
		if (rc == 0)
			rc = stage_one(c, &g);
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
