/*
 * complete.c - `pbx __complete WORD...`: what the last WORD of a command
 * line can be, one candidate a line, for the shell completion scripts in
 * completion/ (bash and zsh).
 *
 * Everything comes from the verb tables (cmd.h: subcommands, each option's
 * flags and metavar, and the kinds of positional arguments in `args`) and
 * from what the store and the configuration hold: cluster names, templates,
 * packages, PKG:TASK, images.  A FILE prints the single line "__files__"
 * (the script completes file names itself); after "--" nothing is
 * offered (a remote command).  It never fails and never writes: without a
 * store or with a bad configuration there are just fewer candidates.
 */
#include "cli/cmd.h"
#include "cli/complete.h"
#include "config/config.h"
#include "store/experiments.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What completion knows: the word being completed and where to read. */
struct comp {
	const char *cur;
	const char *config_path;
	struct pbx_store *st; /* opened on demand; NULL when none */
	int st_tried;
};

static void comp_say(const struct comp *c, const char *word)
{
	if (word && !strncmp(word, c->cur, strlen(c->cur)))
		printf("%s\n", word);
}

static struct pbx_store *comp_store(struct comp *c)
{
	char *path;
	struct pbx_err err = PBX_ERR_INIT;
	if (c->st_tried)
		return c->st;
	c->st_tried = 1;
	path = pbx_home_path("pbx.db");
	if (access(path, R_OK) == 0 && pbx_store_open(path, &c->st, &err) < 0)
		c->st = NULL;
	free(path);
	return c->st;
}

static void comp_clusters(struct comp *c)
{
	struct pbx_cluster_row *rows = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0, i;
	if (!comp_store(c) || pbx_store_cluster_list(c->st, 0, &rows, &n, &err) < 0)
		return;
	for (i = 0; i < n; i++)
		comp_say(c, rows[i].name);
	pbx_cluster_rows_free(rows, n);
}

static void comp_templates(struct comp *c)
{
	struct pbx_config *cfg = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t i;
	if (pbx_config_load(c->config_path, 1, &cfg, &err) < 0)
		return;
	for (i = 0; i < cfg->ntemplates; i++)
		comp_say(c, cfg->templates[i].name);
	pbx_config_free(cfg);
}

static void comp_packages(struct comp *c)
{
	struct pbx_package_row *rows = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0, i, k;
	if (!comp_store(c) || pbx_store_package_list(c->st, &rows, &n, &err) < 0)
		return;
	for (i = 0; i < n; i++) {
		comp_say(c, rows[i].short_id);
		for (k = 0; k < i && strcmp(rows[k].name, rows[i].name); k++)
			;
		if (k == i) /* a name once: its newest package */
			comp_say(c, rows[i].name);
	}
	pbx_package_rows_free(rows, n);
}

/* Parameter names (report's -g, --x, --color-by): of every task in the
 * store; after "a,b," the list so far followed by each name not in it. */
static void comp_params(struct comp *c)
{
	const char *comma = strrchr(c->cur, ',');
	size_t head = comma ? (size_t)(comma - c->cur) + 1 : 0, n = 0, i;
	struct pbx_err err = PBX_ERR_INIT;
	char **names = NULL;
	if (!comp_store(c) || pbx_store_param_names(c->st, &names, &n, &err) < 0)
		return;
	for (i = 0; i < n; i++) {
		char *word, *listed = xasprintf(",%.*s", (int)head, c->cur), *me;
		me = xasprintf(",%s,", names[i]);
		if (!strstr(listed, me)) {
			word = xasprintf("%.*s%s", (int)head, c->cur, names[i]);
			comp_say(c, word);
			free(word);
		}
		free(me);
		free(listed);
		free(names[i]);
	}
	free(names);
}

/* PKG:IDX for each task of PKG's latest submission (cur is "PKG:..."). */
static void comp_tasks(struct comp *c)
{
	const char *colon = strchr(c->cur, ':');
	struct pbx_package_row p;
	struct pbx_submission_row *subs = NULL;
	struct pbx_task_row *tasks = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t ns = 0, nt = 0, i;
	char *ref;
	if (!colon) {
		comp_packages(c);
		return;
	}
	ref = xstrndup(c->cur, (size_t)(colon - c->cur));
	if (comp_store(c) && pbx_store_package_find(c->st, ref, &p, &err) == 0) {
		if (pbx_store_submissions_of(c->st, p.id, &subs, &ns, &err) == 0 && ns &&
		    pbx_store_tasks_list(c->st, subs[ns - 1].id, &tasks, &nt, &err) == 0) {
			for (i = 0; i < nt; i++) {
				char *w = xasprintf("%s:%lld", ref, (long long)tasks[i].idx);
				comp_say(c, w);
				free(w);
			}
			pbx_task_rows_free(tasks, nt);
		}
		pbx_submission_rows_free(subs, ns);
		pbx_package_row_free(&p);
	}
	free(ref);
}

static void comp_images(struct comp *c)
{
	struct pbx_image_row *rows = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0, i;
	if (!comp_store(c) || pbx_store_image_list(c->st, 0, &rows, &n, &err) < 0)
		return;
	for (i = 0; i < n; i++)
		comp_say(c, rows[i].name);
	pbx_image_rows_free(rows, n);
}

static void comp_verbs(struct comp *c, const struct pbx_cmd *const *table);

static void comp_all_verbs(struct comp *c)
{
	comp_verbs(c, pbx_commands);
}

/* Candidates of argument kind `kind` (len bytes of a kind list such as
 * "CLUSTER|TEMPLATE"): each |-separated kind in turn. */
static void comp_kind(struct comp *c, const char *kind, size_t len)
{
	static const struct {
		const char *name;
		void (*fn)(struct comp *c);
	} kinds[] = {
		{ "CLUSTER", comp_clusters }, { "TEMPLATE", comp_templates },
		{ "PACKAGE", comp_packages }, { "TASK", comp_tasks },
		{ "IMAGE", comp_images },     { "VERB", comp_all_verbs },
		{ "PARAM", comp_params },     { "PARAMS", comp_params },
	};
	while (len > 0) {
		size_t n = strcspn(kind, "|"), i;
		if (n > len)
			n = len;
		if (n == 4 && !strncmp(kind, "FILE", 4))
			printf("__files__\n");
		for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
			if (strlen(kinds[i].name) == n && !strncmp(kind, kinds[i].name, n))
				kinds[i].fn(c);
		kind += n;
		len -= n;
		if (len && *kind == '|') {
			kind++;
			len--;
		}
	}
}

/* An option's own spellings ("-t", "--template") from its flags
 * ("-t, --template TEMPLATE", "-w, --watch[=SECONDS]", "--KEY=VALUE"),
 * through `fn`, and its metavar (the word after a space) in *meta. */
static void comp_option_words(const char *flags, void (*fn)(void *ctx, const char *w, size_t n),
			      void *ctx, const char **meta, size_t *metalen)
{
	const char *p = flags;
	*meta = NULL;
	*metalen = 0;
	while (*p) {
		size_t n = strcspn(p, ", =[ ");
		if (*p == '-' && n > 1 && strncmp(p, "--KEY", 5) != 0)
			fn(ctx, p, n);
		p += n;
		if (*p == ' ' && p[1] != '-') { /* "--template TEMPLATE" */
			*meta = p + 1;
			*metalen = strcspn(p + 1, ", ");
			return;
		}
		p += strspn(p, ", =[]");
		if (*p && *p != '-')
			p += strcspn(p, ","); /* "=SECONDS]": no separate value */
		p += strspn(p, ", ");
	}
}

static void comp_say_n(void *ctx, const char *w, size_t n)
{
	char *word = xstrndup(w, n);
	comp_say(ctx, word);
	free(word);
}

struct comp_match {
	const char *word;
	int found;
};

static void comp_match_n(void *ctx, const char *w, size_t n)
{
	struct comp_match *m = ctx;
	if (strlen(m->word) == n && !strncmp(m->word, w, n))
		m->found = 1;
}

/* The metavar of option `word` of cmd (len in *len), or NULL when it
 * takes no separate value (or is not one of cmd's). */
static const char *comp_option_meta(const struct pbx_cmd *cmd, const char *word, size_t *len)
{
	const struct pbx_option *o;
	char shown[128];
	for (o = cmd->options; o && o->kind; o++) {
		struct comp_match m = { word, 0 };
		const char *meta;
		size_t ignored;
		comp_option_words(pbx_opt_display(o, shown, sizeof(shown)), comp_match_n, &m, &meta,
				  &ignored);
		if (!m.found)
			continue;
		if (o->kind != PBX_OPT_KIND_STRING && o->kind != PBX_OPT_KIND_LIST)
			return NULL; /* a flag, or a value only after '=' */
		*len = strcspn(o->metavar, ", ");
		return o->metavar;
	}
	return NULL;
}

/* The kind of positional argument `pos` (0-based) of cmd, from its args:
 * "FILE CLUSTER", "TASK..." (the last repeats). */
static const char *comp_positional(const struct pbx_cmd *cmd, int pos, size_t *len)
{
	const char *p = cmd->args;
	int i = 0;
	while (p && *p) {
		size_t n = strcspn(p, " ");
		int repeats = n > 3 && !strncmp(p + n - 3, "...", 3);
		if (i == pos || (repeats && p[n] == '\0')) {
			*len = repeats ? n - 3 : n;
			return p;
		}
		p += n;
		p += strspn(p, " ");
		i++;
	}
	return NULL;
}

/* A table's verbs (hidden ones not). */
static void comp_verbs(struct comp *c, const struct pbx_cmd *const *table)
{
	size_t i;
	for (i = 0; table[i]; i++)
		comp_say(c, table[i]->name);
}

/* The verb `word` of table by exact name or unique prefix, or NULL. */
static const struct pbx_cmd *comp_find(const struct pbx_cmd *const *table, const char *word)
{
	const struct pbx_cmd *found = NULL;
	size_t i;
	for (i = 0; table[i]; i++) {
		if (!strcmp(table[i]->name, word))
			return table[i];
		if (!strncmp(table[i]->name, word, strlen(word)))
			found = found ? (const struct pbx_cmd *)-1 : table[i];
	}
	return found == (const struct pbx_cmd *)-1 ? NULL : found;
}

/* The words of one verb after its name: options, their values, positionals. */
static void comp_verb_args(struct comp *c, const struct pbx_cmd *cmd, int argc, char **argv)
{
	const char *meta = NULL;
	size_t metalen = 0;
	int i, pos = 0;
	for (i = 0; i < argc - 1; i++) {
		if (meta) {
			meta = NULL;
			continue;
		}
		if (!strcmp(argv[i], "--"))
			return; /* a command for the node: not ours to complete */
		if (argv[i][0] == '-' && argv[i][1])
			meta = comp_option_meta(cmd, argv[i], &metalen);
		else
			pos++;
	}
	if (meta) {
		comp_kind(c, meta, metalen);
		return;
	}
	if (c->cur[0] == '-') {
		const struct pbx_option *o;
		const char *m;
		size_t ml;
		char shown[128];
		for (o = cmd->options; o && o->kind; o++)
			comp_option_words(pbx_opt_display(o, shown, sizeof(shown)), comp_say_n, c,
					  &m, &ml);
		comp_say(c, "--help");
		return;
	}
	meta = comp_positional(cmd, pos, &metalen);
	if (meta)
		comp_kind(c, meta, metalen);
}

void pbx_complete(const char *config_path, int argc, char **argv)
{
	struct comp c = { argc > 0 ? argv[argc - 1] : "", config_path, NULL, 0 };
	const struct pbx_cmd *cmd;
	int i = 0;
	/* global options before the verb: -q, -C FILE */
	while (i < argc - 1 && argv[i][0] == '-') {
		if ((!strcmp(argv[i], "-C") || !strcmp(argv[i], "--config")) && i + 1 < argc - 1)
			c.config_path = argv[++i];
		else if (!strcmp(argv[i], "-C") || !strcmp(argv[i], "--config")) {
			printf("__files__\n");
			return;
		}
		i++;
	}
	if (i >= argc - 1) {
		if (c.cur[0] == '-') {
			static const char *const globals[] = { "-q",       "--quiet",   "-C",
							       "--config", "--version", "-h",
							       "--help",   NULL };
			size_t k;
			for (k = 0; globals[k]; k++)
				comp_say(&c, globals[k]);
		} else {
			comp_verbs(&c, pbx_commands);
		}
		goto out;
	}
	cmd = comp_find(pbx_commands, argv[i++]);
	if (cmd && cmd->subcmds) {
		if (i >= argc - 1) {
			comp_verbs(&c, cmd->subcmds);
			if (c.cur[0] == '-')
				comp_say(&c, "--help");
			goto out;
		}
		cmd = comp_find(cmd->subcmds, argv[i++]);
	}
	if (cmd)
		comp_verb_args(&c, cmd, argc - i, argv + i);
out:
	pbx_store_close(c.st);
}
