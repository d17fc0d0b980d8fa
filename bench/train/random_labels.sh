#!/bin/sh
# random_labels.sh - Zhang et al.'s randomization test on real data: the
# mlp memorises a 1000-example Fashion-MNIST subset whose labels are all
# random (training accuracy rises towards 1.0) while test accuracy stays
# near chance (0.10).  Prints the epoch curve from metrics.jsonl.
#
# usage: bench/train/random_labels.sh [PBX_TRAIN] [OUTDIR]
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../..
BIN=${1:-$ROOT/build-train/src/train/pbx-train}
OUT=${2:-runs/random-labels}
"$BIN" "$ROOT/templates/train/random-labels.yaml" --set output_dir="$OUT" 2>"$OUT.log"
python3 - "$OUT/metrics.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "train_acc" in d and (d["epoch"] % 10 == 0 or d["epoch"] == 1):
        print("epoch %3d  train acc %.3f  test acc %s" % (
            d["epoch"], d["train_acc"],
            "%.3f" % d["test_acc"] if d.get("test_acc") is not None else "-"))
PY
