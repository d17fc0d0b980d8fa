/*
 * test_store.c - the SQLite store: migrations, cluster and node rows, host
 * keys, and two processes writing at the same time without "database is
 * locked" failures.
 */
#include "common/tap.h"
#include "store/experiments.h"
#include "store/store.h"
#include "util/xalloc.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char dbpath[256];

#define UID_A "0123456789abcdef0123456789abcdef"
#define UID_B "fedcba9876543210fedcba9876543210"
#define UID_C "00000000000000000000000000000001"

static void test_schema_and_clusters(void)
{
	struct pbx_store *st;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster_row row, *rows;
	size_t n;
	int64_t id, id2;
	int slot;

	ok(pbx_store_open(dbpath, &st, &err) == 0, "store opens: %s", err.msg);
	ok(pbx_store_schema_version(st) == 12, "schema version is 12 (all migrations applied)");
	ok(pbx_store_cluster_get(st, "a", &row, &err) < 0 && err.code == PBX_EXIT_NOTFOUND,
	   "missing cluster is NOTFOUND");
	is_str(err.msg, "no cluster named 'a'", "missing cluster message");
	ok(pbx_store_free_slot(st, "local", 0, &slot, &err) == 0 && slot == 0, "first slot is 0");
	ok(pbx_store_cluster_create(st, "a", UID_A, "local", "{}", 0, &id, &err) == 0, "create a");
	ok(pbx_store_cluster_create(st, "a", UID_C, "local", "{}", 1, &id2, &err) < 0,
	   "second live cluster with the same name refused");
	ok(pbx_store_cluster_create(st, "b", UID_A, "local", "{}", 1, &id2, &err) < 0,
	   "a second cluster with the same id refused");
	ok(pbx_store_cluster_create(st, "b", UID_B, "local", "{}", 1, &id2, &err) == 0, "create b");
	ok(pbx_store_free_slot(st, "local", 0, &slot, &err) == 0 && slot == 2, "next slot is 2");
	ok(pbx_store_cluster_set_state(st, id, "deleted", &err) == 0, "delete a");
	ok(pbx_store_free_slot(st, "local", 0, &slot, &err) == 0 && slot == 0, "slot 0 reused");
	ok(pbx_store_free_slot(st, "local", 1, &slot, &err) == 0 && slot == 2,
	   "from 1: 2 (1 is b's; another home holds 0)");
	ok(pbx_store_free_slot(st, "local", 3, &slot, &err) == 0 && slot == 3, "from 3: 3");
	ok(pbx_store_cluster_create(st, "a", UID_C, "local", "{\"x\":1}", 0, &id, &err) == 0,
	   "name reusable after delete");
	ok(pbx_store_cluster_get(st, "a", &row, &err) == 0 &&
		   !strcmp(row.template_json, "{\"x\":1}") && !strcmp(row.state, "starting") &&
		   !row.template_name && !strcmp(row.uid, UID_C),
	   "get returns the live row, with its id");
	pbx_cluster_row_free(&row);
	ok(pbx_store_cluster_set_template(st, id, "gce-gpu", &err) == 0 &&
		   pbx_store_cluster_get(st, "a", &row, &err) == 0 && row.template_name &&
		   !strcmp(row.template_name, "gce-gpu"),
	   "the template a cluster was started from is kept");
	pbx_cluster_row_free(&row);
	ok(pbx_store_cluster_list(st, 0, &rows, &n, &err) == 0 && n == 2, "two live clusters");
	pbx_cluster_rows_free(rows, n);
	ok(pbx_store_cluster_list(st, 1, &rows, &n, &err) == 0 && n == 3, "three with deleted");
	pbx_cluster_rows_free(rows, n);
	pbx_store_close(st);
}

static void test_nodes_and_hostkeys(void)
{
	struct pbx_store *st;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_node_row node = { 0 }, *rows;
	char *type, *key;
	size_t n;
	int removed;

	pbx_store_open(dbpath, &st, &err);
	node.cluster_id = 1;
	node.name = "node2";
	node.role = "compute";
	node.address = "127.0.1.3";
	node.ssh_port = 22;
	ok(pbx_store_node_put(st, &node, &err) == 0, "put node2");
	node.name = "head";
	node.role = "head";
	node.address = "127.0.1.1";
	ok(pbx_store_node_put(st, &node, &err) == 0, "put head");
	node.name = "node10";
	node.role = "compute";
	node.address = "127.0.1.11";
	ok(pbx_store_node_put(st, &node, &err) == 0, "put node10");
	node.address = "127.0.1.12";
	node.state = "up";
	node.zone = "us-central1-a";
	node.public_address = "127.0.2.12";
	node.operation = "operation-123";
	node.instance_id = "4711";
	node.instance_uid = "4616337213435693569";
	ok(pbx_store_node_put(st, &node, &err) == 0, "update node10");
	ok(pbx_store_node_list(st, 1, &rows, &n, &err) == 0 && n == 3, "three nodes");
	ok(n == 3 && !strcmp(rows[0].name, "head") && !strcmp(rows[1].name, "node2") &&
		   !strcmp(rows[2].name, "node10") && !strcmp(rows[2].address, "127.0.1.12") &&
		   !strcmp(rows[2].state, "up"),
	   "head first, then natural order; update applied");
	ok(n == 3 && rows[2].zone && !strcmp(rows[2].zone, "us-central1-a") &&
		   rows[2].public_address && !strcmp(rows[2].public_address, "127.0.2.12") &&
		   rows[2].operation && !strcmp(rows[2].operation, "operation-123") &&
		   !strcmp(rows[2].instance_id, "4711") && !rows[0].zone && !rows[0].public_address,
	   "zone, public address, operation, instance id kept");
	ok(n == 3 && rows[2].instance_uid && !strcmp(rows[2].instance_uid, "4616337213435693569") &&
		   !rows[0].instance_uid,
	   "the instance's uid kept; none where none was put");
	pbx_node_rows_free(rows, n);
	node.instance_uid = NULL;
	ok(pbx_store_node_put(st, &node, &err) == 0 &&
		   pbx_store_node_list(st, 1, &rows, &n, &err) == 0 && n == 3 &&
		   !rows[2].instance_uid,
	   "a put without a uid clears it (a new instance's is not known yet)");
	pbx_node_rows_free(rows, n);

	ok(pbx_store_hostkey_get(st, "127.0.1.1:22", &type, &key, &err) == 0, "no key yet");
	ok(pbx_store_hostkey_put(st, "127.0.1.1:22", "ssh-ed25519", "AAAA", &err) == 0, "pin");
	ok(pbx_store_hostkey_put(st, "127.0.1.1:22", "ssh-ed25519", "BBBB", &err) == 0,
	   "second put keeps the first key");
	ok(pbx_store_hostkey_get(st, "127.0.1.1:22", &type, &key, &err) == 1 &&
		   !strcmp(key, "AAAA"),
	   "pinned key returned");
	free(type);
	free(key);
	ok(pbx_store_hostkey_forget(st, "127.0.1.1:22", &removed, &err) == 0 && removed == 1,
	   "forget");
	pbx_store_close(st);
}

/* Each writer does many short write transactions, as concurrent pbx
 * commands do; none may fail with SQLITE_BUSY. */
static int writer(int which, int rounds)
{
	struct pbx_store *st;
	struct pbx_err err = PBX_ERR_INIT;
	int i;
	if (pbx_store_open(dbpath, &st, &err) < 0) {
		fprintf(stderr, "writer %d: %s\n", which, err.msg);
		return 1;
	}
	for (i = 0; i < rounds; i++) {
		struct pbx_node_row node = { 0 };
		char name[32];
		snprintf(name, sizeof(name), "w%d-%d", which, i);
		node.cluster_id = 1;
		node.name = name;
		node.role = "compute";
		node.address = "127.0.1.9";
		node.ssh_port = 22;
		if (pbx_store_begin(st, &err) < 0 || pbx_store_node_put(st, &node, &err) < 0 ||
		    pbx_store_cluster_set_state(st, 2, "up", &err) < 0 ||
		    pbx_store_commit(st, &err) < 0) {
			fprintf(stderr, "writer %d round %d: %s\n", which, i, err.msg);
			pbx_store_close(st);
			return 1;
		}
	}
	pbx_store_close(st);
	return 0;
}

/* Runs SQL on a raw database file (building a store as an older pbx left it). */
static int raw_sql(const char *path, const char *sql)
{
	sqlite3 *db;
	int rc = sqlite3_open(path, &db) == SQLITE_OK &&
		 sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
	sqlite3_close(db);
	return rc;
}

/* A store of schema 5 (clusters without ids) is migrated: each cluster
 * gets the id its cloud resources already carry, its store number as
 * pbx-cluster-id (a legacy id), and keeps everything else. */
static void test_migration_ids(void)
{
	char path[300];
	struct pbx_store *st;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster_row row, *rows;
	size_t n;
	int64_t id;
	snprintf(path, sizeof(path), "%s.v5", dbpath);
	ok(raw_sql(path,
		   "CREATE TABLE clusters (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
		   " cloud TEXT NOT NULL, state TEXT NOT NULL, template_json TEXT NOT NULL,"
		   " slot INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL,"
		   " updated INTEGER NOT NULL, template TEXT);"
		   "INSERT INTO clusters VALUES (7, 'gpu', 'gce', 'up', '{}', 0, 1, 1, NULL);"
		   "INSERT INTO clusters VALUES (9, 'old', 'aws', 'deleted', '{}', 0, 1, 1, NULL);"
		   "CREATE TABLE nodes (id INTEGER PRIMARY KEY, cluster_id INTEGER NOT NULL,"
		   " name TEXT NOT NULL, instance_id TEXT);"
		   "CREATE TABLE submissions (id INTEGER PRIMARY KEY);"
		   "PRAGMA user_version=5;"),
	   "a schema-5 store with two clusters");
	/* migrations 1-5 are not run again: user_version says they were;
	 * migration 6 only touches the clusters table, 10 the nodes', 11 the
	 * submissions' (a store of schema 5 has them; here only the columns
	 * they read) */
	ok(pbx_store_open(path, &st, &err) == 0, "the old store opens: %s", err.msg);
	ok(pbx_store_schema_version(st) == 12, "and is migrated to schema 12");
	ok(pbx_store_cluster_get(st, "gpu", &row, &err) == 0, "the live cluster is there: %s",
	   err.msg);
	ok(!strcmp(row.uid, "7") && !strcmp(row.state, "up"), "its id is its store number: '%s'",
	   row.uid);
	pbx_cluster_row_free(&row);
	ok(pbx_store_cluster_list(st, 1, &rows, &n, &err) == 0 && n == 2 &&
		   !strcmp(rows[1].uid, "9"),
	   "a deleted one's too");
	pbx_cluster_rows_free(rows, n);
	ok(pbx_store_cluster_create(st, "new", UID_A, "gce", "{}", 1, &id, &err) == 0 &&
		   pbx_store_cluster_get(st, "new", &row, &err) == 0 && !strcmp(row.uid, UID_A),
	   "a cluster made after the migration has its random id");
	pbx_cluster_row_free(&row);
	pbx_store_close(st);
}

/* A store of schema 9 (nodes without instance_uid) is migrated: an EC2
 * node's uid is its instance id (never reused; that pbx kept its pins by
 * it), a Compute Engine node's (its id is its name) stays unknown. */
static void test_migration_uids(void)
{
	char path[300];
	struct pbx_store *st;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_node_row *rows;
	size_t n;
	snprintf(path, sizeof(path), "%s.v9", dbpath);
	ok(raw_sql(path,
		   "CREATE TABLE clusters (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
		   " cloud TEXT NOT NULL, state TEXT NOT NULL, template_json TEXT NOT NULL,"
		   " slot INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL,"
		   " updated INTEGER NOT NULL, template TEXT, uid TEXT NOT NULL DEFAULT '');"
		   "CREATE TABLE nodes (id INTEGER PRIMARY KEY, cluster_id INTEGER NOT NULL,"
		   " name TEXT NOT NULL, role TEXT NOT NULL, address TEXT NOT NULL,"
		   " ssh_port INTEGER NOT NULL, gpus INTEGER NOT NULL DEFAULT 0, instance_id TEXT,"
		   " root TEXT NOT NULL DEFAULT '', state TEXT NOT NULL, zone TEXT,"
		   " public_address TEXT, operation TEXT, UNIQUE(cluster_id, name));"
		   "INSERT INTO clusters VALUES (1, 'e', 'aws', 'up', '{}', 0, 1, 1, NULL, '1');"
		   "INSERT INTO clusters VALUES (2, 'g', 'gce', 'up', '{}', 0, 1, 1, NULL, '2');"
		   "INSERT INTO nodes VALUES (1, 1, 'node1', 'compute', '10.0.0.5', 22, 0,"
		   " 'i-0123456789abcdef0', '', 'up', NULL, NULL, NULL);"
		   "INSERT INTO nodes VALUES (2, 1, 'node2', 'compute', '', 22, 0, NULL, '',"
		   " 'asleep', NULL, NULL, NULL);"
		   "INSERT INTO nodes VALUES (3, 2, 'node1', 'compute', '10.0.0.6', 22, 0,"
		   " 'g-0123-node1', '', 'up', 'us-central1-a', NULL, NULL);"
		   "CREATE TABLE submissions (id INTEGER PRIMARY KEY);"
		   "PRAGMA user_version=9;"),
	   "a schema-9 store with an EC2 and a Compute Engine cluster");
	ok(pbx_store_open(path, &st, &err) == 0 && pbx_store_schema_version(st) == 12,
	   "is migrated to schema 12: %s", err.msg);
	ok(pbx_store_node_list(st, 1, &rows, &n, &err) == 0 && n == 2 && rows[0].instance_uid &&
		   !strcmp(rows[0].instance_uid, "i-0123456789abcdef0") && !rows[1].instance_uid,
	   "an EC2 node's uid is its instance id; none without one");
	pbx_node_rows_free(rows, n);
	ok(pbx_store_node_list(st, 2, &rows, &n, &err) == 0 && n == 1 && !rows[0].instance_uid &&
		   !strcmp(rows[0].instance_id, "g-0123-node1"),
	   "a Compute Engine node's uid is unknown (its id is its name)");
	pbx_node_rows_free(rows, n);
	pbx_store_close(st);
}

static void test_two_writers(void)
{
	struct pbx_store *st;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_node_row *rows;
	size_t n;
	int status, failures = 0, w;
	pid_t pids[2];
	for (w = 0; w < 2; w++) {
		pids[w] = fork();
		if (pids[w] == 0)
			_exit(writer(w, 400));
	}
	for (w = 0; w < 2; w++) {
		waitpid(pids[w], &status, 0);
		failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	ok(failures == 0, "two processes wrote 400 transactions each without a lock failure");
	pbx_store_open(dbpath, &st, &err);
	if (pbx_store_node_list(st, 1, &rows, &n, &err) < 0)
		n = 0;
	ok(n == 3 + 800, "all 800 rows present (%zu nodes)", n);
	pbx_node_rows_free(rows, n);
	pbx_store_close(st);
}

/* Node runs (spend): open, close no earlier than the start, list in order;
 * a run with an unknown price keeps it unknown. */
static void test_node_runs(void)
{
	struct pbx_store *st;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_node_run *v = NULL;
	size_t n = 0;
	int64_t id;

	ok(pbx_store_open(dbpath, &st, &err) == 0, "store opens: %s", err.msg);
	ok(pbx_store_cluster_create(st, "runs", "0000000000000000000000000000000f", "gce", "{}", 0,
				    &id, &err) == 0,
	   "create a cluster for runs: %s", err.msg);
	ok(pbx_store_run_open(st, id, "head", 1000, 3600000000000LL, "USD", &err) == 0 &&
		   pbx_store_run_open(st, id, "node1", 1010, -1, "USD", &err) == 0,
	   "two runs open");
	ok(pbx_store_run_open(st, id, "head", 1001, 1, "USD", &err) < 0,
	   "a second open run of the same node is refused");
	ok(pbx_store_runs_list(st, id, &v, &n, &err) == 0 && n == 2, "listed: 2");
	if (n == 2) {
		ok(!strcmp(v[0].node, "head") && v[0].started == 1000 && v[0].ended == 0 &&
			   v[0].nanos == 3600000000000LL && !strcmp(v[0].currency, "USD"),
		   "the head's run, open");
		ok(!strcmp(v[1].node, "node1") && v[1].nanos == -1 && !v[1].currency[0],
		   "an unknown price stays unknown, without a currency");
		ok(pbx_store_run_close(st, v[0].id, 1100, &err) == 0 &&
			   pbx_store_run_close(st, v[1].id, 900, &err) == 0,
		   "both closed");
		ok(pbx_store_run_close(st, v[0].id, 5000, &err) == 0,
		   "closing a closed run is a no-op");
	}
	pbx_node_runs_free(v, n);
	ok(pbx_store_runs_list(st, id, &v, &n, &err) == 0 && n == 2 && v[0].ended == 1100 &&
		   v[1].ended == 1010,
	   "ended as given, a run never ends before it began, and stays ended");
	pbx_node_runs_free(v, n);
	pbx_store_close(st);
}

/* A task counts as harvested when its status file came home as it was at
 * its end: no older than its END (which the wrapper takes from the file
 * system's clock); one older (harvested while it ran) does not. */
static void test_unharvested(void)
{
	struct pbx_store *st;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_unharvested *u = NULL;
	sqlite3 *db;
	size_t n = 0;
	int64_t cid;
	char *sql;
	ok(pbx_store_open(dbpath, &st, &err) == 0, "store opens: %s", err.msg);
	ok(pbx_store_cluster_create(st, "u", "00000000000000000000000000000002", "local", "{}", 5,
				    &cid, &err) == 0,
	   "a cluster");
	sql = xasprintf(
		"INSERT INTO packages(id, short_id, name, experiment_path, experiment_text, user,"
		" host, ntasks, created) VALUES ('pk1', 'pk1', 'e', 'e.yaml', '', 'u', 'h', 4, 1);"
		"INSERT INTO submissions(id, package_id, cluster_id, remote_dir, resources_json,"
		" state, created) VALUES (77, 'pk1', %lld, 'r', '{}', 'submitted', 1);"
		"INSERT INTO tasks(submission_id, idx, params_json, state, start_time, end_time,"
		" updated) VALUES (77, 0, '{}', 'COMPLETED', 100, 200, 1),"
		" (77, 1, '{}', 'COMPLETED', 100, 200, 1), (77, 2, '{}', 'COMPLETED', 100, 200, 1),"
		" (77, 3, '{}', 'RUNNING', 100, NULL, 1), (77, 4, '{}', 'COMPLETED', 100, NULL, 1);"
		"INSERT INTO harvested(submission_id, idx, path, size, mtime) VALUES"
		" (77, 0, 'status', 10, 200), (77, 1, 'status', 10, 199), (77, 2, 'status', 10, 198),"
		" (77, 4, 'status', 10, -1);",
		(long long)cid);
	ok(sqlite3_open(dbpath, &db) == SQLITE_OK &&
		   sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK,
	   "a package: 4 ended tasks (status home at the end, a second before, two before, "
	   "taken while it ran with no known end), 1 running");
	sqlite3_close(db);
	free(sql);
	ok(pbx_store_unharvested(st, cid, &u, &n, &err) == 0 && n == 1 && u[0].submission_id == 77,
	   "its submission is listed: %s", err.msg);
	ok(n == 1 && u[0].live == 1 && u[0].ended == 3,
	   "1 live; 3 ended not home (their status older than their end, or recorded -1: "
	   "harvested while they ran)");
	pbx_unharvested_free(u, n);
	{
		struct pbx_harvested h[] = { { 0, "status", 10, 200 },
					     { 1, "stdout", 5, 300 },
					     { 1, "status", 10, -1 },
					     { 2, "status", 10, 7 } };
		ok(pbx_harvested_final_status(h, 4, 0, 200) &&
			   !pbx_harvested_final_status(h, 4, 0, 201),
		   "a status is final when no older than the end");
		ok(!pbx_harvested_final_status(h, 4, 1, 0),
		   "one taken while the task ran never is, even with no known end");
		ok(pbx_harvested_final_status(h, 4, 2, 0) &&
			   !pbx_harvested_final_status(h, 4, 3, 0),
		   "with no known end any status taken at the end is; no status, none");
	}
	pbx_store_close(st);
}

int main(void)
{
	char dir[] = "/tmp/pbx-store-XXXXXX";
	if (!mkdtemp(dir))
		return 2;
	snprintf(dbpath, sizeof(dbpath), "%s/pbx.db", dir);
	test_schema_and_clusters();
	test_nodes_and_hostkeys();
	test_migration_ids();
	test_migration_uids();
	test_two_writers();
	test_node_runs();
	test_unharvested();
	{
		char *cmd = xasprintf("rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cleanup failed\n");
		free(cmd);
	}
	return tap_done();
}
