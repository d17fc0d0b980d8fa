#!/bin/sh
# cluster_start.sh - benchmark: `pbx cluster start` of a local cluster with
# 1 compute node against 8 compute nodes, in the same run, interleaved.
# Prints each timing, the medians and the ratio (goal: 8 nodes in at most
# 1.3x the time of 1 node), and the CPU time the whole machine spent on each
# start (node bodies share this machine's cores; on a cloud every node has
# its own).  Usage: bench/cluster_start.sh [PBX] [ROUNDS]
set -eu
PBX=${1:-build/src/cli/pbx}
ROUNDS=${2:-5}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
WORK=$(mktemp -d /tmp/pbx-bench.XXXXXX)
trap 'for n in 1 8; do PBX_HOME=$WORK/h$n "$PBX" -q cluster stop b$n >/dev/null 2>&1 || true; done; rm -rf "$WORK"' EXIT

setup() {   # $1 = nodes
	home=$WORK/h$1
	mkdir -p "$home"
	cat >"$home/config.yaml" <<EOF
clusters:
  b$1:
    cloud: local
    node_groups:
      - { name: node, count: $1, gpus: 2 }
clouds:
  local: { address_base: 127.0.2$1.0, ssh_port: 2300$1, slurm_port_base: 2$1000 }
EOF
	chmod 600 "$home/config.yaml"
}

now() { date +%s.%N; }

# CPU time of the whole machine so far, in seconds (user+nice+system+irq+softirq).
cpu_s() { awk '/^cpu /{printf "%.2f\n", ($2 + $3 + $4 + $7 + $8) / 100}' /proc/stat; }

one() {     # $1 = nodes; prints "seconds cpu-seconds" for start
	c0=$(cpu_s)
	t0=$(now)
	PBX_HOME=$WORK/h$1 "$PBX" -q cluster start b$1 >/dev/null
	t1=$(now)
	c1=$(cpu_s)
	PBX_HOME=$WORK/h$1 "$PBX" -q cluster stop b$1 >/dev/null
	echo "$t0 $t1 $c0 $c1" | awk '{printf "%.3f %.2f\n", $2 - $1, $4 - $3}'
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

setup 1
setup 8
: >"$WORK/t1"
: >"$WORK/t8"
: >"$WORK/c1"
: >"$WORK/c8"
echo "pbx cluster start local: 1 node vs 8 nodes, $ROUNDS rounds, interleaved"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
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
echo "median CPU time of the machine: 1 node ${mc1}s   8 nodes ${mc8}s; with $(nproc) cores 8 nodes cannot take less than $(echo "$mc8 $(nproc)" | awk '{printf "%.2f", $1 / $2}')s"
