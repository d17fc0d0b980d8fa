#!/bin/sh
# cluster_start.sh - benchmark: `pbx cluster start` of a local cluster with
# 1 compute node against 8 compute nodes, in the same run, interleaved.
# Prints each timing, the medians and the ratio (goal: 8 nodes in at most
# 1.3x the time of 1 node), and the CPU time each start cost.  Node bodies
# share this machine's cores (on a cloud every node has its own), so the
# 8-node start cannot take less than its CPU time divided by the cores: the
# script prints that floor and the ratio it allows.
# Usage: bench/cluster_start.sh [PBX] [ROUNDS]
set -eu
PBX=${1:-build/src/cli/pbx}
ROUNDS=${2:-5}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
WORK=$(mktemp -d /tmp/pbx-bench.XXXXXX)

# CPU time is measured in a cgroup this script moves itself into (root,
# cgroup v1 cpuacct or v2): pbx, the node bodies and every daemon they
# start, and nothing else.  Without one, the whole machine's CPU time is
# used (user+nice+system+irq+softirq), which counts other work too.
CG='' CG_BASE=''
for base in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup; do
	d=$base/pbx-bench.$$
	mkdir "$d" 2>/dev/null || continue
	if { [ -r "$d/cpuacct.usage" ] || [ -r "$d/cpu.stat" ]; } &&
		echo $$ >"$d/cgroup.procs" 2>/dev/null; then
		CG=$d CG_BASE=$base
		break
	fi
	rmdir "$d" 2>/dev/null || true
done

cleanup() {
	for n in 1 8; do PBX_HOME=$WORK/h$n "$PBX" -q cluster stop --discard-results b$n >/dev/null 2>&1 || true; done
	rm -rf "$WORK"
	if [ -n "$CG" ]; then
		echo $$ >"$CG_BASE/cgroup.procs" 2>/dev/null || true
		rmdir "$CG" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM   # dash runs no EXIT trap on a signal by itself

cpu_s() {   # CPU seconds so far
	if [ -r "$CG/cpuacct.usage" ]; then
		awk '{printf "%.3f\n", $1 / 1e9}' "$CG/cpuacct.usage"
	elif [ -r "$CG/cpu.stat" ]; then
		awk '$1 == "usage_usec" {printf "%.3f\n", $2 / 1e6}' "$CG/cpu.stat"
	else
		awk '/^cpu /{printf "%.3f\n", ($2 + $3 + $4 + $7 + $8) / 100}' /proc/stat
	fi
}

setup() {   # $1 = nodes
	home=$WORK/h$1
	mkdir -p "$home"
	cat >"$home/config.yaml" <<CONF
clusters:
  b$1:
    cloud: local
    node_groups:
      - { name: node, count: $1, gpus: 2 }
clouds:
  local: { address_base: 127.0.2$1.0, ssh_port: 2300$1, slurm_port_base: 2$1000 }
CONF
	chmod 600 "$home/config.yaml"
}

now() { date +%s.%N; }

one() {     # $1 = nodes; prints "seconds cpu-seconds" for start
	c0=$(cpu_s)
	t0=$(now)
	PBX_HOME=$WORK/h$1 "$PBX" -q cluster start b$1 >/dev/null
	t1=$(now)
	c1=$(cpu_s)
	PBX_HOME=$WORK/h$1 "$PBX" -q cluster stop --discard-results b$1 >/dev/null
	echo "$t0 $t1 $c0 $c1" | awk '{printf "%.3f %.3f\n", $2 - $1, $4 - $3}'
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

setup 1
setup 8
: >"$WORK/t1"
: >"$WORK/t8"
: >"$WORK/c1"
: >"$WORK/c8"
cores=$(nproc)
echo "pbx cluster start local: 1 node vs 8 nodes, $ROUNDS rounds, interleaved"
echo "machine: $cores cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
echo "CPU time of: $([ -n "$CG" ] && echo "pbx and its node bodies (cgroup $CG)" || echo "the whole machine")"
i=1
while [ "$i" -le "$ROUNDS" ]; do
	set -- $(one 1); echo "$1" >>"$WORK/t1"; echo "$2" >>"$WORK/c1"; a=$1 ac=$2
	set -- $(one 8); echo "$1" >>"$WORK/t8"; echo "$2" >>"$WORK/c8"
	echo "round $i: 1 node ${a}s (cpu ${ac}s)   8 nodes ${1}s (cpu ${2}s)"
	i=$((i + 1))
done
m1=$(median <"$WORK/t1")
m8=$(median <"$WORK/t8")
mc1=$(median <"$WORK/c1")
mc8=$(median <"$WORK/c8")
echo "median: 1 node ${m1}s   8 nodes ${m8}s   ratio $(echo "$m8 $m1" | awk '{printf "%.2f", $1 / $2}') (goal <= 1.30)"
echo "median CPU: 1 node ${mc1}s   8 nodes ${mc8}s ($(echo "$mc1 $mc8" | awk '{printf "%.3f", ($2 - $1) / 7}')s per extra node)"
echo "$mc8 $cores $m1 $m8" | awk '{f = $1 / $2; printf "CPU floor of 8 nodes on %d cores: %.3fs, so ratio >= %.2f; 8 nodes took %.0f%% of that floor\n", $2, f, f / $3, 100 * $4 / f}'
