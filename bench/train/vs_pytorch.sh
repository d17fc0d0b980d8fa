#!/bin/sh
# vs_pytorch.sh - training throughput of pbx-train against PyTorch (and
# MXNet and TensorFlow where they install) on the same model (cnn-bn), batch
# size and thread count, measured in ONE run with the frameworks
# interleaved round by round (the machine is shared; medians are reported).
# Also reports pbx-train's GFLOP/s against the OpenBLAS sgemm peak measured
# in the same run, and the peak RSS of every process (/usr/bin/time -v).
# The GFLOP/s count a convolution's direct (im2col) FLOPs, 2*OC*OH*OW*C*K*K
# per example: pbx-train's Winograd convolution does fewer, and its own
# AVX-512 kernels are not bound by OpenBLAS's peak, so the percentage is a
# throughput figure, not a kernel efficiency.
#
# If OPENBLAS_CORETYPE is set (it forces OpenBLAS's kernel set), pbx-train
# and the sgemm peak are ALSO measured with it unset ("pbx-train/auto":
# OpenBLAS's own choice for this CPU), since the frameworks' oneDNN kernels
# ignore it.
#
# usage: bench/train/vs_pytorch.sh [PBX_TRAIN]
# env:   BATCH=128 THREADS=2 ROUNDS=3 STEPS=40
#        PY=python3 with torch (and tensorflow), MXPY=python with mxnet
#        (separate because mxnet 1.9.1 needs numpy<2); unset = skipped
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:-$HERE/../../build-train/src/train/pbx-train}
BATCH=${BATCH:-128}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-40}
PY=${PY:-python3}
MXPY=${MXPY:-}
W=$(mktemp -d "${TMPDIR:-/tmp}/pbx-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT

cc -O2 "$HERE/sgemm_peak.c" $(pkg-config --cflags --libs openblas) -o "$W/sgemm_peak"

echo "# machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB"
echo "# batch $BATCH, threads $THREADS, rounds $ROUNDS"

rss() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1"; }

# pbx_run NAME [env -u ...]: one pbx-train run -> a line of results.jsonl.
# Synthetic 1x28x28 data with random labels (like the random tensors of
# frameworks.py: the loss stays up, no denormal slow paths anywhere),
# STEPS+5 steps, no evaluation.
pbx_run() {
	name=$1
	shift
	rm -rf "$W/pbx"
	"$@" /usr/bin/time -v "$BIN" - --set model=cnn-bn --set dataset=synthetic \
		--set synthetic_n=$((BATCH * (STEPS + 5))) --set test_subset=$BATCH \
		--set batch_size="$BATCH" --set threads="$THREADS" --set epochs=1 \
		--set eval_every=0 --set log_every=5 --set nesterov=true \
		--set weight_decay=5e-4 --set corruption=random_labels \
		--set output_dir="$W/pbx" 2>"$W/pbx.time" >/dev/null
	python3 - "$W/pbx" "$(rss "$W/pbx.time")" "$name" <<'PY' >> "$W/results.jsonl"
import json, statistics, sys
d, rss, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = [json.loads(l) for l in open(d + "/metrics.jsonl")]
ips = [l["images_per_s"] for l in lines if "images_per_s" in l][1:]  # drop warm-up window
s = json.load(open(d + "/summary.json"))
m = statistics.median(ips)
print(json.dumps({"framework": name, "images_per_s": round(m, 1),
                  "gflops": round(m * s["train_flops_per_example"] * 1e-9, 1),
                  "peak_rss_kb": rss}))
PY
}

for r in $(seq 1 "$ROUNDS"); do
	pbx_run pbx-train env
	if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
		pbx_run pbx-train/auto env -u OPENBLAS_CORETYPE
	fi
	for fw in torch tensorflow mxnet; do
		py=$PY
		[ "$fw" = mxnet ] && py=$MXPY
		[ -n "$py" ] || { echo "{\"framework\": \"$fw\", \"error\": \"no interpreter (set MXPY)\"}" >> "$W/results.jsonl"; continue; }
		if /usr/bin/time -v "$py" "$HERE/frameworks.py" --framework "$fw" \
			--batch "$BATCH" --threads "$THREADS" --steps "$STEPS" \
			> "$W/fw.json" 2>"$W/fw.time"; then
			python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); d["peak_rss_kb"]=int(sys.argv[2]); print(json.dumps(d))' \
				"$W/fw.json" "$(rss "$W/fw.time")" >> "$W/results.jsonl"
		else
			tail -n 1 "$W/fw.json" >> "$W/results.jsonl" 2>/dev/null || true
		fi
	done
	OPENBLAS_NUM_THREADS=$THREADS "$W/sgemm_peak" "$THREADS" 2048 | sed 's/^{/{"framework": "sgemm-peak", /' >> "$W/results.jsonl"
	if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
		env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS=$THREADS "$W/sgemm_peak" \
			"$THREADS" 2048 | sed 's/^{/{"framework": "sgemm-peak\/auto", /' >> "$W/results.jsonl"
	fi
done

python3 - "$W/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["framework"], []).append(r)
def peak_of(name):
    rs = by.get(name, [])
    return (statistics.median(r["sgemm_gflops"] for r in rs), rs[0]["openblas"]) if rs else (None, None)
peak, peak_lib = peak_of("sgemm-peak")
print("# OpenBLAS sgemm peak (2048^3, same run): %.1f GFLOP/s  [%s]" % (peak, peak_lib))
auto, auto_lib = peak_of("sgemm-peak/auto")
if auto:
    print("# ... with OPENBLAS_CORETYPE unset:        %.1f GFLOP/s  [%s]" % (auto, auto_lib))
pbx = statistics.median(r["images_per_s"] for r in by["pbx-train"])
print("%-15s %-22s %12s %10s %12s" % ("framework", "version", "images/s", "pbx speed-up", "peak RSS MiB"))
for fw in ["pbx-train", "pbx-train/auto", "torch", "tensorflow", "mxnet"]:
    rs = by.get(fw, [])
    ok = [r for r in rs if "images_per_s" in r]
    if not ok:
        if fw != "pbx-train/auto":
            print("%-15s %s" % (fw, rs[0].get("error", "not run") if rs else "not run"))
        continue
    ips = statistics.median(r["images_per_s"] for r in ok)
    rss = statistics.median(r["peak_rss_kb"] for r in ok) / 1024
    print("%-15s %-22s %12.1f %10.2fx %12.0f   (rounds: %s)" % (
        fw, ok[0].get("version", "-"), ips, pbx / ips, rss,
        ", ".join("%.0f" % r["images_per_s"] for r in ok)))
for fw, pk in (("pbx-train", peak), ("pbx-train/auto", auto)):
    if by.get(fw) and pk:
        g = statistics.median(r["gflops"] for r in by[fw])
        print("# %s: %.1f GFLOP/s (direct-conv FLOPs) = %.0f%% of the OpenBLAS sgemm peak" % (fw, g, 100 * g / pk))
PY
