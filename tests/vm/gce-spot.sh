#!/bin/sh
# gce-spot.sh - a Spot node preempted on booted Debian 12 VMs (docs/spot.md):
# the path t0463 runs on node bodies, here with
# systemd, pbx-preempt.service and Compute Engine's notice as it comes:
# `preempted` TRUE in the metadata and, at the same moment, ACPI's power
# button (the emulator's vms.py presses it through QMP), so the guest shuts
# down while its job checkpoints, and its machine ends 30 s later.  A Spot
# group with min: 0 starts with the head alone -> a pbx-train task wakes
# spot1 (pbx-resume on the head, whose pbx calls the API at
# compute.googleapis.com) -> the emulator preempts spot1 mid-training ->
# the task checkpoints, exits 75 and is requeued -> slurmctld runs
# pbx-suspend for spot1 and, for the requeued job, pbx-resume: a new
# instance -> the task resumes from its checkpoint and completes on its
# second attempt -> an uninterrupted twin ends with the same parameters ->
# stop -> nothing left.  No pbx runs on the user's side but to submit and
# read.  NAT block 127.0.144.0/24.
#
# PBX_VM_IMAGE picks the image (default: the prebaked one); images are
# built once into PBX_VM_IMAGES (default: build/vm-images).  Skipped, with
# the reason, where this machine cannot boot VMs.
. "$PBX_SOURCE_DIR/tests/cli/lib.sh"

. "$PBX_SOURCE_DIR/tests/vm/lib.sh"
IMAGES=${PBX_VM_IMAGES:-$(dirname "$PBX")/../../vm-images}
KIND=${PBX_VM_IMAGE:-baked}
vm_skip_unless "$(vm_why_not)"

gce_vm_test_exit s1
# each VM's journal on its serial console (vms.py): what a preempted VM
# did, after it is gone
export PBX_VM_CONSOLE_JOURNAL=1
spot_console() { cat "$TEST_TMP"/emu/vm/*-spot1/console.log 2>/dev/null | tr -d '\r'; }
instances() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted(i["name"].rsplit("-", 1)[1] + "=" + i["status"] for i in json.load(sys.stdin)["instances"])))'; }
spot_instance() { emu_get state | json_get '" ".join(i["name"] + "/" + i["id"] for i in d["instances"] if i["labels"].get("pbx-role") == "compute")'; }
on_head() { "$PBX" -q cluster exec s1 -- "$@" 2>&1; }
power_log() { on_head cat /var/log/pbx-power.log; }
show_logs() {
	power_log | tail -n 20 | sed 's/^/# power: /' >&2
	on_head sh -c 'grep -h -i "requeue\|not responding\|power\|spot1" /var/log/slurm/slurmctld.log | tail -n 30' | sed 's/^/# slurmctld: /' >&2
	on_head cat "$T0/stderr" | tail -n 15 | sed 's/^/# task: /' >&2
}

vm_images_ready "$KIND" "$IMAGES"
vm_user_key gce-spot
gce_vm_emulator "$TEST_TMP" "$IMAGES/$KIND" 127.0.144.0/24
ok $? "the emulator runs with its VM network: $(tail -n 3 "$TEST_TMP/emu.out")"
gce_vm_config "$PBX_HOME" s1 "$TEST_TMP/sa.json" "$PBX_HOME/id" \
	"{ name: spot, count: 1, min: 0, machine_type: e2-standard-2, spot: true }" \
	"head: { service_account: pbx-vm@pbx-test.iam.gserviceaccount.com }
    slurm: { suspend_time: 120s, resume_timeout: 1500s }"

t0=$(date +%s)
run_pbx cluster start s1
ok $rc "start of a Spot group with min: 0 on booted VMs ($(($(date +%s) - t0)) s): $errout"
is "$(instances)" "head=RUNNING" "only the head's instance exists"

# ------------------------------------------ a training task wakes spot1
spot_experiment
# a TCG VM trains at about 17 images/s (an epoch of 2048 took 119 s): 512
# examples, 6 epochs of 8 steps, a metrics line each epoch, so the
# preemption comes after the first epoch and each run takes minutes
sed -i -e 's/time: "00:10:00"/time: "01:00:00"/' -e 's/synthetic_n: 2048/synthetic_n: 512/' \
	-e 's/epochs: 100/epochs: 6/' -e 's/log_every: 50/log_every: 8/' "$TEST_TMP/pre/experiment.yaml"
t0=$(date +%s)
run_pbx parrun --json "$TEST_TMP/pre/experiment.yaml" s1
ok $rc "parrun of a pbx-train task: $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
T0=/shared/pbx/$PKG/tasks/0
training() { on_head test -s "$T0/out/metrics.jsonl" >/dev/null; }
wait_for 1800 training
ok $? "the task trains on a woken Spot VM ($(($(date +%s) - t0)) s)"
[ -n "$(spot_instance)" ] || show_logs
INST1=$(spot_instance)
NAME=${INST1%/*}
run_pbx cluster exec -n spot1 s1 -- systemctl is-active pbx-preempt
is "$out" "active" "spot1 runs pbx-preempt.service: $errout"

# --------------------------------------- preempted: notice + power button
op=$(gce_preempt "$NAME")
is "$op" "compute.instances.preempted" "the emulator preempts spot1 ($NAME): 30 s of notice, the power button pressed"
requeued() { on_head grep -q '^=== pbx task 0 attempt 1 REQUEUED exit 75 ' "$T0/stderr"; }
wait_for 600 requeued
r=$?
ok $r "the task checkpointed, exited 75 and was requeued within the notice"
[ $r = 0 ] || show_logs
spot_console | grep -a 'pbx-preempt\|Stopping\|Stopped\|Power\|power' | tail -n 40 | sed 's/^/# spot1: /' >&2
spot_console | grep -aq 'pbx-preempt.*SIGTERM sent to its batch step'
ok $? "pbx-preempt on spot1 signalled the job (its journal on the console)"
gone() { [ "$(instances)" = "head=RUNNING" ] || [ "$(spot_instance)" != "$INST1" ]; }
wait_for 600 gone
ok $? "Compute Engine deleted the preempted instance: $(instances)"

# ----------- nothing on the user's side: slurmctld suspends and resumes
suspended() { power_log | grep -q ' suspend spot1$'; }
wait_for 900 suspended
ok $? "slurmctld ran pbx-suspend for spot1 once its job had left"
woke_again() { [ "$(power_log | grep -c ' resume spot1$')" -ge 2 ]; }
wait_for 1800 woke_again
ok $? "and pbx-resume again for the requeued job"
t0=$(date +%s)
wait_final "$PKG" 3000
ok $? "the task ends ($(($(date +%s) - t0)) s after the second wake)"
is "$(json_get '[(t["state"], t["attempt"]) for t in d["tasks"]]' <"$TEST_TMP/state.json")" \
	"[('COMPLETED', 2)]" "it completes on its second attempt"
[ "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" = "['COMPLETED']" ] || show_logs
on_head grep -q '^pbx-train: resumed from out/checkpoint.pbxt' "$T0/stderr"
ok $? "attempt 2 resumed from the checkpoint"
INST2=$(spot_instance)
[ -n "$INST2" ] && [ "$INST2" != "$INST1" ]
ok $? "on a new instance of spot1 ($INST1, then $INST2)"

# ------------------------------------------------ the uninterrupted twin
mkdir -p "$TEST_TMP/twin"
sed 's/^name: spot$/name: spot-twin/' "$TEST_TMP/pre/experiment.yaml" >"$TEST_TMP/twin/experiment.yaml"
run_pbx parrun --json "$TEST_TMP/twin/experiment.yaml" s1
ok $rc "parrun of the twin: $errout"
TWIN=$(echo "$out" | json_get 'd["package"]')
wait_final "$TWIN" 3000
is "$(json_get '[(t["state"], t["attempt"]) for t in d["tasks"]]' <"$TEST_TMP/state.json")" \
	"[('COMPLETED', 1)]" "the twin completes on its first attempt"
sha() { on_head cat "/shared/pbx/$1/tasks/0/out/summary.json" | json_get 'd["params_sha256"]'; }
s0=$(sha "$PKG")
s1=$(sha "$TWIN")
[ -n "$s0" ] && [ "$s0" = "$s1" ]
ok $? "final parameters equal the uninterrupted twin's ($s0 / $s1)"

# ------------------------------------------------------------- stop
run_pbx cluster stop --discard-results s1
ok $rc "stop: $errout"
is "$(instances)" "" "the emulator holds no instance"
sleep 1
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM is left running"

done_testing
