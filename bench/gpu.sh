#!/bin/sh
# bench/gpu.sh - pbx-train's CUDA backend against PyTorch eager and
# torch.compile on the same GPU, in one run: cnn-bn and mini-alexnet, batch
# 128 and 1024, fp32 (TF32 off on both sides), images/s of training steps
# and the peak GPU memory of each process (nvidia-smi, sampled every 50 ms:
# it includes the CUDA context; PyTorch's own allocator peak is printed
# too).  Needs an NVIDIA GPU (exit 2 without one) and python3 with a
# CUDA-enabled torch.  The goal: pbx-train >= 2x eager and >= 1x
# torch.compile; the ratios are printed, not enforced.
#
# pbx-train reads Fashion-MNIST when DATA_DIR (or the runtime's default
# directory) has it, else its synthetic 1x28x28 set, and copies every batch
# from the host; PyTorch trains on a random batch already on the GPU.
# images/s: pbx-train's median "images_per_s" over the logged windows after
# WARM steps; PyTorch's median over windows after warm-up (gpu_torch.py).
#
# usage: bench/gpu.sh [BUILD_DIR]      (default build-gpu, built if needed)
# env:   PY=python3  STEPS=300  WARM=50  OUT=bench/out
#        MODELS="cnn-bn mini-alexnet"  BATCHES="128 1024"  MODES="eager compile"
#        PBX_GPU_SELFTEST=1  without a GPU: pbx-train on the CPU, no PyTorch,
#                  60 steps (tests this script, measures nothing useful)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
PY=${PY:-python3}
STEPS=${STEPS:-300}
WARM=${WARM:-50}
OUT=${OUT:-$ROOT/bench/out}
BIN=$BUILD/src/train/pbx-train
# shellcheck source-path=SCRIPTDIR source=../tests/gpu/common.sh
. "$ROOT/tests/gpu/common.sh"
gpu_require
gpu_build "$ROOT" "$BUILD"
GPU=cuda
if [ "${PBX_GPU_SELFTEST:-0}" = 1 ]; then
	GPU=cpu # the script's plumbing on a machine without a GPU: no PyTorch
	STEPS=${SELFTEST_STEPS:-60}
	WARM=20
else
	"$PY" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null ||
		gpu_die "$PY has no CUDA-enabled torch (set PY)"
	echo "# $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())')"
fi
mkdir -p "$OUT"
W=$(mktemp -d "${TMPDIR:-/tmp}/pbx-gpu-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT

data="--set dataset=synthetic --set synthetic_n=65536 --set test_subset=256"
dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
if [ -e "$dir/train-images-idx3-ubyte.gz" ] || [ -e "$dir/train-images-idx3-ubyte" ]; then
	data="--set dataset=fashion-mnist --set data_dir=$dir"
fi

# peak_watch PID FILE: in the background, samples nvidia-smi every 50 ms
# while process PID lives and writes its peak MiB to FILE.  It must run
# beside the shell's own `wait PID`: run inside $(...) instead, it would
# poll a child it cannot reap, which kill -0 sees alive for ever (a zombie;
# the first run on an H100 hung there).
peak_watch() {
	pid=$1; peak=0
	if [ "$GPU" = cuda ]; then
		while kill -0 "$pid" 2>/dev/null; do
			m=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
				awk -F', *' -v p="$pid" '$1 == p {print $2}')
			[ -n "$m" ] && [ "$m" -gt "$peak" ] && peak=$m
			sleep 0.05
		done
	fi
	echo "$peak" >"$2"
}

# run_watched PEAKFILE CMD...: runs CMD in the background, watched by
# peak_watch; returns CMD's status once both have ended
run_watched() {
	_pf=$1; shift
	"$@" &
	_pid=$!
	peak_watch "$_pid" "$_pf" &
	_wpid=$!
	wait "$_pid"; _rc=$?
	wait "$_wpid"
	return $_rc
}

# median of the images_per_s of the windows after WARM steps
pbx_ips() {
	sed -n 's/^{"step":\([0-9]*\),.*"images_per_s":\([^,]*\),.*/\1 \2/p' "$1" |
		awk -v w="$WARM" '$1 > w {print $2}' | sort -g |
		awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]; else print "nan"}'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2fx", a / b; else print "-"}'; }
int() { awk -v a="$1" 'BEGIN {if (a + 0 > 0) printf "%.0f", a; else print a}'; }

table=$OUT/gpu.md
{
	echo "| model | batch | pbx-train img/s | eager img/s | compile img/s | vs eager | vs compile | peak MiB pbx / eager / compile |"
	echo "|---|---|---|---|---|---|---|---|"
} >"$table"
for model in ${MODELS:-cnn-bn mini-alexnet}; do
	for batch in ${BATCHES:-128 1024}; do
		t0=$(date +%s)
		o=$W/pbx-$model-$batch
		# shellcheck disable=SC2086 # $data is a list of options
		run_watched "$W/peak" "$BIN" - --set model="$model" --set batch_size="$batch" $data --set epochs=1000 \
			--set max_steps="$STEPS" --set eval_every=0 --set log_every=10 \
			--set device=$GPU --set output_dir="$o" >"$o.log" 2>&1 ||
			gpu_die "pbx-train failed: $(tail -3 "$o.log")"
		pm=$(cat "$W/peak")
		pi=$(pbx_ips "$o/metrics.jsonl")
		echo "# $model batch $batch: pbx-train $(int "$pi") img/s, peak $pm MiB ($(($(date +%s) - t0)) s)"
		ips_eager=- ips_compile=- peak_eager=- peak_compile=-
		for mode in ${MODES:-eager compile}; do
			[ "$GPU" = cuda ] || continue
			t0=$(date +%s)
			run_watched "$W/peak" "$PY" "$ROOT/bench/gpu_torch.py" --model "$model" --batch "$batch" --mode "$mode" \
				--steps "$STEPS" >"$W/$mode.json" 2>"$W/$mode.err" ||
				gpu_die "gpu_torch.py $mode failed: $(tail -3 "$W/$mode.err")"
			eval "peak_$mode=\$(cat \"\$W/peak\")"
			eval "ips_$mode=\$(sed -n 's/.*\"images_per_s\": \([0-9.e+-]*\).*/\1/p' \"\$W/\$mode.json\")"
			cat "$W/$mode.json"
			echo "# $model batch $batch: $mode done ($(($(date +%s) - t0)) s)"
		done
		# shellcheck disable=SC2154 # set by eval above
		echo "| $model | $batch | $(int "$pi") | $(int "$ips_eager") | $(int "$ips_compile") | $(ratio "$pi" "$ips_eager") | $(ratio "$pi" "$ips_compile") | $pm / $peak_eager / $peak_compile |" >>"$table"
	done
done
cat "$table"
echo "# table in $table"
