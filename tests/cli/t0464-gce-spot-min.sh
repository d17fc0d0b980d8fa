#!/bin/sh
# t0464-gce-spot-min.sh - a preempted Spot node that always runs (within its
# group's min:) comes back by itself (issue 19, section 3; docs/spot.md), on
# the Compute Engine emulator's node bodies.  A Spot group with count 2,
# min 1 starts with spot1 made and spot2 asleep; a pbx-train task runs on
# spot1; the emulator preempts spot1 (30 s of notice).  Its pbx-preempt
# marks it POWER_DOWN_ASAP (the cluster has power saving) and sends the job
# SIGTERM; pbx-train checkpoints and exits 75, the wrapper requeues the job;
# slurmctld runs pbx-suspend for spot1, which powers spot1 up again once
# SLURM has it down: pbx-resume makes it anew.  The task completes on its
# second attempt from its checkpoint with the parameters of an
# uninterrupted twin; spot2, woken for the requeued job or not, sleeps again
# after suspend_time, spot1 stays; the user's pbx reaches the new spot1.  No
# pbx ran on the user's side but to read.  Emulator addresses
# 127.0.145.0/24 (private) and 127.0.146.0/24 (public); SLURM ports from
# 4000 + 64*8.
. "$(dirname "$0")/lib.sh"

gce_power_cluster sm 127.0.145.0/24 127.0.146.0/24 4000 \
	"{ name: spot, count: 2, min: 1, machine_type: e2-standard-2, cpus: 2, spot: true }" \
	"slurm: { suspend_time: 30s, resume_timeout: 240s }" --preempt-notice 30
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
spot1_instance() {
	emu_get state | json_get '" ".join(i["name"] + "/" + i["id"] for i in d["instances"] if i["name"].endswith("-spot1"))'
}

run_pbx -q cluster start sm
ok $rc "a Spot group with count 2, min 1 starts: $errout"
is "$(node_states)" "head:up spot1:up spot2:asleep" "spot1 is made, spot2 sleeps"
head_conf=$(find "$BODIES" -path '*/var/log/slurm/slurmctld.log' | head -n 1)
head_conf=${head_conf%/var/log/slurm/slurmctld.log}/etc/slurm/slurm.conf
is "$(grep '^SuspendExcNodes=' "$head_conf")" "SuspendExcNodes=spot1" "SLURM never suspends spot1 for being idle"
conf_sum=$(md5sum <"$head_conf")

spot_train sm
is "$(emu_instances)" "head=RUNNING spot1=RUNNING" "the task runs on spot1, which always runs"
INST1=$(spot1_instance)
NAME=${INST1%/*}
spot_watching gce "spot1"

op=$(gce_preempt "$NAME")
is "$op" "compute.instances.preempted" "the emulator preempts spot1 (30 s of notice)"
# POWER_DOWN_ASAP, not DRAIN: a drained spot1 would stay down until the
# user's next start
spot_power_notice "$plog"

# from here nothing on the user's side but reading
suspended() { power_log | grep -q ' suspend spot1$'; }
wait_for 3000 suspended
ok $? "slurmctld ran pbx-suspend for spot1 once its job had left: $(power_log | tail -n 3 | tr '\n' '|')"
powered_up() { power_log | grep -q ' power_up spot1 (a Spot node that always runs)$'; }
wait_for 3000 powered_up
ok $? "pbx-suspend powered spot1 up again once SLURM had it down: $(power_log | tail -n 4 | tr '\n' '|')"
remade() { power_log | sed -n '/ power_up spot1 /,$p' | grep -q ' resume spot1$'; }
wait_for 3000 remade
ok $? "which ran pbx-resume for spot1: $(power_log | grep -E ' (resume|suspend|power_up) ' | tr '\n' '|')"
spot_resumed 900
new_up() {
	i=$(spot1_instance)
	[ -n "$i" ] && [ "$i" != "$INST1" ] &&
		[ "$("$PBX" cluster exec sm -- sinfo -h -n spot1 -o '%t %E' 2>/dev/null)" = "idle none" ]
}
wait_for 6000 new_up
ok $? "spot1 is a new instance ($INST1, then $(spot1_instance)), idle with no reason: $("$PBX" cluster exec sm -- sinfo -h -n spot1 -o '%t %E' 2>&1)"
wait_for 6000 prints "head=RUNNING spot1=RUNNING" emu_instances
is "$(emu_instances)" "head=RUNNING spot1=RUNNING" "after suspend_time idle spot1 stays, spot2 sleeps"

# spot2 woke while spot1 slept, then spot1 woke: node lines and
# SuspendExcNodes are in the template's order, so slurmctld never restarted
is "$(md5sum <"$head_conf")" "$conf_sum" "the head's slurm.conf did not change through the wakes and sleeps"
is "$(grep -c 'Terminate signal' "${head_conf%/etc/slurm/slurm.conf}/var/log/slurm/slurmctld.log")" 0 \
	"slurmctld was never restarted"

# the user's pbx learns the new spot1 (its address and host key)
run_pbx cluster exec -n spot1 sm -- hostname
ok $rc "the user's exec reaches the new spot1: $out $errout"
INST2=$(spot1_instance)
is "$(node_uid spot1)" "${INST2#*/}" "the user's store has spot1's new instance"
spot_twin sm

run_pbx -q cluster stop --discard-results sm
ok $rc "stop: $errout"
is "$(emu_get state | json_get 'len(d["instances"])')" "0" "no instance is left"
wait_for 300 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
done_testing
