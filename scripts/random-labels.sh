#!/bin/sh
# random-labels.sh - the study of templates/experiments/random-labels (Zhang
# et al.'s randomization test on Fashion-MNIST: label corruption 0, 0.2,
# ..., 1.0) end to end on the built-in local cluster: build pbx and
# pbx-train, start the cluster (or repair it), submit the 6 tasks, wait,
# harvest, print final train/test accuracy per corruption level and write
# the HTML report (accuracy against corruption, learning curves), then stop
# the cluster.  About 7 minutes on a 2-core machine (docs/experiments.md, Results).
# Usage: scripts/random-labels.sh [--keep]   (--keep leaves the cluster running)
set -eu
cd "$(dirname "$0")/.."
keep=${1:-}
[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
	{ echo "random-labels.sh: install Debian's dataset-fashion-mnist first" >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs" >/dev/null
PBX=$(pwd)/build/src/cli/pbx
EXP=templates/experiments/random-labels/experiment.yaml
step() { printf '\n== %s\n' "$*"; }
start=$(date +%s)

step "pbx cluster start local"
"$PBX" cluster start local
step "pbx parrun $EXP local"
"$PBX" parrun "$EXP" local
step "pbx state --watch random-labels  (until the 6 tasks have ended)"
"$PBX" state --watch=10 random-labels
"$PBX" state -v random-labels
step "pbx harvest random-labels"
"$PBX" harvest random-labels
step "pbx report random-labels -m train_acc -m test_acc -s corruption_prob"
"$PBX" report random-labels -m train_acc -m test_acc -s corruption_prob
report=$(pwd)/build/random-labels.html
"$PBX" report random-labels -f html -o "$report" -m train_acc -m test_acc
echo "HTML report (accuracy against corruption, learning curves): $report"
echo "wall time: $(($(date +%s) - start)) s"
if [ "$keep" = --keep ]; then
	step "the cluster keeps running; stop it with: $PBX cluster stop local"
else
	step "pbx cluster stop local"
	"$PBX" cluster stop local
fi
