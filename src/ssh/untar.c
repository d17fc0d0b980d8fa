/*
 * untar.c - the in-process extractor of checked tar streams (see untar.h).
 *
 * Everything is relative to one directory descriptor.  A regular file is
 * written under UNTAR_PARTIAL, a name at the destination's top that no
 * member may take, created with O_CREAT|O_EXCL|O_NOFOLLOW (a leftover is
 * unlinked first, so nothing is ever written through a symlink or into
 * another name's hard-linked inode); its data is gathered into writes of
 * up to UNTAR_WRITE bytes; at its last byte it gets its mtime, is closed
 * and renamed to its own name.  So a member's name only ever holds the
 * whole member, even when the process is killed mid-write (the partial
 * file is left under UNTAR_PARTIAL, and the next extraction replaces it).
 */
#define _GNU_SOURCE
#include "ssh/untar.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNTAR_WRITE   (256u * 1024u)
#define UNTAR_PARTIAL PBX_UNTAR_PARTIAL

struct untar_dir {
	char *path;
	int64_t mtime;
};

struct pbx_untar {
	int dirfd;
	char *dir;     /* for messages */
	int fd;        /* the regular file being written, or -1 */
	char *cur;     /* its path */
	uint64_t left; /* its bytes still to come */
	int64_t cur_mtime;
	struct pbx_buf wbuf;    /* its bytes not yet written */
	struct untar_dir *dirs; /* directories made, for their mtimes at the end */
	size_t ndirs, cap;
};

struct pbx_untar *pbx_untar_new(const char *dir, struct pbx_err *err)
{
	struct pbx_untar *u;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		pbx_err_set(err, "cannot open %s: %s", dir, strerror(errno));
		return NULL;
	}
	u = xcalloc(1, sizeof(*u));
	u->dirfd = fd;
	u->dir = xstrdup(dir);
	u->fd = -1;
	u->wbuf = (struct pbx_buf)PBX_BUF_INIT;
	return u;
}

static int untar_fail(struct pbx_untar *u, const char *what, const char *path, struct pbx_err *err)
{
	return pbx_err_set(err, "cannot %s %s/%s: %s", what, u->dir, path, strerror(errno));
}

/* Removes whatever non-directory entry is at path (a missing one is fine). */
static int untar_clear(struct pbx_untar *u, const char *path, struct pbx_err *err)
{
	if (unlinkat(u->dirfd, path, 0) < 0 && errno != ENOENT)
		return untar_fail(u, "replace", path, err);
	return 0;
}

/* ------------------------------------------------------------ members */

static int untar_mkdir(struct pbx_untar *u, const struct pbx_tar_member *m, struct pbx_err *err)
{
	struct stat sb;
	if (!*m->path)
		return 0; /* the destination itself */
	if (mkdirat(u->dirfd, m->path, (m->mode | 0700) & 0777) < 0) {
		if (errno != EEXIST || fstatat(u->dirfd, m->path, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			return untar_fail(u, "create directory", m->path, err);
		if (!S_ISDIR(sb.st_mode) &&
		    (untar_clear(u, m->path, err) < 0 ||
		     mkdirat(u->dirfd, m->path, (m->mode | 0700) & 0777) < 0))
			return untar_fail(u, "create directory", m->path, err);
	}
	if (u->ndirs == u->cap) {
		u->cap = u->cap ? 2 * u->cap : 64;
		u->dirs = xreallocarray(u->dirs, u->cap, sizeof(*u->dirs));
	}
	u->dirs[u->ndirs].path = xstrdup(m->path);
	u->dirs[u->ndirs++].mtime = m->mtime;
	return 0;
}

static int untar_close_file(struct pbx_untar *u, struct pbx_err *err)
{
	struct timespec ts[2] = { { u->cur_mtime, 0 }, { u->cur_mtime, 0 } };
	int rc = 0;
	if (u->wbuf.len && pbx_write_all(u->fd, u->wbuf.buf, u->wbuf.len) < 0)
		rc = untar_fail(u, "write", u->cur, err);
	pbx_buf_reset(&u->wbuf);
	if (rc == 0)
		futimens(u->fd, ts);
	if (close(u->fd) < 0 && rc == 0)
		rc = untar_fail(u, "write", u->cur, err);
	u->fd = -1;
	/* rename() replaces a symlink or file at the name, never follows it */
	if (rc == 0 && renameat(u->dirfd, UNTAR_PARTIAL, u->dirfd, u->cur) < 0)
		rc = untar_fail(u, "create", u->cur, err);
	if (rc < 0)
		unlinkat(u->dirfd, UNTAR_PARTIAL, 0);
	free(u->cur);
	u->cur = NULL;
	return rc;
}

static int untar_open_file(struct pbx_untar *u, const struct pbx_tar_member *m, struct pbx_err *err)
{
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(u->dirfd, UNTAR_PARTIAL, flags, m->mode);
	if (fd < 0 && errno == EEXIST && untar_clear(u, UNTAR_PARTIAL, err) == 0)
		fd = openat(u->dirfd, UNTAR_PARTIAL, flags, m->mode);
	if (fd < 0)
		return untar_fail(u, "create", m->path, err);
	u->fd = fd;
	u->cur = xstrdup(m->path);
	u->left = m->size;
	u->cur_mtime = m->mtime;
	return m->size == 0 ? untar_close_file(u, err) : 0;
}

static int untar_link(struct pbx_untar *u, const struct pbx_tar_member *m, struct pbx_err *err)
{
	int hard = m->type == '1', rc;
	rc = hard ? linkat(u->dirfd, m->link, u->dirfd, m->path, 0)
		  : symlinkat(m->link, u->dirfd, m->path);
	if (rc < 0 && errno == EEXIST && untar_clear(u, m->path, err) == 0)
		rc = hard ? linkat(u->dirfd, m->link, u->dirfd, m->path, 0)
			  : symlinkat(m->link, u->dirfd, m->path);
	if (rc < 0)
		return untar_fail(u, hard ? "create hard link" : "create symlink", m->path, err);
	if (!hard) {
		struct timespec ts[2] = { { m->mtime, 0 }, { m->mtime, 0 } };
		utimensat(u->dirfd, m->path, ts, AT_SYMLINK_NOFOLLOW);
	}
	return 0;
}

static int untar_member(void *ctx, const struct pbx_tar_member *m, struct pbx_err *err)
{
	struct pbx_untar *u = ctx;
	if (u->fd >= 0)
		return pbx_err_set(err, "tar member %s started before %s ended", m->path, u->cur);
	if (!strcmp(m->path, UNTAR_PARTIAL))
		return pbx_err_set(err, "tar member %s: the name is reserved", m->path);
	switch (m->type) {
	case '5':
		return untar_mkdir(u, m, err);
	case '0':
		return untar_open_file(u, m, err);
	default:
		return untar_link(u, m, err);
	}
}

static int untar_data(void *ctx, const void *p, size_t len, struct pbx_err *err)
{
	struct pbx_untar *u = ctx;
	if (u->fd < 0 || len > u->left)
		return pbx_err_set(err, "tar data outside a file member");
	u->left -= len;
	if (!u->wbuf.len && len >= UNTAR_WRITE) {
		if (pbx_write_all(u->fd, p, len) < 0)
			return untar_fail(u, "write", u->cur, err);
	} else {
		pbx_buf_add(&u->wbuf, p, len);
		if (u->wbuf.len >= UNTAR_WRITE) {
			if (pbx_write_all(u->fd, u->wbuf.buf, u->wbuf.len) < 0)
				return untar_fail(u, "write", u->cur, err);
			pbx_buf_reset(&u->wbuf);
		}
	}
	return u->left ? 0 : untar_close_file(u, err);
}

struct pbx_tar_events pbx_untar_events(struct pbx_untar *u)
{
	struct pbx_tar_events ev = { untar_member, untar_data, NULL, u };
	return ev;
}

/* ------------------------------------------------------------ finish */

int pbx_untar_finish(struct pbx_untar *u, int complete, struct pbx_err *err)
{
	size_t i;
	int rc = 0;
	if (!u)
		return 0;
	if (u->fd >= 0) { /* cut short in the middle of a file: remove it */
		close(u->fd);
		unlinkat(u->dirfd, UNTAR_PARTIAL, 0);
		if (complete)
			rc = pbx_err_set(err, "tar stream ended inside %s", u->cur);
	}
	for (i = u->ndirs; i-- > 0;) {
		struct timespec ts[2] = { { u->dirs[i].mtime, 0 }, { u->dirs[i].mtime, 0 } };
		utimensat(u->dirfd, u->dirs[i].path, ts, AT_SYMLINK_NOFOLLOW);
		free(u->dirs[i].path);
	}
	free(u->dirs);
	free(u->cur);
	free(u->dir);
	pbx_buf_release(&u->wbuf);
	close(u->dirfd);
	free(u);
	return rc;
}
