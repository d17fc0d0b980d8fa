/*
 * cmd-config.c - `pbx config check|path|templates`: validate the
 * configuration file and show what it defines (`init`, which writes a
 * first one: cmd-config-init.c).
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "config/config.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct pbx_cmd cmd_config_check;

struct check_opts {
	int clouds, json;
};

static int cmd_config_load(struct pbx_ctx *ctx, int argc, char **argv, struct pbx_config **cfg)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *path = argc > 1 ? argv[1] : ctx->config_path;
	if (pbx_config_load(path, argc <= 1, cfg, &err) < 0)
		return pbx_report(&err);
	return 0;
}

/* The examples' placeholders (templates/config.yaml, `pbx config init`)
 * left in cfg, each said as a warning; returns how many. */
static int cmd_config_placeholders(const struct pbx_config *cfg)
{
	static const char *const fake[] = { "my-project", "ami-0123456789abcdef0",
					    "subnet-0123456789abcdef0", NULL };
	const char *const *f;
	size_t i;
	int n = 0;
	for (f = fake; *f; f++) {
		if (cfg->gce.project && !strcmp(cfg->gce.project, *f) && ++n)
			pbx_warning("%s: clouds.gce.project: '%s' is the example's placeholder: "
				    "your project's id goes there",
				    cfg->path, *f);
		if (cfg->aws.subnet && !strcmp(cfg->aws.subnet, *f) && ++n)
			pbx_warning("%s: clouds.aws.subnet: '%s' is the example's placeholder",
				    cfg->path, *f);
		for (i = 0; i < cfg->ntemplates; i++) {
			const struct pbx_cluster_template *t = &cfg->templates[i];
			if (t->image && !strcmp(t->image, *f) && ++n)
				pbx_warning("%s: clusters.%s.image: '%s' is the example's "
					    "placeholder: the AMI of your region goes there",
					    cfg->path, t->name, *f);
			if (t->subnet && !strcmp(t->subnet, *f) && ++n)
				pbx_warning("%s: clusters.%s.subnet: '%s' is the example's "
					    "placeholder",
					    cfg->path, t->name, *f);
		}
	}
	return n;
}

static int cmd_config_check_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_config *cfg;
	struct check_opts o = { 0 };
	int n, first, rc = pbx_opts_parse(&cmd_config_check, argc, argv, &o, &first);
	if (rc)
		return rc;
	if (o.json && !o.clouds)
		return pbx_usage_error(&cmd_config_check, "--json goes with --clouds");
	rc = cmd_config_load(ctx, argc - first + 1, argv + first - 1, &cfg);
	if (rc)
		return rc;
	if (pbx_config_check_files(cfg, &err) < 0) {
		pbx_config_free(cfg);
		return pbx_report(&err);
	}
	n = cmd_config_placeholders(cfg);
	if (!o.json)
		printf("%s: ok (%zu cluster template%s)%s\n", cfg->path, cfg->ntemplates,
		       cfg->ntemplates == 1 ? "" : "s",
		       n ? ", but placeholders are left: the clusters that use them cannot "
			   "start"
			 : "");
	rc = o.clouds ? pbx_cli_config_clouds(cfg, o.json) : 0;
	pbx_config_free(cfg);
	return rc;
}

static const struct pbx_option check_opts[] = {
	PBX_OPT_FLAG(0, "clouds", struct check_opts, clouds,
		     "also ask each cloud a template uses (gce, aws): are its credentials\n"
		     "found and good (one cheap authenticated call), and do the quotas the\n"
		     "template needs fit (Compute Engine: instances and GPUs of its region;\n"
		     "EC2: each instance family's vCPUs, on-demand and spot, from Service\n"
		     "Quotas, less what runs in the region)"),
	PBX_OPT_FLAG('j', "json", struct check_opts, json,
		     "with --clouds: an array of {\"template\", \"cloud\", \"ok\",\n"
		     "\"identity\", \"where\", \"error\", \"quotas\": [{\"metric\", \"need\",\n"
		     "\"limit\", \"used\", \"fits\"}], \"note\"}"),
	PBX_OPT_END,
};

static const struct pbx_cmd cmd_config_check = {
	.name = "check",
	.summary = "validate the configuration file",
	.usage = "pbx config check [--clouds [-j]] [FILE]",
	.description = "Parses FILE (default $PBX_HOME/config.yaml) and checks every key, type\n"
		       "and value, the permissions of the file and of the SSH keys it names.\n"
		       "Errors name the file, line and key; nothing is changed.  With\n"
		       "--clouds, each template on a cloud is asked about too: where its\n"
		       "credentials come from, whether they work, and whether its quotas fit;\n"
		       "pbx exits 1 when one does not.  Nothing is created.",
	.examples = "pbx config check\n"
		    "pbx config check --clouds",
	.options = check_opts,
	.args = "FILE",
	.min_args = 0,
	.max_args = 1,
	.exec = cmd_config_check_exec,
};

static int cmd_config_path_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("%s\n", ctx->config_path);
	return 0;
}

static const struct pbx_cmd cmd_config_path = {
	.name = "path",
	.summary = "print the path of the configuration file in use",
	.usage = "pbx config path",
	.min_args = 0,
	.max_args = 0,
	.exec = cmd_config_path_exec,
};

static int cmd_config_templates_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_config *cfg;
	size_t i;
	int rc = cmd_config_load(ctx, argc, argv, &cfg);
	if (rc)
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
	.min_args = 0,
	.max_args = 1,
	.exec = cmd_config_templates_exec,
};

extern const struct pbx_cmd pbx_cmd_config_init; /* cmd-config-init.c */

static const struct pbx_cmd *const cmd_config_subcmds[] = {
	&pbx_cmd_config_init, &cmd_config_check, &cmd_config_path, &cmd_config_templates, NULL,
};

const struct pbx_cmd pbx_cmd_config = {
	.name = "config",
	.summary = "check and show the configuration ($PBX_HOME/config.yaml)",
	.description = "The configuration holds cluster templates (cloud, login user, SSH key,\n"
		       "image, head node and node groups) and cloud sections; see\n"
		       "templates/config.yaml for a commented example.  Without a file, pbx\n"
		       "uses a built-in template 'local': 2 compute nodes with 2 GPU GRES each\n"
		       "on this machine.",
	.subcmds = cmd_config_subcmds,
};
