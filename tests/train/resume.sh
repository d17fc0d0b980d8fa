#!/bin/sh
# resume.sh PBX_TRAIN WORKDIR - interrupted + resumed == uninterrupted.
# Trains cnn-bn (conv, BN, ReLU, pooling, dropout, augmentation) on a small
# synthetic set in deterministic mode three ways and compares the params
# hash in summary.json:
#   a) straight through;
#   b) SIGTERM raised by the trainer itself at step 7 (mid-epoch; the real
#      handler path), exit 75, then --resume;
#   c) SIGTERM sent from outside with kill(1) while it runs, then --resume
#      (if the run finished before the signal landed, it is still compared).
set -eu
# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/../cli/harness.sh"
BIN=$1
W=$2
rm -rf "$W"
mkdir -p "$W"
COMMON="--set dataset=synthetic --set synthetic_n=192 --set test_subset=64
 --set model=cnn-bn --set epochs=3 --set batch_size=32 --set threads=2
 --set deterministic=true --set augment.crop_pad=2 --set augment.hflip=true
 --set log_every=1 --set seed=7"

hash() { sed -n 's/.*"params_sha256": *"\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }

"$BIN" - $COMMON --set output_dir="$W/a" 2>"$W/a.log"
A=$(hash "$W/a")

rc=0
"$BIN" - $COMMON --set output_dir="$W/b" --set signal_at_step=7 2>"$W/b1.log" || rc=$?
if [ "$rc" != 75 ]; then ok 1 "signalled run exited $rc, want 75"; cat "$W/b1.log"; exit 1; fi
grep -q '"status": "interrupted"' "$W/b/summary.json"
"$BIN" - $COMMON --set output_dir="$W/b" --resume 2>"$W/b2.log"
grep -q "resumed from" "$W/b2.log"
B=$(hash "$W/b")
# metrics.jsonl continues without duplicate steps
LINES_A=$(wc -l < "$W/a/metrics.jsonl"); LINES_B=$(wc -l < "$W/b/metrics.jsonl")
if [ "$LINES_A" != "$LINES_B" ]; then ok 1 "metrics lines $LINES_A vs $LINES_B"; exit 1; fi

"$BIN" - $COMMON --set output_dir="$W/c" 2>"$W/c1.log" &
PID=$!
# SIGTERM once it trains (its handler is in place), not before: 60 s at most
i=0
while [ ! -s "$W/c/metrics.jsonl" ] && [ $i -lt 1200 ] && kill -0 $PID 2>/dev/null; do sleep 0.05; i=$((i+1)); done
if [ ! -s "$W/c/metrics.jsonl" ]; then ok 1 "no metrics after $((i / 20)) s"; cat "$W/c1.log"; kill -KILL $PID 2>/dev/null; exit 1; fi
kill -TERM $PID 2>/dev/null || true
rc=0; wait $PID || rc=$?
if [ "$rc" != 75 ] && [ "$rc" != 0 ]; then ok 1 "killed run exited $rc"; cat "$W/c1.log"; exit 1; fi
if [ "$rc" = 75 ]; then "$BIN" - $COMMON --set output_dir="$W/c" --resume 2>"$W/c2.log"; fi
C=$(hash "$W/c")

echo "uninterrupted $A"
echo "self-signal   $B"
echo "kill -TERM    $C (first run exit $rc)"
if [ -z "$A" ] || [ "$A" != "$B" ] || [ "$A" != "$C" ]; then ok 1 "params differ"; exit 1; fi
ok 0 "resume is bit-identical"
test_done
