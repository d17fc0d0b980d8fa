/*
 * cmd-version.c - `pbx version` (and `pbx --version`, which main.c maps to
 * it): the version pbx was built as.
 */
#include "cli/cmd.h"

#include <stdio.h>

extern const struct pbx_cmd pbx_cmd_version;

static int cmd_version_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	printf("pbx %s\n", PBX_VERSION);
	return 0;
}

const struct pbx_cmd pbx_cmd_version = {
	.name = "version",
	.summary = "print the version of pbx",
	.usage = "pbx version\npbx --version",
	.min_args = 0,
	.max_args = 0,
	.exec = cmd_version_exec,
};
