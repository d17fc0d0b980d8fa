#!/bin/sh
# gce-power.sh - SLURM power saving on booted Debian 12 VMs
# (docs/power-saving.md): the head is a VM of the emulator (vms.py) with a
# service account, and its nodes are made by the head itself, with the
# laptop's pbx idle.  A gce template whose group has min: 0 starts with
# the head alone -> a 2-task sweep wakes both nodes: slurmctld (as SlurmUser
# slurm) runs pbx-resume, which runs the head's pbx through the sudo rule;
# the head's pbx calls Compute Engine at https://compute.googleapis.com
# (the emulator, behind the namespace's gateway with a certificate the
# image trusts) with a token from the metadata server, bulk-inserts the
# instances, bootstraps the new VMs in systemd mode, pbx-ready lets the
# jobs start -> both tasks complete on woken VMs -> harvest -> after
# SuspendTime pbx-suspend deletes them (no VM left but the head's) ->
# stop -> nothing left.
#
# PBX_VM_IMAGE picks the image (default: the prebaked one); images are
# built once into PBX_VM_IMAGES (default: build/vm-images).  Skipped, with
# the reason, where this machine cannot boot VMs.
. "$PBX_SOURCE_DIR/tests/cli/lib.sh"

. "$PBX_SOURCE_DIR/tests/vm/lib.sh"
IMAGES=${PBX_VM_IMAGES:-$(dirname "$PBX")/../../vm-images}
KIND=${PBX_VM_IMAGE:-baked}
vm_skip_unless "$(vm_why_not)"

gce_vm_test_exit p1
# the instances as "node=STATUS ..." (the head as head), sorted
instances() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted(i["name"].rsplit("-", 1)[1] + "=" + i["status"] for i in json.load(sys.stdin)["instances"])))'; }
on_head() { "$PBX" -q cluster exec p1 -- "$@" 2>&1; }
power_log() { on_head cat /var/log/pbx-power.log; }
show_power_log() { power_log | tail -n 30 | sed 's/^/#   /' >&2; }

vm_images_ready "$KIND" "$IMAGES"
vm_user_key gce-power
gce_vm_emulator "$TEST_TMP" "$IMAGES/$KIND" 127.0.137.0/24
ok $? "the emulator runs with its VM network: $(tail -n 3 "$TEST_TMP/emu.out")"
gce_vm_config "$PBX_HOME" p1 "$TEST_TMP/sa.json" "$PBX_HOME/id" \
	"{ name: cpu, count: 2, min: 0, machine_type: e2-standard-2 }" \
	"head: { service_account: pbx-vm@pbx-test.iam.gserviceaccount.com }
    slurm: { suspend_time: 120s, resume_timeout: 1200s }"

# ------------------------------------------------- start: the head alone
t0=$(date +%s)
run_pbx cluster start p1
ok $rc "start of a cluster with min: 0 on booted VMs ($(($(date +%s) - t0)) s): $errout"
is "$(instances)" "head=RUNNING" "only the head's instance exists"
run_pbx cluster exec p1 -- sinfo -h -N -o '%N %t'
is "$out" "cpu1 idle~
cpu2 idle~" "SLURM knows both nodes powered down"
is "$(on_head sh -c 'stat -c "%U %a" /var/log/pbx-power.log; visudo -cqf /etc/sudoers.d/pbx-power && echo rule ok')" \
	"slurm 640
rule ok" "the power log is SlurmUser's, the sudo rule passes visudo"
on_head grep -c '127\.0\.0\.1' /etc/pbx/head-config.yaml >"$TEST_TMP/lo.count"
is "$(cat "$TEST_TMP/lo.count")" "0" "the head's configuration names no loopback endpoint (the head calls the cloud's own)"

# --------------------------------------- a sweep wakes both nodes
mkdir -p "$TEST_TMP/sweep"
cat >"$TEST_TMP/sweep/experiment.yaml" <<'EOF'
name: woken
command: echo "x=$PBX_PARAM_X on $(hostname)" > result.txt
sweep: { grid: { x: [1, 2] } }
outputs: ["result.txt"]
EOF
bulk_inserts() { grep -c 'POST /compute/v1/projects/pbx-test/zones/[^/]*/instances/bulkInsert' "$TEST_TMP/emu.log"; }
bulk0=$(bulk_inserts)
t0=$(date +%s)
run_pbx parrun --json "$TEST_TMP/sweep/experiment.yaml" p1
ok $rc "parrun of a 2-task sweep: $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG" 1500
wf=$?
is "$(json_get '" ".join(sorted({t["state"] for t in d["tasks"]}))' <"$TEST_TMP/state.json")" "COMPLETED" \
	"both tasks COMPLETED on woken VMs ($(($(date +%s) - t0)) s)"
[ "$wf" = 0 ] || show_power_log
echo "# the sweep took $(($(date +%s) - t0)) s (nodes made, booted and bootstrapped by the head)" >&2
run_pbx cluster exec -n cpu2 p1 -- sh -c 'findmnt -n -o FSTYPE /shared; systemctl is-active slurmd munge'
is "$out" "nfs4
active
active" "a woken node (the laptop learns it from the cloud): /shared over NFS, units active: $errout"
run_pbx harvest "$PKG"
ok $rc "harvest: $errout"
is "$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null | sed 's/.*-//' | sort | tr '\n' ' ')" \
	"cpu1 cpu2 " "one task ran on each woken node"
is "$(power_log | grep -c ' resume cpu\[1-2\]$')" "1" "pbx-power.log has one resume of cpu[1-2]"
tokens=$(emu_get calls | json_get 'd["metadata_tokens"].get("pbx-vm@pbx-test.iam.gserviceaccount.com", 0)')
[ "${tokens:-0}" -ge 1 ]
ok $? "the head's pbx took its token from the metadata server ($tokens)"
is "$(($(bulk_inserts) - bulk0))" "1" "one bulkInsert made both nodes"

# --------------------------------------- idle: the head deletes them
t0=$(date +%s)
while [ "$(instances)" != "head=RUNNING" ] && [ $(($(date +%s) - t0)) -lt 600 ]; do sleep 5; done
is "$(instances)" "head=RUNNING" "after SuspendTime the head deleted both nodes ($(($(date +%s) - t0)) s)"
[ "$(instances)" = "head=RUNNING" ] || show_power_log
is "$(pgrep -f "qemu-system.*$TEST_TMP.*-cpu[12]" | wc -l)" "0" "no node's VM runs"
# SuspendTimeout (30 s) later SLURM has them powered down (idle% until then)
t0=$(date +%s)
until run_pbx cluster exec p1 -- sinfo -h -N -o '%N %t' && [ "$out" = "cpu1 idle~
cpu2 idle~" ] || [ $(($(date +%s) - t0)) -ge 120 ]; do sleep 5; done
is "$out" "cpu1 idle~
cpu2 idle~" "SLURM has them powered down again"
is "$(power_log | grep -ci 'error\|fail')" "0" "no error in the power log"

# ------------------------- woken again: a new instance, a new host key
cat >"$TEST_TMP/sweep/experiment.yaml" <<'EOF'
name: again
command: echo "again on $(hostname)" > result.txt
outputs: ["result.txt"]
EOF
t0=$(date +%s)
run_pbx parrun --json "$TEST_TMP/sweep/experiment.yaml" p1
ok $rc "parrun of one more task: $errout"
PKG2=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG2" 1500
wf=$?
is "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" "['COMPLETED']" \
	"a node woken a second time runs the task ($(($(date +%s) - t0)) s)"
[ "$wf" = 0 ] || show_power_log

# ------------------------------------------------------------- stop
run_pbx cluster stop --discard-results p1
ok $rc "stop: $errout"
is "$(instances)" "" "the emulator holds no instance"
sleep 1
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM is left running"

done_testing
