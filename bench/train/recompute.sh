#!/bin/sh
# recompute.sh [PBX_TRAIN] - activation recomputation on a 28-layer net
# (bench/train/deep-bn.yaml): peak RSS, activation memory and step time
# without recomputation and with sqrt(n) segments (and 2 segments), same
# seed; the final parameters must be identical (same gradients).
# Step time: median of steps 3..STEPS (metrics.jsonl step_ms).
set -eu
cd "$(dirname "$0")/../.."
BIN=${1:-build/src/train/pbx-train}
STEPS=${STEPS:-12}
THREADS=${THREADS:-2}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; threads $THREADS, batch 64, $STEPS steps"
printf '%-12s %9s %14s %13s %12s %s\n' recompute segments "act+grad MiB" "peak RSS MiB" "step ms" params_sha256
for r in 0 -1 2; do
	"$BIN" bench/train/deep-bn.yaml --set recompute=$r --set max_steps="$STEPS" \
		--set threads="$THREADS" --set output_dir="$W/r$r" 2>"$W/r$r.log"
	python3 - "$W/r$r" "$r" <<'PY'
import json, statistics, sys
d, r = sys.argv[1], sys.argv[2]
s = json.load(open(d + "/summary.json"))
ms = [json.loads(l)["step_ms"] for l in open(d + "/metrics.jsonl") if '"step_ms"' in l][2:]
print("%-12s %9d %14.1f %13.1f %12.1f %s" % (r, s["recompute_segments"] or 1,
      s["activation_floats"] * 4 / 2**20, s["peak_rss_kb"] / 1024,
      statistics.median(ms), s["params_sha256"][:16]))
PY
done
