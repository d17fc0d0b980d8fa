/*
 * cluster_session.h - the session layer of src/cluster: a verb's cluster
 * resolved once (target.c) and an open, live cluster (cluster.c): its row,
 * nodes and SSH connections; open, close, connect, run a command or script
 * on a node, mark its state.  What features add on close or on a failed
 * connect to the head comes through struct pbx_cluster_hooks, which the
 * feature layer registers (hooks.c): the session names no feature.  Calls
 * only the plans (cluster_plan.h) below it.
 *
 * Library code: reports through struct pbx_err; never prints.
 */
#ifndef PBX_CLUSTER_SESSION_H
#define PBX_CLUSTER_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "cloud/provider.h"
#include "cluster/cluster_plan.h"
#include "config/config.h"
#include "slurm/sinfo.h"
#include "ssh/ssh.h"
#include "store/store.h"
#include "util/err.h"

/* ------------------------------------------------------------ target.c */

/* A verb's cluster, resolved once: the name checked, the store's row read
 * (when it has one) and the template chosen by one rule. */
struct pbx_cluster_target {
	const char *name;                     /* borrowed */
	int known;                            /* the store has a live row: `row` */
	struct pbx_cluster_row row;           /* owned; moved out by pbx_cluster_open_row */
	char *tmpl_name;                      /* owned: the name `t` was looked up under */
	const struct pbx_cluster_template *t; /* the config's (borrowed); NULL: none */
};
/* 0 when `name` may name a new cluster (the rule of template names,
 * pbx_config_name_ok: [a-z][a-z0-9-]{0,30}; it becomes a directory, a
 * hostname prefix and a cloud label); else -1 with a usage error that
 * shows the name safely (control characters escaped). */
int pbx_cluster_name_check(const char *name, struct pbx_err *err);
/* The template a cluster is (or would be) built from: `tmpl` (-t), else
 * the one `row` was started from (row may be NULL), else `name`. */
const char *pbx_cluster_template_for(const struct pbx_cluster_row *row, const char *name,
				     const char *tmpl);
/* Fills *tg (pbx_cluster_target_release): checks `name`
 * (pbx_cluster_name_check) before anything is read, reads its row once
 * and looks up its template in cfg (may be NULL: no template).  An unknown
 * cluster is no error (tg->known = 0). */
int pbx_cluster_target_resolve(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			       const char *tmpl, struct pbx_cluster_target *tg,
			       struct pbx_err *err);
/* 0 when tg has a template, else -1 with PBX_EXIT_NOTFOUND naming it. */
int pbx_cluster_target_template(const struct pbx_cluster_target *tg, const struct pbx_config *cfg,
				struct pbx_err *err);
void pbx_cluster_target_release(struct pbx_cluster_target *tg);

/* ------------------------------------------------------------ cluster.c */

/* An open, live cluster: its row, nodes and SSH connections. */
struct pbx_cluster {
	struct pbx_cluster_row row;
	struct pbx_node_row *nodes; /* head first */
	size_t nnodes;
	const struct pbx_provider *provider;
	struct pbx_cluster_spec spec;
	void *pctx; /* the provider's context (provider->open) */
	char *dir;
	char *user, *key_path;
	struct pbx_hostkeys hostkeys;
	struct pbx_ssh_pool *pool;
	struct pbx_store *store;      /* borrowed */
	const struct pbx_config *cfg; /* borrowed */
	/* spec.t: the config's template with the cluster's recorded sizes
	 * (see pbx_template_sized); sized_groups is its group array. */
	struct pbx_cluster_template sized;
	struct pbx_node_group *sized_groups;
	/* Set while `start` runs: a head that does not answer is being
	 * brought up, not reported as stopped (pbx_cluster_connect). */
	int starting;
	/* The node this pbx runs on, whose commands it runs itself, or -1:
	 * pbx on the head (pbx-head sets PBX_THIS_NODE=head;
	 * docs/head-identity.md), which also reaches every other node at its
	 * private address, never through itself. */
	int here;
	/* When the cloud says the cluster powered off (unix s; 0 = not known):
	 * its head's stop, and each node's own (stops[0..nstops), by node
	 * name), set by pbx_cluster_stopped_why: where the node runs end. */
	int64_t stopped_at;
	struct pbx_node_stop {
		char name[64];
		int64_t at;
	} * stops;
	size_t nstops;
	/* With the head powered off: the nodes whose instances the cloud still
	 * lists as running (billed), space-separated, or NULL; set by
	 * pbx_cluster_stopped_why, owned by c. */
	char *still_running;
	/* When the cloud says a node's instance started (unix s), for the
	 * nodes the laptop's view learnt up (awake.c): where their runs begin
	 * (a node the head woke ran before any verb here saw it). */
	struct pbx_node_stop *starts;
	size_t nstarts;
	/* For the bootstrap: when the head powers the cluster off because its
	 * budget is spent (unix s; 0 = no budget to enforce), set by start. */
	int64_t budget_until;
	int64_t opened_at; /* when pbx_cluster_open opened it (unix s) */
	/* During a start: the power-saving nodes asleep (no instance), out of
	 * `nodes` but in slurm.conf (State=CLOUD); slurm_sleep_steps.c. */
	struct pbx_node_row *asleep;
	size_t nasleep;
	/* The user's public key the cluster's record carried (template
	 * record's user_key; on the head's store only), or NULL: spec.user_key.
	 * Owned. */
	char *user_key;
	/* 1 once this verb took the head's runs of the nodes that may sleep
	 * (pbx_cluster_head_runs): spend_sync leaves those nodes' runs be. */
	int head_runs;
};

/* Called with every cluster pbx_cluster_open opens (NULL: none): the CLI
 * warns of a budget there. */
void pbx_cluster_set_open_hook(void (*fn)(struct pbx_cluster *c));

/* Opens live cluster `name`; *out owned by the caller (pbx_cluster_close). */
int pbx_cluster_open(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		     struct pbx_cluster **out, struct pbx_err *err);
/* The same on a row already read: takes *row over (it is left zeroed,
 * whatever the result). */
int pbx_cluster_open_row(struct pbx_store *st, const struct pbx_config *cfg,
			 struct pbx_cluster_row *row, struct pbx_cluster **out,
			 struct pbx_err *err);
void pbx_cluster_close(struct pbx_cluster *c);
/* What the feature layer adds to the session (hooks.c registers it): the
 * session (cluster.c) calls these and names no feature.  Any may be NULL. */
struct pbx_cluster_hooks {
	/* pbx_cluster_close, before c is freed: what the verb changed (the
	 * spend's node runs), at unix time `now`. */
	void (*closing)(struct pbx_cluster *c, int64_t now);
	/* A connection to the head failed (not while starting, not a host key
	 * refused): why the cluster is powered off, or NULL when it is not
	 * known to be; caller frees. */
	char *(*stopped_why)(struct pbx_cluster *c);
};
/* Replaces the hooks with a copy of *h (NULL: none). */
void pbx_cluster_set_hooks(const struct pbx_cluster_hooks *h);
/* Sets the cluster's state in the store (best effort, logged). */
void pbx_cluster_mark(struct pbx_cluster *c, const char *state);
/* 1 for a cluster pbx uses as it is (cloud ssh): commands run as the
 * user, in the user's login session, never through sudo. */
int pbx_cluster_is_users(const struct pbx_cluster *c);

/* A pooled connection to node i (owned by the cluster's pool): direct to
 * its public address, or to its (private) address; through the head when
 * the head has a public address and node i has none (direct-tcpip). */
int pbx_cluster_connect(struct pbx_cluster *c, size_t i, struct pbx_ssh **out, struct pbx_err *err);
/* Closes the login connection kept between verbs (a cloud ssh cluster
 * with transport: openssh: its control connection), so that the next verb
 * logs in again: 1 when one was open, 0 when none was (or the cluster
 * keeps none), -1 with err. */
int pbx_cluster_disconnect(struct pbx_cluster *c, struct pbx_err *err);

/* Index of the node called `name`, or -1. */
int pbx_cluster_node_index(const struct pbx_cluster *c, const char *name);
/* Whether a command run on c's head sees this machine's files as this pbx
 * does, so that a path of this pbx's (its download cache) may be named to
 * it: pbx runs on the head itself (c->here == 0), or the head is a local
 * cluster's node body (an sshd on this machine, its login root). */
int pbx_cluster_head_sees_here(const struct pbx_cluster *c);
/* Runs `cmdline` (already quoted, as pbx_ssh_exec takes it) on node i:
 * over SSH (pbx_cluster_connect), or on this machine when node i is the
 * one this pbx runs on (c->here; pbx_run_sh).  As pbx_ssh_exec: `in` on
 * stdin, output to `out`, *status its exit status; -1 only when it could
 * not be run. */
int pbx_cluster_node_exec(struct pbx_cluster *c, size_t i, const char *cmdline, const void *in,
			  size_t inlen, pbx_ssh_output_fn out, void *ctx, int *status,
			  struct pbx_err *err);

/*
 * Runs argv on node `node` (0 = head) after sourcing the node's env.sh
 * (SLURM_CONF, PBX_SHARED ...) and changing to the shared directory.
 * Output streams to `out`; *status gets the exit status.
 */
int pbx_cluster_exec(struct pbx_cluster *c, size_t node, const char *const *argv,
		     pbx_ssh_output_fn out, void *ctx, int *status, struct pbx_err *err);
/* Same with a shell command line (already quoted by the caller). */
int pbx_cluster_exec_sh(struct pbx_cluster *c, size_t node, const char *cmdline,
			pbx_ssh_output_fn out, void *ctx, int *status, struct pbx_err *err);
/* The command line to send for `cmdline`: as is when the login user is
 * root, else run by root through `sudo -n sh -c CMDLINE` (cloud images log
 * in as a user with passwordless sudo).  Caller frees. */
char *pbx_cluster_as_root(const struct pbx_cluster *c, const char *cmdline);

/* Output of pbx_cluster_run: stdout and stderr. */
struct pbx_cluster_output {
	struct pbx_buf out, err;
	int status; /* the script's exit status (also after a failure) */
};
/*
 * pbx's remote scripts: runs `script` with /bin/sh -c on node `node` the
 * way pbx_cluster_exec_sh runs a command line (env.sh, shared directory),
 * with `in` (may be NULL) on stdin, collecting stdout and stderr into *o.
 * A non-zero exit status is an error quoting stderr.  On success the
 * caller releases *o (pbx_cluster_output_release); on failure nothing is
 * left to release.
 */
int pbx_cluster_run(struct pbx_cluster *c, size_t node, const char *script,
		    const struct pbx_buf *in, struct pbx_cluster_output *o, struct pbx_err *err);
/* Same, with stdin read from `in_fd` until its end (the caller keeps and
 * closes it), sent as it arrives: streamed over SSH; on the node this pbx
 * runs on (c->here) read whole first, then run. */
int pbx_cluster_run_fd(struct pbx_cluster *c, size_t node, const char *script, int in_fd,
		       struct pbx_cluster_output *o, struct pbx_err *err);
void pbx_cluster_output_release(struct pbx_cluster_output *o);
/* Current sinfo node states (head's view); caller frees with pbx_sinfo_free. */
int pbx_cluster_sinfo(struct pbx_cluster *c, struct pbx_sinfo_node **nodes, size_t *n,
		      struct pbx_err *err);

/* $PBX_HOME/clusters/NAME; caller frees. */
char *pbx_cluster_dir(const char *name);

#endif
