#!/bin/sh
# t0450-gce-autostop.sh - autostop on Compute Engine (the emulator's node
# bodies; docs/autostop.md): an idle cluster (head + 1 node, autostop 12 s)
# powers itself off from inside, with no credential on the head: every
# instance becomes TERMINATED through a guest shutdown (the emulator's
# compute.instances.guestTerminate, as Compute Engine records one), no
# body process is left and the bodies' disks stay; `cluster show` and
# `exec` say it is stopped; `cluster start` sends instances.start for each
# TERMINATED instance, the same disks come back and a job runs.  The head's
# metadata server gives it tokens for its service account (the node none),
# and pbx run with them and no credentials deletes the cluster by its id;
# the user's `stop` then finds nothing and forgets it.  Emulator addresses $SLOT_NET.1.0/24 (private) and
# $SLOT_NET.2.0/24 (public); SLURM ports from BODY_PORT_BASE + 64*8.
. "$(dirname "$0")/lib.sh"

stop_at_exit as
gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24"
mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C t0450 -f "$PBX_HOME/id"
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  as:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    autostop: 12s
    head: { service_account: pbx-e2e@pbx-test.iam.gserviceaccount.com }
    node_groups:
      - { name: node, count: 1, machine_type: e2-standard-4 }
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
  local: { slurm_port_base: $BODY_PORT_BASE }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"
export PBX_AUTOSTOP_TICK=1
statuses() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted(i["status"] for i in json.load(sys.stdin)["instances"])))'; }
BODIES=$TEST_TMP/emu/bodies

run_pbx -q cluster start as
ok $rc "the cluster starts: $errout"
is "$(statuses)" "RUNNING RUNNING" "two instances run"
is "$(emu_get state | python3 -c 'import json,sys; print(" ".join(sorted("%s=%s" % (i["name"].rsplit("-", 1)[-1], ",".join(s["email"] for s in i.get("serviceAccounts", [])) or "-") for i in json.load(sys.stdin)["instances"])))')" \
	"head=pbx-e2e@pbx-test.iam.gserviceaccount.com node1=-" "the head runs as its service account, the node as none"
i=0
while [ "$(statuses)" != "TERMINATED TERMINATED" ] && [ $i -lt 90 ]; do sleep 1; i=$((i + 1)); done
is "$(statuses)" "TERMINATED TERMINATED" "idle for 12 s, both instances stopped themselves (${i} s)"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
alogs() { find "$BODIES" -name pbx-autostop.log -exec cat {} +; }
is "$(alogs | grep -c 'the head asks to power off')" 1 "node1 obeyed the head's request"
is "$(alogs | grep -c 'not answered')" 0 "and the head had its answer (.pbx-autostop/off/, docs/autostop.md): $(alogs | grep 'not answered')"
is "$(find "$BODIES" -path '*/var/lib/pbx/autostop.last' -exec grep answered= {} +)" "answered=node1
unanswered=" "the head's record says node1 answered"
is "$(find "$BODIES" -name slurm.conf -path '*/etc/slurm/*' | grep -c .)" 2 "both bodies' disks are kept"
list_state() { "$PBX" cluster list --json "$@" | json_get '[c["state"] for c in d if c["name"] == "as"][0]'; }
is "$(list_state)" "up" "cluster list, offline, shows the state recorded at the start"
is "$(list_state --refresh)" "stopped" "cluster list --refresh asks the cloud: stopped"
is "$(list_state)" "stopped" "and records it"
run_pbx -q cluster exec as -- hostname
is "$rc" 1 "exec on the stopped cluster fails"
echo "$errout" | grep -q "cluster as is stopped: its head instance is TERMINATED.*pbx cluster start as"
ok $? "it says the head instance is TERMINATED and how to start it: $errout"

run_pbx cluster start as --autostop off
ok $rc "start brings it back: $errout"
echo "$errout" | grep -q "starting (was TERMINATED)"
ok $? "progress says the stopped instances are started"
is "$(statuses)" "RUNNING RUNNING" "both instances run again"
run_pbx cluster exec as -- srun -N1 hostname
ok $rc "a job runs: $out $errout"
is "$(list_state)" "up" "after the start, cluster list says up"
run_pbx cluster show as
echo "$out" | grep -q "last: stopped itself at .*idle for 12 s (autostop)"
ok $? "show reads the head's record of its last autostop: $(echo "$out" | sed -n 3p)"

# The head alone powered off (a guest shutdown), node1 still running:
# `cluster list --refresh` says stopped and names what is still billed.
emu_post guest-shutdown "{\"instance\": \"$(emu_get state | python3 -c 'import json,sys; print([i["name"] for i in json.load(sys.stdin)["instances"] if i["name"].endswith("-head")][0])')\"}" >/dev/null
i=0
while [ "$(statuses)" != "RUNNING TERMINATED" ] && [ $i -lt 30 ]; do sleep 1; i=$((i + 1)); done
is "$(statuses)" "RUNNING TERMINATED" "the head alone is powered off"
run_pbx cluster list --refresh
echo "$out" | grep -q "^as  *gce  *stopped (running: node1) "
ok $? "cluster list --refresh: stopped, node1 still running: $out"
is "$("$PBX" cluster list --refresh --json | json_get '[(c["state"], c["still_running"]) for c in d if c["name"] == "as"][0]')" \
	"('stopped', ['node1'])" "and in JSON"
is "$("$PBX" cluster list --json | json_get '[c["still_running"] for c in d if c["name"] == "as"][0]')" \
	"None" "still_running is null without --refresh (not asked)"
run_pbx -q cluster exec as -- hostname
echo "$errout" | grep -q "still running, and billed: node1"
ok $? "exec says node1 still runs: $errout"
run_pbx cluster start as --autostop off
ok $rc "start brings the head back: $errout"
is "$(statuses)" "RUNNING RUNNING" "both instances run"

# The head's own identity (docs/head-identity.md): its metadata server
# hands it tokens for its service account, which the compute API takes; the
# node, which runs as no account, gets none.
ip_of() {
	emu_get state | python3 -c 'import json, sys
print(" ".join(i["networkIP"] for i in json.load(sys.stdin)["instances"]
               if i["name"].endswith("-" + sys.argv[1])))' "$1"
}
HEAD_IP=$(ip_of head)
NODE_IP=$(ip_of node1)
md_get() { curl -s -o "$TEST_TMP/md" -w '%{http_code}' -H 'Metadata-Flavor: Google' "http://$1/computeMetadata/v1/instance/$2"; }
is "$(md_get "$HEAD_IP" service-accounts/default/email):$(cat "$TEST_TMP/md")" \
	"200:pbx-e2e@pbx-test.iam.gserviceaccount.com" "the head's metadata server names its service account"
is "$(md_get "$HEAD_IP" service-accounts/default/token)" 200 "and gives it a token"
tok=$(json_get 'd["access_token"]' <"$TEST_TMP/md")
is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" \
	"http://127.0.0.1:$PORT/compute/v1/projects/pbx-test/zones/us-central1-a/instances")" 200 \
	"the compute API takes the head's token"
is "$(md_get "$NODE_IP" service-accounts/default/token)" 404 "the node, with no service account, gets no token"
is "$(curl -s -o /dev/null -w '%{http_code}' "http://$HEAD_IP/computeMetadata/v1/instance/service-accounts/default/token")" \
	403 "a request without Metadata-Flavor gets none"

# pbx run as the head (a home with no credentials at all, the metadata
# server found by GCE_METADATA_HOST as on a VM by its name) deletes the
# cluster by its id: what a head does when it deletes its own cluster.
HEAD_HOME=$TEST_TMP/head-home
mkdir -p "$HEAD_HOME"
# the user's configuration without its credentials
sed "s#credentials: [^,]*,##" "$PBX_HOME/config.yaml" >"$HEAD_HOME/config.yaml"
grep -q credentials "$HEAD_HOME/config.yaml"
is "$?" 1 "the head's configuration names no credentials"
CID=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT uid FROM clusters WHERE name = 'as' AND state != 'deleted'")
out=$(env -u GOOGLE_APPLICATION_CREDENTIALS CLOUDSDK_CONFIG="$HEAD_HOME/gcloud" GCE_METADATA_HOST="$HEAD_IP" \
	PBX_HOME="$HEAD_HOME" PBX_CONFIG="$HEAD_HOME/config.yaml" "$PBX" -q cluster stop --discard-results --id "$CID" as 2>&1)
ok $? "pbx with the head's identity stops the cluster by its id: $out"
is "$(emu_get calls | json_get 'd["metadata_tokens"]')" "{'pbx-e2e@pbx-test.iam.gserviceaccount.com': 2}" \
	"its token came from the head's metadata server (the test's and pbx's)"
is "$(emu_get state | json_get 'len(d["instances"]), len(d["firewalls"])')" "0 0" \
	"no instance and no firewall rule is left"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"

run_pbx -q cluster stop --discard-results as
ok $rc "the user's stop then finds nothing left and forgets the cluster: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM clusters WHERE name = 'as'")" "deleted" "the store says deleted"
done_testing
