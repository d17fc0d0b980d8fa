/*
 * data_hashes.c - a local data source's file hashes remembered between
 * stagings (see data_hashes.h): loaded sorted by name, looked up by
 * binary search, the walk's files written back as JSON lines.
 */
#include "jobs/data_hashes.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What is remembered of one file. */
struct hash_entry {
	char *name;
	uint64_t size, ino, dev;
	int64_t mtime, ctime; /* ns */
	char sha[65];
};

struct hash_list {
	struct hash_entry *v;
	size_t n, alloc;
};

struct pbx_data_hashes {
	char *path;
	struct hash_list old; /* loaded, sorted by name */
	struct hash_list now; /* this walk's files */
	int64_t started;      /* ns (CLOCK_REALTIME) when loaded */
	size_t read, reused;
};

static void list_add(struct hash_list *l, const struct hash_entry *e)
{
	if (l->n == l->alloc) {
		l->alloc = l->alloc ? 2 * l->alloc : 64;
		l->v = xreallocarray(l->v, l->alloc, sizeof(*l->v));
	}
	l->v[l->n] = *e;
	l->v[l->n++].name = xstrdup(e->name);
}

static void list_free(struct hash_list *l)
{
	size_t i;
	for (i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct hash_entry *)a)->name, ((const struct hash_entry *)b)->name);
}

static int64_t ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* Whether s is 64 lower-case hex digits. */
static int sha_hex(const char *s)
{
	size_t i;
	for (i = 0; s && i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s && s[64] == '\0';
}

/* One line into h->old; a line that does not read is left out. */
static void parse_line(struct pbx_data_hashes *h, const char *p, size_t n)
{
	json_t *o = json_loadb(p, n, 0, NULL);
	struct hash_entry e = { 0 };
	json_t *size = json_object_get(o, "size"), *mt = json_object_get(o, "mtime");
	json_t *ct = json_object_get(o, "ctime"), *ino = json_object_get(o, "ino");
	json_t *dev = json_object_get(o, "dev");
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *sha = json_string_value(json_object_get(o, "sha256"));
	if (name && *name && sha_hex(sha) && json_is_integer(size) &&
	    json_integer_value(size) >= 0 && json_is_integer(mt) && json_is_integer(ct) &&
	    json_is_integer(ino) && json_is_integer(dev)) {
		e.name = (char *)name;
		e.size = (uint64_t)json_integer_value(size);
		e.mtime = json_integer_value(mt);
		e.ctime = json_integer_value(ct);
		e.ino = (uint64_t)json_integer_value(ino);
		e.dev = (uint64_t)json_integer_value(dev);
		memcpy(e.sha, sha, 65);
		list_add(&h->old, &e);
	}
	json_decref(o);
}

struct pbx_data_hashes *pbx_data_hashes_parse(const char *path, const char *text, size_t len)
{
	struct pbx_data_hashes *h = xcalloc(1, sizeof(*h));
	struct timespec now;
	size_t at = 0;
	h->path = path ? xstrdup(path) : NULL;
	while (text && at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
		parse_line(h, text + at, n);
		at += n + 1;
	}
	if (h->old.n)
		qsort(h->old.v, h->old.n, sizeof(*h->old.v), entry_cmp);
	clock_gettime(CLOCK_REALTIME, &now);
	h->started = ns_of(&now);
	return h;
}

struct pbx_data_hashes *pbx_data_hashes_load(const char *path)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err ignored = PBX_ERR_INIT;
	struct pbx_data_hashes *h;
	if (pbx_read_file(path, &b, &ignored) < 0)
		pbx_buf_reset(&b);
	h = pbx_data_hashes_parse(path, b.buf, b.len);
	pbx_buf_release(&b);
	return h;
}

/* The remembered entry of rel when the file is as it was, or NULL. */
static const struct hash_entry *unchanged(const struct pbx_data_hashes *h, const char *rel,
					  const struct stat *st)
{
	struct hash_entry key = { .name = (char *)rel };
	const struct hash_entry *e =
		h->old.n ? bsearch(&key, h->old.v, h->old.n, sizeof(*h->old.v), entry_cmp) : NULL;
	if (!e || e->size != (uint64_t)st->st_size || e->mtime != ns_of(&st->st_mtim) ||
	    e->ctime != ns_of(&st->st_ctim) || e->ino != (uint64_t)st->st_ino ||
	    e->dev != (uint64_t)st->st_dev)
		return NULL;
	return e;
}

int pbx_data_hashes_sha256(struct pbx_data_hashes *h, const char *rel, const char *full,
			   const struct stat *st, char hex[65], struct pbx_err *err)
{
	const struct hash_entry *old = unchanged(h, rel, st);
	struct hash_entry e = { .name = (char *)rel,
				.size = (uint64_t)st->st_size,
				.ino = (uint64_t)st->st_ino,
				.dev = (uint64_t)st->st_dev,
				.mtime = ns_of(&st->st_mtim),
				.ctime = ns_of(&st->st_ctim) };
	if (old) {
		memcpy(hex, old->sha, 65);
		h->reused++;
	} else if (pbx_sha256_file(full, hex, err) < 0) {
		return -1;
	} else {
		h->read++;
	}
	/* racily clean: changed within a second of this walk, a change in the
	 * same tick after the read would not show; read it again next time */
	if (e.mtime > h->started - 1000000000 || e.ctime > h->started - 1000000000)
		return 0;
	memcpy(e.sha, hex, 65);
	list_add(&h->now, &e);
	return 0;
}

size_t pbx_data_hashes_read(const struct pbx_data_hashes *h)
{
	return h->read;
}

size_t pbx_data_hashes_reused(const struct pbx_data_hashes *h)
{
	return h->reused;
}

int pbx_data_hashes_save(const struct pbx_data_hashes *h)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err ignored = PBX_ERR_INIT;
	char *dir, *slash;
	size_t i;
	int rc = -1;
	if (!h->path)
		return -1;
	if (h->read == 0 && h->now.n == h->old.n && h->reused == h->old.n)
		return 0; /* every file as remembered: the file already says so */
	for (i = 0; i < h->now.n; i++) {
		const struct hash_entry *e = &h->now.v[i];
		json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:s}", "name", e->name,
				      "size", (json_int_t)e->size, "mtime", (json_int_t)e->mtime,
				      "ctime", (json_int_t)e->ctime, "ino", (json_int_t)e->ino,
				      "dev", (json_int_t)e->dev, "sha256", e->sha);
		char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
		if (line) {
			pbx_buf_adds(&b, line);
			pbx_buf_addc(&b, '\n');
		}
		free(line);
		json_decref(o);
	}
	dir = xstrdup(h->path);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (!slash || pbx_mkdir_p(dir, 0700, &ignored) == 0)
		rc = pbx_write_file_atomic(h->path, b.buf ? b.buf : "", b.len, 0600, &ignored);
	free(dir);
	pbx_buf_release(&b);
	return rc;
}

void pbx_data_hashes_free(struct pbx_data_hashes *h)
{
	if (!h)
		return;
	list_free(&h->old);
	list_free(&h->now);
	free(h->path);
	free(h);
}
