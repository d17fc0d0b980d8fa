/*
 * store.h - everything pbx knows, in one SQLite database ($PBX_HOME/pbx.db).
 *
 * WAL mode, a busy timeout, forward-only migrations versioned with
 * PRAGMA user_version (see migrations.c), and one transaction per logical
 * change (write transactions start with BEGIN IMMEDIATE so two pbx processes
 * never deadlock on a lock upgrade).  The connection is opened in
 * serialized mode, so one struct pbx_store may be shared by threads.
 *
 * Tables: clusters, nodes, events (the audit log), host_keys.  Later
 * modules (experiments, tasks, metrics) add their own migrations.
 */
#ifndef PBX_STORE_STORE_H
#define PBX_STORE_STORE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

struct pbx_store;

/* Opens (creating and migrating) the database.  *out is owned by the
 * caller; release with pbx_store_close(). */
int pbx_store_open(const char *path, struct pbx_store **out, struct pbx_err *err);
void pbx_store_close(struct pbx_store *st);
/* The raw handle, for modules with their own queries; owned by the store. */
sqlite3 *pbx_store_db(struct pbx_store *st);
int pbx_store_schema_version(struct pbx_store *st);

/* Write transactions.  begin is BEGIN IMMEDIATE (waits up to the busy
 * timeout); rollback never fails. */
int pbx_store_begin(struct pbx_store *st, struct pbx_err *err);
int pbx_store_commit(struct pbx_store *st, struct pbx_err *err);
void pbx_store_rollback(struct pbx_store *st);
/* Runs one SQL statement without results (DDL, simple updates). */
int pbx_store_exec(struct pbx_store *st, const char *sql, struct pbx_err *err);

/* Appends an audit event (cluster_id 0 = none; st NULL: nothing).  Never
 * fails the caller: a failure to log is reported on the next store error. */
void pbx_store_event(struct pbx_store *st, int64_t cluster_id, const char *kind, const char *fmt,
		     ...) __attribute__((format(printf, 4, 5)));

/* ---------------------------------------------------------------- clusters */

struct pbx_cluster_row {
	int64_t id;
	char *name;               /* unique among clusters not deleted */
	char *uid;                /* the id its cloud resources carry (unique; see
	                         pbx_cluster_uid_new in src/cloud/provider.h) */
	char *cloud;              /* "local", "gce", "aws" */
	char *state;              /* "starting", "up", "degraded", "stopping", "deleted" */
	char *template_json;      /* the template it was built from, as JSON */
	int slot;                 /* provider-specific allocation (local: address/port block) */
	char *template_name;      /* template it was started from; NULL = its own name */
	int64_t created, updated; /* unix seconds */
};

/* Fills *row (owned by the caller: pbx_cluster_row_free) for the live
 * cluster `name`.  Returns 0, or -1 with code PBX_EXIT_NOTFOUND when none. */
int pbx_store_cluster_get(struct pbx_store *st, const char *name, struct pbx_cluster_row *row,
			  struct pbx_err *err);
/* How many times this process read a cluster's row by name
 * (pbx_store_cluster_get), for `PBX_STATS=1`: a verb resolves its cluster
 * once (src/cluster/target.c). */
unsigned long pbx_store_cluster_reads(void);
/* Creates a live cluster row with cluster id `uid` (made by the caller);
 * *id receives its store number. */
int pbx_store_cluster_create(struct pbx_store *st, const char *name, const char *uid,
			     const char *cloud, const char *template_json, int slot, int64_t *id,
			     struct pbx_err *err);
int pbx_store_cluster_set_state(struct pbx_store *st, int64_t id, const char *state,
				struct pbx_err *err);
/* Records the template a cluster was started from. */
int pbx_store_cluster_set_template(struct pbx_store *st, int64_t id, const char *tmpl,
				   struct pbx_err *err);
/* Replaces the JSON of what the cluster is built from (a resize changes
 * its group counts). */
int pbx_store_cluster_set_template_json(struct pbx_store *st, int64_t id, const char *json,
					struct pbx_err *err);
/* All clusters (deleted ones too when include_deleted), by name.  *rows is
 * owned by the caller: pbx_cluster_rows_free(*rows, *n). */
int pbx_store_cluster_list(struct pbx_store *st, int include_deleted, struct pbx_cluster_row **rows,
			   size_t *n, struct pbx_err *err);
/* The row (deleted or not) whose cluster id is `uid`; *row owned by the
 * caller (pbx_cluster_row_free).  -1 with PBX_EXIT_NOTFOUND when none. */
int pbx_store_cluster_get_uid(struct pbx_store *st, const char *uid, struct pbx_cluster_row *row,
			      struct pbx_err *err);
/* For `pbx cluster adopt`: writes row's name, uid, cloud, state,
 * template_json, slot, template_name and created as they are: over the
 * row of cluster id row->uid when there is one, else as a new row.  *id
 * gets its store number.  The caller checks first that neither the name
 * nor the id is another cluster's. */
int pbx_store_cluster_put(struct pbx_store *st, const struct pbx_cluster_row *row, int64_t *id,
			  struct pbx_err *err);
/* Slots used by live clusters of `cloud`: the lowest free slot >= `from`. */
int pbx_store_free_slot(struct pbx_store *st, const char *cloud, int from, int *slot,
			struct pbx_err *err);
void pbx_cluster_row_free(struct pbx_cluster_row *row);
void pbx_cluster_rows_free(struct pbx_cluster_row *rows, size_t n);

/* ------------------------------------------------------------------- nodes */

struct pbx_node_row {
	int64_t id;
	int64_t cluster_id;
	char *name;    /* SLURM node name ("head", "gpu1", ...) */
	char *role;    /* "head" or "compute" */
	char *address; /* the node's private address (SLURM's NodeAddr); pbx
	                       connects to it directly, or through the head when
	                       the head has a public_address and this node not */
	int ssh_port;
	int gpus;
	char *instance_id;    /* cloud instance id; may be NULL */
	char *root;           /* node's root prefix ("" on cloud nodes, a private
	                       directory for local node bodies) */
	char *state;          /* "planned", "creating" (the cloud accepted it),
	                       "running", "bootstrapping", "up", "down", "failed",
	                       "deleted" */
	char *zone;           /* cloud zone; may be NULL */
	char *public_address; /* address reachable from here (the head); may be NULL */
	char *operation;      /* the cloud operation creating it; may be NULL */
	char *instance_uid;   /* an identity the cloud never gives another
	                       instance (pbx_instance's uid: Compute Engine's
	                       numeric id, EC2's instance id), as last seen
	                       running; NULL when unknown (a new instance until
	                       its poll or a list sees it run) */
};

/* Inserts or updates (by cluster_id + name) a node. */
int pbx_store_node_put(struct pbx_store *st, const struct pbx_node_row *node, struct pbx_err *err);
int pbx_store_node_set_state(struct pbx_store *st, int64_t cluster_id, const char *name,
			     const char *state, struct pbx_err *err);
/* Removes a node's row (a node a resize deleted). */
int pbx_store_node_delete(struct pbx_store *st, int64_t cluster_id, const char *name,
			  struct pbx_err *err);
/* Nodes of a cluster, head first then by name; caller frees with
 * pbx_node_rows_free. */
int pbx_store_node_list(struct pbx_store *st, int64_t cluster_id, struct pbx_node_row **rows,
			size_t *n, struct pbx_err *err);
void pbx_node_rows_free(struct pbx_node_row *rows, size_t n);
/* Frees one row's strings (not the row itself) and zeroes it. */
void pbx_node_row_release(struct pbx_node_row *r);

/* --------------------------------------------------------------- host keys */

/* Returns 1 and fills *type / *key_b64 (caller frees) when a key is pinned
 * for `hostport`, 0 when none, -1 on error. */
int pbx_store_hostkey_get(struct pbx_store *st, const char *hostport, char **type, char **key_b64,
			  struct pbx_err *err);
int pbx_store_hostkey_put(struct pbx_store *st, const char *hostport, const char *type,
			  const char *key_b64, struct pbx_err *err);
/* Forgets the pinned key; *removed = number of keys removed. */
int pbx_store_hostkey_forget(struct pbx_store *st, const char *hostport, int *removed,
			     struct pbx_err *err);

/* Forgets every key whose name starts with `prefix`. */
int pbx_store_hostkey_forget_prefix(struct pbx_store *st, const char *prefix, int *removed,
				    struct pbx_err *err);

/* A pinned key: the name it is pinned under and the key. */
struct pbx_hostkey_row {
	char *hostport, *type, *key_b64;
};
/* Every key whose name starts with `prefix`, by name; *rows owned by the
 * caller: pbx_hostkey_rows_free(*rows, *n). */
int pbx_store_hostkey_list_prefix(struct pbx_store *st, const char *prefix,
				  struct pbx_hostkey_row **rows, size_t *n, struct pbx_err *err);
void pbx_hostkey_rows_free(struct pbx_hostkey_row *rows, size_t n);

/* ------------------------------------------------------------------ images */

/* A prebaked image (`pbx image build`, src/cluster/image.c).  The row is
 * written before anything is made in the cloud; `uid` is what the builder
 * instance carries as its pbx-cluster-id label. */
struct pbx_image_row {
	int64_t id;
	char *name; /* the cloud image's name; unique among live rows
	                         of a cloud and project */
	char *uid;  /* 32 hex digits (pbx_cluster_uid_new) */
	char *cloud, *project, *zone;
	char *source_image;  /* what the builder booted from */
	char *template_name; /* the template it was built from */
	char *link;          /* projects/P/global/images/NAME, "" until made */
	char *state;         /* "building", "ready", "failed", "deleted" */
	char *detail;        /* the stage reached, or why it failed; may be "" */
	int64_t created, updated;
};

/* Inserts `row` (its name, uid, cloud, project, zone, source_image,
 * template_name) in state "building"; -1 with PBX_EXIT_USAGE when a live
 * row of that name exists.  *id gets its store number. */
int pbx_store_image_create(struct pbx_store *st, const struct pbx_image_row *row, int64_t *id,
			   struct pbx_err *err);
/* The live (not deleted) image `name` of any cloud; *row owned by the
 * caller (pbx_image_row_free).  PBX_EXIT_NOTFOUND when none. */
int pbx_store_image_get(struct pbx_store *st, const char *name, struct pbx_image_row *row,
			struct pbx_err *err);
/* Sets state, detail (may be NULL: unchanged) and link (may be NULL). */
int pbx_store_image_set(struct pbx_store *st, int64_t id, const char *state, const char *detail,
			const char *link, struct pbx_err *err);
/* Live images (deleted ones too when include_deleted), by name; *rows
 * owned by the caller: pbx_image_rows_free(*rows, *n). */
int pbx_store_image_list(struct pbx_store *st, int include_deleted, struct pbx_image_row **rows,
			 size_t *n, struct pbx_err *err);
void pbx_image_row_free(struct pbx_image_row *row);
void pbx_image_rows_free(struct pbx_image_row *rows, size_t n);

/* ------------------------------------------------------------------ prices */

/*
 * The price cache (prices.c; what src/cloud/price fetches).  One price of
 * a catalogue; `item` names what is priced:
 *   gce: "core:FAMILY" (a vCPU-hour, FAMILY lowercase: n1, n2, e2, a2, ...),
 *        "ram:FAMILY" (a GiB-hour), "gpu:TYPE" (a GPU-hour, TYPE the
 *        accelerator type, e.g. nvidia-tesla-t4);
 *   aws: "type:INSTANCE_TYPE" (an instance-hour).
 */
struct pbx_price_item {
	char *item;
	int spot;         /* 1: the Spot / preemptible price */
	int64_t nanos;    /* per unit, in 1e-9 of the currency */
	char currency[8]; /* ISO 4217, e.g. "USD" */
};
void pbx_price_items_free(struct pbx_price_item *v, size_t n);

/* Replaces what fetch `scope` of (cloud, region) brought before (e.g.
 * "skus:USD", "type:m5.large") with items v[0..n), recording it as
 * fetched at `fetched` (unix s); one transaction. */
int pbx_store_prices_put(struct pbx_store *st, const char *cloud, const char *region,
			 const char *scope, int64_t fetched, const struct pbx_price_item *v,
			 size_t n, struct pbx_err *err);
/* When fetch `scope` of (cloud, region) was made: *fetched 0 when never. */
int pbx_store_prices_fetched(struct pbx_store *st, const char *cloud, const char *region,
			     const char *scope, int64_t *fetched, struct pbx_err *err);
/* The cached price of `item` (spot or not) in (cloud, region): 0 with
 * *nanos and currency[8], 1 when none is cached, -1 with err. */
int pbx_store_price_get(struct pbx_store *st, const char *cloud, const char *region,
			const char *item, int spot, int64_t *nanos, char currency[8],
			struct pbx_err *err);

/* --------------------------------------------------------------- node runs */

/*
 * Each node's running intervals (runs.c; src/cluster/spend.c decides when
 * one begins or ends).  A run is open (ended 0) while its instance runs.
 */
struct pbx_node_run {
	int64_t id;
	char *node;       /* SLURM node name */
	int64_t started;  /* unix s */
	int64_t ended;    /* unix s; 0 = still running */
	int64_t nanos;    /* its price an hour when it began; -1 = unknown */
	char currency[8]; /* "" when unknown */
};
void pbx_node_runs_free(struct pbx_node_run *v, size_t n);
/* Every run of cluster `cluster_id`, oldest first; *v owned by the caller
 * (pbx_node_runs_free). */
int pbx_store_runs_list(struct pbx_store *st, int64_t cluster_id, struct pbx_node_run **v,
			size_t *n, struct pbx_err *err);
/* Begins a run of `node` at `started` (nanos -1: price unknown). */
int pbx_store_run_open(struct pbx_store *st, int64_t cluster_id, const char *node, int64_t started,
		       int64_t nanos, const char *currency, struct pbx_err *err);
/* Adds a run of `node` from `started` to `ended` (0: open; never before
 * it began), priced as pbx_store_run_open's. */
int pbx_store_run_add(struct pbx_store *st, int64_t cluster_id, const char *node, int64_t started,
		      int64_t ended, int64_t nanos, const char *currency, struct pbx_err *err);
/* Ends run `id` at `ended` (never before it began). */
int pbx_store_run_close(struct pbx_store *st, int64_t id, int64_t ended, struct pbx_err *err);
/* Sets run `id`'s interval to [started, ended] (ended 0: open again;
 * never before it began); its price stays.  An open run's node must have
 * no other open run (the store refuses a second). */
int pbx_store_run_set(struct pbx_store *st, int64_t id, int64_t started, int64_t ended,
		      struct pbx_err *err);
/* Removes run `id`. */
int pbx_store_run_delete(struct pbx_store *st, int64_t id, struct pbx_err *err);

#endif
