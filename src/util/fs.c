/*
 * fs.c - file-system helpers (see fs.h).
 */
#define _GNU_SOURCE
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir of p, or of its parents first when one is missing: the deepest
 * first, so a directory that exists costs one call (each component from
 * the root made a cache of 10,000 objects 160,000 calls).  -1 (errno) with
 * p cut at the directory that could not be made. */
static int mkdir_parents_first(char *p, mode_t mode)
{
	char *slash;
	if (mkdir(p, mode) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT || !(slash = strrchr(p, '/')) || slash == p)
		return -1;
	*slash = '\0';
	if (mkdir_parents_first(p, mode) < 0)
		return -1; /* p left at the directory that could not be made */
	*slash = '/';
	return mkdir(p, mode) == 0 || errno == EEXIST ? 0 : -1;
}

int pbx_mkdir_p(const char *path, mode_t mode, struct pbx_err *err)
{
	char *p = xstrdup(path);
	size_t n = strlen(p);
	int rc = 0;
	while (n > 1 && p[n - 1] == '/') /* "a/b/" is "a/b" */
		p[--n] = '\0';
	if (mkdir_parents_first(p, mode) < 0)
		rc = pbx_err_set(err, "cannot create directory %s: %s", p, strerror(errno));
	free(p);
	return rc;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int pbx_rm_rf(const char *path, struct pbx_err *err)
{
	struct stat st;
	if (!path[0] || !strcmp(path, "/"))
		return pbx_err_set(err, "refusing to remove '%s'", path);
	if (lstat(path, &st) < 0)
		return errno == ENOENT
			       ? 0
			       : pbx_err_set(err, "cannot stat %s: %s", path, strerror(errno));
	if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS) < 0)
		return pbx_err_set(err, "cannot remove %s: %s", path, strerror(errno));
	return 0;
}

int pbx_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int pbx_tmpfile_beside(const char *path, char **tmp, struct pbx_err *err)
{
	int fd;
	*tmp = xasprintf("%s.tmp.XXXXXX", path);
	fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		pbx_err_set(err, "cannot create a temporary file beside %s: %s", path, strerror(e));
		free(*tmp);
		*tmp = NULL;
		errno = e;
	}
	return fd;
}

/* fsync of the directory holding `path` (its new name survives a crash). */
static void sync_parent_dir(const char *path)
{
	char *dcopy = xstrdup(path);
	int dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(dcopy);
}

int pbx_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
			  struct pbx_err *err)
{
	char *tmp;
	int fd = pbx_tmpfile_beside(path, &tmp, err), rc = -1;

	if (fd < 0)
		return -1;
	if (pbx_write_all(fd, data, len) < 0 || fchmod(fd, mode) < 0 || fsync(fd) < 0) {
		pbx_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		goto out;
	}
	if (close(fd) < 0) {
		pbx_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if (rename(tmp, path) < 0) {
		pbx_err_set(err, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	sync_parent_dir(path);
	rc = 0;
out:
	free(tmp);
	return rc;
}

int pbx_read_file(const char *path, struct pbx_buf *out, struct pbx_err *err)
{
	char chunk[65536];
	ssize_t n;
	size_t start = out->len;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pbx_err_set(err, "cannot open %s: %s", path, strerror(errno));
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			close(fd);
			/* out as it was: a caller that gives up on an error
			 * leaks nothing (a /proc file of a process that ended
			 * mid-read: LeakSanitizer saw one in procs.c) */
			if (start == 0) {
				pbx_buf_release(out);
			} else {
				out->len = start;
				out->buf[start] = '\0';
			}
			return pbx_err_set(err, "cannot read %s: %s", path, strerror(errno));
		}
		pbx_buf_add(out, chunk, (size_t)n);
	}
	close(fd);
	return 0;
}

/* Refuses what `fd` (open on `path`) is not: a regular file of at most
 * `max` bytes. */
static int regular_ok(int fd, const char *path, size_t max, struct pbx_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return pbx_err_set(err, "cannot stat %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: not a regular file", path);
	if ((unsigned long long)st.st_size > max)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: larger than %zu bytes", path, max);
	return 0;
}

int pbx_read_regular(const char *path, size_t max, struct pbx_buf *out, int *missing,
		     struct pbx_err *err)
{
	char chunk[65536];
	size_t start = out->len;
	ssize_t n;
	int fd;
	if (missing)
		*missing = 0;
	/* O_NONBLOCK: opening a FIFO must not wait for a writer */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (missing)
			*missing = errno == ENOENT;
		return pbx_err_setc(err, errno == ENOENT ? PBX_EXIT_USAGE : PBX_EXIT_FAIL,
				    "cannot read %s: %s", path, strerror(errno));
	}
	if (regular_ok(fd, path, max, err) < 0) {
		close(fd);
		return -1;
	}
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || out->len - start + (size_t)n > max) {
			if (n < 0)
				pbx_err_set(err, "cannot read %s: %s", path, strerror(errno));
			else
				pbx_err_setc(err, PBX_EXIT_USAGE, "%s: larger than %zu bytes", path,
					     max);
			close(fd);
			if (out->alloc) {
				out->len = start;
				out->buf[start] = '\0';
			}
			return -1;
		}
		pbx_buf_add(out, chunk, (size_t)n);
	}
	close(fd);
	return 0;
}

int pbx_check_private(const char *path, int secret, struct pbx_err *err)
{
	struct stat st;
	mode_t bad = secret ? (S_IRWXG | S_IRWXO) : (S_IWGRP | S_IWOTH);
	if (stat(path, &st) < 0)
		return pbx_err_set(err, "cannot stat %s: %s", path, strerror(errno));
	if (st.st_mode & bad)
		return pbx_err_setc(
			err, PBX_EXIT_SECURITY,
			"%s is %s by others (mode %03o); refusing to use it: run 'chmod %s %s'",
			path, secret ? "accessible" : "writable", (unsigned)(st.st_mode & 0777),
			secret ? "600" : "go-w", path);
	if (st.st_uid != getuid() && st.st_uid != 0)
		return pbx_err_setc(err, PBX_EXIT_SECURITY,
				    "%s is owned by uid %u, not by you; refusing to use it", path,
				    (unsigned)st.st_uid);
	return 0;
}

void pbx_hex(const unsigned char *md, size_t n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;
	for (i = 0; i < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[2 * n] = '\0';
}

void pbx_sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	pbx_hex(md, n, hex);
}

int pbx_sha256_file(const char *path, char hex[65], struct pbx_err *err)
{
	unsigned char md[EVP_MAX_MD_SIZE], chunk[1 << 16];
	unsigned n = 0;
	ssize_t r;
	EVP_MD_CTX *ctx;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pbx_err_set(err, "cannot open %s: %s", path, strerror(errno));
	ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	while ((r = read(fd, chunk, sizeof(chunk))) > 0)
		EVP_DigestUpdate(ctx, chunk, (size_t)r);
	close(fd);
	EVP_DigestFinal_ex(ctx, md, &n);
	EVP_MD_CTX_free(ctx);
	if (r < 0)
		return pbx_err_set(err, "cannot read %s: %s", path, strerror(errno));
	pbx_hex(md, n, hex);
	return 0;
}

const char *pbx_home(void)
{
	static char *home;
	const char *env;
	if (home)
		return home;
	env = getenv("PBX_HOME");
	if (env && *env) {
		home = xstrdup(env);
	} else {
		const char *h = getenv("HOME");
		if (!h || !*h) {
			struct passwd *pw = getpwuid(getuid());
			h = pw ? pw->pw_dir : "/";
		}
		home = xasprintf("%s/.pbx", h);
	}
	return home;
}

char *pbx_home_path(const char *rel)
{
	return xasprintf("%s/%s", pbx_home(), rel);
}

char *pbx_expand_tilde(const char *path)
{
	const char *h;
	if (strncmp(path, "~/", 2) != 0)
		return xstrdup(path);
	h = getenv("HOME");
	return xasprintf("%s/%s", h ? h : "", path + 2);
}
