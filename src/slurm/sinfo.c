/*
 * sinfo.c - sinfo output parsing (see sinfo.h).  The format is pbx's own
 * choice ("%N %t": node name, compact state), so the parser is strict:
 * exactly two fields per line, both within SLURM's character set.  The
 * compact states and their suffixes of SLURM 20.11 to 24.11 are listed in
 * docs/slurm-versions.md ("alloc+", "mix-", "plnd", "block", "?").
 */
#include "slurm/sinfo.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

static int sinfo_word_ok(const char *p, size_t len)
{
	size_t i;
	if (!len || len > 128)
		return 0;
	for (i = 0; i < len; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == '*' || c == '~' || c == '#' ||
		      c == '!' || c == '%' || c == '$' || c == '@' || c == '^' || c == '+' ||
		      c == '?'))
			return 0;
	}
	return 1;
}

static int sinfo_add(struct pbx_sinfo_node **nodes, size_t *n, size_t *cap, const char *name,
		     size_t nlen, const char *state, size_t slen)
{
	size_t i;
	for (i = 0; i < *n; i++)
		if (strlen((*nodes)[i].name) == nlen && !memcmp((*nodes)[i].name, name, nlen))
			return 0;
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 8;
		*nodes = xreallocarray(*nodes, *cap, sizeof(**nodes));
	}
	(*nodes)[*n].name = xstrndup(name, nlen);
	(*nodes)[*n].state = xstrndup(state, slen);
	(*n)++;
	return 0;
}

int pbx_sinfo_parse(const char *text, size_t len, struct pbx_sinfo_node **nodes, size_t *n,
		    struct pbx_err *err)
{
	const char *p = text, *end = text + len;
	size_t cap = 0, lineno = 0;
	*nodes = NULL;
	*n = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *sp;
		const char *eol = nl ? nl : end;
		lineno++;
		if (eol > p && eol[-1] == '\r')
			eol--;
		if (eol == p) {
			p = nl ? nl + 1 : end;
			continue;
		}
		sp = memchr(p, ' ', (size_t)(eol - p));
		if (!sp || !sinfo_word_ok(p, (size_t)(sp - p)) ||
		    !sinfo_word_ok(sp + 1, (size_t)(eol - sp - 1))) {
			pbx_sinfo_free(*nodes, *n);
			*nodes = NULL;
			*n = 0;
			return pbx_err_set(err, "sinfo output line %zu: expected 'NODE STATE'",
					   lineno);
		}
		sinfo_add(nodes, n, &cap, p, (size_t)(sp - p), sp + 1, (size_t)(eol - sp - 1));
		p = nl ? nl + 1 : end;
	}
	return 0;
}

void pbx_sinfo_free(struct pbx_sinfo_node *nodes, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++) {
		free(nodes[i].name);
		free(nodes[i].state);
	}
	free(nodes);
}

int pbx_sinfo_state_usable(const char *state)
{
	/* alloc+: allocated, jobs completing; plnd and mix-: planned for a
	 * pending job (21.08+); block: idle, blocked by an exclusive job (24.05+) */
	static const char *const ok_states[] = { "idle",       "mix",       "alloc", "comp",
						 "completing", "allocated", "mixed", "alloc+",
						 "plnd",       "mix-",      "block", NULL };
	size_t i;
	if (strchr(state, '*'))
		return 0;
	for (i = 0; ok_states[i]; i++)
		if (!strcmp(state, ok_states[i]))
			return 1;
	return 0;
}

int pbx_sinfo_state_resumable(const char *state)
{
	return strstr(state, "down") || strstr(state, "drain") || strstr(state, "inval") ||
	       strstr(state, "fail");
}

const char *pbx_sinfo_state_of(const struct pbx_sinfo_node *nodes, size_t n, const char *name)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (!strcmp(nodes[i].name, name))
			return nodes[i].state;
	return NULL;
}
