#!/bin/sh
# t0454-gce-power-kill.sh - the head's resume program killed with SIGKILL
# on Compute Engine (issue 19, section 2; docs/power-saving.md), at four
# points: node1 marked waking before anything is asked (power:1), its
# instance asked for but not yet recorded (create:1), made but not
# bootstrapped (start:1), bootstrapped before SLURM sees it (start:2).
# Each time the next resume goes on (the instance a killed resume asked for
# is taken, not made twice) and node1 runs a job.  A suspend during a resume
# waits for it (one power action at a time).  Last, a resume killed at
# create:1 and then the user's `stop`, whose store never heard of the
# instance: it is found by the cluster's labels, and nothing is left.
# PBX_TEST_KILL_AT (src/util/testkill.h) raises SIGKILL in pbx itself, as
# `kill -9` would.  Emulator addresses $SLOT_NET.1.0/24 (private) and
# $SLOT_NET.2.0/24 (public); SLURM ports from BODY_PORT_BASE + 64*8 (below Linux's
# ephemeral ports, 32768 up: a port there may be any connection's).
. "$(dirname "$0")/lib.sh"

gce_power_cluster pk "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24" "$BODY_PORT_BASE" "{ name: node, count: 1, min: 0, machine_type: e2-standard-2, cpus: 2 }" \
	"slurm: { suspend_time: 1h, resume_timeout: 240s }"
instances() { emu_instances; }

run_pbx -q cluster start pk
ok $rc "a cluster with min: 0 starts: $errout"
is "$(instances)" "head=RUNNING" "only the head runs"
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
PK_ASLEEP="head=RUNNING" PK_AWAKE="head=RUNNING node1=RUNNING" PK_NODE1="node1="
node1_state() { pk_node1_state pk; }
power_kill_at pk power:1 waking no
power_kill_at pk create:1 creating yes
power_kill_at pk start:1 running yes
power_kill_at pk start:2 bootstrapping yes

# SLURM runs its programs as it sees fit: a suspend of node1 while a
# resume makes it waits for the resume (one power action at a time), and
# then removes the node; without the wait it would see no instance yet and
# leave the resume's running, unrecorded as awake
"$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/r.out" 2>&1 &
resume_pid=$!
making() { case $(node1_state) in waking | creating | running | bootstrapping) return 0 ;; esac; return 1; }
wait_for 300 making
ok $? "a resume of node1 is under way: $(node1_state)"
"$pbx_head" -q cluster power pk suspend node1 >"$TEST_TMP/k.out" 2>&1
ok $? "a suspend of node1 meanwhile: $(cat "$TEST_TMP/k.out")"
wait $resume_pid
ok $? "the resume ended well: $(cat "$TEST_TMP/r.out")"
is "$(node1_state):$(instances)" "asleep:head=RUNNING" "the suspend came second: node1 asleep, no instance"

# A resume killed at create:1 leaves node1's instance running while SLURM
# has node1 asleep: an idle stop of the head (its watcher, run here with a
# 10 s autostop) removes it too, not only the nodes SLURM has awake
stray_resume_idle_stop pk "head=RUNNING node1=RUNNING" "head=TERMINATED"

run_pbx -q cluster start pk
ok $rc "the user's start brings the head back: $errout"
PBX_TEST_KILL_AT=create:1 "$pbx_head" -q cluster power pk resume node1 >"$TEST_TMP/k.out" 2>&1
is "$?" "137" "a last resume killed at create:1"
run_pbx -q cluster stop --discard-results pk
ok $rc "the user's stop: $errout"
is "$(emu_get state | json_get 'len(d["instances"]), len(d["firewalls"]), len(d["routers"])')" "0 0 0" \
	"no instance (node1's, which the user's store never knew, included), firewall rule or router is left"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
