/*
 * test_datacache.c - unit tests of src/jobs/datacache.c in a private
 * $PBX_HOME: the listing (objects under files/, the disk used, the bytes
 * shared with another link, the last use from .pbx-source, the last used
 * first, a cache a staging holds marked busy, what is not a cache left
 * out); the lock (taken, recorded, busy for another, released; a removed
 * lock file is not the lock); removal (busy left; the directory and its
 * lock gone); the bound (least recently used first, busy and shared bytes
 * not counted as freeable, nothing removed within it); resolving an
 * argument (URL normalised, an id prefix, ambiguous or unknown refused).
 */
#include "common/tap.h"
#include "jobs/datacache.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char home[64];

/* $PBX_HOME/data/REL; caller frees. */
static char *at(const char *rel)
{
	return xasprintf("%s/data/%s", home, rel);
}

/* A file of `size` bytes at data/REL, its directories made. */
static void put(const char *rel, size_t size)
{
	char *p = at(rel), *slash = strrchr(p, '/');
	char *buf = xcalloc(size ? size : 1, 1);
	FILE *f;
	*slash = '\0';
	pbx_mkdir_p(p, 0700, NULL);
	*slash = '/';
	f = fopen(p, "w");
	if (f) {
		fwrite(buf, 1, size, f);
		fclose(f);
	}
	free(buf);
	free(p);
}

/* Cache ID of source KEY with one object of `size` bytes, last used
 * `age` seconds ago. */
static void cache(const char *id, const char *key, size_t size, long age)
{
	char *obj = xasprintf("%s/files/o", id), *src = xasprintf("%s/.pbx-source", id);
	char *p = at(src);
	struct timespec t[2];
	FILE *f;
	put(obj, size);
	f = fopen(p, "w");
	if (f) {
		fputs(key, f);
		fclose(f);
	}
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= age;
	t[1] = t[0];
	utimensat(AT_FDCWD, p, t, 0);
	free(p);
	free(src);
	free(obj);
}

static int exists(const char *rel)
{
	struct stat st;
	char *p = at(rel);
	int rc = lstat(p, &st) == 0;
	free(p);
	return rc;
}

static const struct pbx_data_cache *find(const struct pbx_data_cache *v, size_t n, const char *id)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(v[i].id, id))
			return &v[i];
	return NULL;
}

/* Another open file description of ID's lock, held (LOCK_EX). */
static int hold(const char *id)
{
	char *rel = xasprintf("%s.lock", id), *p = at(rel);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		fd = -1;
	}
	free(p);
	free(rel);
	return fd;
}

static const char A[] = "aaaaaaaaaaaaaaaa", B[] = "bbbbbbbbbbbbbbbb", C[] = "cccccccccccccccc",
		  D[] = "dddddddddddddddd";

static void test_list(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_data_cache *v;
	const struct pbx_data_cache *a, *c;
	char *linked = xasprintf("%s/elsewhere", home), *obj = at("cccccccccccccccc/files/o");
	size_t n;
	int fd;
	cache(A, "gs://b/a/", 1 << 20, 300);
	cache(B, "gs://b/b/", 1 << 20, 200);
	cache(C, "s3://b/c/", 1 << 20, 100);
	put("aaaaaaaaaaaaaaaa/files/x.tmp.Ab3dE9", 10); /* a download cut short */
	put("not-a-cache/files/o", 10);
	put("0123456789ABCDEF/files/o", 10); /* upper case: no id of pbx's */
	ok(link(obj, linked) == 0, "c's object linked elsewhere too (a local cluster's copy)");
	fd = hold(B);
	ok(fd >= 0, "b's lock held by another");
	ok(pbx_data_cache_list(&v, &n, &err) == 0 && n == 3, "3 caches listed, nothing else (%zu)",
	   n);
	ok(n == 3 && !strcmp(v[0].id, C) && !strcmp(v[1].id, B) && !strcmp(v[2].id, A),
	   "the last used first");
	a = find(v, n, A);
	c = find(v, n, C);
	ok(a && a->key && !strcmp(a->key, "gs://b/a/") && a->files == 1,
	   "a: its source, 1 object (the temporary file is none)");
	ok(a && a->bytes >= (1 << 20) && a->shared == 0, "a: its disk, nothing shared");
	ok(c && c->shared >= (1 << 20) && c->shared < c->bytes, "c: its object's bytes shared");
	ok(a && a->used <= time(NULL) - 299 && a->used >= time(NULL) - 310,
	   "a: last used 300 s ago");
	ok(find(v, n, B) && find(v, n, B)->busy && a && !a->busy, "b busy, a not");
	ok(!exists("aaaaaaaaaaaaaaaa.lock") && !exists("cccccccccccccccc.lock"),
	   "listing creates no lock file");
	pbx_data_cache_list_free(v, n);
	ok(pbx_data_cache_remove(B, &err) == 1 && exists(B), "a busy cache is left by remove");
	close(fd);
	free(obj);
	free(linked);
}

/* A staging waiting on lock file `lockfile` while a removal of its cache
 * holds it and unlinks it: once the removal ends, the staging must hold
 * the new lock file, not the unlinked one (which would let a second
 * staging, making a new file, run beside it). */
static void test_lock_replaced(const char *lockfile)
{
	int held = hold(D), up[2], down[2], other = -1;
	char c = 0;
	pid_t pid;
	if (pipe(up) < 0 || pipe(down) < 0 || held < 0) {
		ok(0, "set-up of the waiting staging");
		return;
	}
	pid = fork();
	if (pid == 0) { /* the waiting staging */
		struct pbx_err e = PBX_ERR_INIT;
		int lk;
		close(held); /* the removal's, not this process's */
		lk = pbx_data_cache_lock(D, "gs://b/d/", NULL, NULL, &e);
		c = lk >= 0 ? 'y' : 'n';
		if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	usleep(200000); /* it waits on the lock now */
	unlink(lockfile);
	close(held);
	if (read(up[0], &c, 1) == 1 && c == 'y')
		other = hold(D);
	ok(c == 'y' && other < 0 && exists("dddddddddddddddd.lock"),
	   "a staging that waited on a lock file removed meanwhile holds the new one");
	if (other >= 0)
		close(other);
	c = 'x';
	if (write(down[1], &c, 1) != 1)
		perror("write");
	waitpid(pid, NULL, 0);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
}

static void test_lock(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_data_cache *v;
	size_t n;
	char *lockfile = at("dddddddddddddddd.lock");
	int fd = pbx_data_cache_lock(D, "gs://b/d/", NULL, NULL, &err), other;
	ok(fd >= 0 && exists("dddddddddddddddd/.pbx-source"), "lock: taken, the source recorded");
	other = hold(D);
	ok(other < 0, "held: another cannot take it");
	pbx_data_cache_list(&v, &n, &err);
	ok(find(v, n, D) && find(v, n, D)->busy && !strcmp(v[0].id, D) &&
		   !strcmp(find(v, n, D)->key, "gs://b/d/"),
	   "listed busy, its source, the last used");
	pbx_data_cache_list_free(v, n);
	pbx_data_cache_unlock(fd);
	other = hold(D);
	ok(other >= 0, "released");
	close(other);
	test_lock_replaced(lockfile);
	ok(pbx_data_cache_remove(D, &err) == 0 && !exists(D) && !exists("dddddddddddddddd.lock"),
	   "remove: the directory and its lock gone");
	ok(pbx_data_cache_remove(D, &err) == 0, "removing what is not there: 0");
	put(".rm-eeeeeeeeeeeeeeee/files/o", 10); /* a removal killed after its rename */
	ok(pbx_data_cache_remove(D, &err) == 0 && !exists(".rm-eeeeeeeeeeeeeeee"),
	   "the next removal removes what a killed one left");
	ok(pbx_data_cache_remove("../../etc", &err) < 0, "an id that is none: refused (%s)",
	   err.msg);
	free(lockfile);
}

static size_t removed_n;
static char removed_ids[4][17];

static void on_removed(void *ctx, const struct pbx_data_cache *e)
{
	(void)ctx;
	if (removed_n < 4)
		memcpy(removed_ids[removed_n], e->id, 17);
	removed_n++;
}

static void test_trim(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	int fd, rc;
	/* a (oldest, 1 MiB), b (1 MiB, busy), c (newest, its 1 MiB shared) */
	rc = pbx_data_cache_trim(UINT64_C(4) << 20, on_removed, NULL, &err);
	ok(rc == 0 && removed_n == 0, "within 4 MiB: nothing removed");
	fd = hold(B);
	rc = pbx_data_cache_trim(UINT64_C(3) << 19, on_removed, NULL, &err);
	ok(rc == 0 && removed_n == 1 && !strcmp(removed_ids[0], A) && !exists(A) && exists(B) &&
		   exists(C),
	   "over 1.5 MiB: the least recently used goes first, and no more (%zu removed)",
	   removed_n);
	removed_n = 0;
	rc = pbx_data_cache_trim(0, on_removed, NULL, &err);
	ok(rc == 0 && removed_n == 1 && !strcmp(removed_ids[0], C) && exists(B) && !exists(C),
	   "bound 0: every cache no staging holds goes; the busy one stays (%zu removed)",
	   removed_n);
	close(fd);
}

static void test_resolve(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_data_cache v[2];
	char id[17], other[17], want[17], hex[65], *local;
	memset(v, 0, sizeof(v));
	memcpy(v[0].id, "abcd000000000000", 17);
	memcpy(v[1].id, "abce000000000000", 17);
	pbx_sha256_hex("gs://bkt/p/", strlen("gs://bkt/p/"), hex);
	memcpy(want, hex, 16);
	want[16] = '\0';
	ok(pbx_data_cache_resolve("gs://bkt/p", v, 2, id, &err) == 0 && !strcmp(id, want),
	   "a URL without its slash: the id staging gives gs://bkt/p/");
	ok(pbx_data_cache_resolve("abcd", v, 2, id, &err) == 0 && !strcmp(id, v[0].id),
	   "a unique id prefix");
	ok(pbx_data_cache_resolve("abc", v, 2, id, &err) < 0, "3 digits: too short");
	ok(pbx_data_cache_resolve("abc0", v, 2, id, &err) < 0, "no match: refused");
	ok(pbx_data_cache_resolve("gs://bkt/../x", v, 2, id, &err) < 0, "a URL with ..: refused");
	memcpy(v[1].id, "abcd100000000000", 17);
	ok(pbx_data_cache_resolve("abcd", v, 2, id, &err) < 0 && strstr(err.msg, "more than one"),
	   "an ambiguous prefix: refused (%s)", err.msg);
	ok(pbx_data_cache_resolve(home, v, 2, id, &err) == 0 && strlen(id) == 16,
	   "a directory: local: and its real path");
	local = xasprintf("local:%s", home);
	ok(pbx_data_cache_resolve(local, v, 2, other, &err) == 0 && !strcmp(id, other),
	   "the same written as cache ls shows it (local:PATH)");
	free(local);
}

int main(void)
{
	strcpy(home, "/tmp/pbx-datacache.XXXXXX");
	if (!mkdtemp(home))
		return 1;
	setenv("PBX_HOME", home, 1);
	test_list();
	test_lock();
	test_trim();
	test_resolve();
	pbx_rm_rf(home, NULL);
	return tap_done();
}
