/*
 * cmd-help.c - `pbx help [VERB]`, `pbx help --man VERB` (roff for the man
 * pages in man/) and `pbx version`.
 */
#include "cli/cmd.h"
#include "util/err.h"

#include <stdio.h>
#include <string.h>

extern const struct pbx_cmd pbx_cmd_help;

struct help_opts {
	int man;
};

static const struct pbx_option help_opts[] = {
	PBX_OPT_FLAG(0, "man", struct help_opts, man, "print the man page as roff"),
	PBX_OPT_END,
};

static int cmd_help_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	const struct pbx_cmd *cmd;
	struct help_opts o = { 0 };
	int man, first, rc;
	(void)ctx;
	if ((rc = pbx_opts_parse(&pbx_cmd_help, argc, argv, &o, &first)))
		return rc;
	man = o.man;
	if (first == argc) {
		if (man)
			pbx_man_overview();
		else
			pbx_help_overview();
		return 0;
	}
	cmd = pbx_cmd_find(pbx_commands, argv[first], "command");
	if (!cmd)
		return PBX_EXIT_USAGE;
	if (man)
		pbx_man_print(cmd);
	else
		pbx_help_print(cmd, NULL);
	return 0;
}

const struct pbx_cmd pbx_cmd_help = {
	.name = "help",
	.summary = "show help for pbx or one of its verbs",
	.usage = "pbx help [VERB]\npbx help --man [VERB]",
	.description = "Without VERB, lists the verbs.  With VERB, shows the same text as\n"
		       "'pbx VERB --help'.  With --man, prints the verb's man page as roff\n"
		       "(the pages in man/ are generated this way).",
	.args = "VERB",
	.options = help_opts,
	.min_args = 0,
	.max_args = 1,
	.exec = cmd_help_exec,
};
