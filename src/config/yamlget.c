/*
 * yamlget.c - reading values out of a yamltree document: node paths,
 * "FILE:LINE: path: problem" errors, typed getters and the unknown-key
 * check with its "did you mean" hint (see yamltree.h).
 */
#include "config/yamltree.h"
#include "util/buf.h"
#include "util/xalloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PBX_YSHOW_MAX 40
_Static_assert(PBX_YSHOW_MAX + 4 <= PBX_YSHOW_SIZE, "PBX_YSHOW_SIZE too small");

/* Appends the path of `n` to `b`; `start` is where the path begins in b. */
static void ynode_path_add(const struct pbx_ynode *n, struct pbx_buf *b, size_t start)
{
	const char *k;
	if (!n->parent)
		return;
	ynode_path_add(n->parent, b, start);
	if (n->parent->type == PBX_YSEQ) {
		pbx_buf_addf(b, "[%zu]", n->index);
		return;
	}
	if (!n->key)
		return;
	if (b->len > start)
		pbx_buf_addc(b, '.');
	for (k = n->key; *k; k++)
		pbx_buf_addc(b, (unsigned char)*k < 0x20 || *k == 0x7f ? '?' : *k);
}

char *pbx_ynode_path(const struct pbx_ynode *n)
{
	struct pbx_buf b = PBX_BUF_INIT;
	ynode_path_add(n, &b, 0);
	return pbx_buf_detach(&b, NULL);
}

bool pbx_ynode_is_null(const struct pbx_ynode *n)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
	size_t i;
	if (n->type != PBX_YSCALAR || n->quoted)
		return false;
	for (i = 0; nulls[i]; i++)
		if (!strcmp(n->value, nulls[i]))
			return true;
	return false;
}

const char *pbx_ynode_kind(const struct pbx_ynode *n)
{
	if (n->type == PBX_YMAP)
		return "a mapping";
	if (n->type == PBX_YSEQ)
		return "a sequence";
	return pbx_ynode_is_null(n) ? "null" : "a string";
}

static int ynode_verror(const struct pbx_ynode *n, const char *extra, struct pbx_err *err,
			const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));
static int ynode_verror(const struct pbx_ynode *n, const char *extra, struct pbx_err *err,
			const char *fmt, va_list ap)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t start;
	pbx_buf_addf(&b, "%s:%d: ", n->doc->name, n->line);
	start = b.len;
	ynode_path_add(n, &b, start);
	if (extra)
		pbx_buf_addf(&b, "%s%s", b.len > start ? "." : "", extra);
	if (b.len > start)
		pbx_buf_adds(&b, ": ");
	pbx_buf_vaddf(&b, fmt, ap);
	pbx_err_setc(err, PBX_EXIT_USAGE, "%s", b.buf);
	pbx_buf_release(&b);
	return -1;
}

int pbx_ynode_error(const struct pbx_ynode *n, struct pbx_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ynode_verror(n, NULL, err, fmt, ap);
	va_end(ap);
	return -1;
}

/* pbx_ynode_error with a literal message (keeps -Wformat=2 happy). */
static int ynode_say(const struct pbx_ynode *n, const char *extra, struct pbx_err *err,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int ynode_say(const struct pbx_ynode *n, const char *extra, struct pbx_err *err,
		     const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ynode_verror(n, extra, err, fmt, ap);
	va_end(ap);
	return -1;
}

int pbx_ymap_missing(const struct pbx_ynode *map, const char *key, const char *why,
		     struct pbx_err *err)
{
	return ynode_say(map, key, err, "%s", why ? why : "required key is missing");
}

void pbx_ynode_show(const struct pbx_ynode *n, char out[PBX_YSHOW_SIZE])
{
	size_t i, len = n->len;
	if (len > PBX_YSHOW_MAX) {
		len = PBX_YSHOW_MAX;
		while (len && ((unsigned char)n->value[len] & 0xC0) == 0x80)
			len--;
	}
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)n->value[i];
		out[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	strcpy(out + len, len < n->len ? "..." : "");
}

/* Error "must be WHAT, got 'VALUE'" (or "got a mapping", ...). */
static int ywant(const struct pbx_ynode *n, const char *what, struct pbx_err *err)
{
	char shown[PBX_YSHOW_SIZE];
	if (n->type != PBX_YSCALAR || pbx_ynode_is_null(n))
		return ynode_say(n, NULL, err, "must be %s, got %s", what, pbx_ynode_kind(n));
	pbx_ynode_show(n, shown);
	if (n->quoted)
		return ynode_say(n, NULL, err, "must be %s, got the quoted string '%s'", what,
				 shown);
	return ynode_say(n, NULL, err, "must be %s, got '%s'", what, shown);
}

const struct pbx_ynode *pbx_ymap_get(const struct pbx_ynode *map, const char *key)
{
	size_t i, klen = strlen(key);
	if (!map || map->type != PBX_YMAP)
		return NULL;
	for (i = 0; i < map->npairs; i++) {
		const struct pbx_ynode *k = map->pairs[i].key;
		if (k->len == klen && !memcmp(k->value, key, klen))
			return map->pairs[i].value;
	}
	return NULL;
}

int pbx_ynode_expect_map(const struct pbx_ynode *n, struct pbx_err *err)
{
	return n->type == PBX_YMAP ? 0 : ywant(n, "a mapping", err);
}

int pbx_ynode_expect_seq(const struct pbx_ynode *n, struct pbx_err *err)
{
	return n->type == PBX_YSEQ ? 0 : ywant(n, "a sequence", err);
}

size_t pbx_edit_distance(const char *a, const char *b, size_t cap)
{
	size_t la = strlen(a), lb = strlen(b), i, j, d;
	size_t *row;
	if ((la > lb ? la - lb : lb - la) > cap)
		return cap + 1;
	row = xreallocarray(NULL, lb + 1, sizeof(*row));
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	d = row[lb];
	free(row);
	return d > cap ? cap + 1 : d;
}

const char *pbx_did_you_mean(const char *word, const char *const *known)
{
	const char *best = NULL;
	size_t i, bestd = 3;
	for (i = 0; known[i]; i++) {
		size_t d = pbx_edit_distance(word, known[i], 2);
		if (d < bestd) {
			bestd = d;
			best = known[i];
		}
	}
	return best;
}

static bool yknown(const struct pbx_ynode *key, const char *const *known)
{
	size_t i;
	for (i = 0; known[i]; i++)
		if (strlen(known[i]) == key->len && !strcmp(known[i], key->value))
			return true;
	return false;
}

static void ylist(struct pbx_buf *b, const char *const *words)
{
	size_t i;
	for (i = 0; words[i]; i++)
		pbx_buf_addf(b, "%s%s", i ? ", " : "", words[i]);
}

int pbx_ymap_check_keys(const struct pbx_ynode *map, const char *const *known, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	const struct pbx_ynode *key = NULL;
	const char *hint;
	size_t i;
	for (i = 0; i < map->npairs && !key; i++)
		if (!yknown(map->pairs[i].key, known))
			key = map->pairs[i].key;
	if (!key)
		return 0;
	hint = pbx_did_you_mean(key->value, known);
	if (hint) {
		pbx_buf_addf(&b, "did you mean '%s'?", hint);
	} else {
		pbx_buf_adds(&b, "expected one of ");
		ylist(&b, known);
	}
	ynode_say(key, NULL, err, "unknown key (%s)", b.buf);
	pbx_buf_release(&b);
	return -1;
}

int pbx_ynode_str(const struct pbx_ynode *n, unsigned flags, char **out, struct pbx_err *err)
{
	size_t i;
	*out = NULL;
	if (n->type == PBX_YSCALAR && pbx_ynode_is_null(n) && (flags & PBX_YSTR_NULL_OK))
		return 0;
	if (n->type != PBX_YSCALAR || pbx_ynode_is_null(n) || !n->len)
		return ywant(n, "a non-empty string", err);
	if (strlen(n->value) != n->len)
		return ynode_say(n, NULL, err, "must not contain NUL bytes");
	for (i = 0; (flags & PBX_YSTR_ONE_LINE) && i < n->len; i++) {
		unsigned char c = (unsigned char)n->value[i];
		if (c < 0x20 || c == 0x7f)
			return ynode_say(n, NULL, err, "must not contain control characters");
	}
	*out = xstrdup(n->value);
	return 0;
}

/* Strict decimal: optional sign, digits only, fits in a long. */
static int yparse_long(const struct pbx_ynode *n, long *out)
{
	const char *s = n->value;
	char *end;
	long v;
	if (n->type != PBX_YSCALAR || n->quoted || !n->len || strlen(s) != n->len)
		return -1;
	if (*s == '+' || *s == '-')
		s++;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(n->value, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int pbx_ynode_int(const struct pbx_ynode *n, long min, long max, long *out, struct pbx_err *err)
{
	char what[96];
	long v;
	if (min == 1)
		snprintf(what, sizeof(what), "a positive integer");
	else if (min == 0)
		snprintf(what, sizeof(what), "a non-negative integer");
	else
		snprintf(what, sizeof(what), "an integer between %ld and %ld", min, max);
	if (yparse_long(n, &v) < 0 || v < min)
		return ywant(n, what, err);
	if (v > max) {
		if (min == 0 || min == 1)
			snprintf(what, sizeof(what), "at most %ld", max);
		return ywant(n, what, err);
	}
	*out = v;
	return 0;
}

int pbx_ynode_bool(const struct pbx_ynode *n, bool *out, struct pbx_err *err)
{
	static const char *const yes[] = { "true", "yes", "on", NULL };
	static const char *const no[] = { "false", "no", "off", NULL };
	size_t i;
	if (n->type == PBX_YSCALAR && !n->quoted) {
		for (i = 0; yes[i]; i++)
			if (!strcasecmp(n->value, yes[i]) && strlen(yes[i]) == n->len)
				return *out = true, 0;
		for (i = 0; no[i]; i++)
			if (!strcasecmp(n->value, no[i]) && strlen(no[i]) == n->len)
				return *out = false, 0;
	}
	return ywant(n, "true or false", err);
}

int pbx_ynode_choice(const struct pbx_ynode *n, const char *const *choices, int *out,
		     struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	char shown[PBX_YSHOW_SIZE];
	const char *hint;
	int i;
	for (i = 0; n->type == PBX_YSCALAR && choices[i]; i++)
		if (strlen(choices[i]) == n->len && !strcmp(choices[i], n->value))
			return *out = i, 0;
	pbx_buf_adds(&b, "one of ");
	ylist(&b, choices);
	if (n->type != PBX_YSCALAR || pbx_ynode_is_null(n)) {
		ywant(n, b.buf, err);
	} else {
		pbx_ynode_show(n, shown);
		hint = pbx_did_you_mean(n->value, choices);
		ynode_say(n, NULL, err, "must be %s, got '%s'%s%s%s", b.buf, shown,
			  hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
	}
	pbx_buf_release(&b);
	return -1;
}
