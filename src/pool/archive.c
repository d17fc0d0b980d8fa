/*
 * archive.c - a published task's object: the gzip (zlib) of a tar
 * (experiment/tar.h) holding pbx-task.json and the task's files under
 * results/.  Extraction inflates in pieces into the tar checker
 * (ssh/tarcheck.h) and writes with ssh/untar.h, refusing links as well:
 * an object from someone else's bucket yields regular files and
 * directories inside its directory, or nothing.
 */
#include "experiment/tar.h"
#include "pool/pool_internal.h"
#include "ssh/tarcheck.h"
#include "ssh/untar.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---------------------------------------------------------------- make */

/* Adds a directory member for each parent of results/PATH not added yet
 * (the tar checker wants a member's parent first); `seen` holds
 * "\nDIR\n" for each one added. */
static int archive_parents(struct pbx_tar *t, const char *path, struct pbx_buf *seen)
{
	const char *slash;
	for (slash = strchr(path, '/'); slash; slash = strchr(slash + 1, '/')) {
		char *dir = xasprintf("results/%.*s", (int)(slash - path), path);
		char *key = xasprintf("\n%s\n", dir);
		int rc = 0;
		if (!strstr(seen->buf, key)) {
			pbx_buf_adds(seen, key + 1);
			rc = pbx_tar_dir(t, dir, 0755);
		}
		free(dir);
		free(key);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Adds the task's files that are still regular files. */
static int archive_files(struct pbx_tar *t, const char *task_dir, const struct pbx_harvested *files,
			 size_t n, size_t *missing)
{
	struct pbx_buf seen = PBX_BUF_INIT;
	size_t i;
	pbx_buf_addc(&seen, '\n');
	for (i = 0; i < n; i++) {
		char *src = xasprintf("%s/%s", task_dir, files[i].path);
		char *dst = xasprintf("results/%s", files[i].path);
		struct stat sb;
		int rc = 0;
		if (lstat(src, &sb) < 0 || !S_ISREG(sb.st_mode))
			(*missing)++;
		else if ((rc = archive_parents(t, files[i].path, &seen)) == 0)
			rc = pbx_tar_file(t, dst, 0644, src, (unsigned long long)sb.st_size, NULL);
		free(src);
		free(dst);
		if (rc < 0) {
			pbx_buf_release(&seen);
			return -1;
		}
	}
	pbx_buf_release(&seen);
	return 0;
}

static int gzip_buf(const char *in, size_t len, struct pbx_buf *out, struct pbx_err *err)
{
	z_stream z;
	unsigned char chunk[1 << 16];
	int zr;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return pbx_err_set(err, "zlib: cannot start compressing");
	z.next_in = (unsigned char *)in;
	z.avail_in = (uInt)len; /* len <= POOL_OBJECT_MAX < 4 GiB */
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		zr = deflate(&z, Z_FINISH);
		pbx_buf_add(out, chunk, sizeof(chunk) - z.avail_out);
	} while (zr == Z_OK || zr == Z_BUF_ERROR);
	deflateEnd(&z);
	return zr == Z_STREAM_END ? 0 : pbx_err_set(err, "zlib: compressing failed (%d)", zr);
}

int pool_archive_make(const char *record, const char *task_dir, const struct pbx_harvested *files,
		      size_t n, int64_t mtime, struct pbx_buf *out, size_t *missing,
		      struct pbx_err *err)
{
	char *tar = NULL;
	size_t tarlen = 0;
	FILE *f = open_memstream(&tar, &tarlen);
	struct pbx_tar t = { f, mtime, "the task's object", err };
	int rc;
	*missing = 0;
	pbx_buf_release(out);
	if (!f)
		return pbx_err_set(err, "cannot make the task's object: %s", strerror(errno));
	rc = pbx_tar_mem(&t, POOL_RECORD_NAME, 0644, record, strlen(record));
	if (rc == 0 && n)
		rc = pbx_tar_dir(&t, "results", 0755);
	if (rc == 0)
		rc = archive_files(&t, task_dir, files, n, missing);
	if (rc == 0)
		rc = pbx_tar_end(&t);
	if (fclose(f) != 0 && rc == 0)
		rc = pbx_err_set(err, "cannot make the task's object: %s", strerror(errno));
	if (rc == 0 && tarlen > POOL_OBJECT_MAX)
		rc = pbx_err_set(err, "the task's results are larger than %zu bytes",
				 POOL_OBJECT_MAX);
	if (rc == 0)
		rc = gzip_buf(tar, tarlen, out, err);
	free(tar);
	return rc;
}

/* ------------------------------------------------------------- extract */

/* Lets regular files and directories through to untar, nothing else. */
struct extract {
	struct pbx_tar_events untar;
	uint64_t bytes;
};

static int extract_member(void *ctx, const struct pbx_tar_member *m, struct pbx_err *err)
{
	struct extract *x = ctx;
	if (m->type != '0' && m->type != '5')
		return pbx_err_setc(err, PBX_EXIT_SECURITY, "member %s is a link", m->path);
	x->bytes += m->size;
	if (x->bytes > POOL_OBJECT_MAX)
		return pbx_err_setc(err, PBX_EXIT_SECURITY, "unpacks to more than %zu bytes",
				    POOL_OBJECT_MAX);
	return x->untar.member(x->untar.ctx, m, err);
}

static int extract_data(void *ctx, const void *p, size_t len, struct pbx_err *err)
{
	struct extract *x = ctx;
	return x->untar.data(x->untar.ctx, p, len, err);
}

/* Inflates gz into the checker; 1 when the gzip stream ended. */
static int inflate_into(struct pbx_tarcheck *tc, const void *gz, size_t len, struct pbx_err *err)
{
	unsigned char chunk[1 << 16];
	z_stream z;
	int zr = Z_OK, rc = 0;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return pbx_err_set(err, "zlib: cannot start inflating");
	z.next_in = (unsigned char *)gz;
	z.avail_in = (uInt)len;
	while (rc == 0 && zr == Z_OK) {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END)
			rc = pbx_err_setc(err, PBX_EXIT_SECURITY, "not a gzip stream (zlib %d)",
					  zr);
		else if (pbx_tarcheck_feed(tc, chunk, sizeof(chunk) - z.avail_out, NULL, err) < 0)
			rc = -1;
	}
	inflateEnd(&z);
	return rc < 0 ? -1 : 1;
}

int pool_archive_extract(const void *gz, size_t len, const char *dir, struct pbx_err *err)
{
	struct pbx_untar *u = pbx_untar_new(dir, err);
	struct pbx_tarcheck *tc;
	struct extract x;
	struct pbx_tar_events ev;
	int rc;
	if (!u)
		return -1;
	memset(&x, 0, sizeof(x));
	x.untar = pbx_untar_events(u);
	ev = (struct pbx_tar_events){ extract_member, extract_data, NULL, &x };
	tc = pbx_tarcheck_new();
	pbx_tarcheck_set_events(tc, &ev);
	rc = inflate_into(tc, gz, len, err);
	if (rc > 0 && pbx_tarcheck_finish(tc, err) < 0)
		rc = -1;
	pbx_tarcheck_free(tc);
	if (rc > 0) {
		if (pbx_untar_finish(u, 1, err) < 0)
			rc = -1;
	} else {
		struct pbx_err ignored = PBX_ERR_INIT;
		pbx_untar_finish(u, 0, &ignored);
	}
	return rc > 0 ? 0 : -1;
}
