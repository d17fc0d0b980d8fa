/*
 * migrations.c - the store's schema, as forward-only migrations.
 *
 * migrations[i] takes the schema from user_version i to i+1.  Never edit a
 * released migration: append a new one.  Each runs in its own transaction
 * together with the user_version bump, so a crash leaves the old or the new
 * schema, never half of one.
 */
#include "store/store_internal.h"

#include <stdio.h>

static const char *const migrations[] = {
	/* 1: clusters, nodes, events, host keys */
	"CREATE TABLE clusters ("
	"  id INTEGER PRIMARY KEY,"
	"  name TEXT NOT NULL,"
	"  cloud TEXT NOT NULL,"
	"  state TEXT NOT NULL,"
	"  template_json TEXT NOT NULL,"
	"  slot INTEGER NOT NULL DEFAULT 0,"
	"  created INTEGER NOT NULL,"
	"  updated INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX clusters_live_name ON clusters(name) WHERE state != 'deleted';"
	"CREATE TABLE nodes ("
	"  id INTEGER PRIMARY KEY,"
	"  cluster_id INTEGER NOT NULL REFERENCES clusters(id),"
	"  name TEXT NOT NULL,"
	"  role TEXT NOT NULL,"
	"  address TEXT NOT NULL,"
	"  ssh_port INTEGER NOT NULL,"
	"  gpus INTEGER NOT NULL DEFAULT 0,"
	"  instance_id TEXT,"
	"  root TEXT NOT NULL DEFAULT '',"
	"  state TEXT NOT NULL,"
	"  UNIQUE(cluster_id, name));"
	"CREATE TABLE events ("
	"  id INTEGER PRIMARY KEY,"
	"  time INTEGER NOT NULL,"
	"  cluster_id INTEGER,"
	"  kind TEXT NOT NULL,"
	"  detail TEXT NOT NULL);"
	"CREATE INDEX events_cluster ON events(cluster_id, time);"
	"CREATE TABLE host_keys ("
	"  hostport TEXT PRIMARY KEY,"
	"  key_type TEXT NOT NULL,"
	"  key_b64 TEXT NOT NULL,"
	"  first_seen INTEGER NOT NULL);",

	/* 2: experiments - packages, their submissions to clusters, the job
	 * arrays of each submission, and one row per task */
	"CREATE TABLE packages ("
	"  id TEXT PRIMARY KEY,"           /* full SHA-256 content id */
	"  short_id TEXT NOT NULL UNIQUE," /* first 12 hex digits */
	"  name TEXT NOT NULL,"
	"  experiment_path TEXT NOT NULL,"
	"  experiment_text TEXT NOT NULL,"
	"  git_commit TEXT,"
	"  git_diff TEXT,"
	"  user TEXT NOT NULL,"
	"  host TEXT NOT NULL,"
	"  ntasks INTEGER NOT NULL,"
	"  created INTEGER NOT NULL);"
	"CREATE TABLE submissions ("
	"  id INTEGER PRIMARY KEY,"
	"  package_id TEXT NOT NULL REFERENCES packages(id),"
	"  cluster_id INTEGER NOT NULL REFERENCES clusters(id),"
	"  remote_dir TEXT NOT NULL,"
	"  resources_json TEXT NOT NULL,"
	"  pushed INTEGER NOT NULL DEFAULT 0,"
	"  state TEXT NOT NULL," /* submitting, submitted, partial */
	"  created INTEGER NOT NULL,"
	"  UNIQUE(package_id, cluster_id));"
	"CREATE TABLE arrays ("
	"  id INTEGER PRIMARY KEY,"
	"  submission_id INTEGER NOT NULL REFERENCES submissions(id),"
	"  first_task INTEGER NOT NULL,"
	"  ntasks INTEGER NOT NULL,"
	"  spec TEXT NOT NULL,"  /* the --array value, e.g. 0-999%10 or 3,7 */
	"  job_id TEXT,"         /* NULL until sbatch answered */
	"  state TEXT NOT NULL," /* planned, submitted, failed */
	"  created INTEGER NOT NULL);"
	"CREATE INDEX arrays_submission ON arrays(submission_id);"
	"CREATE TABLE tasks ("
	"  submission_id INTEGER NOT NULL REFERENCES submissions(id),"
	"  idx INTEGER NOT NULL,"
	"  params_json TEXT NOT NULL,"
	"  state TEXT NOT NULL," /* NEW, PENDING, RUNNING, COMPLETED, FAILED, ... */
	"  exit_code INTEGER,"
	"  node TEXT,"
	"  attempt INTEGER NOT NULL DEFAULT 0,"
	"  start_time INTEGER,"
	"  end_time INTEGER,"
	"  job_id TEXT,"
	"  submits INTEGER NOT NULL DEFAULT 0," /* how often pbx submitted it */
	"  updated INTEGER NOT NULL,"
	"  PRIMARY KEY(submission_id, idx)) WITHOUT ROWID;",

	/* 3: results - metrics ingested from tasks' metrics.jsonl, and the
	 * files harvest has brought home (so a second harvest fetches nothing) */
	"CREATE TABLE metrics ("
	"  submission_id INTEGER NOT NULL REFERENCES submissions(id),"
	"  idx INTEGER NOT NULL,"
	"  name TEXT NOT NULL,"
	"  step INTEGER NOT NULL,"
	"  value REAL," /* NULL for null / NaN in the file */
	"  PRIMARY KEY(submission_id, idx, name, step)) WITHOUT ROWID;"
	"CREATE TABLE harvested ("
	"  submission_id INTEGER NOT NULL REFERENCES submissions(id),"
	"  idx INTEGER NOT NULL,"
	"  path TEXT NOT NULL," /* relative to the task directory */
	"  size INTEGER NOT NULL,"
	"  mtime INTEGER NOT NULL," /* the remote file's, as listed */
	"  PRIMARY KEY(submission_id, idx, path)) WITHOUT ROWID;",

	/* 4: `pbx cancel` remembers what it cancelled, so a task whose job is
	 * gone before its wrapper could write CANCELLED reads CANCELLED, not
	 * NODE_FAIL or MISSING; a new submission clears it */
	"ALTER TABLE tasks ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;",

	/* 5: clouds - where each node lives (zone), its public address (the
	 * head's, for SSH from here; `address` is the private one SLURM uses),
	 * the cloud operation creating it, so a crash mid-create leaves every
	 * accepted instance recorded; the template a cluster was started from
	 * (`start -t T NAME` finds T again) */
	"ALTER TABLE nodes ADD COLUMN zone TEXT;"
	"ALTER TABLE nodes ADD COLUMN public_address TEXT;"
	"ALTER TABLE nodes ADD COLUMN operation TEXT;"
	"ALTER TABLE clusters ADD COLUMN template TEXT;",

	/* 6: cluster ids - the id every cloud resource of a cluster carries
	 * (label pbx-cluster-id), unique in the store.  A new cluster gets 128
	 * random bits as hex before anything is created; a cluster made
	 * before this migration keeps the id its resources already carry: its
	 * store number, which pbx put on them as pbx-cluster-id (a "legacy"
	 * id, see pbx_cluster_uid_legacy in src/cloud/provider.h) */
	"ALTER TABLE clusters ADD COLUMN uid TEXT NOT NULL DEFAULT '';"
	"UPDATE clusters SET uid = CAST(id AS TEXT);"
	"CREATE UNIQUE INDEX clusters_uid ON clusters(uid);",

	/* 7: prebaked images (`pbx image build`) - a row is written with
	 * state 'building' and the build's id before anything is made in a
	 * cloud, so a build killed at any point leaves what it made findable
	 * (the builder instance carries the id as its pbx-cluster-id label);
	 * state: building, ready, failed, deleted */
	"CREATE TABLE images ("
	"  id INTEGER PRIMARY KEY,"
	"  name TEXT NOT NULL,"
	"  uid TEXT NOT NULL UNIQUE,"
	"  cloud TEXT NOT NULL,"
	"  project TEXT NOT NULL,"
	"  zone TEXT NOT NULL DEFAULT '',"
	"  source_image TEXT NOT NULL,"
	"  template TEXT NOT NULL,"
	"  link TEXT NOT NULL DEFAULT ''," /* projects/P/global/images/NAME once made */
	"  state TEXT NOT NULL,"
	"  detail TEXT NOT NULL DEFAULT ''," /* why it failed, or the stage it reached */
	"  created INTEGER NOT NULL,"
	"  updated INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX images_live ON images(cloud, project, name) WHERE state != 'deleted';",

	/* 8: the price cache (src/cloud/price, docs/cost.md) - what each fetch
	 * of a cloud's price catalogue brought (scope: "skus:CURRENCY" for a
	 * Compute Engine region's SKUs, "type:T" for one EC2 instance type),
	 * and when, so a catalogue older than prices.max_age is fetched again
	 * and pbx works offline from the rest; nanos: the price per unit in
	 * 1e-9 of the currency */
	"CREATE TABLE price_fetches ("
	"  cloud TEXT NOT NULL,"
	"  region TEXT NOT NULL,"
	"  scope TEXT NOT NULL,"
	"  fetched INTEGER NOT NULL,"
	"  PRIMARY KEY(cloud, region, scope)) WITHOUT ROWID;"
	"CREATE TABLE prices ("
	"  cloud TEXT NOT NULL,"
	"  region TEXT NOT NULL,"
	"  scope TEXT NOT NULL,"
	"  item TEXT NOT NULL,"
	"  spot INTEGER NOT NULL,"
	"  nanos INTEGER NOT NULL,"
	"  currency TEXT NOT NULL,"
	"  PRIMARY KEY(cloud, region, item, spot, scope)) WITHOUT ROWID;",
	/* 9: spend (src/cluster/spend.c, docs/cost.md) - each node's running
	 * intervals: started when pbx saw its instance made or powered on,
	 * ended (NULL while it runs) when it was deleted or powered off (the
	 * cloud's own stop time where it gives one); nanos: its price an hour
	 * when the interval began, in 1e-9 of `currency`; NULL when unknown */
	"CREATE TABLE node_runs ("
	"  id INTEGER PRIMARY KEY,"
	"  cluster_id INTEGER NOT NULL REFERENCES clusters(id),"
	"  node TEXT NOT NULL,"
	"  started INTEGER NOT NULL,"
	"  ended INTEGER,"
	"  nanos INTEGER,"
	"  currency TEXT NOT NULL DEFAULT '');"
	"CREATE INDEX node_runs_cluster ON node_runs(cluster_id, node);"
	/* one open run a node: two verbs closing a cluster at once cannot
	 * both begin one (the second insert fails, and is ignored) */
	"CREATE UNIQUE INDEX node_runs_open ON node_runs(cluster_id, node) WHERE ended IS NULL;",

	/* 10: each node's instance_uid - an identity its cloud never gives
	 * another instance (Compute Engine's numeric id; EC2's instance id),
	 * so the user's pbx keeps a woken node's host-key pins while the
	 * instance stays the same (src/cluster/awake.c).  An EC2 node's is its
	 * instance id, which that pbx already compared: its pins stay across
	 * the upgrade; a Compute Engine node's is learnt at the next poll or
	 * list */
	"ALTER TABLE nodes ADD COLUMN instance_uid TEXT;"
	"UPDATE nodes SET instance_uid = instance_id WHERE instance_id LIKE 'i-%'"
	" AND cluster_id IN (SELECT id FROM clusters WHERE cloud = 'aws');",

	/* 11: a submission's environment (the experiment's environment:) as
	 * `pbx state` last read it on the cluster: pbx-env.sh's status line,
	 * "READY KEY" or "FAILED REASON"; NULL: none, or not read yet */
	"ALTER TABLE submissions ADD COLUMN environment TEXT;",

	/* 12: pooled results (store/pool.h, `pbx pull`): one row per task
	 * object pulled from a pool, its provenance record kept whole, and
	 * its metric points */
	"CREATE TABLE pool_tasks ("
	"  pool TEXT NOT NULL,"
	"  object TEXT NOT NULL,"
	"  version TEXT NOT NULL,"
	"  publisher TEXT NOT NULL,"
	"  package_id TEXT NOT NULL,"
	"  experiment TEXT NOT NULL,"
	"  idx INTEGER NOT NULL,"
	"  params_json TEXT NOT NULL,"
	"  state TEXT NOT NULL,"
	"  start_time INTEGER,"
	"  end_time INTEGER,"
	"  record_json TEXT NOT NULL,"
	"  pulled INTEGER NOT NULL,"
	"  PRIMARY KEY(pool, object));"
	"CREATE TABLE pool_metrics ("
	"  pool TEXT NOT NULL,"
	"  object TEXT NOT NULL,"
	"  name TEXT NOT NULL,"
	"  step INTEGER NOT NULL,"
	"  value REAL,"
	"  PRIMARY KEY(pool, object, name, step)) WITHOUT ROWID;",
};

#define NMIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))

int pbx_store_schema_version(struct pbx_store *st)
{
	sqlite3_stmt *stmt;
	int v = -1;
	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &stmt, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(stmt) == SQLITE_ROW)
		v = sqlite3_column_int(stmt, 0);
	sqlite3_finalize(stmt);
	return v;
}

static int store_apply(struct pbx_store *st, int to, struct pbx_err *err)
{
	char bump[64];
	if (pbx_store_exec(st, migrations[to - 1], err) < 0)
		return -1;
	snprintf(bump, sizeof(bump), "PRAGMA user_version=%d", to);
	return pbx_store_exec(st, bump, err);
}

int pbx_store_migrate(struct pbx_store *st, struct pbx_err *err)
{
	int v;
	if (pbx_store_begin(st, err) < 0)
		return -1;
	v = pbx_store_schema_version(st);
	if (v < 0) {
		pbx_store_rollback(st);
		return pbx_store_fail(st, err, "read schema version");
	}
	if (v > NMIGRATIONS) {
		pbx_store_rollback(st);
		return pbx_err_set(err,
				   "store %s has schema version %d, newer than this pbx (%d); "
				   "upgrade pbx",
				   st->path, v, NMIGRATIONS);
	}
	for (; v < NMIGRATIONS; v++) {
		if (store_apply(st, v + 1, err) < 0) {
			pbx_store_rollback(st);
			return pbx_err_prefix(err, "migration to schema %d failed", v + 1);
		}
	}
	return pbx_store_commit(st, err);
}
