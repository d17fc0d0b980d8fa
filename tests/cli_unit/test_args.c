/*
 * test_args.c - unit tests of the dispatcher's argument check
 * (src/cli/args.c, pbx_cmd_check_args) with made-up verbs: the count of
 * positional arguments against min_args and max_args (options and their
 * values not counted, PBX_ARGS_MANY unbounded), an unknown option, a verb
 * without options, "-- COMMAND" (PBX_ARGS_TAIL, _NEEDED), resize's +N|-N
 * (PBX_ARGS_SIGNED) and pass-through options (PBX_ARGS_SPLIT); a failure
 * is exit 2 with the verb's usage, argv is left as it was; the first
 * positional argument is handed back (PBX_NEED_CLUSTER).  And a group's
 * usage made of its subcommands' (pbx_cmd_usage), PBX_HIDE_USAGE left out.
 */
#include "common/tap.h"
#include "cli/cmd.h"
#include "cli/options.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct demo_opts {
	int json;
	const char *node;
	struct pbx_opt_list label;
};

static const struct pbx_option demo_options[] = {
	PBX_OPT_FLAG('j', "json", struct demo_opts, json, "print JSON"),
	PBX_OPT_STRING('n', "node", "NODE", struct demo_opts, node, "on NODE"),
	PBX_OPT_LIST('l', "label", "LABEL", struct demo_opts, label, "a label"),
	PBX_OPT_END,
};

static const struct pbx_cmd one = {
	.name = "one",
	.usage = "pbx one [-j] [-n NODE] NAME [OTHER]",
	.options = demo_options,
	.min_args = 1,
	.max_args = 2,
};
static const struct pbx_cmd plain = {
	.name = "plain", .usage = "pbx plain X", .min_args = 1, .max_args = 1
};
static const struct pbx_cmd many = {
	.name = "many", .usage = "pbx many X...", .min_args = 1, .max_args = PBX_ARGS_MANY
};
static const struct pbx_cmd tail = {
	.name = "tail",
	.usage = "pbx tail [-n NODE] NAME -- COMMAND",
	.options = demo_options,
	.flags = PBX_ARGS_TAIL | PBX_ARGS_TAIL_NEEDED,
	.min_args = 1,
	.max_args = 1,
};
static const struct pbx_cmd opt_tail = {
	.name = "opt-tail",
	.usage = "pbx opt-tail NAME [NODE] [-- COMMAND]",
	.flags = PBX_ARGS_TAIL,
	.min_args = 1,
	.max_args = 2,
};
static const struct pbx_cmd sized = {
	.name = "sized",
	.usage = "pbx sized [-j] NAME +N|-N",
	.options = demo_options,
	.flags = PBX_ARGS_SIGNED,
	.min_args = 2,
	.max_args = 2,
};
static const struct pbx_cmd split = {
	.name = "split",
	.usage = "pbx split [-j] A B [--X=Y ...]",
	.options = demo_options,
	.flags = PBX_ARGS_SPLIT,
	.min_args = 2,
	.max_args = PBX_ARGS_MANY,
};

#define MAXARGS 16

/* The check of cmd on the NULL-terminated words (argv[0] the verb's
 * name); stderr into *err_text (malloc'd).  Checks argv is unchanged. */
static int check(const struct pbx_cmd *cmd, char **err_text, const char *const *words)
{
	char *argv[MAXARGS], *before[MAXARGS];
	int argc = 0, rc, saved, i;
	long len;
	FILE *tmp = tmpfile();
	REQUIRE(tmp);
	argv[argc++] = (char *)cmd->name;
	for (; *words && argc < MAXARGS - 1; words++)
		argv[argc++] = (char *)*words;
	argv[argc] = NULL;
	memcpy(before, argv, sizeof(argv));
	fflush(stderr);
	saved = dup(2);
	dup2(fileno(tmp), 2);
	rc = pbx_cmd_check_args(cmd, argc, argv, NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	for (i = 0; i < argc && argv[i] == before[i]; i++)
		;
	CHECKF(i == argc, "%s: argv is left as it was", cmd->name);
	len = ftell(tmp);
	rewind(tmp);
	*err_text = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
	REQUIRE(*err_text);
	if (len > 0 && fread(*err_text, 1, (size_t)len, tmp) != (size_t)len)
		(*err_text)[0] = '\0';
	fclose(tmp);
	return rc;
}

#define W(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void passes(const struct pbx_cmd *cmd, const char *why, const char *const *words)
{
	char *err;
	int rc = check(cmd, &err, words);
	if (!CHECKF(rc == 0, "%s %s: accepted", cmd->name, why))
		tap_diag_str_("stderr: ", err);
	free(err);
}

/* Refused with exit 2, the usage and `message` on stderr. */
static void refused(const struct pbx_cmd *cmd, const char *why, const char *message,
		    const char *const *words)
{
	char *err, usage[128];
	int rc = check(cmd, &err, words);
	snprintf(usage, sizeof(usage), "usage: %s\n", cmd->usage);
	if (!CHECKF(rc == PBX_EXIT_USAGE && strstr(err, message) && strstr(err, usage),
		    "%s %s: exit 2, '%s' and the usage (got %d)", cmd->name, why, message, rc))
		tap_diag_str_("stderr: ", err);
	free(err);
}

static void counts(void)
{
	passes(&one, "NAME", W("a"));
	passes(&one, "NAME OTHER with options around", W("-j", "a", "-n", "x", "b", "-l", "y"));
	passes(&one, "an option's value is not counted", W("--node", "x", "a"));
	refused(&one, "nothing", "missing argument", W("-j"));
	refused(&one, "three", "unexpected argument 'c'", W("a", "b", "c"));
	refused(&one, "an unknown option", "invalid option", W("a", "--frob"));
	refused(&one, "a missing value", "invalid option", W("a", "-n"));
	passes(&plain, "X", W("x"));
	passes(&plain, "a lone dash is an argument", W("-"));
	refused(&plain, "an option", "unknown option -j", W("x", "-j"));
	refused(&plain, "two", "unexpected argument 'y'", W("x", "y"));
	passes(&many, "any number", W("a", "b", "c", "d", "e", "f", "g"));
	refused(&many, "none", "missing argument", (const char *const[]){ NULL });
}

static void tails(void)
{
	passes(&tail, "NAME -- COMMAND", W("-n", "x", "a", "--", "ls", "-l", "b", "c"));
	refused(&tail, "without --", "expected '-- COMMAND [ARGS...]'", W("a"));
	refused(&tail, "with nothing after --", "expected a COMMAND after '--'", W("a", "--"));
	refused(&tail, "two names", "unexpected argument 'b'", W("a", "b", "--", "ls"));
	refused(&tail, "no name", "missing argument", W("--", "ls"));
	refused(&tail, "an option between NAME and --", "expected '-- COMMAND [ARGS...]'",
		W("a", "-n", "x", "--", "ls"));
	passes(&opt_tail, "NAME", W("a"));
	passes(&opt_tail, "NAME NODE -- COMMAND", W("a", "n", "--", "x", "-y"));
	refused(&opt_tail, "an option before --", "unknown option -y", W("a", "-y", "--", "x"));
	refused(&opt_tail, "nothing after --", "expected a COMMAND after '--'", W("a", "--"));
}

static void signed_and_split(void)
{
	passes(&sized, "NAME +N", W("a", "+2"));
	passes(&sized, "NAME -N among options", W("-j", "a", "-3"));
	refused(&sized, "NAME alone", "missing argument", W("a"));
	refused(&sized, "a third word", "unexpected argument 'b'", W("a", "b", "-2"));
	refused(&sized, "-0 is an option", "invalid option", W("a", "-0"));
	passes(&split, "two and pass-through options", W("a", "-j", "b", "--time", "1:00"));
	refused(&split, "one", "missing argument", W("-j", "a"));
}

static const struct pbx_cmd sub_a = { .name = "a", .usage = "pbx grp a X" };
static const struct pbx_cmd sub_b = { .name = "b",
				      .usage = "pbx grp b [-j]",
				      .flags = PBX_HIDE_USAGE };
static const struct pbx_cmd sub_c = { .name = "c", .usage = "pbx grp c Y" };
static const struct pbx_cmd *const grp_subs[] = { &sub_a, &sub_b, &sub_c, NULL };
static const struct pbx_cmd grp = { .name = "grp", .subcmds = grp_subs };

/* The first positional argument, for PBX_NEED_CLUSTER. */
static void first_name(void)
{
	char *argv[] = { "tail", "-n", "x", "clu", "--", "ls", NULL };
	const char *name = "unset";
	int rc = pbx_cmd_check_args(&tail, 6, argv, &name);
	ok(rc == 0 && name == argv[3], "the first positional argument is handed back");
}

static void group_usage(void)
{
	char *u = pbx_cmd_usage(&grp);
	is_str(u, "pbx grp a X\npbx grp c Y", "a group's usage: its subcommands', hidden ones not");
	free(u);
	u = pbx_cmd_usage(&sub_a);
	is_str(u, "pbx grp a X", "a verb's usage: its own");
	free(u);
}

int main(void)
{
	counts();
	tails();
	signed_and_split();
	first_name();
	group_usage();
	return tap_done();
}
