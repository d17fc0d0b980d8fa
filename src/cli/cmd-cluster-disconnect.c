/*
 * cmd-cluster-disconnect.c - `pbx cluster disconnect NAME`: close the login
 * connection that a cloud ssh cluster with `transport: openssh` keeps
 * between verbs (its OpenSSH control connection, 4 hours after its last
 * use otherwise; docs/ssh-clusters.md), so that the next verb logs in, and
 * asks for the second factor, again.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"

#include <stdio.h>
#include <string.h>

static int cmd_cluster_disconnect_exec(struct pbx_ctx *ctx, int argc, char **argv);

const struct pbx_cmd pbx_cmd_cluster_disconnect = {
	.name = "disconnect",
	.summary = "close the login connection kept between verbs (transport: openssh)",
	.usage = "pbx cluster disconnect NAME",
	.description =
		"On a cluster of cloud ssh with transport: openssh, pbx keeps one\n"
		"authenticated connection (OpenSSH's control connection) for 4 hours after\n"
		"its last use, so a two-factor login is answered once.  This closes it now,\n"
		"without prompting: the next verb logs in again.  Any other cluster keeps\n"
		"no connection between verbs, and there is nothing to close.",
	.examples = "pbx cluster disconnect campus",
	.args = "CLUSTER",
	.flags = PBX_NEED_CONFIG | PBX_NEED_STORE | PBX_NEED_CLUSTER,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_disconnect_exec,
};

static int cmd_cluster_disconnect_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	int rc;
	(void)argc;
	rc = pbx_cluster_disconnect(ctx->cluster, &err);
	if (rc < 0)
		return pbx_report(&err);
	if (rc == 1)
		pbx_info("closed the login connection to %s: the next verb logs in again", argv[1]);
	else
		pbx_info("no login connection to %s is open", argv[1]);
	return 0;
}
