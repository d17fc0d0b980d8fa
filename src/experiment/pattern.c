/*
 * pattern.c - the one matching rule of the experiment's `files:` and
 * `outputs:` patterns (FORMAT.md, "Patterns"): collect.c walks the
 * experiment directory with it, harvest.c picks task files with it.
 *
 * A pattern is read as path components ("./" and empty components are
 * dropped, a trailing "/" only says "a directory"), each matched against
 * the component at the same depth with fnmatch(3) FNM_PATHNAME |
 * FNM_PERIOD: `*`, `?` and `[...]` match neither "/" nor a leading ".",
 * as in glob(3).  An entry matches when its own path does, or the path of
 * a directory above it (a directory name means its whole tree).
 */
#include "experiment/experiment.h"
#include "util/xalloc.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

/* `s` without empty and "." components ("./a//b/" -> "a/b"), and how many
 * components are left; caller frees. */
static char *pattern_normal(const char *s, size_t *ncomp)
{
	char *out = xmalloc(strlen(s) + 1), *o = out;
	*ncomp = 0;
	while (*s) {
		size_t n = strcspn(s, "/");
		if (n && !(n == 1 && s[0] == '.')) {
			if (o != out)
				*o++ = '/';
			memcpy(o, s, n);
			o += n;
			(*ncomp)++;
		}
		s += n + (s[n] == '/');
	}
	*o = '\0';
	return out;
}

/* Length of the first `n` components of normalised path `s` (all of it
 * when it has fewer; *short_by gets how many were missing). */
static size_t pattern_prefix(const char *s, size_t n, size_t *short_by)
{
	size_t len = 0;
	*short_by = n;
	while (*short_by && s[len]) {
		len += strcspn(s + len, "/");
		(*short_by)--;
		if (*short_by && s[len] == '/')
			len++;
	}
	return len;
}

static bool pattern_fnmatch(const char *pat, size_t plen, const char *s, size_t slen)
{
	char *p = xstrndup(pat, plen), *t = xstrndup(s, slen);
	bool m = fnmatch(p, t, FNM_PATHNAME | FNM_PERIOD) == 0;
	free(p);
	free(t);
	return m;
}

bool pbx_pattern_match(const char *pattern, const char *rel, bool is_dir)
{
	size_t c, d, short_by, len;
	char *pat = pattern_normal(pattern, &c), *path = pattern_normal(rel, &d);
	bool dir_only = *pattern && pattern[strlen(pattern) - 1] == '/';
	bool m = false;
	len = pattern_prefix(path, c, &short_by);
	if (!short_by && pattern_fnmatch(pat, strlen(pat), path, len))
		m = d > c || !dir_only || is_dir; /* below a match, or the entry itself */
	free(pat);
	free(path);
	return m;
}

bool pbx_pattern_may_enter(const char *pattern, const char *dir)
{
	size_t c, d, short_by, plen;
	char *pat = pattern_normal(pattern, &c), *path = pattern_normal(dir, &d);
	bool m = false;
	if (c > d) {
		plen = pattern_prefix(pat, d, &short_by);
		m = pattern_fnmatch(pat, plen, path, strlen(path));
	}
	free(pat);
	free(path);
	return m;
}
