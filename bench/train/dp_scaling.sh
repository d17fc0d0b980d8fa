#!/bin/sh
# dp_scaling.sh [BUILD_DIR] - data-parallel pbx-train: per-step compute
# against exposed (not overlapped) gradient communication on 1, 2 and 4
# ranks (cnn-bn, global batch 128, 1 thread per rank, synthetic data), the
# allreduce bus bandwidth of pbx's bucketed path against MPI_Allreduce on the
# same sizes (train_allreduce_bench, in the same run), and from these a
# projection of scaling efficiency at 16 and 256 ranks (assumptions printed).
# On a machine with fewer cores than ranks the figures are oversubscribed.
set -eu
cd "$(dirname "$0")/../.."
B=${1:-build}
BIN=$B/src/train/pbx-train
ARB=$B/tests/train/train_allreduce_bench
STEPS=${STEPS:-40}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe --allow-run-as-root"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
COMMON="--set model=cnn-bn --set dataset=synthetic --set synthetic_n=8192
 --set test_subset=64 --set epochs=1 --set eval_every=0 --set threads=1
 --set log_every=1 --set max_steps=$STEPS"
echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, $(mpirun --version | head -1)"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in 1 2 4; do
	$MPIRUN -np $n "$BIN" - $COMMON --set batch_size=128 --set output_dir="$W/n$n" 2>"$W/n$n.log"
done
# the per-rank compute of a 32-example step, alone (for the projection)
"$BIN" - $COMMON --set batch_size=32 --set output_dir="$W/b32" 2>"$W/b32.log"
GRAD_KB=$(python3 -c "import json;print(json.load(open('$W/n1/summary.json'))['nparams']*4//1024)")
for n in 2 4; do
	$MPIRUN -np $n "$ARB" 20 1024 64 256 "$GRAD_KB" 4096 16384 > "$W/ar$n.txt"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$W" <<'PY'
import json, statistics, sys
W = sys.argv[1]
def med(d, key):
    v = [json.loads(l).get(key) for l in open(d + "/metrics.jsonl") if '"step_ms"' in l]
    v = [x for x in v[3:] if x is not None]
    return statistics.median(v) if v else 0.0
print("\n## per step (cnn-bn, global batch 128, median of steps 4..)")
print("%5s %10s %12s %12s %14s %s" % ("ranks", "step_ms", "compute_ms", "exposed_ms", "images/s", "buckets started in backward"))
rows = {}
for n in (1, 2, 4):
    d = "%s/n%d" % (W, n)
    s = json.load(open(d + "/summary.json"))
    step, comm = med(d, "step_ms"), med(d, "comm_ms")
    rows[n] = (step, comm)
    early = "%d of %d" % (s["buckets_started_in_backward"], s["buckets"]) if n > 1 else "-"
    print("%5d %10.2f %12.2f %12.2f %14.0f %s" % (n, step, step - comm, comm,
          128 / step * 1e3, early))
nparams = json.load(open(W + "/n1/summary.json"))["nparams"]
print("\n## allreduce bus bandwidth, pbx bucketed (1 MiB buckets) vs MPI_Allreduce (%d-KiB row: cnn-bn's gradients)" % (nparams * 4 // 1024))
for n in (2, 4):
    print(open("%s/ar%d.txt" % (W, n)).read().rstrip())
tc = med(W + "/b32", "step_ms")
S = nparams * 4
print("\n## projection (weak scaling: 32 examples per rank, cnn-bn)")
print("measured: compute of a 32-example step on one core T_c = %.2f ms; gradients S = %.2f MB" % (tc, S / 1e6))
print("model:    allreduce T_ar(n) = 2(n-1)/n * S / BW + latency (ring: 2(n-1) alpha; tree/hierarchical: 2 log2(n) alpha);")
print("          exposed = T_ar - hidden,")
print("          hidden = what runs under backward (assumed 2/3 of T_c) minus the last bucket's share;")
print("          efficiency = T_c / (T_c + exposed).  One rank per node; compute does not slow with n.")
import math
for name, bw, alpha in (("25 Gb/s Ethernet (cloud VMs), TCP", 25e9 / 8 * 0.8, 30e-6),
                        ("100 Gb/s InfiniBand / EFA", 100e9 / 8 * 0.9, 5e-6)):
    print("  %s: BW %.1f GB/s, alpha %g us" % (name, bw / 1e9, alpha * 1e6))
    for lat_name, lat in (("ring latency 2(n-1)a", lambda n: 2 * (n - 1)),
                          ("tree latency 2log2(n)a", lambda n: 2 * math.log2(n))):
        out = []
        for n in (16, 256):
            tar = 2 * (n - 1) / n * S / bw + lat(n) * alpha
            tc_s = tc / 1e3
            hidden_max = 2.0 / 3.0 * tc_s
            last = tar * min(1.0, 2**20 / S)  # the bucket backward finishes last cannot overlap
            exp_over = max(last, tar - hidden_max)
            out.append("%3d ranks: T_ar %5.2f ms, efficiency %3.0f%% overlapped / %3.0f%% not" %
                       (n, tar * 1e3, 100 * tc_s / (tc_s + exp_over), 100 * tc_s / (tc_s + tar)))
        print("    %-24s %s" % (lat_name, "; ".join(out)))
print("anchors: MXNet ~92% at 16 GPUs, Horovod ~90% (GPU compute per step is 10-100x shorter than here,")
print("so their communication weighs more).")
PY
