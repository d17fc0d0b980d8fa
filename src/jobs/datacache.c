/*
 * datacache.c - this machine's download cache of staged data: listing it,
 * the per-source lock a staging holds, removing a source's cache
 * (datacache.h; `pbx cache`, src/cli/cmd-cache.c).
 */
#define _GNU_SOURCE
#include "jobs/datacache.h"
#include "objstore/objstore.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SOURCE_FILE ".pbx-source"

/* $PBX_HOME/data[/REST]; caller frees. */
static char *cache_path(const char *rest)
{
	return rest ? xasprintf("%s/data/%s", pbx_home(), rest) : xasprintf("%s/data", pbx_home());
}

static int id_valid(const char *s)
{
	size_t i;
	for (i = 0; i < 16; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return 0;
	return s[16] == '\0';
}

/* ------------------------------------------------------------ the lock */

/* Opens and locks `path` (LOCK_EX, or LOCK_EX|LOCK_NB when !wait), again
 * when the file it locked is no longer the path's (removed with its cache
 * meanwhile).  Returns the descriptor, -2 when busy (!wait), -1 with err. */
static int lock_take(const char *path, int wait, void (*waiting)(void *), void *ctx,
		     struct pbx_err *err)
{
	for (;;) {
		struct stat a, b;
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		int rc;
		if (fd < 0)
			return pbx_err_set(err, "cannot open %s: %s", path, strerror(errno));
		rc = flock(fd, LOCK_EX | LOCK_NB);
		if (rc < 0 && errno == EWOULDBLOCK && wait) {
			if (waiting)
				waiting(ctx);
			waiting = NULL;
			while ((rc = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
				;
		}
		if (rc < 0) {
			int e = errno;
			close(fd);
			if (e == EWOULDBLOCK)
				return -2;
			return pbx_err_set(err, "cannot lock %s: %s", path, strerror(e));
		}
		if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			return fd;
		close(fd);
	}
}

/* Whether a staging holds lock file `path` (a shared lock is refused):
 * read only, nothing created. */
static int lock_busy(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), busy;
	if (fd < 0)
		return 0;
	busy = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return busy;
}

/* Records `key` in cache dir's .pbx-source and stamps it now (its last
 * use): rewritten (synced) only when it says something else, else only
 * its time set.  Best effort: a cache that cannot record it still stages. */
static void source_stamp(const char *dir, const char *key)
{
	struct pbx_err ignored = PBX_ERR_INIT;
	struct pbx_buf b = PBX_BUF_INIT;
	char *src = xasprintf("%s/" SOURCE_FILE, dir);
	if (pbx_read_file(src, &b, &ignored) == 0 && b.len == strlen(key) &&
	    !memcmp(b.buf, key, b.len) &&
	    utimensat(AT_FDCWD, src, NULL, AT_SYMLINK_NOFOLLOW) == 0) {
		pbx_buf_release(&b);
		free(src);
		return;
	}
	pbx_write_file_atomic(src, key, strlen(key), 0600, &ignored);
	pbx_buf_release(&b);
	free(src);
}

int pbx_data_cache_lock(const char *id, const char *key, void (*waiting)(void *ctx), void *ctx,
			struct pbx_err *err)
{
	char *dir = cache_path(NULL), *lock = cache_path(id), *lockfile;
	struct pbx_err ignored = PBX_ERR_INIT;
	int fd = -1;
	lockfile = xasprintf("%s.lock", lock);
	if (pbx_mkdir_p(dir, 0700, err) == 0)
		fd = lock_take(lockfile, 1, waiting, ctx, err);
	if (fd >= 0 && pbx_mkdir_p(lock, 0700, &ignored) == 0)
		source_stamp(lock, key);
	free(lockfile);
	free(lock);
	free(dir);
	return fd;
}

void pbx_data_cache_unlock(int lock)
{
	if (lock >= 0)
		close(lock);
}

/* --------------------------------------------------------------- removal */

/* Removes what removals cut short (killed) left: .rm-ID, renamed out of
 * the way and not removed, unless a removal of ID holds its lock now. */
static void sweep_removed(void)
{
	char *dir = cache_path(NULL), *gone, *lockfile;
	DIR *d = opendir(dir);
	struct dirent *de;
	struct pbx_err ignored = PBX_ERR_INIT;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, ".rm-", 4) || !id_valid(de->d_name + 4))
			continue;
		gone = cache_path(de->d_name);
		lockfile = xasprintf("%s/%s.lock", dir, de->d_name + 4);
		if (!lock_busy(lockfile))
			pbx_rm_rf(gone, &ignored);
		free(lockfile);
		free(gone);
	}
	if (d)
		closedir(d);
	free(dir);
}

int pbx_data_cache_remove(const char *id, struct pbx_err *err)
{
	char *dir = cache_path(id), *lockfile = xasprintf("%s.lock", dir);
	char *gone = NULL;
	int fd, rc = 0;
	if (!id_valid(id)) {
		free(lockfile);
		free(dir);
		return pbx_err_set(err, "'%s' is not a data cache id", id);
	}
	sweep_removed();
	fd = lock_take(lockfile, 0, NULL, NULL, err);
	if (fd == -2)
		rc = 1;
	else if (fd < 0)
		rc = -1;
	if (fd >= 0) {
		/* out of the way first (a name no staging uses), so that
		   what an interruption leaves is never taken for a cache */
		char *name = xasprintf(".rm-%s", id);
		gone = cache_path(name);
		free(name);
		if (pbx_rm_rf(gone, err) < 0 ||
		    (rename(dir, gone) < 0 && errno != ENOENT &&
		     pbx_err_set(err, "cannot remove %s: %s", dir, strerror(errno)) < 0) ||
		    pbx_rm_rf(gone, err) < 0)
			rc = -1;
		else
			unlink(lockfile);
		close(fd);
	}
	free(gone);
	free(lockfile);
	free(dir);
	return rc;
}

/* --------------------------------------------------------------- listing */

/* What du_one adds up (nftw has no context pointer). */
static struct pbx_data_cache *du_into;
static size_t du_files_at; /* the length of ".../ID/files" */
static const char *du_files;

static int du_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	uint64_t used = (uint64_t)st->st_blocks * 512;
	(void)ftw;
	du_into->bytes += used;
	if (type == FTW_F && S_ISREG(st->st_mode)) {
		if (!strncmp(path, du_files, du_files_at) && path[du_files_at] == '/' &&
		    !strstr(path + du_files_at, ".tmp."))
			du_into->files++;
		if (st->st_nlink > 1)
			du_into->shared += used;
	}
	return 0;
}

/* Fills e (its id set) from its directory and lock. */
static void list_one(struct pbx_data_cache *e)
{
	char *dir = cache_path(e->id), *src = xasprintf("%s/" SOURCE_FILE, dir);
	char *lockfile = xasprintf("%s.lock", dir);
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err ignored = PBX_ERR_INIT;
	struct stat st;
	if (pbx_read_file(src, &b, &ignored) == 0 && b.len && !memchr(b.buf, '\0', b.len))
		e->key = xstrndup(b.buf, b.len);
	if (stat(src, &st) == 0 || stat(dir, &st) == 0) {
		e->used = st.st_mtim.tv_sec;
		e->used_nsec = st.st_mtim.tv_nsec;
	}
	du_into = e;
	du_files = xasprintf("%s/files", dir);
	du_files_at = strlen(du_files);
	nftw(dir, du_one, 16, FTW_PHYS);
	free((char *)du_files);
	e->busy = lock_busy(lockfile);
	pbx_buf_release(&b);
	free(lockfile);
	free(src);
	free(dir);
}

static int by_use(const void *a, const void *b)
{
	const struct pbx_data_cache *x = a, *y = b;
	if (x->used != y->used)
		return x->used > y->used ? -1 : 1;
	if (x->used_nsec != y->used_nsec)
		return x->used_nsec > y->used_nsec ? -1 : 1;
	return strcmp(x->id, y->id);
}

int pbx_data_cache_list(struct pbx_data_cache **v, size_t *n, struct pbx_err *err)
{
	char *dir = cache_path(NULL);
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t cap = 0;
	*v = NULL;
	*n = 0;
	if (!d) {
		int e = errno, rc = 0;
		if (e != ENOENT)
			rc = pbx_err_set(err, "cannot read %s: %s", dir, strerror(e));
		free(dir);
		return rc;
	}
	while ((de = readdir(d))) {
		struct stat st;
		if (!id_valid(de->d_name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			*v = xreallocarray(*v, cap, sizeof(**v));
		}
		memset(&(*v)[*n], 0, sizeof(**v));
		memcpy((*v)[*n].id, de->d_name, 17);
		list_one(&(*v)[(*n)++]);
	}
	closedir(d);
	free(dir);
	if (*n)
		qsort(*v, *n, sizeof(**v), by_use);
	return 0;
}

void pbx_data_cache_list_free(struct pbx_data_cache *v, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		free(v[i].key);
	free(v);
}

int pbx_data_cache_trim(uint64_t max, void (*removed)(void *ctx, const struct pbx_data_cache *e),
			void *ctx, struct pbx_err *err)
{
	struct pbx_data_cache *v;
	uint64_t total = 0;
	size_t n, i;
	int rc = pbx_data_cache_list(&v, &n, err);
	for (i = 0; rc == 0 && i < n; i++)
		total += v[i].bytes - v[i].shared;
	for (i = n; rc == 0 && i-- > 0 && total > max;) {
		if (v[i].busy)
			continue;
		rc = pbx_data_cache_remove(v[i].id, err);
		if (rc == 0) {
			total -= v[i].bytes - v[i].shared;
			if (removed)
				removed(ctx, &v[i]);
		}
		if (rc == 1) /* a staging took it since the listing */
			rc = 0;
	}
	pbx_data_cache_list_free(v, n);
	return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------ resolving */

/* The id of key (the sha256's first 16 hex digits, as staging names it). */
static void key_id(const char *key, char id[17])
{
	char hex[65];
	pbx_sha256_hex(key, strlen(key), hex);
	memcpy(id, hex, 16);
	id[16] = '\0';
}

static int resolve_prefix(const char *arg, const struct pbx_data_cache *v, size_t n, char id[17],
			  struct pbx_err *err)
{
	size_t i, len = strlen(arg), found = n, matches = 0;
	for (i = 0; i < len; i++)
		if (!isxdigit((unsigned char)arg[i]))
			len = 0;
	for (i = 0; len >= 4 && len <= 16 && i < n; i++)
		if (!strncasecmp(v[i].id, arg, len)) {
			found = i;
			matches++;
		}
	if (matches == 1) {
		memcpy(id, v[found].id, 17);
		return 0;
	}
	if (matches > 1)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "'%s' names more than one data cache: "
				    "give more of its id",
				    arg);
	return pbx_err_setc(err, PBX_EXIT_USAGE,
			    "'%s' is no cached source: give a gs:// or s3:// URL, a local "
			    "directory or an id that 'pbx cache ls' shows",
			    arg);
}

int pbx_data_cache_resolve(const char *arg, const struct pbx_data_cache *v, size_t n, char id[17],
			   struct pbx_err *err)
{
	struct stat st;
	const char *path = strncmp(arg, "local:", 6) ? arg : arg + 6; /* as ls shows it */
	char *key = NULL, *real;
	size_t i;
	if (strstr(arg, "://")) {
		struct pbx_objstore_url u;
		if (pbx_objstore_url_parse(arg, &u, err) < 0)
			return -1;
		key = xasprintf("%s://%s/%s", u.scheme, u.bucket, u.prefix);
		pbx_objstore_url_free(&u);
	} else if ((real = realpath(path, NULL)) && stat(real, &st) == 0 && S_ISDIR(st.st_mode)) {
		key = xasprintf("local:%s", real);
		free(real);
	} else {
		free(real);
		/* a removed directory the cache still knows by its path */
		for (i = 0; path[0] == '/' && i < n; i++)
			if (v[i].key && !strncmp(v[i].key, "local:", 6) &&
			    !strcmp(v[i].key + 6, path))
				key = xstrdup(v[i].key);
	}
	if (!key)
		return resolve_prefix(arg, v, n, id, err);
	key_id(key, id);
	free(key);
	return 0;
}
