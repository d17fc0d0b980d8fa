/*
 * cluster.h - cluster lifecycle, the same for every provider: start (plan,
 * create, SSH, bootstrap on all nodes at once, wait until sinfo shows every
 * node idle), stop (remove everything, mark deleted), and running commands
 * on the head node with the cluster's SLURM environment.
 *
 * Library code: reports through struct pbx_err and the events callbacks;
 * never prints.
 */
#ifndef PBX_CLUSTER_CLUSTER_H
#define PBX_CLUSTER_CLUSTER_H

#include <stddef.h>

#include "cloud/provider.h"
#include "cloud/price/price.h"
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

/* ------------------------------------------------------------- start.c */

/*
 * Starts cluster tg (resolved by pbx_cluster_target_resolve; a new one is
 * recorded in the store first, its row read into tg), or repairs it when
 * it exists: whatever is down is brought back (a stopped instance is
 * started: autostop keeps disks) and healthy daemons are left alone.
 * `autostop` >= 0 (seconds, 0 = off) replaces the template's autostop for
 * this cluster, from now on; -1 keeps it.  *was_up (may be NULL) is set
 * before ev->nodes is called: 1 when the cluster was recorded up and sinfo
 * (one round trip to the head) showed every compute node usable.  Returns
 * once every compute node is idle in sinfo (or with an error naming the
 * nodes that are not).  tg's row is used up (tg->known = 0 after).
 */
int pbx_cluster_start(struct pbx_store *st, const struct pbx_config *cfg,
		      struct pbx_cluster_target *tg, int autostop, int *was_up,
		      const struct pbx_cluster_events *ev, struct pbx_err *err);
/* The same for cluster `name` from its own recorded template, autostop
 * kept: what a resize and a power-saving resume run. */
int pbx_cluster_start_name(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			   const struct pbx_cluster_events *ev, struct pbx_err *err);

/* Receives each request a dry run would send (no token in it; body may
 * be NULL). */
typedef void (*pbx_request_fn)(void *ctx, const char *method, const char *url, const char *body);

/* `start --dry-run`: plans cluster tg and hands each request its creation
 * would send to `print`; sends nothing, writes nothing.  A provider
 * without API calls (local) refuses with PBX_EXIT_USAGE. */
int pbx_cluster_start_dry(struct pbx_store *st, const struct pbx_config *cfg,
			  const struct pbx_cluster_target *tg, pbx_request_fn print, void *ctx,
			  struct pbx_err *err);
/* The template a dry run of `start` would build cluster tg from, as a
 * record (pbx_template_json), or NULL.  Caller frees. */
char *pbx_cluster_dry_template_json(const struct pbx_cluster_target *tg);
/* The price an hour of cluster tg as `start` would build it (its
 * template, sized as recorded; see pbx_price_quote in
 * src/cloud/price/price.h, whose rules apply).  Reads and may fetch the
 * cloud's price catalogue (never with `offline`), and caches it in st.
 * The caller frees *q (pbx_price_quote_free). */
int pbx_cluster_price(struct pbx_store *st, const struct pbx_config *cfg,
		      const struct pbx_cluster_target *tg, int offline, struct pbx_price_quote *q,
		      struct pbx_err *err);
/* `stop --dry-run`: the requests that would find and delete the
 * cluster's resources; `uid` is --id (may be NULL).  A cluster the store
 * does not know, without uid: only the requests listing what carries the
 * name (a stop would delete nothing). */
int pbx_cluster_stop_dry(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
			 const char *uid, pbx_request_fn print, void *ctx, struct pbx_err *err);

/* How `pbx cluster resize` changes a cluster. */
struct pbx_resize_opts {
	const char *group;   /* node group; NULL = the template's only one */
	int delta;           /* +N adds nodes, -N removes the group's last N */
	int force;           /* -N: down the nodes now (SLURM requeues their
	                           jobs) instead of draining them */
	int drain_timeout_s; /* -N: how long to wait for jobs; 0 = an hour */
	int dry_run;         /* print the requests (print, print_ctx) only */
	pbx_request_fn print;
	void *print_ctx;
};
/*
 * Resizes cluster `name` (see resize.c): grows a node group by creating
 * and bootstrapping new nodes, or shrinks it by draining, then deleting
 * its last nodes; then rewrites slurm.conf on every node.  The new size is
 * recorded with the cluster, so `start` keeps it.
 */
int pbx_cluster_resize(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       const struct pbx_resize_opts *o, const struct pbx_cluster_events *ev,
		       struct pbx_err *err);

/* What `stop` does with a cluster the store does not know. */
struct pbx_stop_opts {
	/* --id: remove what carries this cluster id (and the name); it must be
	 * the cluster's when the store knows it.  NULL: remove nothing. */
	const char *uid;
	/* Without uid: receives each resource that carries the name, whoever's
	 * it is (x->cluster: the id it carries), from provider `cloud`.  May
	 * be NULL. */
	void (*found)(void *ctx, const char *cloud, const struct pbx_instance *x);
	void *found_ctx;
	/* --self: with uid, the instance this pbx runs on (a head deleting its
	 * own cluster, autostop_action: delete): deleted last (spec.self). */
	const char *self;
};

/* Stops cluster tg (pbx_cluster_target_resolve; its row is used up):
 * every process, port, file and cloud resource it made is removed; the
 * store row is marked deleted.  A cluster the store does not know: see
 * struct pbx_stop_opts (o may be NULL); without o->uid nothing is removed
 * and it fails with PBX_EXIT_NOTFOUND. */
int pbx_cluster_stop(struct pbx_store *st, const struct pbx_config *cfg,
		     struct pbx_cluster_target *tg, const struct pbx_stop_opts *o,
		     const struct pbx_cluster_events *ev, struct pbx_err *err);

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
	 * `nodes` but in slurm.conf (State=CLOUD); powersave.c. */
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

/* ------------------------------------------------------------- spend.c */

/* What a cluster has cost (docs/cost.md), from its node runs. */
struct pbx_spend {
	int64_t spent;   /* 1e-9 units of currency, priced runs only */
	int64_t hourly;  /* the running nodes' price an hour now */
	int64_t seconds; /* node-seconds, priced or not */
	size_t runs, running;
	size_t unpriced;  /* runs whose price was not known (not in spent) */
	char currency[8]; /* "" when no run was priced */
};
/* Sums cluster `cluster_id`'s runs up to `now` into *s. */
int pbx_cluster_spend_of(struct pbx_store *st, int64_t cluster_id, int64_t now, struct pbx_spend *s,
			 struct pbx_err *err);
/* Opens a run for each node of c whose instance runs and has none, and
 * ends the runs of nodes deleted or powered off (at c->stopped_at when the
 * cluster is powered off and the cloud said when), from the store's
 * states; prices come from the cache only.  While the cluster is on, the
 * nodes whose runs this verb took from the head (c->head_runs) are left
 * alone.  Best effort, silent. */
void pbx_cluster_spend_sync(struct pbx_cluster *c, int64_t now);

struct pbx_budget {
	int64_t budget; /* the template's, nano-units */
	struct pbx_spend spend;
	int percent; /* spend.spent / budget, rounded down */
};
/* 1 with *b filled when c's template sets a budget, else 0. */
int pbx_cluster_budget(struct pbx_cluster *c, int64_t now, struct pbx_budget *b);
/* 0, or -1 with PBX_EXIT_SECURITY when c has spent its budget: `what`
 * ("parrun") is refused. */
int pbx_cluster_budget_refuse(struct pbx_cluster *c, const char *what, struct pbx_err *err);
/* A line for stderr when c has spent 80% of its budget or more, else
 * NULL; caller frees. */
char *pbx_cluster_budget_warning(struct pbx_cluster *c);
/* When c's budget runs out if every node of its template runs from `now`
 * on, into *until (`now` itself when it has; 0 when it sets none): the
 * head powers the cluster off then.  A budget the template's prices
 * cannot hold it to (a node with no price, or all of them free) is an
 * error (exit 2) that says which price to set, never a budget silently
 * not enforced. */
int pbx_cluster_budget_until(struct pbx_cluster *c, int64_t now, int64_t *until,
			     struct pbx_err *err);
/* Called with every cluster pbx_cluster_open opens (NULL: none): the CLI
 * warns of a budget there. */
void pbx_cluster_set_open_hook(void (*fn)(struct pbx_cluster *c));

/* What `cluster show`, `state` and `exec` know of a power-saving cluster
 * on a cloud whose head makes and deletes the nodes (awake.c;
 * docs/power-saving.md): one list of the instances carrying c's labels,
 * taken into the store and c->nodes.  A node that may sleep whose
 * instance runs is up, with the instance's id, zone and addresses (a new
 * instance's host key is pinned on first contact); one the store has in
 * another state whose instance is gone (or powering off) is asleep.
 * Nothing to do (0) on the local cloud, without power saving, or for pbx
 * on the head (its store is the one that made them).  *changed (may be
 * NULL) counts the nodes changed.  -1 with err when the cloud could not
 * be listed or the store not written: the verb goes on with what the
 * store knew. */
int pbx_cluster_learn_awake(struct pbx_cluster *c, size_t *changed, struct pbx_err *err);

/* ---------------------------------------------------------- headruns.c */

/*
 * The head's node runs (docs/cost.md, "Spend"): on a cloud cluster that
 * saves power the head's own pbx makes and deletes the nodes that may
 * sleep, and its store records their runs as it does.  `pbx cluster runs
 * NAME`, run by that pbx, prints them as one JSON document:
 *   {"version": 1, "cluster": NAME, "id": UID,
 *    "runs": [{"node": "node2", "started": 1716000000,
 *              "ended": 1716000600}, ...]}
 * oldest first, times in unix seconds of the head's clock, ended null
 * while the node runs.  The user's pbx reads it as hostile input: anything
 * else (another version, cluster or id, a missing, unknown or mistyped
 * field, a node that may not sleep, runs of a node that overlap, more than
 * the bounds below) refuses the whole reply.
 */
#define PBX_HEAD_RUNS_VERSION   1
#define PBX_HEAD_RUNS_MAX       200000      /* runs in a reply */
#define PBX_HEAD_RUNS_BYTES_MAX (16u << 20) /* bytes of a reply */
#define PBX_HEAD_RUNS_SKEW_S    300         /* how far the head's clock may be off */

struct pbx_head_run {
	char node[64];
	int64_t started, ended; /* unix s; ended 0: still running */
};
/* `pbx cluster runs NAME`: the document above, of this store's runs of
 * cluster `name`'s nodes that may sleep (its template in cfg, sized as
 * recorded).  Reads only.  *json owned by the caller. */
int pbx_head_runs_json(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       char **json, struct pbx_err *err);
/* Reads reply text[0..len) of cluster `name` (id `uid`, template t) into
 * *v, *n runs sorted by node, then start; *v owned by the caller (free),
 * NULL after an error, which names the field. */
int pbx_head_runs_parse(const char *text, size_t len, const char *name, const char *uid,
			const struct pbx_cluster_template *t, struct pbx_head_run **v, size_t *n,
			struct pbx_err *err);
/* Fits the parsed runs v[0..n) to this machine's clock: a time more than
 * PBX_HEAD_RUNS_SKEW_S after `now` or before `created` (the cluster's
 * creation) refuses them all; one within that is clamped into [created,
 * now]. */
int pbx_head_runs_fit(struct pbx_head_run *v, size_t n, int64_t created, int64_t now,
		      struct pbx_err *err);
/* Cuts v[0..*n) (parsed, fitted) to the times the cluster ran: on[0..non)
 * (the store's runs of its head, oldest first, disjoint; ended 0: on
 * now).  A run outside them goes, one across a time the cluster was off
 * is split; the order stays.  With non 0 nothing is cut.  *v may be
 * replaced (owned by the caller, free; NULL when none is left). */
void pbx_head_runs_clip(struct pbx_head_run **v, size_t *n, const struct pbx_head_run *on,
			size_t non);
/* Makes v[0..n) (parsed, fitted and clipped) the runs of cluster `cluster_id`'s
 * nodes that may sleep in t, in one transaction: each of the store's runs
 * of those nodes takes the interval of the head's run it overlaps most
 * (keeping its price), the others are removed, and a head's run none
 * overlaps is added, priced from quote q (NULL or a line unknown: no
 * price).  The other nodes' runs stay.  *changed (may be NULL): rows
 * written. */
int pbx_head_runs_merge(struct pbx_store *st, int64_t cluster_id,
			const struct pbx_cluster_template *t, const struct pbx_price_quote *q,
			const struct pbx_head_run *v, size_t n, int64_t now, size_t *changed,
			struct pbx_err *err);
/* For a verb that reached c's head: where the head's pbx makes the nodes
 * (a cloud cluster that saves power; not pbx on the head itself) asks it
 * for its runs (one SSH exec), and merges them into the store
 * (c->head_runs then set); else 0 at once.  -1 with err when the head's
 * pbx did not answer or its reply is refused: the store's runs stay. */
int pbx_cluster_head_runs(struct pbx_cluster *c, struct pbx_err *err);

/* `pbx cluster power NAME resume|suspend NODE...`, what SLURM's
 * ResumeProgram and SuspendProgram run (powersave.c): makes and
 * bootstraps the asleep nodes named, or removes the named nodes' instances
 * and puts them to sleep.  A resume that fails removes what it made and
 * marks the nodes DOWN in SLURM with the reason. */
int pbx_cluster_power(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		      const char *action, char **nodes, size_t n, struct pbx_err *err);

/* ------------------------------------------------------------ record.c */

/*
 * A cluster's record (docs/power-saving.md, "A store on the head"): its
 * row, its nodes (asleep ones too) and the host keys pinned for them, as
 * one JSON document that another pbx's store takes in (`pbx cluster
 * adopt`):
 *   {"version": 1,
 *    "cluster": {"name", "uid", "cloud", "state", "template_json" (a
 *                string), "template_name" (or null), "slot", "created"},
 *    "nodes": [{"name", "role", "address", "ssh_port", "gpus",
 *               "instance_id", "root", "state", "zone",
 *               "public_address"}, ...],
 *    "pins": [{"hostport", "type", "key"}, ...]}
 * instance_id, zone and public_address may be null.  A reader refuses
 * anything else: another version, a missing or unknown field, a field of
 * another type, a value the store's writers would not write.
 */
#define PBX_CLUSTER_RECORD_VERSION 1

/* A pin of the record: NAME/NODE@HOST:PORT and its key. */
struct pbx_record_pin {
	char *hostport, *type, *key;
};
/* A record as read (pbx_cluster_record_parse). */
struct pbx_cluster_record {
	struct pbx_cluster_row row; /* id and updated 0 */
	struct pbx_node_row *nodes; /* id and cluster_id 0, head first */
	size_t nnodes;
	struct pbx_record_pin *pins;
	size_t npins;
};
/* The record of live cluster `name` (JSON); *json owned by the caller. */
int pbx_cluster_record(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       char **json, struct pbx_err *err);
/* Reads and validates record text[0..len) into *rec (owned by the caller,
 * pbx_cluster_record_release, on success only); errors (PBX_EXIT_USAGE)
 * read "WHAT: FIELD: problem", FIELD a path such as nodes[2].address. */
int pbx_cluster_record_parse(const char *text, size_t len, const char *what,
			     struct pbx_cluster_record *rec, struct pbx_err *err);
void pbx_cluster_record_release(struct pbx_cluster_record *rec);
/* `pbx cluster adopt`: reads record text[0..len) (named `what` in errors)
 * and makes its cluster this store's, in one transaction: the row, the
 * nodes without their public addresses (this pbx reaches every node at
 * its private address) and the pins, keyed by those addresses.  The same
 * cluster again (its id) replaces its nodes and pins; a name held here by
 * a cluster of another id is refused (PBX_EXIT_FAIL), as is a bad record
 * (PBX_EXIT_USAGE); nothing is written then.  *name (may be NULL) gets the
 * cluster's name, owned by the caller. */
int pbx_cluster_adopt(struct pbx_store *st, const char *text, size_t len, const char *what,
		      char **name, struct pbx_err *err);

/* Opens live cluster `name`; *out owned by the caller (pbx_cluster_close). */
int pbx_cluster_open(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		     struct pbx_cluster **out, struct pbx_err *err);
/* The same on a row already read: takes *row over (it is left zeroed,
 * whatever the result). */
int pbx_cluster_open_row(struct pbx_store *st, const struct pbx_config *cfg,
			 struct pbx_cluster_row *row, struct pbx_cluster **out,
			 struct pbx_err *err);
void pbx_cluster_close(struct pbx_cluster *c);
/* 1 for a cluster pbx uses as it is (cloud ssh): commands run as the
 * user, in the user's login session, never through sudo. */
int pbx_cluster_is_users(const struct pbx_cluster *c);
/* Why cluster c is powered off ("stopped itself at T: idle for 60 s
 * (autostop)...", or the head instance's state, and which instances still
 * run: c->still_running), or NULL when it is not known to be (power.c);
 * when it is, the store records the cluster's state as "stopped" (what
 * `cluster list` shows until the next start).  Caller frees. */
char *pbx_cluster_stopped_why(struct pbx_cluster *c);
/* 1 when c's head deletes the cluster itself (autostop_action: delete,
 * docs/autostop.md): only then does a harvest tell the head what is home. */
int pbx_head_deletes(const struct pbx_cluster *c);
/* The head's record of its last autostop, where pbx can read its disk
 * (node bodies), or NULL.  Caller frees. */
char *pbx_cluster_last_stop(const struct pbx_cluster *c);
/* A pooled connection to node i (owned by the cluster's pool): direct to
 * its public address, or to its (private) address; through the head when
 * the head has a public address and node i has none (direct-tcpip). */
int pbx_cluster_connect(struct pbx_cluster *c, size_t i, struct pbx_ssh **out, struct pbx_err *err);
/* Closes the login connection kept between verbs (a cloud ssh cluster
 * with transport: openssh: its control connection), so that the next verb
 * logs in again: 1 when one was open, 0 when none was (or the cluster
 * keeps none), -1 with err. */
int pbx_cluster_disconnect(struct pbx_cluster *c, struct pbx_err *err);
/* For handing node i to ssh(1) (sshconfig.c): writes DIR/ssh_config and
 * DIR/known_hosts (0600, from the store's pins of node i and, when it is
 * reached through the head, the head's) so that `ssh -F *config *alias`
 * reaches node i as pbx_cluster_connect does (ProxyJump through the head)
 * and accepts only the pinned keys.  Connect once first (the pins).
 * *config and *alias owned by the caller. */
int pbx_cluster_ssh_config(struct pbx_cluster *c, size_t i, char **config, char **alias,
			   struct pbx_err *err);
/* Index of the node called `name`, or -1. */
int pbx_cluster_node_index(const struct pbx_cluster *c, const char *name);
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

/* One line saying which address blocks reach the nodes' port 22 and how
 * the nodes without a public address are reached, from a template record
 * (pbx_template_json: cloud, ssh_from, compute_external_ips).  Caller
 * frees. */
char *pbx_template_ssh_exposure(const char *json);

/* $PBX_HOME/clusters/NAME; caller frees. */
char *pbx_cluster_dir(const char *name);

#endif
