#!/bin/sh
# tfrecord.sh PBX_TRAIN WORKDIR TFR_DUMP - TFRecord shards end to end with the
# real Fashion-MNIST (skipped, exit 77, when it is not installed):
#   - `pbx-train pack` writes the train and test splits as shards;
#   - training from the shards (dataset: tfrecord) ends with parameters
#     identical to training from the IDX files with the same seed and order
#     (params_sha256 of summary.json), with 1 and 3 loader threads;
#   - a flipped byte in a shard: exit 1, the message names the file and the
#     byte offset of the damaged record;
#   - pack's usage errors exit 2;
#   - CIFAR-10 (synthetic binary batches, channel planes): pack writes each
#     image HWC, pixel (r, c) as R, G, B, read back (tfr_dump) as written.
set -u
BIN=$1
W=$2
DUMP=$3
FM=${PBX_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
[ -e "$FM/t10k-images-idx3-ubyte.gz" ] || { echo "skip: no Fashion-MNIST in $FM"; exit 77; }
rm -rf "$W"; mkdir -p "$W"
. "$(dirname "$0")/lib.sh"
sha() { sed -n 's/.*"params_sha256": "\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }

expect 0 "60000 examples 28x28x1, 3 shard(s)" -- "$BIN" pack fashion-mnist "$FM" "$W/tfr" --shards 3
expect 0 "10000 examples 28x28x1, 2 shard(s)" -- "$BIN" pack fashion-mnist "" "$W/tfr" --split test --shards 2
[ -f "$W/tfr/fashion-mnist-train-00002-of-00003.tfrecord" ] || { ok 1 "shard names"; }
ls "$W/tfr" | grep -q tmp && { ok 1 "temporary files left"; }

S="--set model=mlp --set epochs=1 --set subset=3000 --set test_subset=1000
 --set batch_size=100 --set threads=1 --set seed=7 --set log_every=10"
T="--set dataset=tfrecord --set train_files=$W/tfr/fashion-mnist-train-*.tfrecord
 --set test_files=$W/tfr/fashion-mnist-test-*.tfrecord"
expect 0 completed -- "$BIN" - $S --set data_dir="$FM" --set output_dir="$W/idx"
expect 0 completed -- "$BIN" - $S $T --set output_dir="$W/tf1"
expect 0 completed -- "$BIN" - $S $T --set loader_threads=3 --set output_dir="$W/tf3"
a=$(sha "$W/idx"); b=$(sha "$W/tf1"); c=$(sha "$W/tf3")
echo "params: idx $a, tfrecord $b, tfrecord (3 threads) $c"
if [ -z "$a" ] || [ "$a" != "$b" ] || [ "$a" != "$c" ]; then
	ok 1 "training from TFRecord differs from IDX"
fi
# the same test figures, line for line
grep -o '"test_acc":[0-9.]*' "$W/idx/metrics.jsonl" > "$W/a"
grep -o '"test_acc":[0-9.]*' "$W/tf1/metrics.jsonl" > "$W/b"
[ -s "$W/a" ] && cmp -s "$W/a" "$W/b" || { ok 1 "test_acc differs"; }

# one flipped byte in the middle of the second train shard
f="$W/tfr/fashion-mnist-train-00001-of-00003.tfrecord"
rec=$(( $(stat -c %s "$f") / 20000 ))  # 20000 records, all of one size
k=$((rec * 1234 + 100))                # inside record 1234's data
printf '\377' | dd of="$f" bs=1 seek=$k conv=notrunc 2>/dev/null
expect 1 "$f: offset $((rec * 1234)): corrupt record: data CRC mismatch" -- \
	"$BIN" - $S $T --set output_dir="$W/bad"

expect 2 "\-\-split: expected train or test, got 'dev'" -- "$BIN" pack fashion-mnist "" "$W/x" --split dev
expect 2 "expected DATASET DATA_DIR OUT_DIR" -- "$BIN" pack fashion-mnist
expect 2 "\-\-shards: expected 1..99999, got '0'" -- "$BIN" pack mnist "" "$W/x" --shards 0
expect 2 "unknown dataset 'imagenet'" -- "$BIN" pack imagenet "" "$W/x"
expect 2 "dataset tfrecord needs train_files" -- "$BIN" - --set dataset=tfrecord
expect 1 "no file matches the pattern $W/none-\*" -- "$BIN" - $S --set dataset=tfrecord \
	--set train_files="$W/none-*" --set test_files="$W/none-*" --set output_dir="$W/none"
expect 0 "usage: pbx-train pack DATASET" -- "$BIN" pack --help
# CIFAR-10 batches: 1 label byte + 1024 R + 1024 G + 1024 B per record
mkdir -p "$W/cifar"
python3 - "$W/cifar" <<'PY'
import sys
d = sys.argv[1]
def rec(k):  # image k: pixel (r, c) of channel ch is (k*7 + ch*85 + r*3 + c) % 256
    return bytes([(k // 10 + k % 10 * 5) % 10]) + bytes((k * 7 + ch * 85 + r * 3 + c) % 256
                                   for ch in range(3) for r in range(32) for c in range(32))
for i in range(1, 6):
    open(f"{d}/data_batch_{i}.bin", "wb").write(b"".join(rec(10 * i + j) for j in range(2)))
open(f"{d}/test_batch.bin", "wb").write(rec(0))
PY
expect 0 "10 examples 32x32x3, 2 shard(s)" -- "$BIN" pack cifar10 "$W/cifar" "$W/ctf" --shards 2
"$DUMP" "$W/ctf/cifar10-train-*.tfrecord" > "$W/cdump" 2>&1
python3 - "$W/cdump" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[0] == "10 3 32 32 10", lines[0]
for n, line in enumerate(lines[1:11]):
    k = 10 * (n // 2 + 1) + n % 2
    lab, hexpix = line.split()
    want = bytes((k * 7 + ch * 85 + r * 3 + c) % 256
                 for r in range(32) for c in range(32) for ch in range(3))  # HWC
    assert int(lab) == (k // 10 + k % 10 * 5) % 10 and bytes.fromhex(hexpix) == want, n
PY
ok $? "CIFAR-10 pack keeps HWC pixels and labels"

test_done
