#!/bin/sh
# demo.sh - the main job end to end on the embedded default: build pbx,
# start the built-in local cluster (2 compute nodes x 2 GPU GRES, real
# slurmctld/slurmd behind real sshds on 127.0.1.x), run the example sweep on
# it (parrun, state, log), bring the results home (harvest), report them as
# a table and an HTML page with plots, train a model with pbx-train on a
# node, and stop the cluster again.  When a step fails (or on Ctrl-C) it
# stops the cluster too, and prints the command that does it.
# Usage: scripts/demo.sh [--keep]   (--keep leaves the cluster running,
# also after a failure); scripts/demo.sh gce: the Compute Engine path
# without an account (scripts/demo-gce.sh).  PBX=path/to/pbx: use that pbx instead of building.
set -eu
cd "$(dirname "$0")/.."
# `demo.sh gce`: the Compute Engine path against the emulator on booted VMs
if [ "${1:-}" = gce ]; then
	shift
	exec sh scripts/demo-gce.sh "$@"
fi
keep=${1:-}
if [ -z "${PBX:-}" ]; then
	jobs=$(nproc 2>/dev/null || echo 2)
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j "$jobs" >/dev/null
	PBX=$(pwd)/build/src/cli/pbx
fi
case $PBX in # the build tree pbx-train and the HTML report are in
*/src/cli/pbx) build=${PBX%/src/cli/pbx} ;;
*) build=$(pwd)/build && mkdir -p "$build" ;;
esac
step() { printf '\n== %s\n' "$*"; }

# The command that stops the demo's cluster, as a user would type it.
stop_cmd="$PBX cluster stop local"
[ -z "${PBX_HOME:-}" ] || stop_cmd="PBX_HOME=$PBX_HOME $stop_cmd"
cluster_started=
on_exit() {
	rc=$?
	trap - EXIT
	if [ "$rc" -ne 0 ] && [ -n "$cluster_started" ]; then
		if [ "$keep" = --keep ]; then
			printf '\ndemo.sh: failed (exit status %s); the cluster keeps running (--keep); stop it with:\n    %s\n' \
				"$rc" "$stop_cmd" >&2
		else
			# a failed demo's results are not worth keeping
			printf '\ndemo.sh: failed (exit status %s); stopping the cluster:\n    %s\n' "$rc" \
				"$stop_cmd --discard-results" >&2
			"$PBX" cluster stop --discard-results local >&2 ||
				printf 'demo.sh: the cluster did not stop cleanly; run again:\n    %s\n' "$stop_cmd --discard-results" >&2
		fi
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

step "pbx cluster start local"
cluster_started=1
"$PBX" cluster start local
step "pbx cluster show local"
"$PBX" cluster show local
step "pbx cluster exec local -- srun -N2 hostname"
"$PBX" cluster exec local -- srun -N2 sh -c 'echo "$SLURMD_NODENAME on $(hostname)"'
step "pbx parrun templates/experiments/sweep-demo/experiment.yaml local --gres=gpu:1"
"$PBX" parrun templates/experiments/sweep-demo/experiment.yaml local --gres=gpu:1
step "pbx state --watch sweep-demo  (until all 24 tasks have ended)"
"$PBX" state --watch=2 sweep-demo
"$PBX" state -v sweep-demo | head -n 8
step "pbx log sweep-demo:5"
"$PBX" log sweep-demo:5
step "pbx harvest sweep-demo"
"$PBX" harvest sweep-demo
step "pbx report sweep-demo --group-by lr,width --metric loss"
"$PBX" report sweep-demo --group-by lr,width --metric loss
report=$build/sweep-demo-report.html
"$PBX" report sweep-demo --format html -o "$report"
echo "HTML report with learning curves: $report"
if [ -x "$build/src/train/pbx-train" ] && [ -d /usr/share/datasets/fashion-mnist ]; then
	step "pbx-train on a compute node (Fashion-MNIST, mlp, 1 epoch on 10,000 images)"
	"$PBX" cluster exec local -- srun -N1 --gres=gpu:1 "$build/src/train/pbx-train" \
		"$(pwd)/templates/train/fashion-mnist-mlp.yaml" --set epochs=1 --set subset=10000 \
		--set output_dir=demo-train
fi
if [ "$keep" = --keep ]; then
	step "the cluster keeps running; stop it with: $stop_cmd"
else
	step "pbx cluster stop local"
	"$PBX" cluster stop local
fi
cluster_started=
printf '\npbx is %s; "cmake --install %s" puts pbx, pbx-train and their\n' "$PBX" "$build"
printf 'man pages under /usr/local (then "pbx help VERB" or "man pbx-parrun").\n'
