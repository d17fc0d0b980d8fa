/*
 * cluster.h - cluster lifecycle, the same for every provider: the verbs
 * (the top layer): start (plan, create, SSH, bootstrap on all nodes at
 * once, wait until sinfo shows every node idle), stop (remove everything,
 * mark deleted), resize, SLURM power saving's resume and suspend, adopt.
 * It includes the layers below, so a caller includes this one header:
 * cluster_plan.h (pure plans), cluster_session.h (an open cluster, running
 * commands on its nodes), cluster_steps.h (spend, the head's runs, ...).
 *
 * Library code: reports through struct pbx_err and the events callbacks;
 * never prints.
 */
#ifndef PBX_CLUSTER_CLUSTER_H
#define PBX_CLUSTER_CLUSTER_H

#include <stddef.h>

#include "cloud/price/price.h"
#include "cloud/provider.h"
#include "cluster/cluster_plan.h"
#include "cluster/cluster_session.h"
#include "cluster/cluster_steps.h"
#include "config/config.h"
#include "store/store.h"
#include "util/err.h"

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

/* `pbx cluster power NAME resume|suspend NODE...`, what SLURM's
 * ResumeProgram and SuspendProgram run (slurm_sleep.c): makes and
 * bootstraps the asleep nodes named, or removes the named nodes' instances
 * and puts them to sleep.  A resume that fails removes what it made and
 * marks the nodes DOWN in SLURM with the reason. */
int pbx_cluster_power(struct pbx_store *st, const struct pbx_config *cfg, const char *name,
		      const char *action, char **nodes, size_t n, struct pbx_err *err);

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

#endif
