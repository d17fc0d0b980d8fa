#!/bin/sh
# t0400-gce-emulator.sh - `pbx cluster start` of a Compute Engine template
# against the Compute Engine emulator (tests/emulators/gce), end to end: a
# service-account key exchanged at the emulator's token endpoint, a head
# and 2 GPU nodes whose login user is not root (sudo -n), compute nodes
# reached through the head -> every node idle in sinfo -> parrun of the
# example sweep with --gres=gpu:1 -> all 24 tasks COMPLETED -> harvest ->
# report -> stop -> the emulator holds no instance, no firewall rule and no
# router.  Compute nodes have no external address: their outbound traffic
# goes through the cluster's Cloud Router with NAT, which start makes and
# stop deletes, and which a resize leaves alone.  Node bodies answer SSH on
# their external address only when they have one, so `pbx cluster ssh`
# must reach the head on its public address and compute nodes through it.
# Then: 30% of calls throttled (429 / 403 rateLimitExceeded) and start
# still succeeds; a quota error on the GPU nodes leaves nothing behind
# (all or nothing); pbx killed with -9 mid-start, then stop: nothing left.
# Emulator addresses $SLOT_NET.1.0/24 (private) and $SLOT_NET.2.0/24 (public);
# SLURM ports from BODY_PORT_BASE + 64*8 (node bodies of cloud clusters).
# PBX_GCE_EMULATOR (emulator.py) and PBX_NODE_BODY_HELPER override where
# the emulator and its node-body helper are.
. "$(dirname "$0")/lib.sh"
stop_at_exit e1

# emu_start [--fault K=V ...]: a fresh emulator (gce_emulator: PORT, the
# key file TEST_TMP/sa.json), config.yaml pointing at it.
CLOUD=gce
emu_start() {
	gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24" "$@"
	cloud_account
	cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(cloud_template e1 "$PBX_HOME/id" \
		"node_groups:" "  - { name: gpu, count: 2, machine_type: n1-standard-8, gpus: 1, gpu_type: nvidia-tesla-t4 }")"
}
# "instances firewalls routers" the emulator holds
emu_holds() { emu_get state | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["instances"]), len(d["firewalls"]), len(d["routers"]))'; }

mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C t0400 -f "$PBX_HOME/id"

# ------------------------------------------------------------ end to end
emu_start
run_pbx cluster start e1
ok $rc "start of a gce template against the emulator: $errout"
is "$(emu_holds)" "3 2 1" "the emulator holds 3 instances, 2 firewall rules and the router"
# instance names carry the first 12 digits of the cluster id: e1-P-NODE
P=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT substr(uid, 1, 12) FROM clusters WHERE state != 'deleted'")
# a node body's root ends in the first 10 hex digits of its name's SHA-1
body_key() { printf %s "$1" | sha1sum | cut -c1-10; }
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t %G'
is "$out" "gpu1 idle gpu:t4:1
gpu2 idle gpu:t4:1" "every compute node is idle with its GPU, typed t4 (gpu_type)"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(name || ':' || state || ':' || (public_address IS NOT NULL), ' ') FROM nodes")" \
	"head:up:1 gpu1:up:0 gpu2:up:0" "nodes are up; only the head has a public address"
run_pbx cluster exec -n gpu2 e1 -- id -un
is "$out" "root" "commands run as root through sudo -n (login user pbx)"
is "$(emu_get state | python3 -c 'import json,sys
d = json.load(sys.stdin)
print(" ".join(i["name"] + ":" + ("nat" if i["natIP"] else "none") for i in sorted(d["instances"], key=lambda i: i["name"])))
for r in d["routers"]: print(r["name"], r["region"].rsplit("/", 1)[1], r["network"].rsplit("/", 1)[1], r["nats"][0]["sourceSubnetworkIpRangesToNat"])')" \
	"e1-$P-gpu1:none e1-$P-gpu2:none e1-$P-head:nat
pbx-nat-default us-central1 default ALL_SUBNETWORKS_ALL_IP_RANGES" \
	"only the head has an external address; pbx's Cloud NAT serves the region"

# pbx cluster ssh: the head on its public address (its private one does
# not answer from here, as on a VM), compute nodes through the head, host
# keys checked on both hops against pbx's pins.
head_private=$(emu_get state | python3 -c 'import json,sys; print([i["networkIP"] for i in json.load(sys.stdin)["instances"] if i["name"] == sys.argv[1]][0])' "e1-$P-head")
python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], 22), 2)' "$head_private" 2>/dev/null
ok $((! $?)) "the head's private address $head_private does not answer SSH from here"
run_pbx cluster ssh e1 -- sh -c 'echo "$PBX_BODY_ROOT"'
is "$rc:${out##*/}" "0:$(body_key "e1-$P-head")" "cluster ssh NAME -- COMMAND runs on the head: $errout"
run_pbx cluster ssh e1 gpu2 -- sh -c 'echo "$PBX_BODY_ROOT"'
is "$rc:${out##*/}" "0:$(body_key "e1-$P-gpu2")" "cluster ssh NAME NODE -- COMMAND runs on a compute node, through the head: $errout"
run_pbx cluster ssh e1 gpu1 -- printf '%s|' 'a b' '$HOME' "it's"
is "$out" "a b|\$HOME|it's|" "each word of the command reaches the node as one word"
is "$(stat -c %a "$PBX_HOME/clusters/e1/ssh_config" "$PBX_HOME/clusters/e1/known_hosts" | tr '\n' ' ')" "600 600 " \
	"ssh(1)'s configuration and known_hosts are private"
grep -q "^  ProxyJump pbx-head$" "$PBX_HOME/clusters/e1/ssh_config"
ok $? "the compute node's Host block jumps through the head"
# The jump hop checks the head's pinned key: with another key under the
# head's name, ssh(1) refuses before reaching the compute node.
run_pbx cluster ssh e1 gpu2 -- true
cp "$PBX_HOME/clusters/e1/known_hosts" "$TEST_TMP/known.good"
awk '$1 == "pbx-gpu2" { k = $2 " " $3 } END { print "pbx-head " k; print "pbx-gpu2 " k }' \
	"$TEST_TMP/known.good" >"$PBX_HOME/clusters/e1/known_hosts"
ssh -F "$PBX_HOME/clusters/e1/ssh_config" -o BatchMode=yes pbx-gpu2 true >/dev/null 2>"$TEST_TMP/ssh.err"
st=$?
is "$st" "255" "a wrong key for the jump host is refused"
grep -q "Host key verification failed" "$TEST_TMP/ssh.err" && grep -q "pbx-head" "$TEST_TMP/ssh.err"
ok $? "as a host key failure: $(cat "$TEST_TMP/ssh.err")"
run_pbx cluster ssh e1 gpu2 -- true
is "$rc" "0" "the next cluster ssh writes the pinned keys again: $errout"

sweep_demo_round e1

# resize: one more GPU node, then back to two (instance names carry the
# first 12 digits of the cluster id: e1-P-NODE); the router is neither
# made nor deleted (a resize that grows runs start's checks, which read it)
router_calls() { emu_get calls | python3 -c 'import json,sys; print(sum(v for k, v in json.load(sys.stdin)["calls"].items() if k.startswith(("POST routers", "DELETE routers"))))'; }
router_calls_before=$(router_calls)
run_pbx cluster resize --dry-run --json e1 +1
is "$(echo "$out" | python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l)
    if r["url"].split("?")[0].endswith("/bulkInsert"):
        print(r["method"], *sorted(r["body"]["perInstanceProperties"]))')" \
	"POST e1-$P-gpu3" "resize --dry-run --json +1: one bulkInsert, of e1-$P-gpu3 alone"
is "$(emu_holds)" "3 2 1" "the dry run created nothing"
run_pbx cluster resize e1 +1
ok $rc "resize +1: $errout"
is "$(emu_holds)" "4 2 1" "the emulator holds 4 instances, the same router"
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t'
is "$out" "gpu1 idle
gpu2 idle
gpu3 idle" "SLURM has the new node gpu3, idle"
run_pbx cluster exec -n gpu3 e1 -- id -un
is "$out" "root" "the new node is reached through the head, with sudo"
run_pbx cluster resize --dry-run e1 -1
is "$(echo "$out" | grep -Ec "^DELETE .*/zones/us-central1-a/instances/e1-$P-gpu3([?]|\$)")" "1" \
	"resize --dry-run -1: the DELETE of e1-$P-gpu3"
run_pbx cluster resize e1 -1
ok $rc "resize -1: $errout"
is "$(emu_holds)" "3 2 1" "the emulator holds 3 instances again, the firewall rules and router stay"
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t'
is "$out" "gpu1 idle
gpu2 idle" "SLURM no longer lists gpu3"
is "$(router_calls)" "$router_calls_before" "resize neither made nor deleted a router"

run_pbx cluster stop --discard-results e1
ok $rc "stop: $errout"
is "$(emu_holds)" "0 0 0" "the emulator holds no instance, no firewall rule and no router"
is "$(ls "$TEST_TMP/emu/bodies/pbx-test/us-central1-a" 2>/dev/null | wc -l)" "0" "no node body is left"
[ ! -e "$PBX_HOME/clusters/e1" ]
ok $? "pbx's own files of the cluster (munge key, known_hosts) are gone"

# ------------------------------------------------------------- throttled
emu_start --fault throttle=0.3
PBX_STATS=1 run_pbx cluster start e1
ok $rc "start succeeds with 30% of calls throttled: $errout"
retries=$(echo "$errout" | sed -n 's/.*(\([0-9]*\) retries.*/\1/p')
[ "${retries:-0}" -gt 0 ]
ok $? "throttled calls were retried ($retries retries)"
run_pbx cluster stop --discard-results e1
is "$rc:$(emu_holds)" "0:0 0 0" "stop after a throttled start leaves nothing"

# ----------------------------------------------------- quota: all or nothing
emu_start --fault 'quota={"NVIDIA_T4_GPUS": 1}'
run_pbx cluster start e1
is "$rc" "1" "start fails when the GPU quota is too small"
echo "$errout" | grep -q "quota exceeded" && echo "$errout" | grep -q "NVIDIA_T4_GPUS"
ok $? "the message names the quota: $errout"
is "$(emu_holds)" "0 0 0" "all or nothing: no instance, firewall rule or router is left"
run_pbx cluster stop --discard-results e1
ok $rc "stop after the failed start: $errout"

# ------------------------------------- quota under min_nodes: fewer nodes
emu_start --fault 'quota={"NVIDIA_T4_GPUS": 1}'
sed -i 's#^    node_groups:#    min_nodes: 1\n    node_groups:#' "$PBX_HOME/config.yaml"
run_pbx cluster start e1
ok $rc "with min_nodes: 1, start succeeds on a GPU quota of 1: $errout"
echo "$errout" | grep -q "gpu2  not created (quota or capacity)"
ok $? "progress says gpu2 was not created"
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t'
is "$out" "gpu1 idle" "SLURM has the one node that was made"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT n.state FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.state != 'deleted' AND n.name = 'gpu2'")" "not-created" \
	"the store says gpu2 is missing"
emu_post faults '{"quota": {}}' >/dev/null
run_pbx cluster start e1
ok $rc "once the quota allows it, start again: $errout"
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t'
is "$out" "gpu1 idle
gpu2 idle" "the second start made gpu2"

# a resize refused by quota removes only what it asked for
emu_post faults '{"quota": {"NVIDIA_T4_GPUS": 2}}' >/dev/null
run_pbx cluster resize e1 +1
is "$rc" "1" "resize +1 fails when the GPU quota is used up"
echo "$errout" | grep -q "none of the new instances was kept"
ok $? "the message says the new instance was not kept: $errout"
echo "$errout" | grep -q "'pbx cluster resize e1 -1' gives it up"
ok $? "and how to give the node up"
is "$(emu_holds)" "3 2 1" "the running cluster keeps its 3 instances, its firewall rules and router"
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t'
is "$out" "gpu1 idle
gpu2 idle" "and its nodes stay idle in SLURM"
run_pbx cluster resize e1 -1
ok $rc "resize -1 gives up the node that could not be made: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.state != 'deleted' AND n.name = 'gpu3'")" "0" "gpu3 is forgotten"
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t'
is "$out" "gpu1 idle
gpu2 idle" "the cluster is as before the failed resize"
run_pbx cluster stop --discard-results e1
is "$rc:$(emu_holds)" "0:0 0 0" "stop leaves nothing"

# ------------------------------------------- stockout: the next zone
emu_start --fault 'stockout=["us-central1-a"]'
sed -i 's#zone: us-central1-a,#zone: us-central1-a, zones: [us-central1-a, us-central1-b],#' "$PBX_HOME/config.yaml"
run_pbx cluster start e1
ok $rc "start succeeds when the first zone is stocked out: $errout"
is "$(emu_get state | python3 -c 'import json,sys; print(" ".join(sorted({i["zone"].split("/")[-1] for i in json.load(sys.stdin)["instances"]})))')" \
	"us-central1-b" "every instance landed in the second zone"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(DISTINCT zone) FROM nodes WHERE state = 'up'")" \
	"us-central1-b" "the store records the zone"
run_pbx cluster stop --discard-results e1
is "$rc:$(emu_holds)" "0:0 0 0" "stop finds and removes them in the second zone"
emu_start --fault 'stockout=["us-central1-a"]'
run_pbx cluster start e1
is "$rc" "1" "without a second zone, a stockout fails the start"
echo "$errout" | grep -q "zone us-central1-a has no capacity"
ok $? "naming the zone: $errout"
is "$(emu_holds)" "0 0 0" "and leaves nothing"

# ------------------------------------------------------ kill -9 mid-start
emu_start --fault op_delay=0.5
pbx_bg cluster start e1
instances_made() { [ "$(emu_holds | cut -d' ' -f1)" -gt 0 ]; }
wait_bg 100 0.1 instances_made
kill9
run_pbx cluster stop --discard-results e1
ok $rc "stop after pbx was killed mid-create: $errout"
is "$(emu_holds)" "0 0 0" "nothing is left after kill -9 and stop"

# Killed at other points: before anything was created, while operations
# are polled, mid-bootstrap, waiting for idle (by the node's state in the
# store: planned, creating, bootstrapping, and a moment after).
for point in planned creating bootstrapping late; do
	emu_start --fault op_delay=0.3
	pbx_bg cluster start e1
	wait_bg 300 0.02 gpu2_at "$point"
	[ "$point" != late ] || sleep 0.4
	kill9
	run_pbx cluster stop --discard-results e1
	ok $rc "stop after kill -9 at '$point' (gpu2 was '$st'): $errout"
	is "$(emu_holds):$(ls "$TEST_TMP/emu/bodies/pbx-test/us-central1-a" 2>/dev/null | wc -l)" "0 0 0:0" \
		"nothing is left after kill -9 at '$point' and stop"
done
# ------------------------------------------------------------ credentials
# A token living 2 s, operations slow enough that it expires mid-start.
emu_start --token-lifetime 2 --fault op_delay=0.4
run_pbx cluster start e1
ok $rc "start succeeds while its token expires: $errout"
grants=$(emu_get calls | python3 -c 'import json,sys; print(json.load(sys.stdin)["token_grants"])')
[ "$grants" -ge 2 ]
ok $? "the token was fetched again before it expired ($grants grants)"
run_pbx cluster stop --discard-results e1
is "$rc:$(emu_holds)" "0:0 0 0" "stop after the refreshed start leaves nothing"

# A key the emulator does not know (same account, another key).
emu_start
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$TEST_TMP/other.pem" 2>/dev/null
python3 - "$TEST_TMP/sa.json" "$TEST_TMP/other.pem" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["private_key"] = open(sys.argv[2]).read()
json.dump(d, open(sys.argv[1], "w"))
PY
run_pbx cluster start e1
is "$rc" "1" "a wrong key fails the start"
echo "$errout" | grep -q "authentication failed for service account pbx-e2e@pbx-test.iam.gserviceaccount.com" &&
	echo "$errout" | grep -q "invalid_grant"
ok $? "with a clear authentication error: $errout"
echo "$errout" | grep -q -e "BEGIN" -e "eyJ"
ok $((! $?)) "the error quotes neither key nor assertion"
is "$(emu_holds)" "0 0 0" "and nothing was created"
run_pbx cluster stop --discard-results e1

# gcloud's authorized_user file (refresh token) against the token endpoint.
emu_post authorized-users '{"client_id": "cid.apps.googleusercontent.com", "client_secret": "csecret", "refresh_token": "1//rtoken"}' >/dev/null
cat >"$PBX_HOME/adc.json" <<ADC
{"type": "authorized_user", "client_id": "cid.apps.googleusercontent.com", "client_secret": "csecret",
 "refresh_token": "1//rtoken", "token_uri": "http://127.0.0.1:$PORT/token"}
ADC
chmod 600 "$PBX_HOME/adc.json"
sed -i "s#credentials: $TEST_TMP/sa.json#credentials: $PBX_HOME/adc.json#" "$PBX_HOME/config.yaml"
run_pbx cluster stop --discard-results --dry-run e1
run_pbx cluster start e1
ok $rc "start with authorized_user credentials: $errout"
run_pbx cluster stop --discard-results e1
is "$rc:$(emu_holds)" "0:0 0 0" "stop with them leaves nothing"
sqlite3 "$PBX_HOME/pbx.db" "SELECT detail FROM events" >"$TEST_TMP/events"
grep -c "/token" "$TEST_TMP/events" >/dev/null && ! grep -q -e csecret -e rtoken -e "Bearer" -e "BEGIN" "$TEST_TMP/events"
ok $? "the request log names token calls but holds no secret"
done_testing
