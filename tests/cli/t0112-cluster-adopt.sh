#!/bin/sh
# t0112-cluster-adopt.sh - a cluster's record (`pbx cluster record NAME`)
# taken in by another store (`pbx cluster adopt FILE`), as pbx on a
# cluster's head will (docs/power-saving.md, "A store on the head"): a
# started local cluster with a power-saving group (node2 asleep) and, for
# the test, a public address and its pin on the head, is recorded in one
# PBX_HOME and adopted into an empty one: every node's name, role, address,
# state and instance agree, public addresses are gone and the pins are
# under the private addresses; adopting again changes nothing; a newer
# record of the same cluster replaces its nodes; a record with a bad field
# is refused naming the field, a name held by another cluster id is
# refused, and neither writes anything.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster ad slot "{ name: node, count: 2, min: 1, gpus: 0 }"
H1=$PBX_HOME
H2=$TEST_TMP/home2
mkdir -p "$H2"
cp "$H1/config.yaml" "$H2/config.yaml"
REC=$TEST_TMP/record.json

run_pbx cluster start ad
ok $rc "start ad: $errout"

# The store's view of the cluster, what adopt must carry over: the row's
# fields, the nodes, the pins of the cluster's nodes.
store_view() {
	sqlite3 "$1/pbx.db" "SELECT name, uid, cloud, state, template_json, slot, template, created FROM clusters WHERE state != 'deleted';
SELECT name, role, address, ssh_port, gpus, ifnull(instance_id, '-'), root, state, ifnull(zone, '-'), ifnull(public_address, '-') FROM nodes WHERE cluster_id = (SELECT id FROM clusters WHERE state != 'deleted') ORDER BY name;
SELECT hostport, key_type, key_b64 FROM host_keys ORDER BY hostport;"
}
# show_nodes HOME: name/role/address/state/instance/public address of each
# node, as `pbx cluster show --json ad` in HOME says
show_nodes() {
	PBX_HOME=$1 "$PBX" cluster show --json ad 2>/dev/null |
		json_get '"\n".join("%s %s %s %s %s %s" % (n["name"], n["role"], n["address"], n["state"], n["instance_id"], n["public_address"]) for n in d["nodes"])'
}
# bad_record FIELD PYTHON: a copy of the record changed by PYTHON (on r)
# must be refused (exit 2) naming FIELD, writing nothing into H2
bad_record() {
	python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $2; json.dump(r, open(sys.argv[2], 'w'))" \
		"$REC" "$TEST_TMP/bad.json"
	before=$(store_view "$H2")
	in_home "$H2" cluster adopt "$TEST_TMP/bad.json"
	case $rc:$errout in "2:"*"$TEST_TMP/bad.json: $1:"*) r=0 ;; *) r=1 ;; esac
	ok $r "a record with a bad $1 is refused, naming it ($rc: $errout)"
	is "$(store_view "$H2")" "$before" "  and the store is untouched"
}

H1_NODES=$(show_nodes "$H1")
is "$(echo "$H1_NODES" | awk '{print $1 ":" $4}' | tr '\n' ' ')" "head:up node1:up node2:asleep " \
	"the cluster runs, node2 asleep"

# As if the head had a public address (a cloud): pinned there too.
# 198.51.100.7 (a documentation address) is data in the store only:
# `cluster record` reads the store and dials nothing; it is gone again
# before the adopt.
HEAD_ADDR=$(sqlite3 "$H1/pbx.db" "SELECT address FROM nodes WHERE name = 'head'")
sqlite3 "$H1/pbx.db" "UPDATE nodes SET public_address = '198.51.100.7' WHERE name = 'head';
INSERT INTO host_keys SELECT 'ad/head@198.51.100.7:$SSH_PORT', key_type, key_b64, first_seen FROM host_keys WHERE hostport = 'ad/head@$HEAD_ADDR:$SSH_PORT'"
run_pbx cluster record ad
ok $rc "cluster record ad: $errout"
printf '%s\n' "$out" >"$REC"
sqlite3 "$H1/pbx.db" "UPDATE nodes SET public_address = NULL WHERE name = 'head'; DELETE FROM host_keys WHERE hostport LIKE '%@198.51.100.7:%'"
is "$(json_get '" ".join(sorted(d))' <"$REC")" "cluster nodes pins version" "the record's parts"
is "$(json_get '" ".join(n["name"] for n in d["nodes"])' <"$REC")" "head node1 node2" \
	"it has every node, the asleep one too"
is "$(json_get '" ".join(str(n["public_address"]) for n in d["nodes"])' <"$REC")" "198.51.100.7 None None" \
	"the head's public address"
is "$(json_get '" ".join(sorted(p["hostport"] for p in d["pins"]))' <"$REC")" \
	"ad/head@$SLOT_NET.0.1:$SSH_PORT ad/head@198.51.100.7:$SSH_PORT ad/node1@$SLOT_NET.0.2:$SSH_PORT" \
	"and the pins of its nodes, at the public address too"

in_home "$H2" cluster adopt "$REC"
ok $rc "adopt into an empty store: $errout"
V1=$(store_view "$H1")
V2=$(store_view "$H2") # before show, which may record what it finds
is "$(echo "$V2" | head -1)" "$(echo "$V1" | head -1)" "the cluster's row: name, id, cloud, state, template, slot, created"
is "$(echo "$V2" | sed -n '2,4p')" "$(echo "$V1" | sed -n '2,4p')" "every node's fields (no public address)"
is "$(echo "$V2" | sed -n '5,$p')" "$(echo "$V1" | sed -n '5,$p')" \
	"the pins: the head's under its private address only"
is "$(show_nodes "$H2")" "$H1_NODES" \
	"cluster show --json agrees on every node's name, role, address, state, instance"
is "$(show_nodes "$H2" | awk '{print $6}' | sort -u)" "None" "no node has a public address"

in_home "$H2" cluster adopt "$REC"
ok $rc "adopt again: $errout"
is "$(store_view "$H2")" "$V2" "changes nothing"
is "$(sqlite3 "$H2/pbx.db" "SELECT count(*) FROM clusters")" "1" "one cluster row"

# A newer record of the same cluster: node1 down, node2 and its pins gone.
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['nodes']=r['nodes'][:2]; r['nodes'][1]['state']='down'; r['pins']=[p for p in r['pins'] if 'node1' not in p['hostport']]; json.dump(r, open(sys.argv[2], 'w'))" \
	"$REC" "$TEST_TMP/newer.json"
in_home "$H2" cluster adopt "$TEST_TMP/newer.json"
ok $rc "adopt a newer record: $errout"
is "$(sqlite3 "$H2/pbx.db" "SELECT group_concat(name || ':' || state, ' ') FROM (SELECT * FROM nodes ORDER BY name)")" \
	"head:up node1:down" "replaces the nodes"
is "$(sqlite3 "$H2/pbx.db" "SELECT group_concat(hostport, ' ') FROM host_keys")" "ad/head@$SLOT_NET.0.1:$SSH_PORT" \
	"and the pins"
in_home "$H2" cluster adopt "$REC"
is "$rc:$(store_view "$H2")" "0:$V2" "the first record again: as after the first adopt"

bad_record version "del r['version']"
bad_record version "r['version'] = 2"
bad_record version "r['version'] = '1'"
bad_record "nodes[1].name" "r['nodes'][1]['name'] = '../x'"
bad_record "nodes[2].name" "r['nodes'][2]['name'] = 'gpu1'"
bad_record "nodes[0].address" "r['nodes'][0]['address'] = '1.2.3.4; rm'"
bad_record "nodes[1].public_address" "r['nodes'][1]['public_address'] = '1.2.3.4\\n'"
bad_record "nodes[1].root" "r['nodes'][1]['root'] += '/../../etc'"
bad_record "nodes[1].ssh_port" "r['nodes'][1]['ssh_port'] = 0"
bad_record "nodes[1].state" "r['nodes'][1]['state'] = 'up; rm'"
bad_record "nodes[1].extra" "r['nodes'][1]['extra'] = 1"
bad_record cluster.slot "r['cluster']['slot'] = '0'"
bad_record cluster.slot "r['cluster']['slot'] = 0.5"
bad_record cluster.name "r['cluster']['name'] = 'Ad'"
bad_record cluster.uid "r['cluster']['uid'] = 'x'"
bad_record cluster.template_json "r['cluster']['template_json'] = '{'"
# the user's key the nodes the head makes authorize: one public key line only
bad_record cluster.template_json "t = json.loads(r['cluster']['template_json']); t['user_key'] = 'ssh-ed25519 AAAA\\nx'; r['cluster']['template_json'] = json.dumps(t)"
# the budget's deadline the user's start computed: a positive integer only
bad_record cluster.template_json "t = json.loads(r['cluster']['template_json']); t['budget_until'] = -5; r['cluster']['template_json'] = json.dumps(t)"
bad_record cluster.template_json "t = json.loads(r['cluster']['template_json']); t['budget_until'] = '1796200000'; r['cluster']['template_json'] = json.dumps(t)"
bad_record "pins[0].hostport" "r['pins'][0]['hostport'] = 'other/head@$SLOT_NET.0.1:$SSH_PORT'"
bad_record "pins[0].type" "r['pins'][0]['type'] = 'ssh-ed25519 x'"

# The name held here by another cluster (another id, other node states,
# no pins): refused, nothing written.
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['cluster']['uid']='0123456789abcdef0123456789abcdef'; r['nodes'][1]['state']='down'; r['pins']=[]; json.dump(r, open(sys.argv[2], 'w'))" \
	"$REC" "$TEST_TMP/other.json"
in_home "$H2" cluster adopt "$TEST_TMP/other.json"
case $rc:$errout in "1:"*"cluster ad here is another cluster"*) r=0 ;; *) r=1 ;; esac
ok $r "a name held by another cluster id is refused ($rc: $errout)"
is "$(store_view "$H2")" "$V2" "  and the store is untouched"
in_home "$H2" cluster adopt "$TEST_TMP/nonexistent.json"
is "$rc" "2" "a missing file is refused: $errout"
done_testing
