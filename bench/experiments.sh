#!/bin/sh
# experiments.sh - benchmark, one run on a local cluster: submitting a
# 10,000-task sweep with `pbx parrun` against ClusterJob's approach (one
# sbatch per task, run by a script over one SSH session), then `pbx state`
# on those 10,000 tasks.  The tasks are submitted held (--hold) so the
# benchmark measures submission and tracking, not the tasks.  SSH round
# trips are counted by pbx itself (PBX_STATS=1).
# Usage: bench/experiments.sh [PBX] [TASKS]
set -eu
PBX=${1:-build/src/cli/pbx}
N=${2:-10000}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
WORK=$(mktemp -d /tmp/pbx-bench-exp.XXXXXX)
export PBX_HOME=$WORK/home
mkdir -p "$PBX_HOME" "$WORK/exp"
trap '"$PBX" -q cluster stop --discard-results bx >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM   # dash runs no EXIT trap on a signal by itself
cat >"$PBX_HOME/config.yaml" <<EOF
clusters:
  bx:
    cloud: local
    node_groups:
      - { name: node, count: 2, gpus: 0 }
clouds:
  local: { address_base: 127.0.14.0, ssh_port: 22140, slurm_port_base: 20400 }
EOF
chmod 600 "$PBX_HOME/config.yaml"
cat >"$WORK/exp/experiment.yaml" <<EOF
name: bench-$N
command: "true"
sweep:
  list:
$(i=0; while [ $i -lt "$N" ]; do echo "    - { i: $i }"; i=$((i + 1)); done)
resources: { hold: "" }
EOF
now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{printf "%.3f", $2 - $1}'; }
trips() { sed -n 's/^pbx: stats: \([0-9]*\) ssh round trips.*$/\1/p' "$1"; }

"$PBX" -q cluster start bx
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sweep of $N tasks (command: true), submitted held"

t0=$(now)
PBX_STATS=1 "$PBX" parrun --json "$WORK/exp/experiment.yaml" bx >"$WORK/parrun.json" 2>"$WORK/parrun.err"
t1=$(now)
pkg=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["package"])' "$WORK/parrun.json")
echo "pbx parrun:            $(secs "$t0" "$t1") s, $(trips "$WORK/parrun.err") ssh round trips"

t0=$(now)
PBX_STATS=1 "$PBX" state "$pkg" >"$WORK/state.out" 2>"$WORK/state.err"
t1=$(now)
echo "pbx state:             $(secs "$t0" "$t1") s, $(trips "$WORK/state.err") ssh round trips  ($(cat "$WORK/state.out" | cut -c1-80))"
"$PBX" -q cancel "$pkg" >/dev/null 2>&1 || true

# ClusterJob: a generated script with one sbatch per task, run over one SSH
# session (so this baseline is generous: 1 round trip, not N).
t0=$(now)
PBX_STATS=1 "$PBX" cluster exec bx -- sh -c '
	i=0
	while [ "$i" -lt "$1" ]; do
		sbatch --hold --parsable --job-name=cj --output=/dev/null --wrap true >/dev/null || exit 1
		i=$((i + 1))
	done' sh "$N" 2>"$WORK/cj.err"
t1=$(now)
cj=$(secs "$t0" "$t1")
echo "one sbatch per task:   $cj s, $(trips "$WORK/cj.err") ssh round trip (one sbatch call per task)"
"$PBX" cluster exec bx -- scancel -n cj >/dev/null 2>&1 || true
