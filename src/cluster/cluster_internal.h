/*
 * cluster_internal.h - what the files of src/cluster share and no other
 * folder uses, by layer as in cluster.h: pure plans, the session, the node
 * steps (bootstrap, staging, discovery, the head's pbx, SLURM power
 * saving's stage), the verbs.  A file calls only its own layer's and the
 * layers below (scripts/import-graph.py).
 */
#ifndef PBX_CLUSTER_INTERNAL_H
#define PBX_CLUSTER_INTERNAL_H

#include "cluster/cluster.h"
#include "util/buf.h"

#include <time.h>

/* -------------------------------------------------------- plans (pure) */

/* The template as JSON (for the store's record); caller frees. */
char *pbx_template_json(const struct pbx_cluster_template *t);

/* The cluster as built: template t with each group's count taken from
 * `json` (the store's record, which a resize changes) where it names the
 * group, and its autostop from the record's autostop_override (`start
 * --autostop`) when it has one.  *out shares t's strings; *groups (owned by the caller, free) is
 * out->groups. */
void pbx_template_sized(const struct pbx_cluster_template *t, const char *json,
			struct pbx_cluster_template *out, struct pbx_node_group **groups);

/* `json` with group `group`'s count set to `count`; caller frees. */
char *pbx_template_json_resized(const char *json, const char *group, int count);
/* `json` with autostop_override set to `seconds`; caller frees (NULL when
 * json is not a JSON object). */
char *pbx_template_json_autostop(const char *json, int seconds);

/* The user's public key in a template record ("user_key"): the record the
 * user's start sends the head carries it (record.c), so that the nodes
 * pbx on the head makes authorize the user's key too (spec.user_key).
 * The longest public key line taken. */
#define PBX_PUBKEY_LINE_MAX 8192
/* 1 when `s` (may be NULL) is one OpenSSH public key line: TYPE BASE64
 * [COMMENT], printable ASCII, at most PBX_PUBKEY_LINE_MAX bytes; else 0. */
int pbx_pubkey_line_ok(const char *s);
/* `json` with user_key set to `key` (NULL: removed); caller frees (NULL
 * when json is not a JSON object). */
char *pbx_template_json_user_key(const char *json, const char *key);
/* The user_key of template record `json` when it is a public key line
 * (pbx_pubkey_line_ok), else NULL; caller frees. */
char *pbx_template_user_key(const char *json);
/* The budget's deadline in a template record ("budget_until", unix s):
 * the user's start computes it with its prices (pbx_cluster_budget_until)
 * and sends it with the record, so the head's own starts (power saving)
 * keep it instead of recomputing it without prices (docs/cost.md).
 * `json` with budget_until set to `until` (<= 0: removed); caller frees
 * (NULL when json is not a JSON object). */
char *pbx_template_json_budget_until(const char *json, int64_t until);
/* The budget_until of template record `json`, or 0. */
int64_t pbx_template_budget_until(const char *json);

/* head_plan.c: 1 when pbx runs on c's head (pbx-head, with a key of the head's own that
 * every node authorizes; docs/head-identity.md): when it deletes the
 * cluster itself, makes the nodes of power saving, or has its own identity
 * (a service account, an instance profile: it stages data). */
int pbx_head_runs_pbx(const struct pbx_cluster *c);

/* Node `name`'s group in t (may be NULL) and, in *k, its number in it
 * (gpu3: 3; 0 when none); NULL when no group of t names it.  Borrowed
 * from t. */
const struct pbx_node_group *pbx_power_group(const struct pbx_cluster_template *t, const char *name,
					     int *k);
/* Whether node `name` is above its group's min: (SLURM may put it to sleep). */
int pbx_power_may_sleep(const struct pbx_cluster_template *t, const char *name);
/* Whether SLURM's power saving may remove and make node `name` anew, on a
 * cluster with power saving: a node that may sleep, and a Spot node that
 * always runs (within its group's min:, or of a group without one), which
 * its preemption watcher powers down at a notice and pbx-suspend powers up
 * again once it is down (docs/spot.md).  Such a node has a new address
 * each time it is made: slurm.conf names it by DNS, and the user's pbx
 * learns its instance from the cloud (awake.c). */
int pbx_power_remade(const struct pbx_cluster_template *t, const char *name);
/* A start's plan: every node above its group's min: asleep (the store's
 * state, merged after, says otherwise for nodes it knows). */
void pbx_power_plan(struct pbx_cluster *c, struct pbx_node_row *planned, size_t n);

/* Node `name`'s (of `role`) price an hour in quote q (NULL: none): its
 * group's line, the head's for the head; -1 when unknown. */
int64_t pbx_spend_node_price(const struct pbx_price_quote *q, const struct pbx_cluster_template *t,
			     const char *name, const char *role);
/* spend_plan.c: the arithmetic of spend and budget, pure. */
/* Whether a node in store state `state` (may be NULL) has an instance that
 * runs (and is paid for) while its cluster is not powered off. */
int pbx_spend_state_runs(const char *state);
/* When node `name` of c powered off, as the cloud said: its own instance's
 * stop time (c->stops), else its head's (c->stopped_at); 0 when not known. */
int64_t pbx_spend_stopped_at(const struct pbx_cluster *c, const char *name);
/* Where a new run of node `name` begins: when c was opened (a start's
 * instances run from then; `now` when c->opened_at is unset or after now),
 * or earlier when the cloud says its instance started before (c->starts),
 * but never before one of its runs runs[0..nr) ended. */
int64_t pbx_spend_run_from(const struct pbx_cluster *c, const struct pbx_node_run *runs, size_t nr,
			   const char *name, int64_t now);
/* What `seconds` of a node at `nanos` an hour cost, rounded to the nearest
 * nano-unit; 0 when either is 0 or less, INT64_MAX when it does not fit. */
int64_t pbx_spend_run_cost(int64_t seconds, int64_t nanos);
/* Adds run r, as of `now` (the end of a run still open), into *s: its
 * seconds, its cost when priced (r->nanos >= 0; else counted unpriced),
 * and its price an hour in s->hourly while it runs.  The first priced run
 * names s->currency.  Sums stop at INT64_MAX. */
void pbx_spend_add_run(struct pbx_spend *s, const struct pbx_node_run *r, int64_t now);
/* spent / budget in percent, rounded down (0 when budget <= 0; within
 * INT_MIN..INT_MAX). */
int pbx_budget_percent(int64_t spent, int64_t budget);
/* From this percentage of its budget on a cluster's verbs warn. */
#define PBX_BUDGET_WARN_PERCENT 80
/* 1 when b's spend has reached its budget (a budget exactly met is spent). */
int pbx_budget_spent(const struct pbx_budget *b);
/* "12.3456 of its budget 10.00 USD (123%)" into out[0..size). */
void pbx_budget_text(const struct pbx_budget *b, char *out, size_t size);
/* When a budget runs out with `spent` of it spent at `now` and nodes
 * costing `hourly` an hour from now on, `margin` seconds early (the time
 * the cluster takes to power off): never before now; `now` when it is
 * spent or hourly <= 0; INT64_MAX when too far to count. */
int64_t pbx_budget_deadline(int64_t now, int64_t budget, int64_t spent, int64_t hourly,
			    int64_t margin);
/* Whether `name` is a node of t that may sleep (pbx_power_may_sleep), and
 * one that t has: NAMEk of a group, k up to its count, as config.c names
 * them (headruns_parse.c). */
int pbx_head_runs_node_ok(const struct pbx_cluster_template *t, const char *name);

/* ------------------------------------------------------------- session */

/* Makes spec.t template t (NULL: none) sized as the cluster was built. */
void pbx_cluster_use_template(struct pbx_cluster *c, const struct pbx_cluster_template *t);

/* Frees what c holds (SSH pool, provider context, rows, strings), not c
 * itself: for a pbx_cluster embedded in another struct (image build). */
void pbx_cluster_release(struct pbx_cluster *c);

/* The address pbx connects to for node i: its public one when it has one,
 * else its (private) address. */
const char *pbx_cluster_ssh_addr(const struct pbx_cluster *c, size_t i);
/* Whether node i is reached through the head: it has no public address
 * and the head has one (what the cloud reported, whatever the provider). */
int pbx_cluster_via_head(const struct pbx_cluster *c, size_t i);
/* The name node i's host key is pinned under: NAME/NODE@ADDR:PORT.  Pins
 * are per cluster and node, so a rebuilt cluster that reuses an address
 * never trips over an old cluster's key; `stop` forgets "NAME/".  Caller
 * frees. */
char *pbx_cluster_pin_name(const struct pbx_cluster *c, size_t i);

/* --------------------------------------------------------------- steps */

/* headdelete.c: the configuration pbx on the head runs with (JSON, which YAML reads):
 * c's template's cloud, login user and image, the head's own key
 * (~/.ssh/id_ed25519 of pbx-head's HOME), and where its cloud's resources
 * are; no credential.  On a VM (`vm`: a machine of its own, not a node
 * body on this one) an endpoint on loopback is left out: it names a service
 * on the user's machine (an emulator's), which is not the head's loopback,
 * and the head calls its cloud's own API.  Caller frees. */
char *pbx_head_config(const struct pbx_cluster *c, int vm);
/* Adds PBX_STAGE_DIR/head-config.yaml to the stage and, for VMs (`vm`),
 * this pbx as PBX_STAGE_DIR/pbx with pbx.target ("ID VERSION_ID MACHINE"
 * it was built for); a node body runs this binary where it is. */
int pbx_head_stage(const struct pbx_cluster *c, struct pbx_buf *tar, time_t now, int vm,
		   struct pbx_err *err);

/* Sends c's record (record.c) to its head, whose pbx (pbx-head) adopts it
 * into the head's own store: one round trip.  After a start of a cluster
 * whose head runs pbx. */
int pbx_head_adopt(struct pbx_cluster *c, struct pbx_err *err);

/* pbx's directory on a node and, in it, the stage (bootstrap.sh and its
 * parts, slurm.conf, munge.key, ...: templates/README.md, "The stage");
 * relative to the node's root prefix. */
#define PBX_NODE_DIR  "var/lib/pbx"
#define PBX_STAGE_DIR PBX_NODE_DIR "/stage"

/*
 * Runs `sh bootstrap.sh ACTION` on node i.  With `stage_tar` (a tar whose
 * members are PBX_STAGE_DIR/...) it is unpacked into the node's root prefix
 * first, in the same exec (one SSH round trip per node).
 * PBX-STAGE lines become progress events; the error quotes PBX-ERROR lines
 * or the end of stderr.
 */
int pbx_bootstrap_node(struct pbx_cluster *c, size_t i, const struct pbx_slurm_layout *l,
		       const struct pbx_buf *stage_tar, const char *action,
		       const struct pbx_cluster_events *ev, struct pbx_err *err);

/*
 * Begins a stage tar in `tar` (caller-owned): the directories PBX_NODE_DIR
 * and PBX_STAGE_DIR (0700), PBX_STAGE_DIR/bootstrap.sh with its parts
 * (PBX_STAGE_DIR/bootstrap/: every template under templates/bootstrap/),
 * autostop.sh and preempt.sh, dated `now`.  The caller adds its own
 * members and ends the tar (pbx_ustar_end).
 */
int pbx_bootstrap_stage_begin(struct pbx_buf *tar, time_t now, struct pbx_err *err);
/* Adds what pbx renders for each node of c (bootstrap_render.h), which
 * `up` installs as it is: PBX_STAGE_DIR/gres-NODE.conf (its GPUs, their
 * type; under its root prefix in direct mode), env-NODE.sh (its
 * etc/pbx/env.sh, to which a node whose tasks run as the task user adds
 * the cluster's task-user.env.sh) and, in systemd mode, the units of pbx's
 * watchers, pbx-preempt-NODE.service and pbx-autostop-NODE.service. */
int pbx_bootstrap_stage_nodes(const struct pbx_cluster *c, const struct pbx_slurm_layout *l,
			      struct pbx_buf *tar, time_t now, struct pbx_err *err);
/* Adds PBX_STAGE_DIR/apt-proxy.conf (pbx_bootstrap_apt_proxy) when c's
 * template has a proxy, and nothing otherwise: `up` (15-install.sh) and
 * `install` (an image's builder, actions.sh) give it to apt.  Also part of
 * pbx_bootstrap_stage_nodes. */
int pbx_bootstrap_stage_apt_proxy(const struct pbx_cluster *c, struct pbx_buf *tar, time_t now,
				  struct pbx_err *err);
/* Adds the binary at `path` to the stage as PBX_STAGE_DIR/NAME (0755), and
 * NAME.target with what it was built for ("ID VERSION_ID MACHINE" of this
 * host, pbx_host_target): the bootstrap installs it where the node
 * matches (pbx-train; pbx on a head that deletes its cluster). */
int pbx_stage_binary(struct pbx_buf *tar, const char *path, const char *name, time_t now,
		     struct pbx_err *err);

/* Connects to every node (waiting for a fresh VM's sshd) and asks whether
 * it is a node body; if the head is, each node's root becomes its body's
 * prefix and *l the layout of node bodies on this host.  Otherwise *l and
 * the nodes are left as they are. */
int pbx_cluster_discover(struct pbx_cluster *c, struct pbx_slurm_layout *l,
			 const struct pbx_cluster_events *ev, struct pbx_err *err);

/* record.c: c's record (see struct pbx_cluster_record in cluster.h) from
 * the store: its row, every node the store has for it (c->asleep's too)
 * and the pins of those nodes at their address or public address and SSH
 * port.  Caller frees; NULL when the store cannot be read. */
char *pbx_cluster_record_json(const struct pbx_cluster *c);

/* Moves the asleep nodes of c->nodes to c->asleep, recording them; on the
 * user's side a Spot node that always runs, asleep since a preemption, is
 * made instead (waking). */
int pbx_power_split(struct pbx_cluster *c, struct pbx_err *err);
/* slurm.conf's power-saving lines; caller frees. */
char *pbx_power_conf_lines(const struct pbx_cluster *c);
/* The stage's pbx-resume and pbx-suspend, into tar. */
int pbx_power_stage(const struct pbx_cluster *c, struct pbx_buf *tar, time_t now,
		    struct pbx_err *err);

/* --------------------------------------------------------------- verbs */

/* Lists what carries the labels of the spec provider context pctx was
 * opened for and removes it, looking again for what a creation still under
 * way made meanwhile (stop.c); with `always`, destroy runs even when the
 * list is empty (it also removes what belongs to the cluster as a whole).
 * *found (may be NULL) says whether anything was listed. */
int pbx_stop_by_label(const struct pbx_provider *p, void *pctx, int always, int *found,
		      struct pbx_err *err);

#endif
