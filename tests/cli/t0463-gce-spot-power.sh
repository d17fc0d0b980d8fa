#!/bin/sh
# t0463-gce-spot-power.sh - a preempted Spot node that SLURM's power saving
# makes comes back by itself (issue 19, sections 2 and 3; docs/spot.md,
# docs/power-saving.md), on the Compute Engine emulator's node bodies.  A
# Spot group with min: 0 starts with the head alone; a pbx-train task wakes
# node1 (pbx-resume on the head); the emulator preempts it (30 s of notice,
# then Compute Engine deletes it).  node1's pbx-preempt marks it
# POWER_DOWN_ASAP, not only drained, and sends the job SIGTERM; pbx-train
# checkpoints and exits 75, the wrapper requeues the job; slurmctld runs
# pbx-suspend (whose DELETE Compute Engine refuses with resourceNotReady
# until its own deletion ends); the requeued job wakes node1 again, a new
# instance, where the task resumes and completes on attempt 2, with final
# parameters bit-identical to an uninterrupted twin's: no pbx ran on the
# user's side but to read the state.  Emulator addresses 127.0.131.0/24
# (private) and 127.0.132.0/24 (public); SLURM ports from 8000 + 64*8.
. "$(dirname "$0")/lib.sh"

gce_power_cluster sq 127.0.131.0/24 127.0.132.0/24 8000 \
	"{ name: spot, count: 1, min: 0, machine_type: e2-standard-2, cpus: 2, spot: true }" \
	"slurm: { suspend_time: 300s, resume_timeout: 240s }" --preempt-notice 30
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
node1_instances() {
	emu_get state | json_get '" ".join(i["id"] for i in d["instances"] if i["labels"].get("pbx-role") == "compute")'
}
node1_name() {
	emu_get state | json_get '" ".join(i["name"] for i in d["instances"] if i["labels"].get("pbx-role") == "compute")'
}

run_pbx -q cluster start sq
ok $rc "a Spot group with min: 0 starts: $errout"
is "$(node_states)" "head:up spot1:asleep" "only the head is made"

spot_train sq
ID1=$(node1_instances)
NODE=$(node1_name)
[ -n "$ID1" ]
ok $? "node1's instance ($NODE, id $ID1)"
spot_watching gce "the woken node"

op=$(gce_preempt "$NODE")
is "$op" "compute.instances.preempted" "the emulator preempts node1 (30 s of notice)"
spot_power_notice "$plog"

# from here nothing on the user's side but reading: slurmctld suspends
# node1 (its instance is gone) and wakes it again for the requeued job
spot_power_back sq
refused=$(grep -c "\"DELETE /compute/v1/projects/pbx-test/zones/us-central1-a/instances/$NODE?[^ ]* HTTP/1.1\" 400" "$TEST_TMP/emu.log")
[ "$refused" -ge 1 ]
ok $? "the suspend's DELETE during the notice was refused ($refused times: resourceNotReady)"
power_log | grep -q 'resourceNotReady' && r=1 || r=0
ok $r "and asked again until the instance was gone: the suspend did not fail"
spot_resumed 60
ID2=$(node1_instances)
[ -n "$ID2" ] && [ "$ID2" != "$ID1" ]
ok $? "on a new instance of node1 ($ID1, then $ID2)"

spot_twin sq

run_pbx -q cluster stop --discard-results sq
ok $rc "stop: $errout"
is "$(emu_get state | json_get 'len(d["instances"])')" "0" "no instance is left"
wait_for 300 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
done_testing
