/*
 * cmd-config.c - `pbx config check|path|templates`: validate the
 * configuration file and show what it defines.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "config/config.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct pbx_cmd cmd_config_check;

static int cmd_config_load(struct pbx_ctx *ctx, int argc, char **argv, struct pbx_config **cfg)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *path = argc > 1 ? argv[1] : ctx->config_path;
	if (pbx_config_load(path, argc <= 1, cfg, &err) < 0)
		return pbx_report(&err);
	return 0;
}

static int cmd_config_check_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_config *cfg;
	int rc = pbx_plain_args(&cmd_config_check, argc, argv, 0, 1);
	if (rc)
		return rc;
	rc = cmd_config_load(ctx, argc, argv, &cfg);
	if (rc)
		return rc;
	if (pbx_config_check_files(cfg, &err) < 0) {
		pbx_config_free(cfg);
		return pbx_report(&err);
	}
	printf("%s: ok (%zu cluster template%s)\n", cfg->path, cfg->ntemplates,
	       cfg->ntemplates == 1 ? "" : "s");
	pbx_config_free(cfg);
	return 0;
}

static const struct pbx_cmd cmd_config_check = {
	.name = "check",
	.summary = "validate the configuration file",
	.usage = "pbx config check [FILE]",
	.description = "Parses FILE (default $PBX_HOME/config.yaml) and checks every key, type\n"
		       "and value, the permissions of the file and of the SSH keys it names.\n"
		       "Errors name the file, line and key; nothing is changed.",
	.args = "FILE",
	.exec = cmd_config_check_exec,
};

static const struct pbx_cmd cmd_config_path, cmd_config_templates;

static int cmd_config_path_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	int rc = pbx_plain_args(&cmd_config_path, argc, argv, 0, 0);
	if (rc)
		return rc;
	printf("%s\n", ctx->config_path);
	return 0;
}

static const struct pbx_cmd cmd_config_path = {
	.name = "path",
	.summary = "print the path of the configuration file in use",
	.usage = "pbx config path",
	.exec = cmd_config_path_exec,
};

static int cmd_config_templates_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_config *cfg;
	size_t i;
	int rc = pbx_plain_args(&cmd_config_templates, argc, argv, 0, 1);
	if (rc || (rc = cmd_config_load(ctx, argc, argv, &cfg)))
		return rc;
	for (i = 0; i < cfg->ntemplates; i++) {
		char *d = pbx_template_describe(&cfg->templates[i]);
		printf("%-16s %s\n", cfg->templates[i].name, d);
		free(d);
	}
	pbx_config_free(cfg);
	return 0;
}

static const struct pbx_cmd cmd_config_templates = {
	.name = "templates",
	.summary = "list the cluster templates the configuration defines",
	.usage = "pbx config templates [FILE]",
	.exec = cmd_config_templates_exec,
};

static const struct pbx_cmd *const cmd_config_subcmds[] = {
	&cmd_config_check,
	&cmd_config_path,
	&cmd_config_templates,
	NULL,
};

const struct pbx_cmd pbx_cmd_config = {
	.name = "config",
	.summary = "check and show the configuration ($PBX_HOME/config.yaml)",
	.usage = "pbx config check [FILE]\npbx config path\npbx config templates [FILE]",
	.description = "The configuration holds cluster templates (cloud, login user, SSH key,\n"
		       "image, head node and node groups) and cloud sections; see\n"
		       "templates/config.yaml for a commented example.  Without a file, pbx\n"
		       "uses a built-in template 'local': 2 compute nodes with 2 GPU GRES each\n"
		       "on this machine.",
	.subcmds = cmd_config_subcmds,
};
