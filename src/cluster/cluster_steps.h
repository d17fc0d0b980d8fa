/*
 * cluster_steps.h - the steps verbs are made of, on an open cluster
 * (cluster_session.h): spend and budget against the store (spend.c), the
 * hooks the session calls (hooks.c), the laptop's view of nodes the head
 * woke (awake.c), the head's node runs (headruns.c), why a cluster is
 * powered off by autostop (autostop_off.c), a cluster's record (record.c)
 * and ssh(1)'s configuration (sshconfig.c).  The bootstrap, staging and
 * discovery steps, shared by the verbs only, are in cluster_internal.h.
 *
 * Library code: reports through struct pbx_err; never prints.
 */
#ifndef PBX_CLUSTER_STEPS_H
#define PBX_CLUSTER_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "cloud/price/price.h"
#include "cluster/cluster_plan.h"
#include "cluster/cluster_session.h"
#include "config/config.h"
#include "store/store.h"
#include "util/err.h"

/* ------------------------------------------------------------- spend.c */

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

/* ------------------------------------------------------------- hooks.c */

/* Installs the features' session hooks (hooks.c: spend sync on close,
 * why a cluster is powered off on a failed connect to its head).  pbx's
 * main calls it once, before any verb. */
void pbx_cluster_hooks_install(void);

/* ------------------------------------------------------------- awake.c */

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

/* `pbx cluster runs NAME`: the document of cluster_plan.h
 * (headruns_parse.c), of this store's runs of
 * cluster `name`'s nodes that may sleep (its template in cfg, sized as
 * recorded).  Reads only.  *json owned by the caller. */
int pbx_head_runs_json(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       char **json, struct pbx_err *err);

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

/* ------------------------------------------------------------ record.c */

/* The record of live cluster `name` (JSON); *json owned by the caller. */
int pbx_cluster_record(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		       char **json, struct pbx_err *err);

/* ------------------------------------------------------ autostop_off.c */

/* Why cluster c is powered off ("stopped itself at T: idle for 60 s
 * (autostop)...", or the head instance's state, and which instances still
 * run: c->still_running), or NULL when it is not known to be (autostop_off.c);
 * when it is, the store records the cluster's state as "stopped" (what
 * `cluster list` shows until the next start).  Caller frees. */
char *pbx_cluster_stopped_why(struct pbx_cluster *c);

/* The head's record of its last autostop, where pbx can read its disk
 * (node bodies), or NULL.  Caller frees. */
char *pbx_cluster_last_stop(const struct pbx_cluster *c);

/* --------------------------------------------------------- sshconfig.c */

/* For handing node i to ssh(1) (sshconfig.c): writes DIR/ssh_config and
 * DIR/known_hosts (0600, from the store's pins of node i and, when it is
 * reached through the head, the head's) so that `ssh -F *config *alias`
 * reaches node i as pbx_cluster_connect does (ProxyJump through the head)
 * and accepts only the pinned keys.  Connect once first (the pins).
 * *config and *alias owned by the caller. */
int pbx_cluster_ssh_config(struct pbx_cluster *c, size_t i, char **config, char **alias,
			   struct pbx_err *err);

#endif
