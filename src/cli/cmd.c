/*
 * cmd.c - the table of verbs and their dispatch (exact name or unique
 * prefix; "ambiguous command" names the candidates), plus the flag-driven
 * setup that loads the configuration and opens the store.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "config/config.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern const struct pbx_cmd pbx_cmd_cache;
extern const struct pbx_cmd pbx_cmd_cancel;
extern const struct pbx_cmd pbx_cmd_cluster;
extern const struct pbx_cmd pbx_cmd_config;
extern const struct pbx_cmd pbx_cmd_harvest;
extern const struct pbx_cmd pbx_cmd_forget;
extern const struct pbx_cmd pbx_cmd_help;
extern const struct pbx_cmd pbx_cmd_image;
extern const struct pbx_cmd pbx_cmd_log;
extern const struct pbx_cmd pbx_cmd_ls;
extern const struct pbx_cmd pbx_cmd_parrun;
extern const struct pbx_cmd pbx_cmd_publish;
extern const struct pbx_cmd pbx_cmd_pull;
extern const struct pbx_cmd pbx_cmd_rerun;
extern const struct pbx_cmd pbx_cmd_report;
extern const struct pbx_cmd pbx_cmd_run;
extern const struct pbx_cmd pbx_cmd_state;
extern const struct pbx_cmd pbx_cmd_version;

/* In the order `pbx --help` lists them: the workflow first. */
const struct pbx_cmd *const pbx_commands[] = {
	&pbx_cmd_cluster,
	&pbx_cmd_image,
	&pbx_cmd_parrun,
	&pbx_cmd_run,
	&pbx_cmd_state,
	&pbx_cmd_ls,
	&pbx_cmd_log,
	&pbx_cmd_cancel,
	&pbx_cmd_rerun,
	&pbx_cmd_report,
	&pbx_cmd_harvest,
	&pbx_cmd_publish,
	&pbx_cmd_pull,
	&pbx_cmd_forget,
	&pbx_cmd_cache,
	&pbx_cmd_config,
	&pbx_cmd_help,
	&pbx_cmd_version,
	NULL,
};

const struct pbx_cmd *pbx_cmd_find(const struct pbx_cmd *const *table, const char *name,
				   const char *what)
{
	const struct pbx_cmd *found = NULL;
	size_t i, len = strlen(name), matches = 0;
	char names[512] = "";

	for (i = 0; table[i]; i++) {
		if (!strcmp(table[i]->name, name))
			return table[i];
		if (len && !strncmp(table[i]->name, name, len)) {
			found = table[i];
			matches++;
			if (strlen(names) + strlen(table[i]->name) + 3 < sizeof(names)) {
				if (names[0])
					strcat(names, ", ");
				strcat(names, table[i]->name);
			}
		}
	}
	if (matches == 1)
		return found;
	if (matches > 1)
		pbx_error("ambiguous %s: %s, could be: %s", what, name, names);
	else
		pbx_error("unknown %s: %s (see 'pbx help')", what, name);
	return NULL;
}

static int cmd_setup(struct pbx_ctx *ctx, const struct pbx_cmd *cmd)
{
	struct pbx_err err = PBX_ERR_INIT;

	/* $PBX_HOME holds the store, keys and results: others must not be able
	   to swap its files, as for config.yaml */
	if ((cmd->flags & (PBX_NEED_CONFIG | PBX_NEED_STORE)) &&
	    (pbx_mkdir_p(pbx_home(), 0700, &err) < 0 || pbx_check_private(pbx_home(), 0, &err) < 0))
		return pbx_report(&err);
	if ((cmd->flags & PBX_NEED_CONFIG) && !ctx->cfg) {
		if (pbx_config_load(ctx->config_path, 1, &ctx->cfg, &err) < 0)
			return pbx_report(&err);
	}
	if ((cmd->flags & PBX_NEED_STORE) && !ctx->store) {
		char *path = pbx_home_path("pbx.db");
		int rc = pbx_store_open(path, &ctx->store, &err);
		free(path);
		if (rc < 0)
			return pbx_report(&err);
	}
	return 0;
}

int pbx_cmd_invoke(struct pbx_ctx *ctx, const struct pbx_cmd *cmd, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *name = NULL;
	int rc;
	if (!cmd->subcmds && pbx_wants_help(argc, argv)) {
		pbx_help_print(cmd, NULL);
		return 0;
	}
	rc = pbx_cmd_check_args(cmd, argc, argv, &name);
	if (rc || ctx->check_only)
		return rc;
	rc = cmd_setup(ctx, cmd);
	if (rc == 0 && (cmd->flags & PBX_NEED_CLUSTER) &&
	    pbx_cluster_open(ctx->store, ctx->cfg, name, &ctx->cluster, &err) < 0)
		rc = pbx_report(&err);
	if (rc)
		return rc;
	rc = cmd->exec(ctx, argc, argv);
	pbx_cluster_close(ctx->cluster);
	ctx->cluster = NULL;
	return rc;
}

int pbx_cmd_invoke_sub(struct pbx_ctx *ctx, const struct pbx_cmd *cmd, int argc, char **argv)
{
	const struct pbx_cmd *sub;
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		pbx_help_print(cmd, NULL);
		return argc < 2 ? PBX_EXIT_USAGE : 0;
	}
	sub = pbx_cmd_find(cmd->subcmds, argv[1], "subcommand");
	if (!sub)
		return PBX_EXIT_USAGE;
	if (pbx_wants_help(argc - 1, argv + 1)) {
		pbx_help_print(sub, cmd->name);
		return 0;
	}
	return pbx_cmd_invoke(ctx, sub, argc - 1, argv + 1);
}
