#!/bin/sh
# throughput.sh - benchmark, one run on a local cluster of 4 node bodies
# advertising 8 CPUs each: how fast trivial tasks (command: true) run to
# completion when `pbx parrun` submits them, against the same package's
# tasks submitted the way pbx did before (sbatch --export=ALL,VAR=..., which
# SLURM turns into --get-user-env: slurmd runs `su - USER`, a login shell
# with the user's dotfiles, before every task).  Rounds alternate: pbx,
# baseline, pbx.  Completion is seen the same way for both: the job name
# leaves squeue; every task's status file must then say COMPLETED.
# Usage: bench/throughput.sh [PBX] [TASKS]
set -eu
PBX=${1:-build/src/cli/pbx}
N=${2:-400}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
WORK=$(mktemp -d /tmp/pbx-bench-tp.XXXXXX)
export PBX_HOME=$WORK/home
mkdir -p "$PBX_HOME" "$WORK/exp"
trap '"$PBX" -q cluster stop --discard-results tp >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM   # dash runs no EXIT trap on a signal by itself
cat >"$PBX_HOME/config.yaml" <<EOF
clusters:
  tp:
    cloud: local
    node_groups:
      - { name: node, count: 4, gpus: 0, cpus: 8 }
    slurm: { max_array_size: 100001 }
clouds:
  local: { address_base: 127.0.18.0, ssh_port: 22180, slurm_port_base: 20800 }
EOF
chmod 600 "$PBX_HOME/config.yaml"
now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{printf "%.1f", $2 - $1}'; }
rate() { echo "$N $1" | awk '{printf "%.1f", $1 / $2}'; }
SHARED=$PBX_HOME/clusters/tp/shared

# wait_gone NAME: until no job called NAME is left in squeue
wait_gone() {
	while [ -n "$("$PBX" cluster exec tp -- squeue -h -n "$1" -o %i)" ]; do sleep 0.5; done
}
# completed DIR: how many tasks/*/status files under DIR say COMPLETED
completed() {
	cat "$1"/tasks/*/status 2>/dev/null | awk '$2 == "COMPLETED"' | wc -l
}

# pbx_round K: a fresh package (its name differs) through pbx parrun
pbx_round() {
	cat >"$WORK/exp/experiment.yaml" <<EOF
name: tp-$1
command: "true"
sweep:
  grid:
    i: [$(seq -s, 0 $((N - 1)))]
EOF
	t0=$(now)
	pkg=$("$PBX" parrun --json "$WORK/exp/experiment.yaml" tp |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["package"])')
	wait_gone "pbx-$pkg"
	t1=$(now)
	[ "$(completed "$SHARED/pbx/$pkg")" = "$N" ] || { echo "pbx round $1: not all tasks COMPLETED" >&2; exit 1; }
	echo "$pkg" >"$WORK/last-pkg"
	secs "$t0" "$t1"
}

# base_round K: the last package's tasks again, into a run directory of
# their own, with the variables passed as --export=ALL,VAR=...
base_round() {
	r=$SHARED/pbx/$(cat "$WORK/last-pkg")
	run=$SHARED/base-$1
	t0=$(now)
	"$PBX" cluster exec tp -- sh -c 'mkdir -p "$2/slurm" && sbatch --parsable --job-name=base-"$3" \
		--array=0-$(($1 - 1)) --output=/dev/null \
		--export="ALL,PBX_PKG_DIR=$4/pkg,PBX_RUN_DIR=$2,PBX_TASK_OFFSET=0" "$4/pkg/pbx-task.sh" >/dev/null' \
		sh "$N" "$run" "$1" "$r"
	wait_gone "base-$1"
	t1=$(now)
	[ "$(completed "$run")" = "$N" ] || { echo "baseline round $1: not all tasks COMPLETED" >&2; exit 1; }
	secs "$t0" "$t1"
}

"$PBX" -q cluster start tp
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$N trivial tasks (command: true) on 4 node bodies x 8 CPUs, submission to the last one leaving squeue"
p1=$(pbx_round 1)
b1=$(base_round 1)
p2=$(pbx_round 2)
echo "pbx parrun:                    $p1 s, $p2 s   ($(rate "$p1"), $(rate "$p2") tasks/s)"
echo "--export=ALL,VAR=... (before): $b1 s   ($(rate "$b1") tasks/s; pbx is $(echo "$b1 $p1 $p2" |
	awk '{printf "%.1f", $1 / (($2 + $3) / 2)}')x faster)"
echo "HOME's login dotfiles: $(ls -d ~/.profile ~/.bash_profile ~/.bashrc 2>/dev/null | tr '\n' ' ')"
