/*
 * args.c - the dispatcher's check of a verb's arguments, before its exec
 * runs (after tmux's cmd_entry argument template): the options by the
 * verb's table, then the count of positional arguments against the
 * struct pbx_cmd's min_args and max_args, the grammar of the PBX_ARGS_*
 * flags applied.  A failure is the verb's usage error (exit 2).  The check
 * works on a copy: the verb's exec sees argv as it was and parses its
 * options itself, which cannot fail by then.
 */
#include "cli/cmd.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* Zeroed room for the values of option table t (where pbx_opts_parse
 * stores them), to be thrown away. */
static void *args_scratch(const struct pbx_option *t)
{
	size_t end = 0;
	for (; t && t->kind; t++)
		if (t->offset > end)
			end = t->offset;
	return xcalloc(1, end + sizeof(struct pbx_opt_list));
}

static void args_scratch_free(const struct pbx_option *t, void *values)
{
	for (; t && t->kind; t++)
		if (t->kind == PBX_OPT_KIND_LIST)
			pbx_opt_list_free((struct pbx_opt_list *)((char *)values + t->offset));
	free(values);
}

/* "+N" or "-N", N from 1 to 6 digits, not 0: resize's change of size. */
static int args_signed_word(const char *w)
{
	size_t digits = strspn(w + 1, "0123456789");
	return (w[0] == '+' || w[0] == '-') && digits >= 1 && digits <= 6 && !w[1 + digits] &&
	       strspn(w + 1, "0") < digits;
}

/* The positional words of argv[1..argc) for a verb without options: any
 * other word starting with '-' is the usage error. */
static int args_plain(const struct pbx_cmd *cmd, int argc, char **argv, char **pos, int *n)
{
	int i;
	*n = 0;
	for (i = 1; i < argc; i++) {
		if (argv[i][0] == '-' && argv[i][1])
			return pbx_usage_error(cmd, "unknown option %s", argv[i]);
		pos[(*n)++] = argv[i];
	}
	return 0;
}

/* The positional words of argv[1..argc) (argv permuted) into pos[0..*n),
 * the options checked by cmd's table. */
static int args_positionals(const struct pbx_cmd *cmd, int argc, char **argv, char **pos, int *n)
{
	void *values;
	int rc, first, i;
	if (!cmd->options && !(cmd->flags & PBX_ARGS_SPLIT))
		return args_plain(cmd, argc, argv, pos, n);
	values = args_scratch(cmd->options);
	if (cmd->flags & PBX_ARGS_SPLIT) {
		rc = pbx_opts_split(cmd, argc, argv, values, pos, n);
	} else {
		rc = pbx_opts_parse(cmd, argc, argv, values, &first);
		for (*n = 0, i = first; rc == 0 && i < argc; i++)
			pos[(*n)++] = argv[i];
	}
	args_scratch_free(cmd->options, values);
	return rc;
}

/* A verb's "-- COMMAND [ARGS...]" (PBX_ARGS_TAIL): dd is the index of
 * "--" in argv, or argc when there is none; last the last positional
 * argument, which "--" follows directly (options go before it). */
static int args_tail(const struct pbx_cmd *cmd, int argc, char **argv, int dd, const char *last)
{
	if ((dd == argc && (cmd->flags & PBX_ARGS_TAIL_NEEDED)) ||
	    (dd < argc && argv[dd - 1] != last))
		return pbx_usage_error(cmd, "expected '-- COMMAND [ARGS...]'");
	if (dd == argc - 1)
		return pbx_usage_error(cmd, "expected a COMMAND after '--'");
	return 0;
}

/* The count of positional arguments: n words in pos, and `extra` more
 * (a +N or -N taken out before the options were parsed). */
static int args_count(const struct pbx_cmd *cmd, char **pos, int n, int extra)
{
	int max = cmd->max_args;
	if (n + extra < cmd->min_args)
		return pbx_usage_error(cmd, "missing argument");
	if (max != PBX_ARGS_MANY && n + extra > max)
		return pbx_usage_error(cmd, "unexpected argument '%s'",
				       pos[max - extra >= 0 ? max - extra : 0]);
	return 0;
}

int pbx_cmd_check_args(const struct pbx_cmd *cmd, int argc, char **argv, const char **name)
{
	char **copy = xcalloc((size_t)argc + 1, sizeof(*copy));
	char **pos = xcalloc((size_t)argc + 1, sizeof(*pos));
	int i, k = 1, dd = argc, extra = 0, n = 0, rc;
	copy[0] = argv[0];
	for (i = 1; i < argc; i++) {
		if ((cmd->flags & PBX_ARGS_TAIL) && !strcmp(argv[i], "--")) {
			dd = i;
			break;
		}
		if ((cmd->flags & PBX_ARGS_SIGNED) && i > 1 && !extra && args_signed_word(argv[i]))
			extra = 1;
		else
			copy[k++] = argv[i];
	}
	rc = args_positionals(cmd, k, copy, pos, &n);
	if (rc == 0)
		rc = args_count(cmd, pos, n, extra);
	if (rc == 0 && (cmd->flags & PBX_ARGS_TAIL))
		rc = args_tail(cmd, argc, argv, dd, n ? pos[n - 1] : NULL);
	if (name)
		*name = rc == 0 && n ? pos[0] : NULL;
	free(pos);
	free(copy);
	return rc;
}
