/*
 * command.c - what a task runs: {name} placeholders in `command` (checked
 * at load time, substituted shell-quoted per point), the pbx-train command
 * line of `train:` experiments, a point's parameters as JSON, and the
 * `train:` section turned into JSON (jansson) for the package.
 *
 * Placeholder syntax: "{{" and "}}" are literal braces; "{" followed by
 * [a-z_][a-z0-9_]* and "}" is a placeholder, and so is the same after a
 * "$" ("${lr}" is "{lr}"); any other brace is literal (so "${HOME}" or
 * "awk '{print $1}'" need no escaping).  Values are never re-scanned, so
 * a value "{other}" stays as it is.
 */
#include "experiment/experiment_internal.h"
#include "util/buf.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Scanning                                                            */

struct cmd_token {
	const char *lit;  /* literal bytes to copy, or NULL for a placeholder */
	const char *name; /* placeholder name (not terminated) */
	size_t len;       /* bytes of lit or name */
	size_t advance;   /* bytes of the command consumed */
};

static bool cmd_namechar(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || c == '_' || (!first && c >= '0' && c <= '9');
}

/* The token starting at p (p points at a non-NUL byte).  "${name}" is
 * the placeholder {name}, its "$" consumed with it: the shell's way to
 * write a variable gives the parameter, not "$'value'". */
static void cmd_next(const char *p, struct cmd_token *t)
{
	size_t n = 1, dollar = p[0] == '$' && p[1] == '{' && cmd_namechar(p[2], true);
	t->lit = p;
	t->name = NULL;
	t->len = t->advance = 1;
	if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
		t->advance = 2;
		return;
	}
	p += dollar;
	if (p[0] != '{' || !cmd_namechar(p[1], true))
		return;
	while (cmd_namechar(p[n], false))
		n++;
	if (p[n] != '}')
		return;
	t->lit = NULL;
	t->name = p + 1;
	t->len = n - 1;
	t->advance = dollar + n + 1;
}

/* The value of placeholder name[0..len) in point i, or NULL. */
static const struct pbx_param *cmd_lookup(const struct pbx_experiment *e, size_t i,
					  const char *name, size_t len)
{
	const struct pbx_point *pt = &e->points[i];
	size_t k;
	for (k = 0; k < pt->nparams; k++)
		if (strlen(pt->params[k].name) == len && !memcmp(pt->params[k].name, name, len))
			return &pt->params[k];
	return NULL;
}

static bool cmd_is_repeat(const char *name, size_t len)
{
	return len == 6 && !memcmp(name, "repeat", 6);
}

/* ------------------------------------------------------------------ */
/* Load-time check                                                     */

/* " (did you mean {x}?)", " (parameters: a, b)" or " (the sweep defines
 * no parameters)" for an unknown placeholder. */
static void cmd_hint(const struct pbx_experiment *e, const char *name, struct pbx_buf *b)
{
	const struct pbx_point *pt = &e->points[0];
	const char **known = xcalloc(pt->nparams + 1, sizeof(char *));
	const char *hint;
	size_t k;
	for (k = 0; k < pt->nparams; k++)
		known[k] = pt->params[k].name;
	hint = pbx_did_you_mean(name, known);
	if (hint) {
		pbx_buf_addf(b, " (did you mean {%s}?)", hint);
	} else if (pt->nparams) {
		pbx_buf_adds(b, " (parameters:");
		for (k = 0; k < pt->nparams; k++)
			pbx_buf_addf(b, "%s %s", k ? "," : "", known[k]);
		pbx_buf_adds(b, ")");
	} else {
		pbx_buf_adds(b, " (the sweep defines no parameters)");
	}
	free(known);
}

int pbx_exp_check_command(const struct pbx_experiment *e, const struct pbx_ynode *cmd,
			  struct pbx_err *err)
{
	struct cmd_token t;
	struct pbx_buf b = PBX_BUF_INIT;
	const char *p;
	char *name;
	for (p = e->command; *p; p += t.advance) {
		cmd_next(p, &t);
		if (t.lit || cmd_is_repeat(t.name, t.len) || cmd_lookup(e, 0, t.name, t.len))
			continue;
		name = xstrndup(t.name, t.len > 40 ? 40 : t.len);
		pbx_buf_addf(&b, "unknown placeholder {%s%s}", name, t.len > 40 ? "..." : "");
		cmd_hint(e, name, &b);
		if (t.advance == t.len + 3) /* ${name}: meant for the shell? */
			pbx_buf_addf(&b, "; a shell variable is $%s or ${{%s}}", name, name);
		free(name);
		pbx_ynode_error(cmd, err, "%s", b.buf);
		pbx_buf_release(&b);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Per point                                                           */

int pbx_exp_check_command_size(const struct pbx_experiment *e, const struct pbx_ynode *n,
			       struct pbx_err *err)
{
	size_t i, len;
	for (i = 0; i < e->npoints; i++) {
		char *cmd = pbx_experiment_task_command(e, i);
		len = strlen(cmd);
		free(cmd);
		if (len > PBX_EXPERIMENT_MAX_COMMAND)
			return pbx_ynode_error(n, err,
					       "the command of task %zu is %zu bytes once "
					       "its parameters are substituted, more than %d (one "
					       "argument of execve)",
					       i, len, PBX_EXPERIMENT_MAX_COMMAND);
	}
	return 0;
}

static void cmd_substitute(const struct pbx_experiment *e, size_t i, struct pbx_buf *b)
{
	struct cmd_token t;
	const struct pbx_param *v;
	const char *p;
	for (p = e->command; *p; p += t.advance) {
		cmd_next(p, &t);
		if (t.lit)
			pbx_buf_add(b, t.lit, t.len);
		else if ((v = cmd_lookup(e, i, t.name, t.len)))
			pbx_shell_quote(b, v->value);
		else
			pbx_buf_adds(b, "'0'"); /* {repeat} with repeats: 1 */
	}
}

static void cmd_train(const struct pbx_experiment *e, size_t i, struct pbx_buf *b)
{
	const struct pbx_point *pt = &e->points[i];
	size_t k;
	pbx_buf_adds(b, "pbx-train train.yaml");
	for (k = 0; k < pt->nparams; k++) {
		char *kv;
		if (!strcmp(pt->params[k].name, "repeat"))
			continue;
		kv = xasprintf("%s=%s", pt->params[k].name, pt->params[k].value);
		pbx_buf_adds(b, " --set ");
		pbx_shell_quote(b, kv);
		free(kv);
	}
	/* A requeued attempt (exit 75 after a checkpoint) picks up where the
	 * last one stopped; the first starts fresh (no checkpoint yet). */
	pbx_buf_adds(b, " --resume");
}

char *pbx_experiment_task_command(const struct pbx_experiment *e, size_t i)
{
	struct pbx_buf b = PBX_BUF_INIT;
	if (e->command)
		cmd_substitute(e, i, &b);
	else
		cmd_train(e, i, &b);
	return pbx_buf_detach(&b, NULL);
}

/* A JSON string of `len` bytes (valid UTF-8 after libyaml); never NULL. */
static json_t *cmd_jstr(const char *s, size_t len)
{
	json_t *j = json_stringn(s, len);
	return j ? j : json_string("\xef\xbf\xbd");
}

char *pbx_experiment_point_json(const struct pbx_experiment *e, size_t i)
{
	const struct pbx_point *pt = &e->points[i];
	json_t *o = json_object();
	char *s, *out;
	size_t k;
	for (k = 0; k < pt->nparams; k++)
		json_object_set_new(o, pt->params[k].name,
				    cmd_jstr(pt->params[k].value, pt->params[k].len));
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	out = xstrdup(s ? s : "{}");
	free(s);
	return out;
}

/* ------------------------------------------------------------------ */
/* train: as JSON                                                      */

static json_t *cmd_tojson(const struct pbx_ynode *n)
{
	json_t *j;
	size_t i;
	if (n->type == PBX_YSCALAR)
		return pbx_ynode_is_null(n) ? json_null() : cmd_jstr(n->value, n->len);
	if (n->type == PBX_YSEQ) {
		j = json_array();
		for (i = 0; i < n->nitems; i++)
			json_array_append_new(j, cmd_tojson(n->items[i]));
		return j;
	}
	j = json_object();
	for (i = 0; i < n->npairs; i++) {
		const struct pbx_ynode *k = n->pairs[i].key;
		json_object_setn_new(j, k->value, k->len, cmd_tojson(n->pairs[i].value));
	}
	return j;
}

char *pbx_exp_train_json(const struct pbx_ynode *train)
{
	json_t *j = cmd_tojson(train);
	char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	char *out = xasprintf("%s\n", s ? s : "{}");
	json_decref(j);
	free(s);
	return out;
}
