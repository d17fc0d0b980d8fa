/*
 * cluster_plan.h - the bottom layer of src/cluster: pure plans, no I/O (no
 * store, SSH, cloud or clock): which nodes SLURM's power saving may put to
 * sleep (slurm_sleep_plan.c), which heads run pbx (head_plan.c), spend and
 * budget arithmetic (spend_plan.c), the template as sized and its record's
 * fields (template_json.c), the head's runs and a cluster's record read as
 * hostile input (headruns_parse.c, record_parse.c).  Unit-tested without
 * SLURM (tests/cluster/test_plan.c, test_headruns.c).
 *
 * The layers, each calling only down (scripts/import-graph.py checks that
 * no cycle is longer than 2 files): cluster_plan.h -> cluster_session.h ->
 * cluster_steps.h -> cluster.h (the verbs).
 */
#ifndef PBX_CLUSTER_PLAN_H
#define PBX_CLUSTER_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "store/store.h"
#include "util/err.h"

struct pbx_cluster; /* cluster_session.h: a plan only reads its fields */

/* -------------------------------------------------------- spend_plan.c */

/* What a cluster has cost (docs/cost.md), from its node runs. */
struct pbx_spend {
	int64_t spent;   /* 1e-9 units of currency, priced runs only */
	int64_t hourly;  /* the running nodes' price an hour now */
	int64_t seconds; /* node-seconds, priced or not */
	size_t runs, running;
	size_t unpriced;  /* runs whose price was not known (not in spent) */
	char currency[8]; /* "" when no run was priced */
};

struct pbx_budget {
	int64_t budget; /* the template's, nano-units */
	struct pbx_spend spend;
	int percent; /* spend.spent / budget, rounded down */
};

/* ---------------------------------------------------- headruns_parse.c */

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

/* ------------------------------------------------------ record_parse.c */

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

/* Reads and validates record text[0..len) into *rec (owned by the caller,
 * pbx_cluster_record_release, on success only); errors (PBX_EXIT_USAGE)
 * read "WHAT: FIELD: problem", FIELD a path such as nodes[2].address. */
int pbx_cluster_record_parse(const char *text, size_t len, const char *what,
			     struct pbx_cluster_record *rec, struct pbx_err *err);
void pbx_cluster_record_release(struct pbx_cluster_record *rec);

/* --------------------------------------------------------- head_plan.c */

/* 1 when c's head deletes the cluster itself (autostop_action: delete,
 * docs/autostop.md): only then does a harvest tell the head what is home. */
int pbx_head_deletes(const struct pbx_cluster *c);
/* 1 when data source `key` (normalised: "gs://BUCKET/PREFIX/", ...) is
 * staged by c's head with its own identity (docs/data.md, "Credentials"):
 * a bucket of the head's cloud, a head with a service account (gce) or an
 * instance profile (aws), and this pbx not that head. */
int pbx_head_stages_data(const struct pbx_cluster *c, const char *key);

/* ----------------------------------------------------- template_json.c */

/* One line saying which address blocks reach the nodes' port 22 and how
 * the nodes without a public address are reached, from a template record
 * (pbx_template_json: cloud, ssh_from, compute_external_ips).  Caller
 * frees. */
char *pbx_template_ssh_exposure(const char *json);

#endif
