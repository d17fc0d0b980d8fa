/*
 * tarcheck.c - the streaming tar gatekeeper (see tarcheck.h for the rules).
 *
 * The stream is cut into 512-byte blocks.  A header block is parsed,
 * combined with any pending GNU long-name ('L'/'K') or pax ('x') override,
 * checked against what the archive has created so far (directories,
 * symlinks, regular files, and the paths symlink targets walk through as
 * directories), then passed on; the member's data blocks follow unchanged.
 *
 * Why parents must come first: GNU tar replaces an existing symlink by a
 * directory when it extracts a directory member, but follows it when it
 * extracts "dir/file" with no "dir/" member before.  `tar -cf - .` always
 * emits a directory before its contents, so honest archives pass.
 */
#include "ssh/tarcheck.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TC_BLOCK    512
#define TC_META_MAX (1u << 20)

/* ------------------------------------------------------------ string set */

/* An open-addressing set of owned strings. */
struct strset {
	char **slot;
	size_t cap, n;
};

static uint64_t strset_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static size_t strset_find(const struct strset *set, const char *s)
{
	size_t i = (size_t)strset_hash(s) & (set->cap - 1);
	while (set->slot[i] && strcmp(set->slot[i], s) != 0)
		i = (i + 1) & (set->cap - 1);
	return i;
}

static int strset_has(const struct strset *set, const char *s)
{
	return set->cap && set->slot[strset_find(set, s)] != NULL;
}

static void strset_grow(struct strset *set)
{
	struct strset bigger = { NULL, set->cap ? set->cap * 2 : 64, set->n };
	size_t i;
	bigger.slot = xcalloc(bigger.cap, sizeof(char *));
	for (i = 0; i < set->cap; i++)
		if (set->slot[i])
			bigger.slot[strset_find(&bigger, set->slot[i])] = set->slot[i];
	free(set->slot);
	*set = bigger;
}

static void strset_add(struct strset *set, const char *s)
{
	size_t i;
	if ((set->n + 1) * 2 > set->cap)
		strset_grow(set);
	i = strset_find(set, s);
	if (!set->slot[i]) {
		set->slot[i] = xstrdup(s);
		set->n++;
	}
}

static void strset_free(struct strset *set)
{
	size_t i;
	for (i = 0; i < set->cap; i++)
		free(set->slot[i]);
	free(set->slot);
	set->slot = NULL;
	set->cap = set->n = 0;
}

/* ------------------------------------------------------------ state */

struct pbx_tarcheck {
	unsigned char blk[TC_BLOCK]; /* block being assembled */
	size_t blen;
	uint64_t blocks_left;        /* data blocks of the current member still to come */
	char meta_type;              /* 'L', 'K', 'x', 'g' while reading their data, else 0 */
	uint64_t meta_left;          /* meta bytes still to collect */
	struct pbx_buf meta;         /* collected meta data */
	char *next_path, *next_link; /* overrides for the next member (owned) */
	int has_next_size;
	uint64_t next_size;
	int ended, failed;
	size_t members;
	struct strset dirs;       /* directory members ("" = the root) */
	struct strset links;      /* symlink members */
	struct strset files;      /* regular files and hard links */
	struct strset walked;     /* paths symlink targets go through as directories */
	struct pbx_tar_events ev; /* member consumer, if any */
	uint64_t data_left;       /* data bytes of the current member for ev.data */
};

struct pbx_tarcheck *pbx_tarcheck_new(void)
{
	struct pbx_tarcheck *tc = xcalloc(1, sizeof(*tc));
	tc->meta = (struct pbx_buf)PBX_BUF_INIT;
	strset_add(&tc->dirs, "");
	return tc;
}

static void tc_clear_next(struct pbx_tarcheck *tc)
{
	free(tc->next_path);
	free(tc->next_link);
	tc->next_path = tc->next_link = NULL;
	tc->has_next_size = 0;
}

void pbx_tarcheck_free(struct pbx_tarcheck *tc)
{
	if (!tc)
		return;
	tc_clear_next(tc);
	pbx_buf_release(&tc->meta);
	strset_free(&tc->dirs);
	strset_free(&tc->links);
	strset_free(&tc->files);
	strset_free(&tc->walked);
	free(tc);
}

void pbx_tarcheck_set_events(struct pbx_tarcheck *tc, const struct pbx_tar_events *ev)
{
	tc->ev = *ev;
}

/* Passes checked bytes on, when there is somewhere to pass them. */
static void tc_pass(struct pbx_buf *out, const void *p, size_t len)
{
	if (out)
		pbx_buf_add(out, p, len);
}

/* Hands up to `len` bytes of the current member's data to ev.data. */
static int tc_emit_data(struct pbx_tarcheck *tc, const void *p, size_t len, struct pbx_err *err)
{
	size_t n = tc->data_left < len ? (size_t)tc->data_left : len;
	if (!n || !tc->ev.data)
		return 0;
	tc->data_left -= n;
	if (tc->ev.data(tc->ev.ctx, p, n, err) < 0) {
		tc->failed = 1;
		return -1;
	}
	return 0;
}

size_t pbx_tarcheck_members(const struct pbx_tarcheck *tc)
{
	return tc->members;
}

/* ------------------------------------------------------------ refusals */

static int tc_refuse(struct pbx_tarcheck *tc, const char *name, const char *why,
		     struct pbx_err *err)
{
	char shown[256];
	size_t i;
	for (i = 0; name[i] && i < sizeof(shown) - 1; i++)
		shown[i] = isprint((unsigned char)name[i]) ? name[i] : '?';
	shown[i] = '\0';
	tc->failed = 1;
	if (tc->ev.refused)
		tc->ev.refused(tc->ev.ctx, shown, why);
	return pbx_err_setc(err, PBX_EXIT_SECURITY, "refusing tar member '%s': %s", shown, why);
}

/* ------------------------------------------------------------ header fields */

/* Octal (optionally space/NUL padded) or GNU base-256; -1 when malformed. */
static int tc_number(const unsigned char *f, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	if (f[0] & 0x80) {
		if (f[0] != 0x80)
			return -1; /* negative or too large */
		for (i = 1; i < len; i++) {
			if (v >> 56)
				return -1;
			v = v << 8 | f[i];
		}
		*out = v;
		return 0;
	}
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = v * 8 + (uint64_t)(f[i] - '0');
	}
	if (i < len && f[i] != ' ' && f[i] != '\0')
		return -1;
	*out = v;
	return 0;
}

static unsigned tc_checksum(const unsigned char *b)
{
	unsigned sum = 0;
	size_t i;
	for (i = 0; i < TC_BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : b[i];
	return sum;
}

static int tc_checksum_ok(const unsigned char *b)
{
	uint64_t want;
	int ssum = 0;
	size_t i;
	if (tc_number(b + 148, 8, &want) < 0)
		return 0;
	for (i = 0; i < TC_BLOCK; i++)
		ssum += (i >= 148 && i < 156) ? ' ' : (signed char)b[i];
	return want == tc_checksum(b) || (int64_t)want == ssum;
}

/* A fixed-width header string field as a C string (caller frees). */
static char *tc_field(const unsigned char *f, size_t len)
{
	return xstrndup((const char *)f, strnlen((const char *)f, len));
}

/* The member name: override, or POSIX prefix + "/" + name. */
static char *tc_raw_name(struct pbx_tarcheck *tc, const unsigned char *b)
{
	char *name, *prefix, *full;
	if (tc->next_path)
		return xstrdup(tc->next_path);
	name = tc_field(b, 100);
	if (memcmp(b + 257, "ustar\0", 6) != 0 || !b[345])
		return name;
	prefix = tc_field(b + 345, 155);
	full = xasprintf("%s/%s", prefix, name);
	free(prefix);
	free(name);
	return full;
}

/* Clears setuid/setgid/sticky in place, fixing the checksum. */
static void tc_sanitize_mode(unsigned char *b)
{
	uint64_t mode;
	char field[16];
	if (tc_number(b + 100, 8, &mode) < 0 || !(mode & 07000))
		return;
	snprintf(field, sizeof(field), "%07o", (unsigned)(mode & 0777));
	memcpy(b + 100, field, 8);
	snprintf(field, sizeof(field), "%06o", tc_checksum(b));
	memcpy(b + 148, field, 7);
	b[155] = ' ';
}

/* ------------------------------------------------------------ paths */

/* Normalises a member name: drops "." and empty components; refuses
 * absolute names and "..".  "" is the root. */
static int tc_normalize(struct pbx_tarcheck *tc, const char *raw, struct pbx_buf *out,
			struct pbx_err *err)
{
	const char *p = raw;
	if (raw[0] == '/')
		return tc_refuse(tc, raw, "absolute name", err);
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return tc_refuse(tc, raw, "'..' in name", err);
		if (n && !(n == 1 && p[0] == '.')) {
			if (out->len)
				pbx_buf_addc(out, '/');
			pbx_buf_add(out, p, n);
		}
		p += n;
		p += *p == '/';
	}
	return 0;
}

/* The parent of a normalised path ("" for a top-level one); caller frees. */
static char *tc_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? xstrndup(path, (size_t)(slash - path)) : xstrdup("");
}

/*
 * Walks a symlink's target from the link's directory, lexically.  Refuses
 * absolute targets and any step above the root; remembers every path the
 * walk uses as a directory, and refuses one that is a symlink.
 */
static int tc_walk_target(struct pbx_tarcheck *tc, const char *path, const char *target,
			  struct pbx_err *err)
{
	struct pbx_buf cur = PBX_BUF_INIT;
	const char *p = target;
	char *parent = tc_parent(path);
	int rc = 0;
	if (!*target || target[0] == '/')
		rc = tc_refuse(tc, path, "symlink target is empty or absolute", err);
	pbx_buf_adds(&cur, parent);
	free(parent);
	while (rc == 0 && *p) {
		size_t n = strcspn(p, "/");
		int last = p[n] == '\0' || p[n + strspn(p + n, "/")] == '\0';
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			char *up;
			if (!cur.len) {
				rc = tc_refuse(tc, path, "symlink points outside the tree", err);
				break;
			}
			up = tc_parent(cur.buf);
			pbx_buf_reset(&cur);
			pbx_buf_adds(&cur, up);
			free(up);
		} else if (n && !(n == 1 && p[0] == '.')) {
			if (cur.len)
				pbx_buf_addc(&cur, '/');
			pbx_buf_add(&cur, p, n);
			if (!last && strset_has(&tc->links, cur.buf))
				rc = tc_refuse(tc, path, "symlink target goes through a symlink",
					       err);
			else if (!last)
				strset_add(&tc->walked, cur.buf);
		}
		p += n;
		p += strspn(p, "/");
	}
	pbx_buf_release(&cur);
	return rc;
}

/* ------------------------------------------------------------ members */

static int tc_check_place(struct pbx_tarcheck *tc, const char *path, char type, struct pbx_err *err)
{
	char *parent;
	int have;
	if (!*path)
		return type == '5' ? 0 : tc_refuse(tc, ".", "the root must be a directory", err);
	parent = tc_parent(path);
	have = strset_has(&tc->dirs, parent);
	free(parent);
	if (!have)
		return tc_refuse(tc, path, "parent directory not in the archive before it", err);
	if (strset_has(&tc->links, path))
		return tc_refuse(tc, path, "replaces a symlink of the archive", err);
	if (type != '5' && strset_has(&tc->dirs, path))
		return tc_refuse(tc, path, "replaces a directory of the archive", err);
	return 0;
}

static int tc_hardlink(struct pbx_tarcheck *tc, const char *path, const char *target,
		       struct pbx_err *err)
{
	struct pbx_buf norm = PBX_BUF_INIT;
	int rc = 0;
	if (target[0] == '/')
		rc = tc_refuse(tc, path, "hard link to an absolute path", err);
	else if (tc_normalize(tc, target, &norm, err) < 0)
		rc = tc_refuse(tc, path, "hard link target has '..'", err);
	else if (!strset_has(&tc->files, norm.buf))
		rc = tc_refuse(tc, path, "hard link to something that is not an earlier file", err);
	pbx_buf_release(&norm);
	return rc;
}

static int tc_member(struct pbx_tarcheck *tc, const char *path, char type, const char *link,
		     uint64_t size, struct pbx_err *err)
{
	if (tc_check_place(tc, path, type, err) < 0)
		return -1;
	if (type != '0' && type != '\0' && type != '7' && size != 0)
		return tc_refuse(tc, path, "non-file member with data", err);
	switch (type) {
	case '5':
		strset_add(&tc->dirs, path);
		return 0;
	case '0':
	case '\0':
	case '7':
		strset_add(&tc->files, path);
		return 0;
	case '1':
		if (tc_hardlink(tc, path, link, err) < 0)
			return -1;
		strset_add(&tc->files, path);
		return 0;
	case '2':
		if (strset_has(&tc->walked, path))
			return tc_refuse(tc, path,
					 "symlink where another symlink's target needs a directory",
					 err);
		if (tc_walk_target(tc, path, link, err) < 0)
			return -1;
		strset_add(&tc->links, path);
		return 0;
	default:
		return tc_refuse(tc, path, "unsupported member type (device, fifo, sparse...)",
				 err);
	}
}

/* ------------------------------------------------------------ meta headers */

/* Applies one pax record "key=value" (value may not contain NUL). */
static int tc_pax_record(struct pbx_tarcheck *tc, int global, const char *key, size_t klen,
			 const char *val, size_t vlen, struct pbx_err *err)
{
	int layout = (klen == 4 && !memcmp(key, "path", 4)) ||
		     (klen == 8 && !memcmp(key, "linkpath", 8)) ||
		     (klen == 4 && !memcmp(key, "size", 4));
	if ((klen >= 10 && !memcmp(key, "GNU.sparse", 10)) || (global && layout) ||
	    memchr(val, '\0', vlen))
		return tc_refuse(tc, "(pax header)", "unsupported pax record", err);
	if (global || !layout)
		return 0;
	if (key[0] == 'p') {
		free(tc->next_path);
		tc->next_path = xstrndup(val, vlen);
	} else if (key[0] == 'l') {
		free(tc->next_link);
		tc->next_link = xstrndup(val, vlen);
	} else {
		char *end, *v = xstrndup(val, vlen);
		tc->next_size = strtoull(v, &end, 10);
		tc->has_next_size = 1;
		if (!vlen || *end) {
			free(v);
			return tc_refuse(tc, "(pax header)", "bad pax size", err);
		}
		free(v);
	}
	return 0;
}

/* Parses "LEN key=value\n" records. */
static int tc_pax(struct pbx_tarcheck *tc, int global, struct pbx_err *err)
{
	const char *p = tc->meta.buf, *end = p + tc->meta.len;
	while (p < end) {
		char *sp;
		unsigned long long len = strtoull(p, &sp, 10);
		const char *rec = p, *eq;
		if (sp == p || *sp != ' ' || len <= (size_t)(sp - p) + 1 ||
		    len > (size_t)(end - rec) || rec[len - 1] != '\n')
			return tc_refuse(tc, "(pax header)", "malformed pax record", err);
		eq = memchr(sp + 1, '=', (size_t)(rec + len - 1 - (sp + 1)));
		if (!eq)
			return tc_refuse(tc, "(pax header)", "malformed pax record", err);
		if (tc_pax_record(tc, global, sp + 1, (size_t)(eq - sp - 1), eq + 1,
				  (size_t)(rec + len - 1 - (eq + 1)), err) < 0)
			return -1;
		p = rec + len;
	}
	return 0;
}

static int tc_meta_done(struct pbx_tarcheck *tc, struct pbx_err *err)
{
	char type = tc->meta_type;
	size_t n = strnlen(tc->meta.buf, tc->meta.len);
	tc->meta_type = 0;
	if (type == 'x' || type == 'g')
		return tc_pax(tc, type == 'g', err);
	if (n != tc->meta.len && n + 1 != tc->meta.len)
		return tc_refuse(tc, "(long name)", "NUL inside a GNU long name", err);
	if (type == 'L') {
		free(tc->next_path);
		tc->next_path = xstrndup(tc->meta.buf, n);
	} else {
		free(tc->next_link);
		tc->next_link = xstrndup(tc->meta.buf, n);
	}
	return 0;
}

/* ------------------------------------------------------------ blocks */

static int tc_is_zero(const unsigned char *b)
{
	size_t i;
	for (i = 0; i < TC_BLOCK; i++)
		if (b[i])
			return 0;
	return 1;
}

static int tc_start_meta(struct pbx_tarcheck *tc, char type, uint64_t size, struct pbx_err *err)
{
	if (size > TC_META_MAX)
		return tc_refuse(tc, "(meta header)", "oversized long name or pax header", err);
	tc->meta_type = type;
	tc->meta_left = size;
	pbx_buf_reset(&tc->meta);
	return 0;
}

/* Checks the mode and mtime fields (refused when corrupt, as tar would)
 * and tells ev.member of the member (hard link targets normalised). */
static int tc_emit_member(struct pbx_tarcheck *tc, const unsigned char *b, const char *path,
			  char type, const char *link, uint64_t size, struct pbx_err *err)
{
	struct pbx_buf norm = PBX_BUF_INIT;
	struct pbx_tar_member m = {
		path, type == '\0' || type == '7' ? '0' : type, link, size, 0, 0
	};
	uint64_t mode = 0644, mtime = 0;
	int rc = 0;
	tc->data_left = m.type == '0' ? size : 0;
	if (tc_number(b + 100, 8, &mode) < 0 || tc_number(b + 136, 12, &mtime) < 0)
		return tc_refuse(tc, path, "corrupt mode or mtime", err);
	if (!tc->ev.member)
		return 0;
	m.mode = (unsigned)(mode & 0777);
	m.mtime = (int64_t)mtime;
	if (m.type == '1') {
		tc_normalize(tc, link, &norm, err); /* cannot fail: tc_hardlink checked it */
		m.link = norm.buf ? norm.buf : "";
	}
	if (tc->ev.member(tc->ev.ctx, &m, err) < 0) {
		tc->failed = 1;
		rc = -1;
	}
	pbx_buf_release(&norm);
	return rc;
}

/* Checks a (non-meta) member header; fills *size. */
static int tc_entry(struct pbx_tarcheck *tc, const unsigned char *b, char type, uint64_t *size,
		    struct pbx_err *err)
{
	struct pbx_buf path = PBX_BUF_INIT;
	char *raw = tc_raw_name(tc, b);
	char *link = tc->next_link ? xstrdup(tc->next_link) : tc_field(b + 157, 100);
	int rc;
	if (tc->has_next_size)
		*size = tc->next_size;
	rc = tc_normalize(tc, raw, &path, err);
	if (rc == 0)
		rc = tc_member(tc, path.buf, type, link, *size, err);
	if (rc == 0)
		rc = tc_emit_member(tc, b, path.buf ? path.buf : "", type, link, *size, err);
	free(raw);
	free(link);
	pbx_buf_release(&path);
	tc_clear_next(tc);
	return rc;
}

static int tc_header(struct pbx_tarcheck *tc, unsigned char *b, struct pbx_buf *out,
		     struct pbx_err *err)
{
	uint64_t size;
	char type = (char)b[156];
	if (tc_is_zero(b)) {
		static const unsigned char zeros[2 * TC_BLOCK];
		tc->ended = 1; /* tar stops here; so do we */
		tc_pass(out, zeros, sizeof(zeros));
		return 0;
	}
	if (!tc_checksum_ok(b) || tc_number(b + 124, 12, &size) < 0)
		return tc_refuse(tc, "(header)", "corrupt tar header", err);
	if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
		if (tc_start_meta(tc, type, size, err) < 0)
			return -1;
	} else {
		tc_sanitize_mode(b);
		if (tc_entry(tc, b, type, &size, err) < 0)
			return -1;
		tc->members++;
	}
	tc->blocks_left = (size + TC_BLOCK - 1) / TC_BLOCK;
	tc_pass(out, b, TC_BLOCK);
	return 0;
}

/* A whole block of member data (or meta data). */
static int tc_data_block(struct pbx_tarcheck *tc, const unsigned char *b, struct pbx_buf *out,
			 struct pbx_err *err)
{
	tc_pass(out, b, TC_BLOCK);
	tc->blocks_left--;
	if (!tc->meta_type)
		return tc_emit_data(tc, b, TC_BLOCK, err);
	size_t take = tc->meta_left < TC_BLOCK ? (size_t)tc->meta_left : TC_BLOCK;
	pbx_buf_add(&tc->meta, b, take);
	tc->meta_left -= take;
	return tc->blocks_left ? 0 : tc_meta_done(tc, err);
}

/* Passes a run of plain data blocks straight from the input; returns the
 * bytes used, or -1 when ev.data refused them. */
static ptrdiff_t tc_data_run(struct pbx_tarcheck *tc, const unsigned char *p, size_t len,
			     struct pbx_buf *out, struct pbx_err *err)
{
	uint64_t n = len / TC_BLOCK;
	if (tc->meta_type || tc->blen || !tc->blocks_left || !n)
		return 0;
	if (n > tc->blocks_left)
		n = tc->blocks_left;
	tc_pass(out, p, (size_t)n * TC_BLOCK);
	tc->blocks_left -= n;
	if (tc_emit_data(tc, p, (size_t)n * TC_BLOCK, err) < 0)
		return -1;
	return (ptrdiff_t)(n * TC_BLOCK);
}

int pbx_tarcheck_feed(struct pbx_tarcheck *tc, const void *data, size_t len, struct pbx_buf *out,
		      struct pbx_err *err)
{
	const unsigned char *p = data;
	if (tc->failed)
		return pbx_err_setc(err, PBX_EXIT_SECURITY, "tar stream already refused");
	while (len && !tc->ended) {
		ptrdiff_t used = tc_data_run(tc, p, len, out, err);
		size_t take;
		int rc;
		if (used < 0)
			return -1;
		p += used;
		len -= (size_t)used;
		if (!len)
			break;
		take = TC_BLOCK - tc->blen < len ? TC_BLOCK - tc->blen : len;
		memcpy(tc->blk + tc->blen, p, take);
		tc->blen += take;
		p += take;
		len -= take;
		if (tc->blen < TC_BLOCK)
			break;
		tc->blen = 0;
		rc = tc->blocks_left ? tc_data_block(tc, tc->blk, out, err)
				     : tc_header(tc, tc->blk, out, err);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Every path a symlink target walks through must have turned out to be a
 * directory of the archive (not something already in the destination). */
static int tc_walks_resolved(struct pbx_tarcheck *tc, struct pbx_err *err)
{
	size_t i;
	for (i = 0; i < tc->walked.cap; i++)
		if (tc->walked.slot[i] && !strset_has(&tc->dirs, tc->walked.slot[i]))
			return tc_refuse(
				tc, tc->walked.slot[i],
				"a symlink target goes through it but it is no directory of the archive",
				err);
	return 0;
}

int pbx_tarcheck_finish(struct pbx_tarcheck *tc, struct pbx_err *err)
{
	if (tc->failed)
		return pbx_err_setc(err, PBX_EXIT_SECURITY, "tar stream already refused");
	if (!tc->ended && (tc->blen || tc->blocks_left || tc->members == 0))
		return pbx_err_set(err, "truncated tar archive");
	return tc_walks_resolved(tc, err);
}
