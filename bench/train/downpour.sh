#!/bin/sh
# downpour.sh [BUILD_DIR] [EPOCHS] - Downpour SGD against synchronous
# allreduce on Fashion-MNIST with cnn-bn (templates/train/fashion-mnist-
# cnn-bn.yaml): 2 workers + 1 parameter server (mpirun -np 3, server-side
# SGD with the template's momentum and weight decay, batch 128 per worker)
# next to 2 allreduce ranks (mpirun -np 2, global batch 256 = 128 per rank,
# lr scaled x2).  Prints, for each: the time to reach 0.92 test accuracy
# (training seconds of the rank that evaluates, and wall seconds since
# start), the final and best accuracy, and for Downpour the staleness the
# server measured.  One thread per rank; oversubscribed where ranks > cores.
set -eu
cd "$(dirname "$0")/../.."
B=${1:-build}
E=${2:-12}
BIN=$B/src/train/pbx-train
CFG=templates/train/fashion-mnist-cnn-bn.yaml
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d /tmp/pbx-bench-dp.XXXXXX)
trap 'rm -rf "$W"' EXIT
COMMON="--set epochs=$E --set threads=1 --set checkpoint_every=0 --set deterministic=false"
echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, $(mpirun --version | head -1)"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s.%N)
mpirun --oversubscribe -np 2 "$BIN" "$CFG" $COMMON --set batch_size=256 --set lr=0.1 \
	--set output_dir="$W/ar" 2>"$W/ar.log"
t1=$(date +%s.%N)
mpirun --oversubscribe --enable-recovery -np 3 "$BIN" "$CFG" $COMMON --set mode=downpour \
	--set ps_ranks=1 --set ps_optimizer=sgd --set output_dir="$W/dp" 2>"$W/dp.log"
t2=$(date +%s.%N)
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep "parameter server rank 0: done" "$W/dp.log" | sed 's/^/# /'
python3 - "$W" "$t0" "$t1" "$t2" <<'PY'
import json, sys
W, t0, t1, t2 = sys.argv[1], *map(float, sys.argv[2:])
def run(d, wall):
    ev = [json.loads(l) for l in open(f"{W}/{d}/metrics.jsonl") if '"test_acc"' in l]
    hit = next((e for e in ev if e["test_acc"] >= 0.92), None)
    s = json.load(open(f"{W}/{d}/summary.json"))
    return hit, s, wall
rows = [("allreduce, 2 ranks", *run("ar", t1 - t0)), ("downpour, 2 workers + 1 server", *run("dp", t2 - t1))]
print("| run | epochs | time to 0.92 (train s) | at epoch | final acc | best acc | wall s | staleness mean / max |")
print("|---|---|---|---|---|---|---|---|")
for name, hit, s, wall in rows:
    st = "-"
    if name.startswith("downpour"):
        d = json.load(open(f"{W}/dp/downpour.json"))
        st = "%.2f / %d" % (d["staleness_mean"], d["staleness_max"])
    print("| %s | %d | %s | %s | %.4f | %.4f | %.0f | %s |" % (
        name, s["epochs"], "%.0f" % hit["elapsed_seconds"] if hit else "not reached",
        hit["epoch"] if hit else "-", s["test_acc"], s["best_test_acc"], wall, st))
PY
