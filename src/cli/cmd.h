/*
 * cmd.h - how a pbx verb is described and run.
 *
 * Each verb lives in its own file (cmd-cluster.c, cmd-config.c, ...) and
 * exports one `const struct pbx_cmd`.  The struct is pure data plus an
 * exec function: the same strings produce `pbx VERB --help`, `pbx help
 * VERB` and the man page man/pbx-VERB.1 (see help.c), so they cannot drift
 * apart.  Verbs with subcommands (cluster start|stop|...) list them in
 * `subcmds`; dispatch and prefix matching are in cmd.c.
 *
 * Setup is driven by flags (like git's RUN_SETUP): the dispatcher checks the
 * arguments, loads the configuration, opens the store and the cluster the
 * first argument names before exec when asked to, so no verb repeats that
 * code.
 */
#ifndef PBX_CLI_CMD_H
#define PBX_CLI_CMD_H

#include <stdbool.h>

#include "cli/options.h"

struct pbx_config;
struct pbx_store;
struct pbx_cluster;

enum pbx_cmd_flags {
	PBX_NEED_CONFIG = 1 << 0, /* load $PBX_HOME/config.yaml (built-in default if absent) */
	PBX_NEED_STORE = 1 << 1,  /* open $PBX_HOME/pbx.db */
	PBX_HIDE_USAGE = 1 << 2,  /* a subcommand left out of its group's usage (internal) */
	/* How the dispatcher counts positional arguments (min_args, max_args): */
	PBX_ARGS_SPLIT = 1 << 3,       /* options by pbx_opts_split: every other word counts */
	PBX_ARGS_TAIL = 1 << 4,        /* "--" ends them: a COMMAND follows, not counted */
	PBX_ARGS_TAIL_NEEDED = 1 << 5, /* with PBX_ARGS_TAIL: "-- COMMAND" must be given */
	PBX_ARGS_SIGNED = 1 << 6,      /* resize's +N|-N counts, not an option */
	/* open the cluster named by the first positional argument into
	 * ctx->cluster (with PBX_NEED_CONFIG | PBX_NEED_STORE); closed after exec */
	PBX_NEED_CLUSTER = 1 << 7,
};

/* max_args: no upper limit. */
#define PBX_ARGS_MANY (-1)

/* Everything a verb's exec needs; owned by the dispatcher. */
struct pbx_ctx {
	struct pbx_config *cfg;      /* loaded when PBX_NEED_CONFIG */
	struct pbx_store *store;     /* opened when PBX_NEED_STORE */
	struct pbx_cluster *cluster; /* opened when PBX_NEED_CLUSTER */
	const char *config_path;     /* the config file in use */
	bool quiet;                  /* -q: no progress output */
	bool stdout_tty;             /* stdout is a terminal */
	bool stderr_tty;             /* stderr is a terminal (progress display) */
	bool color;                  /* colour allowed (tty and NO_COLOR unset) */
	const char *argv0_path;      /* full path of the running pbx binary */
	/* `pbx __check ARGS`: the verb, its options and its arguments'
	 * count checked as for a run, then nothing run (exit 0 or 2); for
	 * docs.commands, which checks every command the docs show */
	bool check_only;
};

struct pbx_cmd {
	const char *name;
	const char *summary; /* one line, lowercase, no full stop */
	/* Synopsis lines, each starting "pbx "; NULL for a group: the usage
	 * lines of its subcommands (pbx_cmd_usage). */
	const char *usage;
	const char *description; /* paragraphs separated by blank lines */
	/* The verb's option table (options.h), ended by PBX_OPT_END; NULL:
	 * none but -h.  Parsing, help, man page and completion read it. */
	const struct pbx_option *options;
	/* The kinds of the positional arguments, for completion (complete.c):
	 * space-separated, each CLUSTER, TEMPLATE, PACKAGE, TASK (PKG or
	 * PKG:TASK), IMAGE, VERB or FILE, alternatives joined by |, the last
	 * ending in ... when it repeats; NULL: none or free text. */
	const char *args;
	const char *examples; /* lines of example commands, may be NULL */
	int flags;            /* enum pbx_cmd_flags */
	/* The positional arguments after the options: at least min_args, at
	 * most max_args (PBX_ARGS_MANY: no limit).  The dispatcher checks
	 * them, and the options, before exec (the usage error, exit 2), so a
	 * verb's exec never counts its own. */
	int min_args, max_args;
	/* Runs the verb; argv[0] is the verb's own name.  Returns an exit code. */
	int (*exec)(struct pbx_ctx *ctx, int argc, char **argv);
	const struct pbx_cmd *const *subcmds; /* NULL-terminated, or NULL */
};

/* What `cluster show`, `state` and `cluster exec` run on cluster c before
 * they use its nodes (cmd-cluster-info.c): pbx_cluster_learn_awake, one list of
 * the cloud; when that fails the verb goes on with what the store knows,
 * after a warning (none with -q). */
void pbx_cli_learn_awake(const struct pbx_ctx *ctx, struct pbx_cluster *c);
/* What `cluster show` and `state` run on cluster c once they reached its
 * head (cmd-cluster-info.c): pbx_cluster_head_runs, the head's runs of the
 * nodes it makes; when it fails the spend of those nodes stays as this
 * store saw them, after a warning (none with -q). */
void pbx_cli_head_runs(const struct pbx_ctx *ctx, struct pbx_cluster *c);
/* The one-screen summary opening `cluster start --dry-run` of template t
 * (gce and aws; cluster_plan.c), on stderr. */
struct pbx_cluster_template;
void pbx_cli_cluster_plan(const struct pbx_config *cfg, const struct pbx_cluster_template *t,
			  const char *name);

/* The top-level verbs, NULL-terminated (cmd.c). */
extern const struct pbx_cmd *const pbx_commands[];

/* Finds `name` in `table` by exact name or unique prefix.  On no match or
 * an ambiguous prefix prints an error (naming the candidates) and returns
 * NULL. */
const struct pbx_cmd *pbx_cmd_find(const struct pbx_cmd *const *table, const char *name,
				   const char *what);
/* Runs a verb with subcommands: finds argv[1] in cmd->subcmds, sets it up
 * and calls its exec.  Used as the exec of group verbs. */
int pbx_cmd_invoke_sub(struct pbx_ctx *ctx, const struct pbx_cmd *cmd, int argc, char **argv);
/* cmd's usage: its own, or for a group the usage of each subcommand not
 * PBX_HIDE_USAGE, a line each.  Caller frees. */
char *pbx_cmd_usage(const struct pbx_cmd *cmd);
/* Checks argv's options and positional arguments against cmd's option
 * table, min_args, max_args and PBX_ARGS_* flags (args.c; argv is left as
 * it is): 0, or the usage error's exit code after printing it.  *name (if
 * name is not NULL): the first positional argument, borrowed from argv;
 * NULL when there is none. */
int pbx_cmd_check_args(const struct pbx_cmd *cmd, int argc, char **argv, const char **name);
/* Checks the arguments, prepares ctx for cmd->flags and calls exec;
 * releases only the cluster it opened (PBX_NEED_CLUSTER). */
int pbx_cmd_invoke(struct pbx_ctx *ctx, const struct pbx_cmd *cmd, int argc, char **argv);

/* help.c: usage on error ("usage: ..." to stderr, returns PBX_EXIT_USAGE),
 * full help to stdout, and the man page generator. */
int pbx_usage_error(const struct pbx_cmd *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void pbx_help_print(const struct pbx_cmd *cmd, const char *parent);
void pbx_help_overview(void);
void pbx_man_print(const struct pbx_cmd *cmd);
void pbx_man_overview(void); /* pbx(1) */
/* True when argv has -h or --help before "--"; exec functions check this
 * first (the dispatcher already does for them). */
bool pbx_wants_help(int argc, char **argv);

/* `pbx config check --clouds` (config_clouds.c): asks each template's
 * cloud; prints text or a JSON array; returns the exit code. */
struct pbx_config;
int pbx_cli_config_clouds(const struct pbx_config *cfg, int json);

#endif
