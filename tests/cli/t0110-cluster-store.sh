#!/bin/sh
# t0110-cluster-store.sh - what the store knows of a cluster follows
# reality and survives pbx forgetting: a cluster started with -t TEMPLATE
# under another name finds its template again on the next start; its nodes
# read "up" once idle; a cluster whose rows the store lost is not removed
# by a plain `stop` (the name alone may be someone else's): it lists what
# carries the name with the cluster id, and `stop --id ID` removes it
# completely, found by its label (the local provider's cluster directory,
# holding its id).  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster tpl slot "{ name: node, count: 1, gpus: 0 }"
# A Compute Engine section whose credentials are missing here: stop must
# still remove a forgotten local cluster.
echo '  gce: { project: p, zone: z, endpoint: "http://127.0.0.1:1/compute/v1/", credentials: /nonexistent/key.json }' \
	>>"$PBX_HOME/config.yaml"
LC_NAME=other
CDIR="$PBX_HOME/clusters/other"
DB="$PBX_HOME/pbx.db"

run_pbx cluster start -t tpl other
ok $rc "start -t tpl other succeeds: $errout"
is "$(sqlite3 "$DB" "SELECT template FROM clusters WHERE name = 'other'")" "tpl" \
	"the store records the template"
is "$(sqlite3 "$DB" "SELECT group_concat(name || '=' || state, ' ') FROM nodes")" \
	"head=up node1=up" "every node reads up once idle"

pkill -F "$CDIR/nodes/node1/run/slurmd-node1.pid"
run_pbx cluster start other
ok $rc "start other (no -t) finds template tpl again and repairs: $errout"
run_pbx cluster exec other -- sinfo -h -o '%t'
is "$out" "idle" "the repaired node is idle"

# --self (a head deleting its own cluster) goes with --id, the id of the
# cluster (the head's store knows it as the user's does, or not at all);
# refused before anything is deleted.
run_pbx cluster stop --discard-results --self head-x other
is "$rc:$(echo "$errout" | grep -c -- "--self INSTANCE goes with --id")" "2:1" "stop --self without --id is refused: $errout"
run_pbx cluster stop --discard-results --id 0123456789abcdef0123456789abcdef --self head-x other
is "$rc:$(echo "$errout" | grep -c -- "--self is for a head deleting its own cluster; cluster 'other' in this store .* is another (id ")" "2:1" \
	"stop --id --self of another cluster of the name this store knows is refused: $errout"
run_pbx cluster exec other -- sinfo -h -o '%t'
is "$out" "idle" "the cluster still runs"

# pbx forgets the cluster (as if killed before it wrote anything).
sqlite3 "$DB" "DELETE FROM nodes; DELETE FROM host_keys; UPDATE clusters SET state = 'deleted'"
[ -n "$(procs_mentioning "$CDIR/")" ]
ok $? "the forgotten cluster's daemons still run"
ID=$(sqlite3 "$DB" "SELECT uid FROM clusters WHERE name = 'other'")
is "$(cat "$CDIR/cluster-id")" "$ID" "the cluster's directory holds its id"
run_pbx cluster stop --discard-results other
is "$rc" "3" "a stop of a name the store does not know deletes nothing (exit 3)"
echo "$errout" | grep -q "nothing was deleted.*pbx cluster stop --id ID other"
ok $? "and says how to delete it: $errout"
echo "$out" | grep -q "^local  *$CDIR  *-  *-  *$ID\$"
ok $? "it lists the cluster's directory with its id: $out"
[ -n "$(procs_mentioning "$CDIR/")" ] && [ -d "$CDIR" ]
ok $? "the cluster is still whole"
run_pbx cluster stop --discard-results --id 0123456789abcdef0123456789abcdef other
is "$rc:$(echo "$errout" | grep -c "cannot look for cluster 'other'")" "1:1" \
	"another id finds nothing here (and Compute Engine could not be asked): $errout"
[ -d "$CDIR" ]
ok $? "and deletes nothing"
run_pbx cluster stop --discard-results --id "$ID" other
ok $rc "stop --id finds the forgotten cluster by label: $errout"
is "$(procs_mentioning "$CDIR/")" "" "no process of the cluster is left"
[ ! -e "$CDIR" ]
ok $? "its directory is gone"
run_pbx cluster stop --discard-results other
is "$rc:$(echo "$errout" | grep -c "cannot look for cluster 'other': Compute Engine credentials")" "1:1" \
	"a second stop finds nothing here, but says Compute Engine could not be asked"
sed -i '/^  gce:/d' "$PBX_HOME/config.yaml"
run_pbx cluster stop --discard-results other
is "$rc" "3" "without that section a second stop finds nothing (exit 3)"
done_testing
