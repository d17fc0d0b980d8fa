/*
 * collect.c - which files a package ships.  Without `files`, the whole
 * experiment directory less .pbxignore matches; with it, what its patterns
 * (pattern.c, relative to the directory) match, directories whole: the
 * directory is searched, entering only directories a pattern may match
 * below, never symlinks.  ".git"
 * is never shipped.  Only regular files, directories and symlinks whose
 * target stays inside the directory (checked lexically) are accepted;
 * symlinks are kept as links, never followed.  Modes are normalised (0755
 * for directories and executable files, 0644 otherwise) so the package id
 * does not depend on umask.
 */
#include "experiment/package_internal.h"
#include "util/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pbx_collect {
	const char *root; /* e->dir */
	const struct pbx_experiment *e;
	struct pbx_ignore *ignore; /* NULL with explicit files */
	struct pbx_package *p;
	size_t alloc;
	size_t *hits; /* per `files` pattern: entries it matched */
	struct pbx_err *err;
};

static int collect_walk(struct pbx_collect *c, const char *rel);
static int collect_search(struct pbx_collect *c, const char *rel, bool added);

/* ------------------------------------------------------------------ */
/* One entry                                                           */

/* How to leave `rel` out, appended to the error in c->err: the
 * .pbxignore line for its top directory (or itself), and for a Python
 * virtual environment that the cluster builds its own. */
static int collect_hint(struct pbx_collect *c, const char *rel)
{
	size_t n = strcspn(rel, "/");
	char *top = xstrndup(rel, n), *cfg = xasprintf("%s/%s/pyvenv.cfg", c->root, top);
	int venv = rel[n] == '/' && access(cfg, F_OK) == 0;
	size_t len = strlen(c->err->msg);
	snprintf(c->err->msg + len, sizeof(c->err->msg) - len,
		 "; leave it out with the line '%s%s' in %s/.pbxignore%s", top,
		 rel[n] == '/' ? "/" : "", c->root,
		 venv ? " (a Python virtual environment: the cluster builds its own from "
			"environment: python:, pbx-experiment(5))"
		      : "");
	free(cfg);
	free(top);
	return -1;
}

/* Refuses a symlink whose target leaves the tree: `rel` is the link's
 * path, `target` what it points to. */
static int collect_link_ok(struct pbx_collect *c, const char *rel, const char *target)
{
	long depth = 0;
	const char *s;
	if (target[0] == '/') {
		pbx_err_setc(c->err, PBX_EXIT_USAGE,
			     "%s/%s: a symlink to an absolute "
			     "path (%s) cannot be shipped",
			     c->root, rel, target);
		return collect_hint(c, rel);
	}
	for (s = rel; (s = strchr(s, '/')); s++)
		depth++;
	for (s = target; *s;) {
		size_t n = strcspn(s, "/");
		if (n == 2 && s[0] == '.' && s[1] == '.')
			depth--;
		else if (n && !(n == 1 && s[0] == '.'))
			depth++;
		if (depth < 0) {
			pbx_err_setc(c->err, PBX_EXIT_USAGE,
				     "%s/%s: symlink points "
				     "outside %s (%s)",
				     c->root, rel, c->root, target);
			return collect_hint(c, rel);
		}
		s += n + (s[n] == '/');
	}
	return 0;
}

static struct pbx_package_file *collect_add(struct pbx_collect *c, const char *rel, char type)
{
	struct pbx_package *p = c->p;
	struct pbx_package_file *f;
	if (p->nfiles >= PBX_PACKAGE_MAX_FILES) {
		pbx_err_setc(c->err, PBX_EXIT_USAGE,
			     "%s: more than %d files to ship (list "
			     "them under files: or exclude some in .pbxignore)",
			     c->root, PBX_PACKAGE_MAX_FILES);
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

static int collect_symlink(struct pbx_collect *c, const char *rel, const char *full)
{
	char target[PATH_MAX];
	ssize_t n = readlink(full, target, sizeof(target) - 1);
	struct pbx_package_file *f;
	if (n < 0)
		return pbx_err_set(c->err, "cannot read symlink %s: %s", full, strerror(errno));
	target[n] = '\0';
	if (collect_link_ok(c, rel, target) < 0 || !(f = collect_add(c, rel, 'l')))
		return -1;
	f->target = xstrdup(target);
	return 0;
}

/* Adds `rel` (lstat'ed as st) and, for a directory, everything below. */
static int collect_entry(struct pbx_collect *c, const char *rel, const struct stat *st)
{
	char *full = xasprintf("%s/%s", c->root, rel);
	struct pbx_package_file *f;
	int rc = -1;
	if (S_ISLNK(st->st_mode)) {
		rc = collect_symlink(c, rel, full);
	} else if (S_ISREG(st->st_mode)) {
		if ((f = collect_add(c, rel, 'f'))) {
			f->size = (unsigned long long)st->st_size;
			f->mode = st->st_mode & 0111 ? 0755 : 0644;
			c->p->bytes += f->size;
			rc = 0;
		}
	} else if (S_ISDIR(st->st_mode)) {
		if ((f = collect_add(c, rel, 'd'))) {
			f->mode = 0755;
			rc = collect_walk(c, rel);
		}
	} else {
		pbx_err_setc(c->err, PBX_EXIT_USAGE, "%s: not a regular file, directory or symlink",
			     full);
		rc = collect_hint(c, rel);
	}
	free(full);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Walking directories                                                 */

static int collect_child(struct pbx_collect *c, const char *rel, const char *name)
{
	char *child = rel ? xasprintf("%s/%s", rel, name) : xstrdup(name);
	char *full = xasprintf("%s/%s", c->root, child);
	struct stat st;
	int rc = 0;
	if (lstat(full, &st) < 0)
		rc = pbx_err_set(c->err, "cannot stat %s: %s", full, strerror(errno));
	else if (pbx_experiment_data_shadows(c->e, child))
		rc = 0; /* a local data: source: staged, not shipped */
	else if (!c->ignore || !pbx_ignore_match(c->ignore, child, S_ISDIR(st.st_mode)))
		rc = collect_entry(c, child, &st);
	free(full);
	free(child);
	return rc;
}

/* Adds everything inside directory `rel` (NULL for the root). */
static int collect_walk(struct pbx_collect *c, const char *rel)
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
		rc = collect_child(c, rel, de->d_name);
	}
	closedir(d);
	free(full);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Explicit patterns                                                     */

/* Adds the directories above `rel`, refusing symlinks among them. */
static int collect_parents(struct pbx_collect *c, const char *rel)
{
	char *path = xstrdup(rel), *slash = path;
	struct stat st;
	int rc = 0;
	while (rc == 0 && (slash = strchr(slash, '/'))) {
		char *full;
		*slash = '\0';
		full = xasprintf("%s/%s", c->root, path);
		if (lstat(full, &st) < 0 || !S_ISDIR(st.st_mode))
			rc = pbx_err_setc(c->err, PBX_EXIT_USAGE,
					  "%s: %s is not a directory "
					  "(a symlink?); list files below real directories",
					  rel, full);
		else if (!collect_add(c, path, 'd'))
			rc = -1;
		else
			c->p->files[c->p->nfiles - 1].mode = 0755;
		free(full);
		*slash++ = '/';
	}
	free(path);
	return rc;
}

/* The first pattern that may match below `rel` (a symlink), or -1. */
static long collect_entered_by(const struct pbx_collect *c, const char *rel)
{
	size_t k;
	for (k = 0; k < c->e->nfiles; k++)
		if (pbx_pattern_may_enter(c->e->files[k], rel))
			return (long)k;
	return -1;
}

/* "FILE:LINE: files[K]: " in front of err's message; returns -1. */
static int collect_blame(struct pbx_collect *c, size_t k)
{
	return pbx_err_prefix(c->err, "%s:%d: files[%zu]", c->e->path, c->e->files_lines[k], k);
}

/* Child `rel` of a directory being searched, lstat'ed as st: added whole
 * when a pattern matches it (unless `added`: a directory above was), and
 * searched further when a pattern may match below it, so every pattern's
 * matches are counted. */
static int collect_pick(struct pbx_collect *c, const char *rel, const struct stat *st, bool added)
{
	bool is_dir = S_ISDIR(st->st_mode), matched = false;
	struct stat target;
	char *full;
	long k;
	size_t i;
	int rc = 0;
	for (i = 0; i < c->e->nfiles; i++) {
		if (!pbx_pattern_match(c->e->files[i], rel, is_dir))
			continue;
		c->hits[i]++;
		if (!added && !matched &&
		    (collect_parents(c, rel) < 0 || collect_entry(c, rel, st) < 0))
			return collect_blame(c, i);
		matched = true;
	}
	k = collect_entered_by(c, rel);
	if (k < 0)
		return 0;
	if (is_dir)
		return collect_search(c, rel, added || matched);
	if (!S_ISLNK(st->st_mode) || matched)
		return 0;
	full = xasprintf("%s/%s", c->root, rel);
	if (stat(full, &target) == 0 && S_ISDIR(target.st_mode))
		rc = pbx_err_setc(c->err, PBX_EXIT_USAGE,
				  "'%s' passes through %s, a symlink "
				  "to a directory; list files below real directories",
				  c->e->files[k], full);
	free(full);
	return rc < 0 ? collect_blame(c, (size_t)k) : 0;
}

/* Searches directory `rel` (NULL for the top) for what the patterns match;
 * `added`: the directory was added whole already (only count matches). */
static int collect_search(struct pbx_collect *c, const char *rel, bool added)
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
		char *child, *cfull;
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, ".git"))
			continue;
		child = rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		cfull = xasprintf("%s/%s", c->root, child);
		if (lstat(cfull, &st) < 0)
			rc = pbx_err_set(c->err, "cannot stat %s: %s", cfull, strerror(errno));
		else
			rc = collect_pick(c, child, &st, added);
		free(cfull);
		free(child);
	}
	closedir(d);
	free(full);
	return rc;
}

/* What the `files` patterns match; each must match something. */
static int collect_patterns(struct pbx_collect *c)
{
	size_t k;
	int rc;
	c->hits = xcalloc(c->e->nfiles, sizeof(*c->hits));
	rc = collect_search(c, NULL, false);
	for (k = 0; rc == 0 && k < c->e->nfiles; k++)
		if (!c->hits[k])
			rc = pbx_err_setc(c->err, PBX_EXIT_USAGE,
					  "%s:%d: files[%zu]: '%s' matches "
					  "nothing in %s",
					  c->e->path, c->e->files_lines[k], k, c->e->files[k],
					  c->root);
	free(c->hits);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Sorting and de-duplication                                          */

static int collect_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pbx_package_file *)a)->path,
		      ((const struct pbx_package_file *)b)->path);
}

static void collect_unique(struct pbx_package *p)
{
	size_t i, out = 0;
	qsort(p->files, p->nfiles, sizeof(*p->files), collect_cmp);
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
	struct pbx_collect c = { e->dir, e, NULL, p, 0, NULL, err };
	int rc = 0;
	if (!e->nfiles) {
		if (pbx_ignore_load(e->dir, &c.ignore, err) < 0)
			return -1;
		rc = collect_walk(&c, NULL);
		pbx_ignore_free(c.ignore);
	} else {
		rc = collect_patterns(&c);
	}
	if (rc == 0)
		collect_unique(p);
	if (rc == 0 && p->bytes > PBX_PACKAGE_MAX_BYTES)
		rc = pbx_err_setc(err, PBX_EXIT_USAGE,
				  "%s: %llu bytes to ship, more than "
				  "%llu (exclude data in .pbxignore)",
				  e->dir, p->bytes, PBX_PACKAGE_MAX_BYTES);
	return rc;
}
