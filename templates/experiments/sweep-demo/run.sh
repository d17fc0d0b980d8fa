#!/bin/sh
# run.sh - the sweep-demo "training": prints its parameters, then writes
# metrics.jsonl, one {"step":N,"loss":L,"acc":A} line per step, with a loss
# curve that depends on --lr, --width and the repeat, and result.txt (the
# last line).  No GPU work: it only shows which GPU it was given.
set -eu
lr=
width=
while [ $# -gt 0 ]; do
	case $1 in
	--lr) lr=$2; shift 2 ;;
	--width) width=$2; shift 2 ;;
	*) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ -z "$lr" ] || [ -z "$width" ]; then echo "usage: run.sh --lr LR --width W" >&2; exit 2; fi
echo "task ${PBX_TASK_INDEX:-?}: lr=$lr width=$width repeat=${PBX_REPEAT:-0}" \
	"node=$(uname -n) user=$(id -un) gpus=${CUDA_VISIBLE_DEVICES:-none}"
cat params.json 2>/dev/null || true
awk -v lr="$lr" -v w="$width" -v r="${PBX_REPEAT:-0}" -v steps="${DEMO_STEPS:-50}" 'BEGIN {
	srand(1000 * w + 17 * r + int(lr * 10000))
	floor = 0.5 / log(w)                  # wider is better ...
	rate = lr * 3                         # ... and a larger lr learns faster
	for (s = 1; s <= steps; s++) {
		loss = floor + (2.3 - floor) * exp(-rate * s) + 0.02 * rand()
		acc = 1 - loss / 2.4
		if (acc < 0) acc = 0
		printf "{\"step\":%d,\"loss\":%.4f,\"acc\":%.4f}\n", s, loss, acc
	}
}' >metrics.jsonl
tail -n 1 metrics.jsonl >result.txt
echo "done: $(cat result.txt)"
