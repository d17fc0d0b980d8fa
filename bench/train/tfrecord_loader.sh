#!/bin/sh
# tfrecord_loader.sh - loader throughput from TFRecord shards against the
# IDX files, in one run: packs Fashion-MNIST's training set into 4 shards
# (pbx-train pack), then loader_bench loads each source (best of 3) and runs
# one epoch of batches through the prefetching loader.
# Usage: sh bench/train/tfrecord_loader.sh [BUILD_DIR] [THREADS]
set -eu
B=${1:-build}
T=${2:-2}
FM=${PBX_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
W=$(mktemp -d /tmp/pbx-bench-tfr.XXXXXX)
trap 'rm -rf "$W"' EXIT
"$B/src/train/pbx-train" pack fashion-mnist "$FM" "$W" --shards 4 >/dev/null
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "IDX: $(du -ch "$FM"/train-*-ubyte.gz | tail -1 | cut -f1) gzip'd; TFRecord: $(du -sh "$W" | cut -f1) in 4 shards"
for t in 1 "$T"; do
	"$B/tests/train/train_loader_bench" "$FM" "$W/fashion-mnist-train-*.tfrecord" "$t" 3
done
