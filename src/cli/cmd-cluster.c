/*
 * cmd-cluster.c - `pbx cluster`: the group of subcommands that create,
 * inspect, use and delete SLURM clusters, and their table.  Each family
 * lives in its own file: cmd-cluster-lifecycle.c (start, stop, resize),
 * cmd-cluster-price.c (price), cmd-cluster-info.c (list, show),
 * cmd-cluster-remote.c (ssh, exec, forget-host), cmd-cluster-head.c (the
 * head's plumbing: power, record, adopt, runs), cmd-cluster-disconnect.c,
 * cmd-cluster-gc.c and cmd-cluster-registry.c (registry-login,
 * registry-logout); what they share is in cluster_cli.h.
 */
#include "cli/cluster_cli.h"
#include "cli/cmd.h"

#include <stddef.h>

/* In the order `pbx cluster --help` lists them. */
static const struct pbx_cmd *const cmd_cluster_subcmds[] = {
	&pbx_cmd_cluster_start,
	&pbx_cmd_cluster_price,
	&pbx_cmd_cluster_list,
	&pbx_cmd_cluster_show,
	&pbx_cmd_cluster_ssh,
	&pbx_cmd_cluster_disconnect,
	&pbx_cmd_cluster_exec,
	&pbx_cmd_cluster_resize,
	&pbx_cmd_cluster_stop,
	&pbx_cmd_cluster_forget_host,
	&pbx_cmd_cluster_power,
	&pbx_cmd_cluster_record,
	&pbx_cmd_cluster_adopt,
	&pbx_cmd_cluster_runs,
	&pbx_cmd_cluster_data,
	&pbx_cmd_cluster_gc,
	&pbx_cmd_cluster_registry_login,
	&pbx_cmd_cluster_registry_logout,
	NULL,
};

const struct pbx_cmd pbx_cmd_cluster = {
	.name = "cluster",
	.summary = "create, inspect, use and delete SLURM clusters",
	.description = "A cluster is built from a template in $PBX_HOME/config.yaml (cloud,\n"
		       "login user, SSH key, image, head node, node groups with GPU counts).\n"
		       "The cloud 'local' builds a real multi-node SLURM cluster on this machine:\n"
		       "each node is an sshd on its own loopback address with its own root\n"
		       "prefix, bootstrapped over SSH exactly as a cloud VM is.  Without any\n"
		       "configuration file, 'pbx cluster start local' uses a built-in template\n"
		       "of 2 compute nodes with 2 GPU GRES each.  The cloud 'gce' builds it\n"
		       "from Compute Engine VMs (clouds.gce), 'aws' from EC2 instances\n"
		       "(clouds.aws: region, profile, subnet; credentials as the AWS CLI finds\n"
		       "them: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN,\n"
		       "AWS_PROFILE, ~/.aws/credentials and ~/.aws/config, instance metadata).",
	.examples = "pbx cluster start local\n"
		    "pbx cluster exec local -- srun -N2 hostname\n"
		    "pbx cluster show local --json\n"
		    "pbx cluster stop local",
	.subcmds = cmd_cluster_subcmds,
};
