#!/bin/sh
# t0450-gce-autostop.sh - autostop on Compute Engine (the emulator's node
# bodies; docs/autostop.md): an idle cluster (head + 1 node, autostop 12 s)
# powers itself off from inside, with no credential on the head: every
# instance becomes TERMINATED through a guest shutdown (the emulator's
# compute.instances.guestTerminate, as Compute Engine records one), no
# body process is left and the bodies' disks stay; `cluster show` and
# `exec` say it is stopped; `cluster start` sends instances.start for each
# TERMINATED instance, the same disks come back and a job runs; `stop`
# deletes everything.  Emulator addresses 127.0.90.0/24 (private) and
# 127.0.91.0/24 (public); SLURM ports from 26000 + 64*8.
. "$(dirname "$0")/lib.sh"

stop_at_exit as
gce_emulator 127.0.90.0/24 127.0.91.0/24
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
  local: { slurm_port_base: 26000 }
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

run_pbx -q cluster stop as
ok $rc "stop: $errout"
is "$(emu_get state | json_get 'len(d["instances"]), len(d["firewalls"])')" "0 0" \
	"no instance and no firewall rule is left"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
done_testing
