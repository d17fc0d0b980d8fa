/*
 * cmd-cluster-remote.c - `pbx cluster exec|ssh|forget-host`: a command or
 * a shell on a cluster's node, over the same pinned host keys as every
 * verb, and forgetting such a key once a node was legitimately rebuilt.
 */
#include "cli/cluster_cli.h"
#include "cli/cmd.h"
#include "cli/output.h"
#include "cluster/cluster.h"
#include "util/quote.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ----------------------------------------------------------------- exec */

/* exec's one option, parsed from the words before "--" only: what follows
 * is the command, which no option parser may touch. */
struct exec_opts {
	const char *node;
};

static const struct pbx_option cluster_exec_opts[] = {
	PBX_OPT_STRING('n', "node", "NODE", struct exec_opts, node,
		       "run on NODE instead of the head node"),
	PBX_OPT_END,
};

/* The -n NODE of `exec [-n NODE] NAME -- COMMAND...` (NULL: the head),
 * parsed from a copy of the words before "--"; *dd the index of "--".
 * The dispatcher checked them: the parse cannot fail. */
static const char *cluster_exec_node(int argc, char **argv, int *dd)
{
	struct exec_opts o = { 0 };
	char **copy;
	int first;
	for (*dd = 1; *dd < argc && strcmp(argv[*dd], "--") != 0; (*dd)++)
		;
	copy = xcalloc((size_t)*dd + 1, sizeof(*copy));
	memcpy(copy, argv, (size_t)*dd * sizeof(*copy));
	(void)pbx_opts_parse(&pbx_cmd_cluster_exec, *dd, copy, &o, &first);
	free(copy);
	return o.node;
}

static int cmd_cluster_exec_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster *c = ctx->cluster;
	int dd, status = 0, idx = 0, rc;
	const char *node = cluster_exec_node(argc, argv, &dd);
	const char *name = argv[dd - 1]; /* "--" follows NAME (PBX_ARGS_TAIL) */
	if (node)                        /* a node the head woke: its instance's address */
		pbx_cli_learn_awake(ctx, c);
	if (node && (idx = pbx_cluster_node_index(c, node)) < 0) {
		pbx_error("cluster %s has no node named '%s'", name, node);
		return PBX_EXIT_NOTFOUND;
	}
	/* the node's bytes: as they are into a pipe, made visible on a terminal */
	rc = pbx_cluster_exec(c, (size_t)idx, (const char *const *)argv + dd + 1,
			      pbx_cli_passthrough, NULL, &status, &err);
	pbx_cli_passthrough_end();
	if (rc < 0)
		return pbx_report(&err);
	if (status == 127 && argc == dd + 2 && strpbrk(argv[dd + 1], " \t;|&<>$`*"))
		pbx_info("'%s' ran as one command name; for a shell command line: pbx cluster "
			 "exec %s -- sh -c '...'",
			 argv[dd + 1], name);
	return status;
}

const struct pbx_cmd pbx_cmd_cluster_exec = {
	.name = "exec",
	.summary = "run a command on the head node with the cluster's SLURM environment",
	.usage = "pbx cluster exec [-n NODE] NAME -- COMMAND [ARGS...]",
	.description = "Runs COMMAND with ARGS (each passed as one word, never re-split by a\n"
		       "shell) in the cluster's shared directory, with SLURM_CONF and PBX_SHARED\n"
		       "set.  Its stdout and stderr stream back (on a terminal with control\n"
		       "characters other than newline and tab shown as \\xHH); pbx exits with its\n"
		       "status.  With -n on a power-saving cluster on a cloud, pbx first lists\n"
		       "the cluster's instances (one call) to learn whether the head woke NODE\n"
		       "and at which address.",
	.args = "CLUSTER",
	.options = cluster_exec_opts,
	.examples = "pbx cluster exec local -- srun -N3 hostname\n"
		    "pbx cluster exec local -- sinfo",
	.flags = PBX_ARGS_TAIL | PBX_ARGS_TAIL_NEEDED | PBX_NEED_CONFIG | PBX_NEED_STORE |
		 PBX_NEED_CLUSTER,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_exec_exec,
};

/* ------------------------------------------------------------------ ssh */

/* The remote command of `ssh NAME [NODE] -- COMMAND [ARGS...]`: each word
 * quoted, so the node's shell sees them as given (as `cluster exec` does).
 * NULL without "--".  Caller frees. */
static char *cluster_ssh_command(char **argv, int dashdash)
{
	struct pbx_buf b = PBX_BUF_INIT;
	if (dashdash < 0)
		return NULL;
	pbx_shell_join(&b, (const char *const *)argv + dashdash + 1);
	return pbx_buf_detach(&b, NULL);
}

static int cmd_cluster_ssh_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster *c = ctx->cluster;
	struct pbx_ssh *s;
	char *config = NULL, *alias = NULL, *command;
	int idx = 0, rc, dashdash = -1, nargs, i;
	for (i = 1; i < argc && dashdash < 0; i++)
		if (!strcmp(argv[i], "--"))
			dashdash = i;
	nargs = dashdash < 0 ? argc : dashdash; /* NAME [NODE]: the dispatcher counted */
	if (nargs == 3)                         /* a node the head woke: its instance's address */
		pbx_cli_learn_awake(ctx, c);
	if (nargs == 3 && (idx = pbx_cluster_node_index(c, argv[2])) < 0) {
		pbx_error("cluster %s has no node named '%s'", argv[1], argv[2]);
		return PBX_EXIT_NOTFOUND;
	}
	/* Connect once through libssh2, as every verb does (through the head
	 * for a node without a public address), so the pinned host keys are
	 * checked (or pinned), then hand the terminal to OpenSSH with those
	 * keys as its only known hosts, on the same path. */
	if (pbx_cluster_connect(c, (size_t)idx, &s, &err) < 0 ||
	    (!pbx_ssh_is_openssh(s) &&
	     pbx_cluster_ssh_config(c, (size_t)idx, &config, &alias, &err) < 0))
		return pbx_report(&err);
	command = cluster_ssh_command(argv, dashdash);
	{
		const char *sargv[] = { "ssh",   "-F", config, alias, command ? "--" : NULL,
					command, NULL };
		/* transport: openssh: the user's own ssh, on the control
		 * connection the connect above made sure of */
		const char **own = pbx_ssh_interactive_argv(s, command);
		fflush(NULL);
		execvp("ssh", (char *const *)(own ? own : sargv));
		free(own);
	}
	pbx_error("cannot run ssh: %m");
	rc = PBX_EXIT_FAIL;
	free(config);
	free(alias);
	free(command);
	return rc;
}

const struct pbx_cmd pbx_cmd_cluster_ssh = {
	.name = "ssh",
	.summary = "open a shell on a node (the head by default), or run a command there",
	.usage = "pbx cluster ssh NAME [NODE] [-- COMMAND [ARGS...]]",
	.description =
		"Runs ssh(1) the way pbx itself connects: to the head and to any node\n"
		"with a public address directly, to a node without one through the head\n"
		"(ProxyJump).  ssh(1) gets a configuration and a known_hosts file that pbx\n"
		"writes (mode 0600) in $PBX_HOME/clusters/NAME from the host keys it pinned,\n"
		"with StrictHostKeyChecking yes for both hops, so a changed host key is\n"
		"refused here as everywhere.  With '-- COMMAND', each word of COMMAND and\n"
		"ARGS reaches the node's shell as one word, as with 'cluster exec', but\n"
		"without the cluster's environment.  With NODE on a power-saving cluster on\n"
		"a cloud, pbx first lists the cluster's instances (one call) to learn\n"
		"whether the head woke NODE and at which address.",
	.examples = "pbx cluster ssh gce-gpu\n"
		    "pbx cluster ssh gce-gpu gpu1 -- nvidia-smi",
	.args = "CLUSTER",
	.flags = PBX_ARGS_TAIL | PBX_NEED_CONFIG | PBX_NEED_STORE | PBX_NEED_CLUSTER,
	.min_args = 1,
	.max_args = 2,
	.exec = cmd_cluster_ssh_exec,
};

/* ---------------------------------------------------------- forget-host */

static int cmd_cluster_forget_host_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	int removed;
	(void)argc;
	if (pbx_store_hostkey_forget(ctx->store, argv[1], &removed, &err) < 0)
		return pbx_report(&err);
	if (!removed) {
		pbx_error("no host key pinned for '%s'", argv[1]);
		return PBX_EXIT_NOTFOUND;
	}
	pbx_info("forgot the host key of %s; it is pinned again on next contact", argv[1]);
	return 0;
}

const struct pbx_cmd pbx_cmd_cluster_forget_host = {
	.name = "forget-host",
	.summary = "forget a pinned host key (after a node was legitimately rebuilt)",
	.usage = "pbx cluster forget-host HOST",
	.description = "pbx pins each node's SSH host key on first contact and refuses a changed\n"
		       "key.  HOST is the name printed in that refusal.",
	.flags = PBX_NEED_STORE,
	.min_args = 1,
	.max_args = 1,
	.exec = cmd_cluster_forget_host_exec,
};
