/*
 * cmd-help.c - `pbx help [VERB]`, `pbx help --man VERB` (roff for the man
 * pages in man/) and `pbx version`.
 */
#include "cli/cmd.h"
#include "util/err.h"

#include <stdio.h>
#include <string.h>

extern const struct pbx_cmd pbx_cmd_help;

static int cmd_help_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	const struct pbx_cmd *cmd;
	int man = 0, rc;
	(void)ctx;
	if (argc > 1 && !strcmp(argv[1], "--man")) {
		man = 1;
		argc--;
		argv++;
	}
	if ((rc = pbx_plain_args(&pbx_cmd_help, argc, argv, 0, 1)))
		return rc;
	if (argc < 2) {
		if (man)
			pbx_man_overview();
		else
			pbx_help_overview();
		return 0;
	}
	cmd = pbx_cmd_find(pbx_commands, argv[1], "command");
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
	.exec = cmd_help_exec,
};
