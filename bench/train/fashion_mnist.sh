#!/bin/sh
# fashion_mnist.sh - reproduces docs/TRAIN.md's Fashion-MNIST figures: the
# mlp (target >= 0.88 test accuracy) and cnn-bn (target >= 0.92) with the
# example configs in templates/train, on the real data set
# (apt-get install dataset-fashion-mnist -> /usr/share/datasets/fashion-mnist).
# Prints the final and best test accuracy, epochs and wall-clock minutes.
#
# usage: bench/train/fashion_mnist.sh [PBX_TRAIN] [OUTDIR]
# env:   THREADS (default: all CPUs)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../..
BIN=${1:-$ROOT/build-train/src/train/pbx-train}
OUT=${2:-runs/fashion-mnist}
THREADS=${THREADS:-0}
mkdir -p "$OUT"
for m in mlp cnn-bn; do
	start=$(date +%s)
	/usr/bin/time -v "$BIN" "$ROOT/templates/train/fashion-mnist-$m.yaml" \
		--set threads="$THREADS" --set output_dir="$OUT/$m" 2>"$OUT/$m.log"
	end=$(date +%s)
	python3 - "$OUT/$m/summary.json" "$m" "$((end - start))" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
want = {"mlp": 0.88, "cnn-bn": 0.92}[sys.argv[2]]
print("%-7s test acc %.4f (best %.4f, target %.2f: %s) after %d epochs, %.1f min wall, "
      "%.0f images/s, peak RSS %.0f MiB" % (
          sys.argv[2], s["test_acc"], s["best_test_acc"], want,
          "PASS" if s["test_acc"] >= want else "FAIL", s["epochs"],
          int(sys.argv[3]) / 60, s["images_per_s"], s["peak_rss_kb"] / 1024))
PY
done
