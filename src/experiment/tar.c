/*
 * tar.c - the package's tar writer: POSIX ustar headers (fields filled by
 * util/ustar.h), with a pax extended header ('x') in front of an entry
 * whose path or link target does not fit (GNU tar, bsdtar and busybox
 * read both).  Owner root:root, the
 * package's creation time as mtime.  Regular files are streamed from disk
 * and re-hashed on the way, so a file that changed since the package id
 * was computed is refused rather than shipped under the wrong id.
 */
#include "experiment/package_internal.h"
#include "util/buf.h"
#include "util/ustar.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PBX_TAR_BLOCK PBX_USTAR_BLOCK

static int tar_io(struct pbx_tar *t)
{
	return pbx_err_set(t->err, "cannot write %s: %s", t->what, strerror(errno));
}

static int tar_put(struct pbx_tar *t, const void *data, size_t len)
{
	if (len && fwrite(data, 1, len, t->f) != len)
		return tar_io(t);
	return 0;
}

/* Zero bytes up to the next 512-byte boundary after `len` bytes. */
static int tar_pad(struct pbx_tar *t, unsigned long long len)
{
	static const char zero[PBX_TAR_BLOCK];
	size_t rest = (size_t)(len % PBX_TAR_BLOCK);
	return rest ? tar_put(t, zero, PBX_TAR_BLOCK - rest) : 0;
}

/* ------------------------------------------------------------------ */
/* Headers                                                             */

/* Splits `path` into ustar prefix/name; false when it cannot. */
static bool tar_split(const char *path, char *h)
{
	size_t len = strlen(path), i;
	if (len <= 100) {
		memcpy(h, path, len);
		return true;
	}
	for (i = len - 1; i > 0; i--) {
		if (path[i] != '/' || len - i - 1 > 100 || len - i - 1 == 0)
			continue;
		if (i > 155)
			return false;
		memcpy(h + 345, path, i);
		memcpy(h, path + i + 1, len - i - 1);
		return true;
	}
	return false;
}

/* "LEN key=value\n" where LEN counts the whole record. */
static void tar_pax_record(struct pbx_buf *b, const char *key, const char *value)
{
	size_t body = 1 + strlen(key) + 1 + strlen(value) + 1, len = body, digits;
	for (;;) {
		char tmp[32];
		digits = (size_t)snprintf(tmp, sizeof(tmp), "%zu", len);
		if (body + digits == len)
			break;
		len = body + digits;
	}
	pbx_buf_addf(b, "%zu %s=%s\n", len, key, value);
}

static int tar_header(struct pbx_tar *t, const char *path, char type, unsigned mode,
		      unsigned long long size, const char *link);

/* Writes a pax header for path and/or link when they need one. */
static int tar_pax(struct pbx_tar *t, const char *path, const char *link, bool path_fits)
{
	struct pbx_buf b = PBX_BUF_INIT;
	int rc;
	if (!path_fits)
		tar_pax_record(&b, "path", path);
	if (link && strlen(link) > 100)
		tar_pax_record(&b, "linkpath", link);
	if (!b.len)
		return 0;
	rc = tar_header(t, "././@PaxHeader", 'x', 0644, b.len, NULL);
	if (rc == 0)
		rc = tar_put(t, b.buf, b.len);
	if (rc == 0)
		rc = tar_pad(t, b.len);
	pbx_buf_release(&b);
	return rc;
}

static int tar_header(struct pbx_tar *t, const char *path, char type, unsigned mode,
		      unsigned long long size, const char *link)
{
	char h[PBX_TAR_BLOCK];
	bool fits;
	memset(h, 0, sizeof(h));
	fits = tar_split(path, h);
	if (type != 'x' && (!fits || (link && strlen(link) > 100))) {
		if (tar_pax(t, path, link, fits) < 0)
			return -1;
		memset(h, 0, sizeof(h));
		if (!fits || !tar_split(path, h))
			memcpy(h, path, 100);
	}
	pbx_ustar_fill((unsigned char *)h, type, mode, t->mtime, size, link);
	return tar_put(t, h, sizeof(h));
}

/* ------------------------------------------------------------------ */
/* Entries                                                             */

int pbx_tar_dir(struct pbx_tar *t, const char *path, unsigned mode)
{
	char *p = xasprintf("%s/", path);
	int rc = tar_header(t, p, '5', mode, 0, NULL);
	free(p);
	return rc;
}

int pbx_tar_mem(struct pbx_tar *t, const char *path, unsigned mode, const void *data, size_t len)
{
	if (tar_header(t, path, '0', mode, len, NULL) < 0 || tar_put(t, data, len) < 0)
		return -1;
	return tar_pad(t, len);
}

int pbx_tar_link(struct pbx_tar *t, const char *path, const char *target)
{
	return tar_header(t, path, '2', 0777, 0, target);
}

/* A member's source: read() as pbx_tar_reader's, and whether to hash
 * what it gives (sha256 over every byte, into sha). */
struct tar_source {
	pbx_tar_read_fn read;
	void *ctx;
	EVP_MD_CTX *sha; /* or NULL: no digest wanted */
};

/* Copies `size` bytes from src into the tar (path: the member, for
 * messages). */
static int tar_copy(struct pbx_tar *t, struct tar_source *src, const char *path,
		    unsigned long long size)
{
	char *chunk = xmalloc(1 << 16);
	unsigned long long done = 0;
	ssize_t r = 0;
	int rc = 0;
	while (rc == 0 && done < size) {
		size_t want = size - done < (1 << 16) ? (size_t)(size - done) : (1 << 16);
		r = src->read(src->ctx, chunk, want, t->err);
		if (r <= 0)
			break;
		if (src->sha)
			EVP_DigestUpdate(src->sha, chunk, (size_t)r);
		rc = tar_put(t, chunk, (size_t)r);
		done += (unsigned long long)r;
		if (rc == 0 && t->on_bytes)
			t->on_bytes(t->on_bytes_ctx, (unsigned long long)r);
	}
	free(chunk);
	if (rc == 0 && r < 0)
		rc = -1; /* read() said why */
	else if (rc == 0 && done != size)
		rc = pbx_err_set(t->err, "%s changed while being packaged", path);
	return rc;
}

int pbx_tar_reader(struct pbx_tar *t, const char *path, unsigned mode, unsigned long long size,
		   pbx_tar_read_fn read, void *ctx)
{
	struct tar_source src = { read, ctx, NULL };
	if (tar_header(t, path, '0', mode, size, NULL) < 0 || tar_copy(t, &src, path, size) < 0)
		return -1;
	return tar_pad(t, size);
}

/* A file's reader (ctx: its fd; its name in fd_src for messages). */
struct fd_src {
	int fd;
	const char *name;
};

static ssize_t fd_read(void *ctx, char *buf, size_t max, struct pbx_err *err)
{
	struct fd_src *f = ctx;
	ssize_t r;
	do
		r = read(f->fd, buf, max);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		pbx_err_set(err, "cannot read %s: %s", f->name, strerror(errno));
	return r;
}

int pbx_tar_file(struct pbx_tar *t, const char *path, unsigned mode, const char *src,
		 unsigned long long size, const unsigned char sha[32])
{
	unsigned char now[32];
	unsigned n = 0;
	struct fd_src f = { open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), src };
	struct tar_source in = { fd_read, &f, NULL };
	int rc;
	if (f.fd < 0)
		return pbx_err_set(t->err, "cannot open %s: %s", src, strerror(errno));
	if (sha) {
		in.sha = EVP_MD_CTX_new();
		EVP_DigestInit_ex(in.sha, EVP_sha256(), NULL);
	}
	rc = tar_header(t, path, '0', mode, size, NULL);
	if (rc == 0)
		rc = tar_copy(t, &in, src, size);
	close(f.fd);
	if (sha) {
		EVP_DigestFinal_ex(in.sha, now, &n);
		EVP_MD_CTX_free(in.sha);
	}
	if (rc == 0 && sha && memcmp(now, sha, 32))
		rc = pbx_err_set(t->err, "%s changed while being packaged", src);
	return rc < 0 ? -1 : tar_pad(t, size);
}

int pbx_tar_end(struct pbx_tar *t)
{
	static const char zero[2 * PBX_TAR_BLOCK];
	return tar_put(t, zero, sizeof(zero));
}
