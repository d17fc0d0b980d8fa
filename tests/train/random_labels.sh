#!/bin/sh
# random_labels.sh PBX_TRAIN WORKDIR - Zhang et al.'s randomization test in
# small: with every training label replaced by a random class, the mlp
# still drives training accuracy towards 1 (memorisation) while test
# accuracy stays near chance (0.10).  Synthetic data, so no download.
set -eu
BIN=$1
W=$2
rm -rf "$W"
"$BIN" - --set dataset=synthetic --set synthetic_n=400 --set test_subset=1000 \
  --set model=mlp --set corruption=random_labels --set corruption_prob=1 \
  --set optimizer=adam --set lr=0.001 --set epochs=60 --set batch_size=40 \
  --set eval_every=20 --set output_dir="$W" 2>"$W.log"
python3 - "$W/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("train_acc %.3f test_acc %.3f" % (s["train_acc"], s["test_acc"]))
assert s["train_acc"] > 0.9, "did not memorise"
assert s["test_acc"] < 0.2, "test accuracy should stay near chance"
print("ok random labels memorised, test at chance")
PY
