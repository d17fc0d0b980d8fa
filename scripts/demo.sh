#!/bin/sh
# demo.sh - the main job end to end on the embedded default: build pbx,
# start the built-in local cluster (2 compute nodes x 2 GPU GRES, real
# slurmctld/slurmd behind real sshds on 127.0.1.x), run the example sweep on
# it (parrun, state, log), bring the results home (harvest), report them as
# a table and an HTML page with plots, train a model with pbx-train on a
# node, and stop the cluster again.
# Usage: scripts/demo.sh [--keep]   (--keep leaves the cluster running)
set -eu
cd "$(dirname "$0")/.."
keep=${1:-}
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs" >/dev/null
PBX=$(pwd)/build/src/cli/pbx
step() { printf '\n== %s\n' "$*"; }

step "pbx cluster start local"
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
report=$(pwd)/build/sweep-demo-report.html
"$PBX" report sweep-demo --format html -o "$report"
echo "HTML report with learning curves: $report"
if [ -x build/src/train/pbx-train ] && [ -d /usr/share/datasets/fashion-mnist ]; then
	step "pbx-train on a compute node (Fashion-MNIST, mlp, 1 epoch on 10,000 images)"
	"$PBX" cluster exec local -- srun -N1 --gres=gpu:1 "$(pwd)/build/src/train/pbx-train" \
		"$(pwd)/templates/train/fashion-mnist-mlp.yaml" --set epochs=1 --set subset=10000 \
		--set output_dir=demo-train
fi
if [ "$keep" = --keep ]; then
	step "the cluster keeps running; stop it with: $PBX cluster stop local"
else
	step "pbx cluster stop local"
	"$PBX" cluster stop local
fi
