#!/bin/sh
# power.sh - benchmark: SLURM power saving on the local cluster
# (docs/power-saving.md).  A group of 2 nodes with min: 1: node1 always
# runs, node2 sleeps until a job needs it.  Each round times, in the same
# run:
#   awake   `srun -w node1 true` on the node that runs (the baseline);
#   wake    `srun -w node2 true` on the sleeping node: slurmctld runs
#           pbx-resume, which makes and bootstraps node2, then the job runs;
#   sleep   from that job's end until node2's processes are gone again
#           (SuspendTime, here 10 s, then pbx-suspend).
# Between rounds it waits (untimed) until SLURM shows node2 powered down
# (idle~): SLURM wakes a node only after SuspendTimeout (30 s) has passed
# since it was suspended; a job meanwhile waits for that.
# Prints each timing, the medians, wake / awake, sleep - SuspendTime, and
# how many times pbx-resume ran for the rounds (one per wake: no loop).
# Node bodies share this machine's cores; on a cloud the wake adds the
# instance's creation and boot (docs/power-saving.md; bench/gce_power.sh
# measures the Compute Engine path on the emulator).
# Usage: bench/power.sh [PBX] [ROUNDS]
set -eu
PBX=${1:-build/src/cli/pbx}
ROUNDS=${2:-3}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
WORK=$(mktemp -d /tmp/pbx-bench.XXXXXX)
export PBX_HOME="$WORK/home"
SUSPEND=10
mkdir -m 700 "$PBX_HOME"
cat >"$PBX_HOME/config.yaml" <<CONF
clusters:
  pw:
    cloud: local
    node_groups:
      - { name: node, count: 2, min: 1, cpus: 1 }
    slurm: { suspend_time: ${SUSPEND}s, resume_timeout: 120s }
clouds:
  local: { address_base: 127.0.52.0, ssh_port: 22520, slurm_port_base: 9300 }
CONF
chmod 600 "$PBX_HOME/config.yaml"

cleanup() {
	"$PBX" -q cluster stop --discard-results pw >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM   # dash runs no EXIT trap on a signal by itself

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# shellcheck disable=SC2009 # pgrep -f would match the pattern in this shell's own argv
node2_procs() { ps -eo args= | grep -F "$PBX_HOME/clusters/pw/nodes/node2/" | grep -cv grep || true; }
node2_state() { "$PBX" -q cluster exec pw -- sinfo -h -n node2 -o %t 2>/dev/null || true; }

"$PBX" -q cluster start pw
awake='' wake='' sleep_s=''
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	r=$((r + 1))
	t0=$(now)
	"$PBX" -q cluster exec pw -- srun -w node1 true
	t1=$(now)
	a=$(secs "$t0" "$t1")
	t0=$(now)
	"$PBX" -q cluster exec pw -- srun -w node2 true
	t1=$(now)
	w=$(secs "$t0" "$t1")
	i=0
	while [ "$(node2_procs)" != 0 ] && [ "$i" -lt 1200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	t2=$(now)
	s=$(secs "$t1" "$t2")
	# SLURM wakes a node again only once it is powered down (idle~), which
	# takes SuspendTimeout (30 s) after pbx-suspend: not timed, waited for
	i=0
	while [ "$(node2_state)" != "idle~" ] && [ "$i" -lt 120 ]; do
		sleep 1
		i=$((i + 1))
	done
	t3=$(now)
	echo "round $r: awake ${a} s, wake ${w} s, sleep ${s} s, then wakeable again after $(secs "$t2" "$t3") s"
	awake="$awake $a" wake="$wake $w" sleep_s="$sleep_s $s"
done
ma=$(echo "$awake" | median)
mw=$(echo "$wake" | median)
ms=$(echo "$sleep_s" | median)
resumes=$(grep -c " resume " "$PBX_HOME/clusters/pw/nodes/head/var/log/pbx-power.log" 2>/dev/null || echo 0)
echo "median: awake ${ma} s, wake ${mw} s, sleep ${ms} s"
awk -v a="$ma" -v w="$mw" -v s="$ms" -v t="$SUSPEND" 'BEGIN {
	printf "wake / awake = %.1fx; wake - awake = %.2f s (pbx-resume: make + bootstrap + register)\n", w / a, w - a
	printf "sleep - SuspendTime = %.2f s (slurmctld noticing + pbx-suspend)\n", s - t }'
echo "pbx-resume ran $resumes time(s) for $ROUNDS wake(s)"
