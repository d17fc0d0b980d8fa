/*
 * harvest_place.c - placing harvested files without following links, the
 * link rule, and the check of a harvest stream against what it was asked
 * for (see harvest_place.h).
 */
#define _GNU_SOURCE /* renameat2 */
#include "jobs/harvest_place.h"
#include "util/visible.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ names */

int place_link_ok(const char *target)
{
	const char *p = target;
	if (!*target || *target == '/')
		return 0;
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return 0;
		p += n;
		p += *p == '/';
	}
	return 1;
}

/* Appends `s` made visible on one line (names come from the node: they
 * must neither drive the terminal nor break a message's line). */
static void add_shown(struct pbx_buf *out, const char *s)
{
	char *shown = pbx_visible(s, PBX_VISIBLE_LINE);
	pbx_buf_adds(out, shown);
	free(shown);
}

void place_describe(struct pbx_buf *out, const char *member_path)
{
	size_t n = strcspn(member_path, "/");
	if (!n || strspn(member_path, "0123456789") != n) { /* not below a task directory */
		pbx_buf_adds(out, "member '");
		add_shown(out, member_path);
		pbx_buf_addc(out, '\'');
		return;
	}
	pbx_buf_adds(out, "task ");
	pbx_buf_add(out, member_path, n);
	if (member_path[n]) {
		pbx_buf_adds(out, " '");
		add_shown(out, member_path + n + 1);
		pbx_buf_addc(out, '\'');
	}
}

/* ------------------------------------------------------------ walking */

void place_walk_init(struct place_walk *w, int root)
{
	w->root = root;
	w->fd = -1;
	w->dir = NULL;
}

static void walk_forget(struct place_walk *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	free(w->dir);
	w->dir = NULL;
}

void place_walk_release(struct place_walk *w)
{
	walk_forget(w);
}

/* Fills *stop for the component rel[0..at) that openat refused: tells a
 * symlink (ELOOP) and a non-directory (ENOTDIR) apart whatever errno the
 * open gave. */
static void walk_stopped(int dirfd, const char *name, size_t at, int open_errno,
			 struct place_stop *stop)
{
	struct stat sb;
	stop->at = at;
	stop->err = open_errno;
	if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
		stop->err = S_ISLNK(sb.st_mode)   ? ELOOP
			    : S_ISDIR(sb.st_mode) ? open_errno
						  : ENOTDIR;
}

/* Opens the directory rel[0..end) component by component, starting at
 * `start` (which names rel[0..pos), pos 0 or just after a '/'); never
 * follows a link.  Returns a new descriptor or -1 with *stop filled. */
static int walk_from(int start, const char *rel, size_t pos, size_t end, int create,
		     struct place_stop *stop)
{
	int fd = fcntl(start, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		stop->at = pos;
		stop->err = errno;
		return -1;
	}
	while (pos < end) {
		size_t n = strcspn(rel + pos, "/");
		char *name = xstrndup(rel + pos, n < end - pos ? n : end - pos);
		int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
		int next = openat(fd, name, flags);
		if (next < 0 && errno == ENOENT && create &&
		    (mkdirat(fd, name, 0755) == 0 || errno == EEXIST))
			next = openat(fd, name, flags);
		if (next < 0)
			walk_stopped(fd, name, pos + strlen(name), errno, stop);
		free(name);
		close(fd);
		if (next < 0)
			return -1;
		fd = next;
		pos += n + 1;
	}
	return fd;
}

int place_parent(struct place_walk *w, const char *rel, int create, const char **leaf,
		 struct place_stop *stop)
{
	const char *slash = strrchr(rel, '/');
	size_t dlen = slash ? (size_t)(slash - rel) : 0, have;
	int fd;
	*leaf = slash ? slash + 1 : rel;
	if (w->fd >= 0 && strlen(w->dir) == dlen && !memcmp(w->dir, rel, dlen))
		return w->fd;
	/* Going deeper from the directory open now walks only the rest. */
	have = w->fd >= 0 ? strlen(w->dir) : 0;
	if (w->fd >= 0 && have && have < dlen && rel[have] == '/' && !memcmp(w->dir, rel, have))
		fd = walk_from(w->fd, rel, have + 1, dlen, create, stop);
	else
		fd = walk_from(w->root, rel, 0, dlen, create, stop);
	walk_forget(w);
	if (fd < 0)
		return -1;
	w->fd = fd;
	w->dir = xstrndup(rel, dlen);
	return fd;
}

int place_lstat(struct place_walk *w, const char *rel, struct stat *sb, struct place_stop *stop)
{
	struct place_stop ignored;
	const char *leaf;
	int fd = place_parent(w, rel, 0, &leaf, stop ? stop : &ignored);
	if (fd < 0)
		return -1;
	if (fstatat(fd, leaf, sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (stop) {
			stop->at = strlen(rel);
			stop->err = errno;
		}
		return -1;
	}
	return 0;
}

int place_move(struct place_walk *from, struct place_walk *to, const char *rel,
	       struct place_stop *stop)
{
	const char *leaf;
	int src = place_parent(from, rel, 0, &leaf, stop), dst;
	stop->source = src < 0;
	if (src < 0)
		return -1;
	dst = place_parent(to, rel, 1, &leaf, stop);
	if (dst < 0)
		return -1;
	/* renameat replaces a link or file at the name, never follows it */
	if (renameat(src, leaf, dst, leaf) < 0) {
		stop->at = strlen(rel);
		stop->err = errno;
		stop->source = errno == ENOENT;
		return -1;
	}
	return 0;
}

int place_move_new(int from, int to, const char *name)
{
	struct stat sb;
	if (renameat2(from, name, to, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	/* a file system without RENAME_NOREPLACE: check, then rename */
	if (fstatat(to, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		errno = EEXIST;
		return -1;
	}
	return errno == ENOENT ? renameat(from, name, to, name) : -1;
}

void place_explain(struct pbx_buf *out, const char *base, const char *rel,
		   const struct place_stop *stop)
{
	size_t len = strlen(rel);
	int whole = stop->at >= len;
	struct pbx_buf path = PBX_BUF_INIT;
	pbx_buf_addf(&path, "%s/", base);
	pbx_buf_add(&path, rel, whole ? len : stop->at);
	pbx_buf_addc(out, '\'');
	add_shown(out, path.buf);
	pbx_buf_adds(out, "' ");
	if (stop->err == ELOOP)
		pbx_buf_adds(out, "is a symbolic link");
	else if (stop->err == ENOTDIR)
		pbx_buf_adds(out, "is not a directory");
	else if (whole && (stop->err == EISDIR || stop->err == ENOTEMPTY || stop->err == EEXIST))
		pbx_buf_adds(out, "is a directory");
	else
		pbx_buf_addf(out, "cannot be placed: %s", strerror(stop->err));
	pbx_buf_release(&path);
}

/* ------------------------------------------------------------ the stream */

struct expect_entry {
	char *path;
	char type;    /* 'd', 'f' or 'l' */
	char *target; /* links */
	int seen;
};

struct place_expect {
	struct expect_entry *e;
	size_t n, cap;
	int sorted;
};

struct place_expect *place_expect_new(void)
{
	return xcalloc(1, sizeof(struct place_expect));
}

void place_expect_free(struct place_expect *x)
{
	size_t i;
	if (!x)
		return;
	for (i = 0; i < x->n; i++) {
		free(x->e[i].path);
		free(x->e[i].target);
	}
	free(x->e);
	free(x);
}

void place_expect_add(struct place_expect *x, const char *path, char type, const char *target)
{
	if (x->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 256;
		x->e = xreallocarray(x->e, x->cap, sizeof(*x->e));
	}
	x->e[x->n].path = xstrdup(path);
	x->e[x->n].type = type;
	x->e[x->n].target = xstrdup(target);
	x->e[x->n].seen = 0;
	x->n++;
	x->sorted = 0;
}

static int expect_cmp(const void *a, const void *b)
{
	return strcmp(((const struct expect_entry *)a)->path,
		      ((const struct expect_entry *)b)->path);
}

static struct expect_entry *expect_find(struct place_expect *x, const char *path)
{
	struct expect_entry key = { (char *)path, 0, NULL, 0 };
	if (!x->n)
		return NULL;
	if (!x->sorted) {
		qsort(x->e, x->n, sizeof(*x->e), expect_cmp);
		x->sorted = 1;
	}
	return bsearch(&key, x->e, x->n, sizeof(*x->e), expect_cmp);
}

static const char *expect_kind(char type)
{
	return type == 'd' ? "directory" : type == 'f' ? "regular file" : "symlink";
}

/* A tar member type as a manifest type ('f' for a hard link, see .h). */
static char expect_type_of(char tar_type)
{
	return tar_type == '5' ? 'd' : tar_type == '2' ? 'l' : 'f';
}

int place_expect_member(struct place_expect *x, const struct pbx_tar_member *m, struct pbx_err *err)
{
	struct expect_entry *e = expect_find(x, m->path);
	char type = expect_type_of(m->type);
	struct pbx_buf why = PBX_BUF_INIT;
	int rc = 0;
	if (!e)
		pbx_buf_adds(&why, "it was not asked for");
	else if (e->seen)
		pbx_buf_adds(&why, "it comes twice");
	else if (e->type != type)
		pbx_buf_addf(&why, "the manifest lists a %s, the stream carries a %s",
			     expect_kind(e->type),
			     m->type == '1' ? "hard link" : expect_kind(type));
	else if (type == 'l' && strcmp(e->target, m->link) != 0) {
		pbx_buf_adds(&why, "the manifest lists a link to '");
		add_shown(&why, e->target);
		pbx_buf_adds(&why, "', the stream carries a link to '");
		add_shown(&why, m->link);
		pbx_buf_addc(&why, '\'');
	}
	if (why.len) {
		struct pbx_buf name = PBX_BUF_INIT;
		place_describe(&name, m->path);
		rc = pbx_err_setc(err, PBX_EXIT_SECURITY,
				  "%s: the stream does not match the manifest: %s", name.buf,
				  why.buf);
		pbx_buf_release(&name);
	} else {
		e->seen = 1;
	}
	pbx_buf_release(&why);
	return rc;
}
