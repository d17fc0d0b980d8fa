/*
 * experiment.c - the experiment file's top level: reading the file into a
 * yamltree document, the keys name / command / train / files / outputs /
 * env, handing `sweep`, `data` and `resources` to sweep.c and resources.c, and
 * releasing it all.  FORMAT.md is the user-facing description; keep the
 * two in step.
 */
#include "experiment/experiment_internal.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Small shared helpers                                                */

char *pbx_exp_pool_add(struct pbx_exp_priv *x, const char *s, size_t len)
{
	char *copy = xstrndup(s, len);
	if (x->npool == x->pool_alloc) {
		x->pool_alloc = x->pool_alloc ? 2 * x->pool_alloc : 32;
		x->pool = xreallocarray(x->pool, x->pool_alloc, sizeof(*x->pool));
	}
	x->pool[x->npool++] = copy;
	return copy;
}

int pbx_exp_scalar(const struct pbx_ynode *n, struct pbx_err *err)
{
	if (n->type != PBX_YSCALAR)
		return pbx_ynode_error(n, err, "must be a scalar, got %s", pbx_ynode_kind(n));
	if (strlen(n->value) != n->len)
		return pbx_ynode_error(n, err, "must not contain NUL bytes");
	if (n->len > PBX_EXPERIMENT_MAX_VALUE)
		return pbx_ynode_error(n, err, "longer than %d bytes", PBX_EXPERIMENT_MAX_VALUE);
	return 0;
}

static bool exp_lower(char c, bool digits)
{
	return (c >= 'a' && c <= 'z') || c == '_' || (digits && c >= '0' && c <= '9');
}

bool pbx_exp_param_name_ok(const char *s, size_t len)
{
	size_t i;
	if (len < 1 || len > 32 || strlen(s) != len || !exp_lower(s[0], false))
		return false;
	for (i = 1; i < len; i++)
		if (!exp_lower(s[i], true))
			return false;
	return true;
}

static bool exp_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* [A-Za-z0-9][A-Za-z0-9_.-]{0,63} */
static bool exp_name_ok(const char *s)
{
	size_t i, len = strlen(s);
	if (len < 1 || len > 64 || !exp_alnum(s[0]))
		return false;
	for (i = 1; i < len; i++)
		if (!exp_alnum(s[i]) && !strchr("_.-", s[i]))
			return false;
	return true;
}

/* ------------------------------------------------------------------ */
/* name, command / train                                               */

static int exp_name(struct pbx_experiment *e, const struct pbx_ynode *root, struct pbx_err *err)
{
	const struct pbx_ynode *n = pbx_ymap_get(root, "name");
	char shown[PBX_YSHOW_SIZE];
	if (!n)
		return pbx_ymap_missing(root, "name", NULL, err);
	if (pbx_ynode_str(n, PBX_YSTR_ONE_LINE, &e->name, err) < 0)
		return -1;
	if (exp_name_ok(e->name))
		return 0;
	pbx_ynode_show(n, shown);
	return pbx_ynode_error(n, err, "must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63}, got '%s'",
			       shown);
}

static int exp_program(struct pbx_experiment *e, const struct pbx_ynode *root, struct pbx_err *err)
{
	const struct pbx_ynode *cmd = pbx_ymap_get(root, "command");
	const struct pbx_ynode *train = pbx_ymap_get(root, "train");
	if (cmd && train)
		return pbx_ynode_error(train, err,
				       "cannot be given together with command "
				       "(give exactly one)");
	if (!cmd && !train)
		return pbx_ymap_missing(root, "command",
					"required key is missing "
					"(give either command or train)",
					err);
	if (train) {
		if (pbx_ynode_expect_map(train, err) < 0)
			return -1;
		e->train_json = pbx_exp_train_json(train);
		return pbx_exp_check_command_size(e, train, err);
	}
	if (pbx_ynode_str(cmd, 0, &e->command, err) < 0 || pbx_exp_check_command(e, cmd, err) < 0)
		return -1;
	return pbx_exp_check_command_size(e, cmd, err);
}

/* ------------------------------------------------------------------ */
/* files, outputs, env                                                 */

/* A relative glob with no ".." component. */
static int exp_glob_check(const struct pbx_ynode *n, const char *g, struct pbx_err *err)
{
	const char *p = g;
	if (g[0] == '/')
		return pbx_ynode_error(n, err, "must be a relative path, got '%s'", g);
	while (p) {
		if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || p[2] == '\0'))
			return pbx_ynode_error(n, err, "must not contain '..', got '%s'", g);
		p = strchr(p, '/');
		if (p)
			p++;
	}
	return 0;
}

static int exp_globs(const struct pbx_ynode *root, const char *key, char ***out, int **lines,
		     size_t *nout, struct pbx_err *err)
{
	const struct pbx_ynode *seq = pbx_ymap_get(root, key);
	size_t i;
	if (!seq)
		return 0;
	if (pbx_ynode_expect_seq(seq, err) < 0)
		return -1;
	if (!seq->nitems)
		return pbx_ynode_error(seq, err, "must not be empty");
	*out = xcalloc(seq->nitems, sizeof(**out));
	*lines = xcalloc(seq->nitems, sizeof(**lines));
	for (i = 0; i < seq->nitems; i++) {
		(*lines)[i] = seq->items[i]->line;
		if (pbx_ynode_str(seq->items[i], PBX_YSTR_ONE_LINE, &(*out)[i], err) < 0)
			return -1;
		(*nout)++;
		if (exp_glob_check(seq->items[i], (*out)[i], err) < 0)
			return -1;
	}
	return 0;
}

static bool exp_env_name_ok(const char *s, size_t len)
{
	size_t i;
	if (len < 1 || len > 128 || strlen(s) != len || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (i = 0; i < len; i++)
		if (!exp_alnum(s[i]) && s[i] != '_')
			return false;
	return true;
}

static int exp_env_one(struct pbx_experiment *e, const struct pbx_ypair *p, struct pbx_err *err)
{
	const char *name = p->key->value;
	if (!exp_env_name_ok(name, p->key->len))
		return pbx_ynode_error(p->value, err,
				       "not a valid environment variable name "
				       "(want [A-Za-z_][A-Za-z0-9_]*)");
	if (!strncmp(name, "PBX_", 4) || !strncmp(name, "SLURM_", 6))
		return pbx_ynode_error(p->value, err,
				       "names starting with PBX_ or SLURM_ "
				       "are reserved");
	if (pbx_exp_scalar(p->value, err) < 0)
		return -1;
	e->env_names[e->nenv] = xstrdup(name);
	e->env_values[e->nenv++] = xstrdup(p->value->value);
	return 0;
}

static int exp_env(struct pbx_experiment *e, const struct pbx_ynode *root, struct pbx_err *err)
{
	const struct pbx_ynode *env = pbx_ymap_get(root, "env");
	size_t i;
	if (!env)
		return 0;
	if (pbx_ynode_expect_map(env, err) < 0)
		return -1;
	e->env_names = xcalloc(env->npairs + 1, sizeof(char *));
	e->env_values = xcalloc(env->npairs + 1, sizeof(char *));
	for (i = 0; i < env->npairs; i++)
		if (exp_env_one(e, &env->pairs[i], err) < 0)
			return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The whole file                                                      */

static const char *const pbx_exp_keys[] = {
	"name",    "command", "train",       "sweep",  "resources", "files",
	"outputs", "env",     "environment", "notify", "data",      NULL,
};

/* A key that belongs one level down (repeats: at the top instead of under
 * sweep:): said so, with where it goes, before the unknown-key list. */
static int exp_misplaced(const struct pbx_ynode *root, struct pbx_err *err)
{
	static const char *const under[] = {
		"grid",     "sweep",     "zip",           "sweep",     "list",    "sweep",
		"random",   "sweep",     "repeats",       "sweep",     "time",    "resources",
		"gres",     "resources", "gpus",          "resources", "nodes",   "resources",
		"mem",      "resources", "partition",     "resources", "account", "resources",
		"launcher", "resources", "cpus-per-task", "resources", "ntasks",  "resources",
		NULL,
	};
	size_t i, k;
	for (i = 0; i < root->npairs; i++)
		for (k = 0; under[k]; k += 2)
			if (!strcmp(root->pairs[i].key->value, under[k]))
				return pbx_ynode_error(root->pairs[i].key, err,
						       "belongs under %s: (%s: { %s: ... })",
						       under[k + 1], under[k + 1], under[k]);
	return 0;
}

static int exp_root(struct pbx_exp_priv *x, const struct pbx_ydoc *doc, struct pbx_err *err)
{
	struct pbx_experiment *e = &x->pub;
	const struct pbx_ynode *root = doc->root;
	if (!root)
		return pbx_err_setc(err, PBX_EXIT_USAGE,
				    "%s:1: empty experiment file "
				    "(want a mapping with name and command or train)",
				    doc->name);
	if (pbx_ynode_expect_map(root, err) < 0 || exp_misplaced(root, err) < 0 ||
	    pbx_ymap_check_keys(root, pbx_exp_keys, err) < 0)
		return -1;
	if (exp_name(e, root, err) < 0 || pbx_exp_sweep(x, pbx_ymap_get(root, "sweep"), err) < 0 ||
	    exp_program(e, root, err) < 0 ||
	    pbx_exp_resources(e, pbx_ymap_get(root, "resources"), err) < 0 ||
	    exp_globs(root, "files", &e->files, &e->files_lines, &e->nfiles, err) < 0 ||
	    exp_globs(root, "outputs", &e->outputs, &e->outputs_lines, &e->noutputs, err) < 0)
		return -1;
	if (exp_env(e, root, err) < 0)
		return -1;
	if (pbx_exp_notify(e, pbx_ymap_get(root, "notify"), err) < 0 ||
	    pbx_exp_data(e, pbx_ymap_get(root, "data"), err) < 0)
		return -1;
	return pbx_exp_environment(e, pbx_ymap_get(root, "environment"), err);
}

int pbx_experiment_parse(const char *name, const char *text, size_t len, const char *dir,
			 struct pbx_experiment **out, struct pbx_err *err)
{
	struct pbx_exp_priv *x;
	struct pbx_ydoc *doc = NULL;
	*out = NULL;
	if (len > PBX_EXPERIMENT_MAX_FILE)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "%s: larger than %d bytes", name,
				    PBX_EXPERIMENT_MAX_FILE);
	if (pbx_ydoc_parse_max(name, text, len, PBX_EXPERIMENT_MAX_NODES, &doc, err) < 0)
		return -1;
	x = xcalloc(1, sizeof(*x));
	x->pub.path = xstrdup(name);
	x->pub.dir = xstrdup(dir ? dir : ".");
	x->pub.text = xmalloc(len + 1);
	memcpy(x->pub.text, text, len);
	x->pub.text[len] = '\0';
	x->pub.text_len = len;
	if (exp_root(x, doc, err) < 0) {
		pbx_ydoc_free(doc);
		pbx_experiment_free(&x->pub);
		return -1;
	}
	pbx_ydoc_free(doc);
	*out = &x->pub;
	return 0;
}

/* The absolute directory holding `path`; caller frees. */
static char *exp_dir_of(const char *path, struct pbx_err *err)
{
	char *copy = xstrdup(path), *dir, *abs;
	dir = dirname(copy);
	abs = realpath(dir, NULL);
	if (!abs)
		pbx_err_setc(err, PBX_EXIT_USAGE, "cannot resolve the directory of %s: %s", path,
			     strerror(errno));
	free(copy);
	return abs;
}

int pbx_experiment_load(const char *path, struct pbx_experiment **out, struct pbx_err *err)
{
	struct pbx_buf b = PBX_BUF_INIT;
	char *dir;
	int rc;
	*out = NULL;
	if (pbx_read_regular(path, PBX_EXPERIMENT_MAX_FILE, &b, NULL, err) < 0) {
		err->code = PBX_EXIT_USAGE;
		return -1;
	}
	dir = exp_dir_of(path, err);
	rc = dir ? pbx_experiment_parse(path, b.buf, b.len, dir, out, err) : -1;
	free(dir);
	pbx_buf_release(&b);
	return rc;
}

static void exp_free_strv(char **v, size_t n)
{
	size_t i;
	for (i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void pbx_experiment_free(struct pbx_experiment *e)
{
	struct pbx_exp_priv *x = (struct pbx_exp_priv *)e;
	if (!e)
		return;
	exp_free_strv(x->pool, x->npool);
	free(x->block);
	free(e->points);
	pbx_sbatch_opts_free(&e->res);
	exp_free_strv(e->files, e->nfiles);
	exp_free_strv(e->outputs, e->noutputs);
	free(e->files_lines);
	free(e->outputs_lines);
	exp_free_strv(e->env_names, e->nenv);
	exp_free_strv(e->env_values, e->nenv);
	pbx_exp_environment_free(&e->env);
	free(e->notify);
	pbx_exp_data_free(e);
	free(e->path);
	free(e->dir);
	free(e->name);
	free(e->command);
	free(e->train_json);
	free(e->text);
	free(x);
}

const struct pbx_param *pbx_experiment_param(const struct pbx_experiment *e, size_t i,
					     const char *name)
{
	const struct pbx_point *pt;
	size_t k;
	if (i >= e->npoints)
		return NULL;
	pt = &e->points[i];
	for (k = 0; k < pt->nparams; k++)
		if (!strcmp(pt->params[k].name, name))
			return &pt->params[k];
	return NULL;
}

size_t pbx_experiment_repeat(const struct pbx_experiment *e, size_t i)
{
	return e->repeats > 1 ? i % e->repeats : 0;
}
