/*
 * yamltree.h - a YAML document read (with libyaml's event parser) into a
 * small tree of nodes that remember their line, column and place in the
 * document, plus typed getters whose errors read
 * "FILE:LINE: dotted.key.path[2].leaf: problem" (code PBX_EXIT_USAGE).
 *
 * Used by config.yaml and meant to be reused by every other YAML file pbx
 * reads (experiment files).  The reader is deliberately strict and safe for
 * untrusted input:
 *   - aliases are refused (no billion-laughs expansion), tags are refused;
 *   - duplicate keys in a mapping are errors (libyaml accepts them);
 *   - mapping keys must be scalars;
 *   - nesting is capped at PBX_YAML_MAX_DEPTH, nodes at PBX_YAML_MAX_NODES
 *     (or the caller's cap, pbx_ydoc_parse_max);
 *   - more than one document in the stream is an error.
 * An empty stream (or a stream of only comments) yields a document whose
 * root is NULL; the caller decides whether that is an error.
 *
 * Ownership: pbx_ydoc_parse() returns a document owned by the caller and
 * released with pbx_ydoc_free(); every node, string and array in it belongs
 * to the document.  Strings handed out by the getters (pbx_ynode_str) are
 * fresh copies owned by the caller.
 */
#ifndef PBX_CONFIG_YAMLTREE_H
#define PBX_CONFIG_YAMLTREE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define PBX_YAML_MAX_DEPTH 64
#define PBX_YAML_MAX_NODES 200000

enum pbx_ytype {
	PBX_YSCALAR,
	PBX_YMAP,
	PBX_YSEQ,
};

struct pbx_ydoc;
struct pbx_ypair;

struct pbx_ynode {
	enum pbx_ytype type;
	int line, column;               /* 1-based position of the node's start */
	const struct pbx_ydoc *doc;     /* owning document (for the file name) */
	const struct pbx_ynode *parent; /* NULL for the root */
	const char *key;                /* key under which it sits in a parent mapping (the
			       key node itself carries its own text), else NULL */
	size_t index;                   /* position in a parent sequence */
	/* PBX_YSCALAR */
	char *value; /* NUL-terminated; may hold NUL bytes before len */
	size_t len;
	bool quoted; /* written '...' / "..." / | / > rather than plain */
	/* PBX_YMAP: pairs in document order */
	struct pbx_ypair *pairs;
	size_t npairs;
	/* PBX_YSEQ: items in document order */
	struct pbx_ynode **items;
	size_t nitems;
};

struct pbx_ypair {
	struct pbx_ynode *key; /* always a scalar */
	struct pbx_ynode *value;
};

struct pbx_ydoc {
	char *name;             /* file name as given, used in messages */
	struct pbx_ynode *root; /* NULL for an empty stream */
	size_t nnodes;
};

/*
 * Parses `len` bytes of YAML; `name` is used in messages only.  On success
 * *out is a new document (free with pbx_ydoc_free); on failure *out is NULL
 * and err holds "NAME:LINE: ..." with code PBX_EXIT_USAGE.
 */
int pbx_ydoc_parse(const char *name, const char *text, size_t len, struct pbx_ydoc **out,
		   struct pbx_err *err);
/* The same with at most `max_nodes` nodes (every scalar, mapping and
 * sequence counts one) instead of PBX_YAML_MAX_NODES. */
int pbx_ydoc_parse_max(const char *name, const char *text, size_t len, size_t max_nodes,
		       struct pbx_ydoc **out, struct pbx_err *err);
void pbx_ydoc_free(struct pbx_ydoc *doc);

/* The dotted path of a node ("clusters.gpu.node_groups[0].count"; "" for
 * the root), control characters in keys shown as '?'.  Caller frees. */
char *pbx_ynode_path(const struct pbx_ynode *n);
/* "a mapping", "a sequence", "null" or "a string": for messages. */
const char *pbx_ynode_kind(const struct pbx_ynode *n);
/* A scalar's text fit for a message: at most 40 bytes (cut on a UTF-8
 * boundary, "..." appended when cut), control characters shown as '?'. */
#define PBX_YSHOW_SIZE 48
void pbx_ynode_show(const struct pbx_ynode *n, char out[PBX_YSHOW_SIZE]);
/* True for a plain "", "~", "null", "Null" or "NULL" scalar. */
bool pbx_ynode_is_null(const struct pbx_ynode *n);

/* Sets err to "NAME:LINE: PATH: <message>" (or "NAME:LINE: <message>" for
 * the root) with code PBX_EXIT_USAGE; returns -1. */
int pbx_ynode_error(const struct pbx_ynode *n, struct pbx_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The value stored under `key` in mapping `map`, or NULL (also when `map`
 * is NULL or not a mapping).  The node belongs to the document. */
const struct pbx_ynode *pbx_ymap_get(const struct pbx_ynode *map, const char *key);

/* Reports `key` missing from mapping `map`: "NAME:LINE: PATH.key: WHY"
 * (WHY defaults to "required key is missing"); returns -1. */
int pbx_ymap_missing(const struct pbx_ynode *map, const char *key, const char *why,
		     struct pbx_err *err);

/* Each returns 0, or -1 with err set naming the node. */
int pbx_ynode_expect_map(const struct pbx_ynode *n, struct pbx_err *err);
int pbx_ynode_expect_seq(const struct pbx_ynode *n, struct pbx_err *err);
/*
 * Refuses the first key of `map` that is not in the NULL-terminated list
 * `known`: "unknown key 'colud' (did you mean 'cloud'?)" - the hint is given
 * when a known key is within edit distance 2.
 */
int pbx_ymap_check_keys(const struct pbx_ynode *map, const char *const *known, struct pbx_err *err);

/* Flags for pbx_ynode_str. */
#define PBX_YSTR_NULL_OK  1u /* a null scalar gives *out = NULL */
#define PBX_YSTR_ONE_LINE 2u /* refuse control characters (newline, tab, ...) */
/* A string value (never empty, never with NUL bytes); *out is a fresh copy
 * owned by the caller. */
int pbx_ynode_str(const struct pbx_ynode *n, unsigned flags, char **out, struct pbx_err *err);
/* A plain decimal integer within [min, max]: "must be a positive integer,
 * got 'two'" (min 1), "must be a non-negative integer" (min 0), otherwise
 * "must be an integer between MIN and MAX". */
int pbx_ynode_int(const struct pbx_ynode *n, long min, long max, long *out, struct pbx_err *err);
/* A plain true/false (also yes/no, on/off; any case). */
int pbx_ynode_bool(const struct pbx_ynode *n, bool *out, struct pbx_err *err);
/* Index in the NULL-terminated `choices` of the string value; error
 * "must be one of a, b, c, got 'x' (did you mean 'y'?)". */
int pbx_ynode_choice(const struct pbx_ynode *n, const char *const *choices, int *out,
		     struct pbx_err *err);

/* Levenshtein distance, giving up (returning > cap) beyond `cap`. */
size_t pbx_edit_distance(const char *a, const char *b, size_t cap);
/* The entry of `known` nearest to `word` within distance 2, or NULL. */
const char *pbx_did_you_mean(const char *word, const char *const *known);

#endif
