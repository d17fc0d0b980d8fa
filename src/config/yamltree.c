/*
 * yamltree.c - builds the node tree of yamltree.h from libyaml's event
 * stream: one frame per open mapping/sequence, nodes attached to their
 * parent as soon as they are created (so a half-built tree is always fully
 * owned by the document), duplicate keys found when a mapping closes.
 */
#include "config/yamltree.h"
#include "util/xalloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct pbx_yframe {
	struct pbx_ynode *node; /* the open mapping or sequence */
};

struct pbx_ybuilder {
	struct pbx_ydoc *doc;
	const char *text;
	size_t len;
	struct pbx_yframe stack[PBX_YAML_MAX_DEPTH];
	int depth;
	int ndocs;
	size_t max_nodes;
	struct pbx_err *err;
};

static void ynode_free(struct pbx_ynode *n)
{
	size_t i;
	if (!n)
		return;
	for (i = 0; i < n->npairs; i++) {
		ynode_free(n->pairs[i].key);
		ynode_free(n->pairs[i].value);
	}
	for (i = 0; i < n->nitems; i++)
		ynode_free(n->items[i]);
	free(n->pairs);
	free(n->items);
	free(n->value);
	free(n);
}

void pbx_ydoc_free(struct pbx_ydoc *doc)
{
	if (!doc)
		return;
	ynode_free(doc->root);
	free(doc->name);
	free(doc);
}

/* Error at a position that has no node (yet). */
static int ymark_error(struct pbx_ybuilder *b, const yaml_mark_t *m, const char *msg)
{
	return pbx_err_setc(b->err, PBX_EXIT_USAGE, "%s:%zu: %s", b->doc->name, m->line + 1, msg);
}

/* Adds a pair whose value is still to come (NULL) to mapping `map`. */
/* Room for item n of an array of n items: capacities go 4, 8, 16, ... (a
 * realloc per item made a 100,000-entry sequence quadratic: 50 s under
 * ASan, whose realloc always copies). */
static void *ygrow(void *array, size_t n, size_t size)
{
	if (n && (n < 4 || (n & (n - 1))))
		return array; /* capacity is the next power of two >= 4 */
	return xreallocarray(array, n ? 2 * n : 4, size);
}

static void ymap_add_key(struct pbx_ynode *map, struct pbx_ynode *key)
{
	map->pairs = ygrow(map->pairs, map->npairs, sizeof(*map->pairs));
	map->pairs[map->npairs].key = key;
	map->pairs[map->npairs].value = NULL;
	map->npairs++;
	key->parent = map;
	key->key = key->type == PBX_YSCALAR ? key->value : NULL;
}

static void yseq_add(struct pbx_ynode *seq, struct pbx_ynode *item)
{
	seq->items = ygrow(seq->items, seq->nitems, sizeof(*seq->items));
	item->parent = seq;
	item->index = seq->nitems;
	seq->items[seq->nitems++] = item;
}

/* Hangs `n` into the tree under the innermost open collection. */
static int yattach(struct pbx_ybuilder *b, struct pbx_ynode *n)
{
	struct pbx_ynode *top;
	if (b->depth == 0) {
		b->doc->root = n;
		return 0;
	}
	top = b->stack[b->depth - 1].node;
	if (top->type == PBX_YSEQ) {
		yseq_add(top, n);
		return 0;
	}
	if (top->npairs && !top->pairs[top->npairs - 1].value) {
		struct pbx_ypair *p = &top->pairs[top->npairs - 1];
		p->value = n;
		n->parent = top;
		n->key = p->key->value;
		return 0;
	}
	ymap_add_key(top, n);
	if (n->type != PBX_YSCALAR)
		return pbx_ynode_error(n, b->err, "mapping keys must be scalars, got %s",
				       pbx_ynode_kind(n));
	return 0;
}

/* Creates a node at `m`, attaches it, and counts it against the cap. */
static struct pbx_ynode *ynew(struct pbx_ybuilder *b, enum pbx_ytype type, const yaml_mark_t *m,
			      const char *value, size_t len)
{
	struct pbx_ynode *n;
	if (++b->doc->nnodes > b->max_nodes) {
		char msg[64];
		snprintf(msg, sizeof(msg), "more than %zu YAML nodes", b->max_nodes);
		ymark_error(b, m, msg);
		return NULL;
	}
	n = xcalloc(1, sizeof(*n));
	n->type = type;
	n->line = (int)m->line + 1;
	n->column = (int)m->column + 1;
	n->doc = b->doc;
	if (type == PBX_YSCALAR) {
		n->value = xmalloc(len + 1);
		if (len)
			memcpy(n->value, value, len);
		n->value[len] = '\0';
		n->len = len;
	}
	return yattach(b, n) < 0 ? NULL : n;
}

/* Refuses an explicit tag on the node just created (tags would change how
 * values are typed; pbx types values by schema instead). */
static int yno_tag(struct pbx_ybuilder *b, const struct pbx_ynode *n, const yaml_char_t *tag)
{
	static const char core[] = "tag:yaml.org,2002:";
	const char *t = (const char *)tag;
	char shown[64];
	size_t i;
	if (!t)
		return 0;
	if (!strncmp(t, core, sizeof(core) - 1))
		snprintf(shown, sizeof(shown), "!!%s", t + sizeof(core) - 1);
	else
		snprintf(shown, sizeof(shown), "%s", t);
	for (i = 0; shown[i]; i++) /* %-escapes in tags may decode to anything */
		if ((unsigned char)shown[i] < 0x20 || shown[i] == 0x7f)
			shown[i] = '?';
	return pbx_ynode_error(n, b->err, "YAML tags are not supported (%s)", shown);
}

static int yscalar(struct pbx_ybuilder *b, const yaml_event_t *ev)
{
	struct pbx_ynode *n;
	n = ynew(b, PBX_YSCALAR, &ev->start_mark, (const char *)ev->data.scalar.value,
		 ev->data.scalar.length);
	if (!n)
		return -1;
	n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
	return yno_tag(b, n, ev->data.scalar.tag);
}

static int yalias(struct pbx_ybuilder *b, const yaml_event_t *ev)
{
	const char *anchor = (const char *)ev->data.alias.anchor;
	char *text = xasprintf("*%.100s", anchor ? anchor : "");
	struct pbx_ynode *n = ynew(b, PBX_YSCALAR, &ev->start_mark, text, strlen(text));
	free(text);
	if (!n)
		return -1;
	return pbx_ynode_error(n, b->err, "YAML aliases are not supported (%s)", n->value);
}

static int yopen(struct pbx_ybuilder *b, const yaml_event_t *ev, enum pbx_ytype type)
{
	const yaml_char_t *tag =
		type == PBX_YMAP ? ev->data.mapping_start.tag : ev->data.sequence_start.tag;
	struct pbx_ynode *n;
	char msg[64];
	if (b->depth >= PBX_YAML_MAX_DEPTH) {
		snprintf(msg, sizeof(msg), "YAML nesting is deeper than %d levels",
			 PBX_YAML_MAX_DEPTH);
		return ymark_error(b, &ev->start_mark, msg);
	}
	n = ynew(b, type, &ev->start_mark, NULL, 0);
	if (!n)
		return -1;
	b->stack[b->depth++].node = n;
	return yno_tag(b, n, tag);
}

struct pbx_ykeyref {
	const struct pbx_ynode *key;
	size_t pos;
};

static int ykeyref_cmp(const void *pa, const void *pb)
{
	const struct pbx_ykeyref *a = pa, *b = pb;
	size_t n = a->key->len < b->key->len ? a->key->len : b->key->len;
	int c = memcmp(a->key->value, b->key->value, n);
	if (c)
		return c;
	if (a->key->len != b->key->len)
		return a->key->len < b->key->len ? -1 : 1;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static int ysame_key(const struct pbx_ykeyref *a, const struct pbx_ykeyref *b)
{
	return a->key->len == b->key->len && !memcmp(a->key->value, b->key->value, a->key->len);
}

/* Refuses the first (in document order) repeated key of a mapping. */
static int ycheck_duplicates(const struct pbx_ynode *map, struct pbx_err *err)
{
	struct pbx_ykeyref *refs;
	size_t i, start = 0, bad = 0, first = 0;
	int found = 0, rc = 0;
	if (map->npairs < 2)
		return 0;
	refs = xreallocarray(NULL, map->npairs, sizeof(*refs));
	for (i = 0; i < map->npairs; i++) {
		refs[i].key = map->pairs[i].key;
		refs[i].pos = i;
	}
	qsort(refs, map->npairs, sizeof(*refs), ykeyref_cmp);
	for (i = 1; i < map->npairs; i++) {
		if (!ysame_key(&refs[i - 1], &refs[i])) {
			start = i;
			continue;
		}
		if (!found || refs[i].pos < bad) {
			found = 1;
			bad = refs[i].pos;
			first = refs[start].pos;
		}
	}
	free(refs);
	if (found)
		rc = pbx_ynode_error(map->pairs[bad].key, err,
				     "duplicate key (first given at line %d)",
				     map->pairs[first].key->line);
	return rc;
}

static int yclose(struct pbx_ybuilder *b)
{
	struct pbx_ynode *n = b->stack[--b->depth].node;
	if (n->type == PBX_YMAP)
		return ycheck_duplicates(n, b->err);
	return 0;
}

static int yevent(struct pbx_ybuilder *b, const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_DOCUMENT_START_EVENT:
		if (b->ndocs++)
			return ymark_error(b, &ev->start_mark, "only one YAML document is allowed");
		return 0;
	case YAML_SCALAR_EVENT:
		return yscalar(b, ev);
	case YAML_ALIAS_EVENT:
		return yalias(b, ev);
	case YAML_SEQUENCE_START_EVENT:
		return yopen(b, ev, PBX_YSEQ);
	case YAML_MAPPING_START_EVENT:
		return yopen(b, ev, PBX_YMAP);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		return yclose(b);
	default:
		return 0;
	}
}

/* Line (1-based) of byte `offset`, for reader errors that carry no mark. */
static size_t yline_of(const char *text, size_t len, size_t offset)
{
	size_t i, line = 1;
	for (i = 0; i < offset && i < len; i++)
		line += text[i] == '\n';
	return line;
}

/* For libyaml's "mapping values are not allowed in this context" on a
 * line `KEY: VALUE` whose plain VALUE holds ": " (a command line, a URL
 * with a port), what to write instead, into hint[] ("" when the line is
 * not of that shape).  The key is shown only when it is a plain name. */
static void ycolon_hint(const struct pbx_ybuilder *b, size_t line, char *hint, size_t size)
{
	const char *s = b->text, *end = b->text + b->len, *k;
	size_t n;
	hint[0] = '\0';
	while (line > 0 && s < end) { /* the start of the 0-based line */
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			return;
		s = nl + 1;
		line--;
	}
	while (s < end && (*s == ' ' || *s == '-'))
		s++;
	for (k = s; k < end && (isalnum((unsigned char)*k) || *k == '_' || *k == '-' || *k == '.');
	     k++)
		;
	n = (size_t)(k - s);
	if (!n || n > 40 || k + 1 >= end || k[0] != ':' || k[1] != ' ')
		return;
	snprintf(hint, size,
		 "; a value with ': ' in it needs quotes, or a block scalar: '%.*s: |' and the "
		 "value on the next lines, indented",
		 (int)n, s);
}

static int ysyntax_error(struct pbx_ybuilder *b, const yaml_parser_t *p)
{
	char hint[160] = "";
	const char *name = b->doc->name;
	const char *problem = p->problem ? p->problem : "unknown error";
	if (p->error == YAML_MEMORY_ERROR)
		return pbx_err_setc(b->err, PBX_EXIT_USAGE, "%s: out of memory parsing YAML", name);
	if (p->error == YAML_READER_ERROR)
		return pbx_err_setc(b->err, PBX_EXIT_USAGE, "%s:%zu: invalid input at byte %zu: %s",
				    name, yline_of(b->text, b->len, p->problem_offset),
				    p->problem_offset, problem);
	if (p->context)
		return pbx_err_setc(b->err, PBX_EXIT_USAGE,
				    "%s:%zu: YAML syntax error at column %zu: %s (%s at line %zu)",
				    name, p->problem_mark.line + 1, p->problem_mark.column + 1,
				    problem, p->context, p->context_mark.line + 1);
	if (!strcmp(problem, "mapping values are not allowed in this context"))
		ycolon_hint(b, p->problem_mark.line, hint, sizeof(hint));
	return pbx_err_setc(b->err, PBX_EXIT_USAGE, "%s:%zu: YAML syntax error at column %zu: %s%s",
			    name, p->problem_mark.line + 1, p->problem_mark.column + 1, problem,
			    hint);
}

static int yrun(struct pbx_ybuilder *b, yaml_parser_t *p)
{
	yaml_event_t ev;
	for (;;) {
		int rc, done;
		if (!yaml_parser_parse(p, &ev))
			return ysyntax_error(b, p);
		rc = yevent(b, &ev);
		done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
		if (rc < 0)
			return -1;
		if (done)
			return 0;
	}
}

int pbx_ydoc_parse(const char *name, const char *text, size_t len, struct pbx_ydoc **out,
		   struct pbx_err *err)
{
	return pbx_ydoc_parse_max(name, text, len, PBX_YAML_MAX_NODES, out, err);
}

int pbx_ydoc_parse_max(const char *name, const char *text, size_t len, size_t max_nodes,
		       struct pbx_ydoc **out, struct pbx_err *err)
{
	struct pbx_ybuilder b;
	yaml_parser_t parser;
	int rc;

	*out = NULL;
	memset(&b, 0, sizeof(b));
	b.doc = xcalloc(1, sizeof(*b.doc));
	b.doc->name = xstrdup(name);
	b.text = text;
	b.len = len;
	b.max_nodes = max_nodes;
	b.err = err;
	if (!yaml_parser_initialize(&parser)) {
		pbx_ydoc_free(b.doc);
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: cannot initialise YAML parser", name);
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	rc = yrun(&b, &parser);
	yaml_parser_delete(&parser);
	if (rc < 0) {
		pbx_ydoc_free(b.doc);
		return -1;
	}
	*out = b.doc;
	return 0;
}
