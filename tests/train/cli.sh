#!/bin/sh
# cli.sh PBX_TRAIN WORKDIR - command line and configuration errors: --help,
# exit 2 with file:line:key messages, a checkpoint from another model is
# refused, a damaged one is detected.
set -u
BIN=$1
W=$2
rm -rf "$W"; mkdir -p "$W"
. "$(dirname "$0")/lib.sh"
expect 0 "usage: pbx-train CONFIG.yaml" -- "$BIN" --help
expect 2 "usage" -- "$BIN"
printf 'train:\n  model: mlp\n  epochs: 2\n  lr: fast\n' > "$W/bad.yaml"
expect 2 "bad.yaml:4: key 'lr': expected a number, got 'fast'" -- "$BIN" "$W/bad.yaml"
printf 'epochs: 2\nlearning_rate: 0.1\n' > "$W/unknown.yaml"
expect 2 "unknown.yaml:2: unknown key 'learning_rate'" -- "$BIN" "$W/unknown.yaml"
printf 'model:\n  layers:\n    - {type: conv, filters: 8}\n    - {type: warp}\n' > "$W/layer.yaml"
expect 2 "layer.yaml:4: key 'model.layers\[1\]': unknown layer type 'warp'" -- "$BIN" "$W/layer.yaml"
printf 'epochs: [1\n' > "$W/syntax.yaml"
expect 2 "syntax.yaml:" -- "$BIN" "$W/syntax.yaml"
# not a regular file: refused before reading (time capped, and memory but
# under ASan, as reading /dev/zero would go on until memory runs out)
cap="ulimit -v 1048576;"
ldd "$BIN" 2>/dev/null | grep -q libasan && cap=
expect 2 "/dev/zero: not a regular file" -- sh -c "$cap exec timeout -k 5 20 \"\$0\" /dev/zero" "$BIN"
mkfifo "$W/fifo"
expect 2 "fifo: not a regular file" -- timeout -k 5 20 "$BIN" "$W/fifo"
expect 2 "key 'model': unknown model 'resnet'" -- "$BIN" - --set model=resnet
expect 2 "\-\-set: key 'epochs': expected an integer" -- "$BIN" - --set epochs=x
S="--set dataset=synthetic --set synthetic_n=64 --set test_subset=32 --set batch_size=32 --set epochs=1"
expect 0 "completed" -- "$BIN" - $S --set output_dir="$W/m1"
expect 1 "different model" -- "$BIN" - $S --set model=lenet --set output_dir="$W/m1" --set resume="$W/m1/checkpoint.pbxt"
cp "$W/m1/checkpoint.pbxt" "$W/damaged.pbxt"
printf 'X' | dd of="$W/damaged.pbxt" bs=1 seek=300 conv=notrunc 2>/dev/null
expect 1 "damaged" -- "$BIN" - $S --set output_dir="$W/m2" --set resume="$W/damaged.pbxt"
# test metrics only at the epochs that were evaluated (2 and the last, 3),
# never repeated from an earlier evaluation or NaN before the first
expect 0 "completed" -- "$BIN" - $S --set epochs=3 --set eval_every=2 --set output_dir="$W/ev"
got=$(grep -o '"epoch":[0-9]*\|"test_acc"\|"test_loss"\|[Nn]a[Nn]\|null' "$W/ev/metrics.jsonl" | tr '\n' ' ')
if [ "$got" = '"epoch":1 "epoch":2 "test_loss" "test_acc" "epoch":3 "test_loss" "test_acc" ' ]; then
	ok 0 "test metrics only where evaluated"
else
	ok 1 "test metrics where not evaluated: $got"
fi
expect 2 "cannot resume: $W/fifo: not a regular file" -- timeout -k 5 20 "$BIN" - $S --set output_dir="$W/m4" --set resume="$W/fifo"
# a layer-list model from YAML trains
printf 'model:\n  layers:\n    - {type: conv, filters: 4, kernel: 3, pad: 1}\n    - bn\n    - relu\n    - {type: avgpool, size: 2}\n    - {type: lrn, size: 3}\n    - flatten\n    - {linear: {out: 16}}\n    - gelu\n    - linear\n' > "$W/layers.yaml"
expect 0 "completed" -- "$BIN" "$W/layers.yaml" $S --set output_dir="$W/m3"
# the data-parallel and recomputation keys
expect 2 "key 'recompute': expected 0 (off), -1" -- "$BIN" - --set recompute=-2
expect 2 "key 'bucket_kb': must be positive" -- "$BIN" - --set bucket_kb=0
expect 2 "key 'comm_timeout': must be positive" -- "$BIN" - --set comm_timeout=0
expect 2 "key 'sync_bn': expected" -- "$BIN" - --set sync_bn=maybe
# one process never starts MPI, even with sync_bn, and records world 1
expect 0 "completed" -- "$BIN" "$W/layers.yaml" $S --set sync_bn=true --set recompute=-1 --set output_dir="$W/m4"
grep -q '"world": 1' "$W/m4/summary.json" && grep -q '"comm": "self"' "$W/m4/summary.json" &&
	ok 0 "one process: world 1, comm self" || { ok 1 "summary of a plain run: $(cat "$W/m4/summary.json")"; }
test_done
