/*
 * ignore.c - .pbxignore: gitignore-like patterns matched with fnmatch(3).
 *
 * One pattern a line; blank lines and lines starting with '#' are skipped
 * (write "\#" for a leading '#'), trailing spaces and CR are dropped.  A
 * leading '!' re-includes what an earlier pattern excluded (the last
 * matching pattern wins; a file inside an excluded directory stays out,
 * as in git, because the directory is never entered).  A trailing '/'
 * matches directories only.  A pattern with a '/' at its start or in its
 * middle is anchored: matched against the whole path relative to the
 * experiment's directory, '*' not crossing '/'; otherwise it is matched
 * against the name alone, at any depth.  A leading "**" + "/" means any depth;
 * any other "**" lets '*' cross '/' in that pattern (so "a/" "**" "/b" needs
 * at least one directory between a and b; git's also matches "a/b").
 */
#include "experiment/package_internal.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ignore_rule {
	char *pat;
	bool negate, dir_only, anchored, deep;
	bool any_depth; /* led by a stripped "**" "/": try every suffix */
};

struct pbx_ignore {
	struct ignore_rule *rules;
	size_t n;
};

/* Parses one line (NUL-terminated, modified in place) into a rule. */
static bool ignore_rule(char *s, struct ignore_rule *r)
{
	size_t len = strlen(s);
	memset(r, 0, sizeof(*r));
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\r'))
		s[--len] = '\0';
	if (!len || s[0] == '#')
		return false;
	if (s[0] == '!') {
		r->negate = true;
		s++;
	} else if (s[0] == '\\' && (s[1] == '#' || s[1] == '!')) {
		s++;
	}
	len = strlen(s);
	if (len && s[len - 1] == '/') {
		r->dir_only = true;
		s[--len] = '\0';
	}
	while (!strncmp(s, "**/", 3)) {
		r->any_depth = true;
		s += 3;
	}
	if (!r->any_depth && s[0] == '/') {
		r->anchored = true;
		s++;
	}
	if (!*s)
		return false;
	r->anchored = r->anchored || strchr(s, '/') != NULL;
	r->any_depth = r->any_depth && r->anchored;
	r->deep = strstr(s, "**") != NULL;
	r->pat = xstrdup(s);
	return true;
}

struct pbx_ignore *pbx_ignore_parse(const char *text, size_t len)
{
	struct pbx_ignore *ig = xcalloc(1, sizeof(*ig));
	char *copy = xstrndup(text, len), *line = copy, *nl;
	struct ignore_rule r;
	while (line) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (ignore_rule(line, &r)) {
			ig->rules = xreallocarray(ig->rules, ig->n + 1, sizeof(r));
			ig->rules[ig->n++] = r;
		}
		line = nl ? nl + 1 : NULL;
	}
	free(copy);
	return ig;
}

int pbx_ignore_load(const char *dir, struct pbx_ignore **out, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	char *path = xasprintf("%s/.pbxignore", dir);
	struct stat st;
	int rc = 0;
	*out = NULL;
	if (lstat(path, &st) < 0 && errno == ENOENT) {
		*out = pbx_ignore_parse("", 0);
	} else if (pbx_read_regular(path, PBX_IGNORE_MAX_FILE, &b, NULL, err) == 0) {
		*out = pbx_ignore_parse(b.buf, b.len);
	} else {
		rc = -1;
	}
	pbx_buf_release(&b);
	free(path);
	return rc;
}

void pbx_ignore_free(struct pbx_ignore *ig)
{
	size_t i;
	if (!ig)
		return;
	for (i = 0; i < ig->n; i++)
		free(ig->rules[i].pat);
	free(ig->rules);
	free(ig);
}

static bool ignore_rule_matches(const struct ignore_rule *r, const char *rel, bool is_dir)
{
	const char *base = strrchr(rel, '/');
	int flags = r->deep ? 0 : FNM_PATHNAME;
	if (r->dir_only && !is_dir)
		return false;
	if (!r->anchored)
		return fnmatch(r->pat, base ? base + 1 : rel, flags) == 0;
	while (r->any_depth && rel) {
		if (fnmatch(r->pat, rel, flags) == 0)
			return true;
		rel = strchr(rel, '/');
		rel = rel ? rel + 1 : NULL;
	}
	return rel && fnmatch(r->pat, rel, flags) == 0;
}

bool pbx_ignore_match(const struct pbx_ignore *ig, const char *rel, bool is_dir)
{
	bool ignored = false;
	size_t i;
	for (i = 0; ig && i < ig->n; i++)
		if (ignore_rule_matches(&ig->rules[i], rel, is_dir))
			ignored = !ig->rules[i].negate;
	return ignored;
}
