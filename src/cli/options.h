/*
 * options.h - one declarative table of a verb's options (after git's
 * parse-options): each entry gives the short and long name, the value's
 * metavar, the help text and where the value goes, and the same table
 * drives parsing (pbx_opts_parse), `--help`, `pbx help VERB`, the man pages
 * (help.c) and shell completion (complete.c).
 *
 *   struct log_opts { int follow; const char *node; };
 *   static const struct pbx_option log_opts[] = {
 *           PBX_OPT_FLAG('f', "follow", struct log_opts, follow, "keep streaming"),
 *           PBX_OPT_STRING('n', "node", "NODE", struct log_opts, node, "on NODE"),
 *           PBX_OPT_END,
 *   };
 *
 * Values are borrowed from argv (strings) or allocated (lists: caller frees
 * the array with pbx_opt_list_free).
 */
#ifndef PBX_CLI_OPTIONS_H
#define PBX_CLI_OPTIONS_H

#include <stddef.h>

struct pbx_cmd;

enum pbx_opt_kind {
	PBX_OPT_KIND_END = 0,
	PBX_OPT_KIND_FLAG,     /* int, set to 1 */
	PBX_OPT_KIND_STRING,   /* const char *, the value (borrowed from argv) */
	PBX_OPT_KIND_OPTIONAL, /* const char *: the value, or "" when given without =VALUE */
	PBX_OPT_KIND_LIST,     /* struct pbx_opt_list: each value appended */
	PBX_OPT_KIND_DOC,      /* documented only; the verb reads it itself */
};

struct pbx_option {
	enum pbx_opt_kind kind;
	char short_name;       /* 'j', or 0 */
	const char *long_name; /* "json" (shown "--json"), or NULL */
	const char *metavar;   /* what the value is ("TEMPLATE"), NULL for a flag */
	const char *help;      /* lines separated by \n */
	size_t offset;         /* where the value goes in the verb's struct */
};

/* The values of a repeatable option, in order; v borrowed from argv. */
struct pbx_opt_list {
	const char **v;
	size_t n;
};
void pbx_opt_list_free(struct pbx_opt_list *l);

#define PBX_OPT_FLAG(s, l, type, field, help)                              \
	{                                                                  \
		PBX_OPT_KIND_FLAG, s, l, NULL, help, offsetof(type, field) \
	}
#define PBX_OPT_STRING(s, l, meta, type, field, help)                        \
	{                                                                    \
		PBX_OPT_KIND_STRING, s, l, meta, help, offsetof(type, field) \
	}
#define PBX_OPT_OPTIONAL(s, l, meta, type, field, help)                        \
	{                                                                      \
		PBX_OPT_KIND_OPTIONAL, s, l, meta, help, offsetof(type, field) \
	}
#define PBX_OPT_LIST(s, l, meta, type, field, help)                        \
	{                                                                  \
		PBX_OPT_KIND_LIST, s, l, meta, help, offsetof(type, field) \
	}
#define PBX_OPT_DOC(display, help)                          \
	{                                                   \
		PBX_OPT_KIND_DOC, 0, display, NULL, help, 0 \
	}
#define PBX_OPT_END                                      \
	{                                                \
		PBX_OPT_KIND_END, 0, NULL, NULL, NULL, 0 \
	}

/* The option as help shows it: "-t, --template TEMPLATE", "--autostop
 * DURATION", "-w, --watch[=SECONDS]", "--KEY=VALUE" (a DOC entry's long
 * name as is).  Writes at most size bytes into buf; returns buf. */
char *pbx_opt_display(const struct pbx_option *o, char *buf, size_t size);

/* Parses the options of argv[1..argc) (argv[0] is the verb) by cmd's table
 * into `values`, with getopt_long's rules (options and arguments in any
 * order, "--" ends the options).  On an unknown option or a missing value:
 * the usage error (exit code PBX_EXIT_USAGE), as every verb gives it.
 * Else 0, and *first is the index of the first positional argument (argv
 * is permuted so that they come last). */
int pbx_opts_parse(const struct pbx_cmd *cmd, int argc, char **argv, void *values, int *first);

/* For a verb whose other arguments pass through unparsed (parrun's sbatch
 * options, `--gres=gpu:1`, `--time 1:00:00`): the table's flags are taken
 * where they stand, given whole ("-j", "--json"), and its STRING entries
 * by their long names ("--skip-done URL", "--skip-done=URL"); every other
 * argument goes to rest[0..*nrest) in order (rest holds argc entries;
 * borrowed from argv).  Returns 0, or the usage error's exit code for a
 * STRING option without its value. */
int pbx_opts_split(const struct pbx_cmd *cmd, int argc, char **argv, void *values, char **rest,
		   int *nrest);

#endif
