# cloud/spot-min.sh - one body for t0464 (CLOUD=gce) and t0468
# (CLOUD=aws), sourced after lib.sh: a preempted Spot node that always runs
# (within its group's min:) comes back by itself (docs/spot.md), on the
# emulators' node bodies.  A Spot group with count 2, min 1 starts with
# spot1 made and spot2 asleep; a pbx-train task runs on spot1; the cloud
# preempts spot1 with 30 s of notice (Compute Engine: the emulator's
# preemption; EC2: the harness's spot interruption, then it terminates the
# instance).  spot1's pbx-preempt marks it POWER_DOWN_ASAP (the cluster has
# power saving) and sends the job SIGTERM; pbx-train checkpoints and exits
# 75, the wrapper requeues the job; slurmctld runs pbx-suspend for spot1,
# which powers spot1 up again once SLURM has it down: pbx-resume makes it
# anew.  The task completes on its second attempt from its checkpoint with
# the parameters of an uninterrupted twin; spot2, woken for the requeued
# job or not, sleeps again after suspend_time, spot1 stays; slurm.conf
# never changes and slurmctld is never restarted; the user's pbx reaches
# the new spot1.  No pbx ran on the user's side but to read.  Where no DNS
# knows a node's name (EC2), slurm.conf names spot1 sm-spot1 and the
# user's start writes it into every node's /etc/hosts block, and the
# head's resume its new address.  Addresses: the slot's $SLOT_NET.1.0/24
# and $SLOT_NET.2.0/24; SLURM ports from BODY_PORT_BASE + 64*8.
# shellcheck disable=SC2154 # rc, out, errout: run_pbx's; plog: spot_watching's
case $CLOUD in
gce)
	cloud_power_cluster sm "{ name: spot, count: 2, min: 1, machine_type: e2-standard-2, cpus: 2, spot: true }" \
		"{ suspend_time: 30s, resume_timeout: 240s }" --preempt-notice 30
	UP=RUNNING
	instances() { emu_instances; }
	# spot1_instance: NAME/ID of spot1's instance ("" while there is none)
	spot1_instance() {
		emu_get state | json_get '" ".join(i["name"] + "/" + i["id"] for i in d["instances"] if i["name"].endswith("-spot1"))'
	}
	# spot1's line in slurm.conf: its instance's name, which the
	# cluster's internal DNS resolves once it exists
	spot1_uid() { spot1_instance | sed 's#^.*/##'; }
	spot1_addr() { echo "NodeAddr=$(spot1_instance | sed 's#-spot1/.*##')-spot1 State=UNKNOWN "; }
	preempt() { is "$(gce_preempt "${INST1%/*}")" "compute.instances.preempted" "the emulator preempts spot1 (30 s of notice)"; }
	hosts_named() { :; }
	left() { emu_get state | json_get 'len(d["instances"])'; }
	NOTHING=0 LEFT="instance"
	;;
aws)
	cloud_power_cluster sm "{ name: spot, count: 2, min: 1, machine_type: t3.large, cpus: 2, spot: true }" \
		"{ suspend_time: 30s, resume_timeout: 240s }"
	UP=running
	instances() { aws_instances sm | sed 's/spot=/spot1=/'; }
	# ID@ADDRESS of spot1's running instance (aws_spot_instances: the one
	# running spot instance)
	spot1_instance() { aws_spot_instances; }
	spot1_uid() { spot1_instance | sed 's/@.*//'; }
	spot1_addr() { echo "NodeAddr=sm-spot1 State=UNKNOWN "; }
	preempt() { is "$(aws_spot_interrupt "${INST1%@*}")" "terminate" "the harness interrupts spot1 (terminate in 30 s)"; }
	hosts_block() { sed -n '/^# pbx: nodes of cluster sm that sleep (begin)$/,/(end)$/p' "$1" | grep -v '^#'; }
	# hosts_named WHAT: the head's /etc/hosts block names spot1's address
	hosts_named() {
		is "$(hosts_block "$head_root/etc/hosts" | grep ' sm-spot1$')" "$(spot1_instance | sed 's/^.*@//') sm-spot1" \
			"$1"
	}
	left() { holds; }
	NOTHING="0 0 0" LEFT="instance, security group or key pair, the head's included"
	;;
esac
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
power_acts() { power_log | grep -E ' (resume|suspend|power_up) ' | tr '\n' '|'; }
spot_sinfo() { "$PBX" cluster exec sm -- sinfo -h -N -n spot1,spot2 -o '%N %t %E' 2>/dev/null | tr '\n' ' '; }

test_expect_success 'a Spot group with count 2, min 1 starts with spot1 alone' '
	run_pbx -q cluster start sm
	ok $rc "a Spot group with count 2, min 1 starts: $errout"
	is "$(node_states)" "head:up spot1:up spot2:asleep" "spot1 is made, spot2 sleeps"
	head_log=$(find "$BODIES" -path "*/var/log/slurm/slurmctld.log" | head -n 1)
	head_root=${head_log%/var/log/slurm/slurmctld.log}
	head_conf=$head_root/etc/slurm/slurm.conf
	is "$(grep "^SuspendExcNodes=" "$head_conf")" "SuspendExcNodes=spot1" "SLURM never suspends spot1 for being idle"
	is "$(grep -E "^NodeName=spot1 " "$head_conf" | tr " " "\n" | grep -E "^(NodeAddr|State)=" | tr "\n" " ")" \
		"$(spot1_addr)" "slurm.conf names spot1 ($(spot1_addr)), a node that always runs"
	hosts_named "the user'"'"'s start wrote spot1'"'"'s address into the head'"'"'s /etc/hosts block"
	conf_sum=$(md5sum <"$head_conf")
'
test_expect_success 'a task trains on spot1; the cloud preempts it' '
	spot_train sm
	is "$(instances)" "head=$UP spot1=$UP" "the task runs on spot1, which always runs"
	INST1=$(spot1_instance)
	spot_watching "$CLOUD" "spot1"
	preempt
	# POWER_DOWN_ASAP, not DRAIN: a drained spot1 would stay down until
	# the next start of the user
	spot_power_notice "$plog"
'
# from here nothing on the user's side but reading
test_expect_success 'pbx-suspend powers spot1 up again: a new instance, the task completes' '
	suspended() { power_log | grep -q " suspend spot1\$"; }
	wait_for 3000 suspended
	ok $? "slurmctld ran pbx-suspend for spot1 once its job had left: $(power_acts)"
	powered_up() { power_log | grep -q " power_up spot1 (a Spot node that always runs)\$"; }
	wait_for 3000 powered_up
	ok $? "pbx-suspend powered spot1 up again once SLURM had it down: $(power_acts)"
	remade() { power_log | sed -n "/ power_up spot1 /,\$p" | grep -q " resume spot1\$"; }
	wait_for 3000 remade
	ok $? "which ran pbx-resume for spot1: $(power_acts)"
	spot_resumed 900
'
test_expect_success 'spot1 runs as a new instance, spot2 sleeps; SLURM went on' '
	settled() {
		i=$(spot1_instance)
		[ -n "$i" ] && [ "${i#* }" = "$i" ] && [ "$i" != "$INST1" ] &&
			[ "$(spot_sinfo)" = "spot1 idle none spot2 idle~ none " ]
	}
	wait_for 6000 settled
	ok $? "spot1 is a new instance ($INST1, then $(spot1_instance)), idle with no reason, spot2 asleep: $(spot_sinfo)"
	wait_for 6000 prints "head=$UP spot1=$UP" instances
	is "$(instances)" "head=$UP spot1=$UP" "after suspend_time idle spot1 stays, spot2 sleeps"
	hosts_named "the head'"'"'s /etc/hosts block has spot1'"'"'s new address"
	power_log | grep -q error && r=1 || r=0
	ok $r "no power action failed: $(power_log | grep error | head -n 2)"
	# spot2 woke while spot1 slept, then spot1 woke: node lines and
	# SuspendExcNodes are in the order of the template, so slurmctld never
	# restarted
	is "$(md5sum <"$head_conf")" "$conf_sum" "the head'"'"'s slurm.conf did not change through the wakes and sleeps"
	is "$(grep -c "Terminate signal" "$head_log")" 0 "slurmctld was never restarted"
'
test_expect_success 'the user'"'"'s pbx reaches the new spot1; the twin has the same parameters' '
	run_pbx cluster exec -n spot1 sm -- hostname
	ok $rc "the user'"'"'s exec reaches the new spot1: $out $errout"
	is "$(node_uid spot1)" "$(spot1_uid)" "the user'"'"'s store has spot1'"'"'s new instance"
	spot_twin sm
'
test_expect_success 'the user'"'"'s stop leaves nothing' '
	run_pbx -q cluster stop --discard-results sm
	ok $rc "stop: $errout"
	is "$(left)" "$NOTHING" "no $LEFT is left"
	wait_for 300 prints "" procs_mentioning "$BODIES/"
	is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
'
test_done
