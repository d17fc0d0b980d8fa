/*
 * collect.c - which files a package ships.  Without `files`, the whole
 * experiment directory less .pbxignore matches; with it, what its globs
 * (glob(3), relative to the directory) match, directories whole.  ".git"
 * is never shipped.  Only regular files, directories and symlinks whose
 * target stays inside the directory (checked lexically) are accepted;
 * symlinks are kept as links, never followed.  Modes are normalised (0755
 * for directories and executable files, 0644 otherwise) so the package id
 * does not depend on umask.
 */
#include "experiment/package_priv.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pbx_collect {
	const char *root;             /* e->dir */
	struct pbx_ignore *ignore;    /* NULL with explicit files */
	struct pbx_package *p;
	size_t alloc;
	struct pbx_err *err;
};

static int pbx_collect_walk(struct pbx_collect *c, const char *rel);

/* ------------------------------------------------------------------ */
/* One entry                                                           */

/* Refuses a symlink whose target leaves the tree: `rel` is the link's
 * path, `target` what it points to. */
static int pbx_collect_link_ok(struct pbx_collect *c, const char *rel, const char *target)
{
	long depth = 0;
	const char *s;
	if (target[0] == '/')
		return pbx_err_setc(c->err, PBX_EXIT_USAGE, "%s/%s: a symlink to an absolute "
				    "path (%s) cannot be shipped", c->root, rel, target);
	for (s = rel; (s = strchr(s, '/')); s++)
		depth++;
	for (s = target; *s;) {
		size_t n = strcspn(s, "/");
		if (n == 2 && s[0] == '.' && s[1] == '.')
			depth--;
		else if (n && !(n == 1 && s[0] == '.'))
			depth++;
		if (depth < 0)
			return pbx_err_setc(c->err, PBX_EXIT_USAGE, "%s/%s: symlink points "
					    "outside %s (%s)", c->root, rel, c->root, target);
		s += n + (s[n] == '/');
	}
	return 0;
}

static struct pbx_package_file *pbx_collect_add(struct pbx_collect *c, const char *rel,
						char type)
{
	struct pbx_package *p = c->p;
	struct pbx_package_file *f;
	if (p->nfiles >= PBX_PACKAGE_MAX_FILES) {
		pbx_err_setc(c->err, PBX_EXIT_USAGE, "%s: more than %d files to ship (list "
			     "them under files: or exclude some in .pbxignore)", c->root,
			     PBX_PACKAGE_MAX_FILES);
		return NULL;
	}
	if (p->nfiles == c->alloc) {
		c->alloc = c->alloc ? 2 * c->alloc : 64;
		p->files = xreallocarray(p->files, c->alloc, sizeof(*p->files));
	}
	f = &p->files[p->nfiles++];
	memset(f, 0, sizeof(*f));
	f->path = xstrdup(rel);
	f->type = type;
	f->mode = type == 'l' ? 0777 : 0644;
	return f;
}

static int pbx_collect_symlink(struct pbx_collect *c, const char *rel, const char *full)
{
	char target[PATH_MAX];
	ssize_t n = readlink(full, target, sizeof(target) - 1);
	struct pbx_package_file *f;
	if (n < 0)
		return pbx_err_set(c->err, "cannot read symlink %s: %s", full, strerror(errno));
	target[n] = '\0';
	if (pbx_collect_link_ok(c, rel, target) < 0 || !(f = pbx_collect_add(c, rel, 'l')))
		return -1;
	f->target = xstrdup(target);
	return 0;
}

/* Adds `rel` (lstat'ed as st) and, for a directory, everything below. */
static int pbx_collect_entry(struct pbx_collect *c, const char *rel, const struct stat *st)
{
	char *full = xasprintf("%s/%s", c->root, rel);
	struct pbx_package_file *f;
	int rc = -1;
	if (S_ISLNK(st->st_mode)) {
		rc = pbx_collect_symlink(c, rel, full);
	} else if (S_ISREG(st->st_mode)) {
		if ((f = pbx_collect_add(c, rel, 'f'))) {
			f->size = (unsigned long long)st->st_size;
			f->mode = st->st_mode & 0111 ? 0755 : 0644;
			c->p->bytes += f->size;
			rc = 0;
		}
	} else if (S_ISDIR(st->st_mode)) {
		if ((f = pbx_collect_add(c, rel, 'd'))) {
			f->mode = 0755;
			rc = pbx_collect_walk(c, rel);
		}
	} else {
		rc = pbx_err_setc(c->err, PBX_EXIT_USAGE, "%s: not a regular file, directory "
				  "or symlink (exclude it in .pbxignore)", full);
	}
	free(full);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Walking directories                                                 */

static int pbx_collect_child(struct pbx_collect *c, const char *rel, const char *name)
{
	char *child = rel ? xasprintf("%s/%s", rel, name) : xstrdup(name);
	char *full = xasprintf("%s/%s", c->root, child);
	struct stat st;
	int rc = 0;
	if (lstat(full, &st) < 0)
		rc = pbx_err_set(c->err, "cannot stat %s: %s", full, strerror(errno));
	else if (!c->ignore || !pbx_ignore_match(c->ignore, child, S_ISDIR(st.st_mode)))
		rc = pbx_collect_entry(c, child, &st);
	free(full);
	free(child);
	return rc;
}

/* Adds everything inside directory `rel` (NULL for the root). */
static int pbx_collect_walk(struct pbx_collect *c, const char *rel)
{
	char *full = rel ? xasprintf("%s/%s", c->root, rel) : xstrdup(c->root);
	DIR *d = opendir(full);
	struct dirent *de;
	int rc = 0;
	if (!d) {
		rc = pbx_err_set(c->err, "cannot open directory %s: %s", full, strerror(errno));
		free(full);
		return rc;
	}
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, ".git"))
			continue;
		rc = pbx_collect_child(c, rel, de->d_name);
	}
	closedir(d);
	free(full);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Explicit globs                                                      */

/* Adds the directories above `rel`, refusing symlinks among them. */
static int pbx_collect_parents(struct pbx_collect *c, const char *rel)
{
	char *path = xstrdup(rel), *slash = path;
	struct stat st;
	int rc = 0;
	while (rc == 0 && (slash = strchr(slash, '/'))) {
		char *full;
		*slash = '\0';
		full = xasprintf("%s/%s", c->root, path);
		if (lstat(full, &st) < 0 || !S_ISDIR(st.st_mode))
			rc = pbx_err_setc(c->err, PBX_EXIT_USAGE, "%s: %s is not a directory "
					  "(a symlink?); list files below real directories",
					  rel, full);
		else if (!pbx_collect_add(c, path, 'd'))
			rc = -1;
		else
			c->p->files[c->p->nfiles - 1].mode = 0755;
		free(full);
		*slash++ = '/';
	}
	free(path);
	return rc;
}

/* root with glob metacharacters escaped, then "/" and the pattern. */
static char *pbx_collect_pattern(const char *root, const char *glob_rel)
{
	size_t i, n = strlen(root);
	char *out = xmalloc(2 * n + strlen(glob_rel) + 2), *o = out;
	for (i = 0; i < n; i++) {
		if (strchr("*?[]\\", root[i]))
			*o++ = '\\';
		*o++ = root[i];
	}
	*o++ = '/';
	strcpy(o, glob_rel);
	return out;
}

/* `rel` with empty and "." components dropped ("./a//b/" -> "a/b");
 * caller frees. */
static char *pbx_collect_normal(const char *rel)
{
	char *out = xmalloc(strlen(rel) + 1), *o = out;
	while (*rel) {
		size_t n = strcspn(rel, "/");
		if (n && !(n == 1 && rel[0] == '.')) {
			if (o != out)
				*o++ = '/';
			memcpy(o, rel, n);
			o += n;
		}
		rel += n + (rel[n] == '/');
	}
	*o = '\0';
	return out;
}

static int pbx_collect_match(struct pbx_collect *c, const char *match)
{
	size_t n = strlen(c->root);
	struct stat st;
	char *rel;
	int rc = 0;
	if (strncmp(match, c->root, n) || match[n] != '/')
		return 0;
	rel = pbx_collect_normal(match + n + 1);
	if (!*rel)
		rc = pbx_collect_walk(c, NULL);
	else if (!strcmp(rel, ".git") || !strncmp(rel, ".git/", 5))
		rc = 0;
	else if (lstat(match, &st) < 0)
		rc = pbx_err_set(c->err, "cannot stat %s: %s", match, strerror(errno));
	else if (pbx_collect_parents(c, rel) == 0)
		rc = pbx_collect_entry(c, rel, &st);
	else
		rc = -1;
	free(rel);
	return rc;
}

static int pbx_collect_glob(struct pbx_collect *c, size_t k, const char *pattern)
{
	char *full = pbx_collect_pattern(c->root, pattern);
	glob_t g;
	size_t i;
	int rc = glob(full, 0, NULL, &g);
	free(full);
	if (rc == GLOB_NOMATCH)
		return pbx_err_setc(c->err, PBX_EXIT_USAGE, "files[%zu]: '%s' matches nothing "
				    "in %s", k, pattern, c->root);
	if (rc != 0)
		return pbx_err_set(c->err, "files[%zu]: cannot expand '%s' in %s", k, pattern,
				   c->root);
	for (i = 0; rc == 0 && i < g.gl_pathc; i++)
		rc = pbx_collect_match(c, g.gl_pathv[i]);
	globfree(&g);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Sorting and de-duplication                                          */

static int pbx_collect_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pbx_package_file *)a)->path,
		      ((const struct pbx_package_file *)b)->path);
}

static void pbx_collect_unique(struct pbx_package *p)
{
	size_t i, out = 0;
	qsort(p->files, p->nfiles, sizeof(*p->files), pbx_collect_cmp);
	for (i = 0; i < p->nfiles; i++) {
		if (out && !strcmp(p->files[out - 1].path, p->files[i].path)) {
			if (p->files[i].type == 'f')
				p->bytes -= p->files[i].size;
			free(p->files[i].path);
			free(p->files[i].target);
			continue;
		}
		p->files[out++] = p->files[i];
	}
	p->nfiles = out;
}

int pbx_collect(const struct pbx_experiment *e, struct pbx_package *p, struct pbx_err *err)
{
	struct pbx_collect c = { e->dir, NULL, p, 0, err };
	size_t k;
	int rc = 0;
	if (!e->nfiles) {
		if (pbx_ignore_load(e->dir, &c.ignore, err) < 0)
			return -1;
		rc = pbx_collect_walk(&c, NULL);
		pbx_ignore_free(c.ignore);
	}
	for (k = 0; rc == 0 && k < e->nfiles; k++)
		rc = pbx_collect_glob(&c, k, e->files[k]);
	if (rc == 0)
		pbx_collect_unique(p);
	if (rc == 0 && p->bytes > PBX_PACKAGE_MAX_BYTES)
		rc = pbx_err_setc(err, PBX_EXIT_USAGE, "%s: %llu bytes to ship, more than "
				  "%llu (exclude data in .pbxignore)", e->dir, p->bytes,
				  PBX_PACKAGE_MAX_BYTES);
	return rc;
}
