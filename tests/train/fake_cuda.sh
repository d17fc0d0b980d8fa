#!/bin/sh
# fake_cuda.sh PBX_TRAIN FAKE_MODULE WORKDIR [MPIRUN] - the whole trainer
# through the device path with no GPU: FAKE_MODULE stands in for
# pbx-train-cuda.so (same entry point; the CPU's kernels on separate host
# memory, tests/train/fake_device.c), so device: cuda runs every device
# seam of train.c (push after initialising and resuming, pull before
# checkpoints, hashes and the summary, the device's grads for the comm,
# clipping and the optimiser step on the device copies, evaluation) and
# must give the CPU's results bit for bit:
#   - a run, its metrics and its checkpoint payload (params, BN statistics,
#     momentum) == device: cpu; also with activation recomputation
#   - SIGTERM at step 5, exit 75, --resume: == uninterrupted, on the
#     device, and across devices (device -> cpu, cpu -> device)
#   - with MPIRUN, 2 ranks: == 2 ranks on the cpu; when one rank has no
#     GPU, auto puts both on the CPU after one notice and cuda fails on both
# $S is split into words on purpose; ok never fails:
# shellcheck disable=SC2086,SC2015
set -u
BIN=$1
MOD=$2
W=$3
MPIRUN=${4:-}
rm -rf "$W"; mkdir -p "$W"
# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/../cli/harness.sh"
S="--set dataset=synthetic --set synthetic_n=256 --set test_subset=64 --set batch_size=32 --set epochs=2 --set model=cnn-bn --set log_every=1 --set seed=3"
export PBX_TRAIN_CUDA_MODULE="$MOD"

# run NAME DEVICE ARGS...: exit status in rc, output in $W/NAME.log
run() {
	_n=$1; _d=$2; shift 2
	"$BIN" - $S "$@" --set device="$_d" --set output_dir="$W/$_n" >"$W/$_n.log" 2>&1
	rc=$?
}
# same A B WHAT: checkpoint payloads (after the 208-byte header) and the
# per-step losses of A and B are identical
same() {
	if ! cmp -s -i 208 "$W/$1/checkpoint.pbxt" "$W/$2/checkpoint.pbxt"; then
		ok 1 "$3: checkpoints differ ($(cmp -i 208 "$W/$1/checkpoint.pbxt" "$W/$2/checkpoint.pbxt" 2>&1))"
	elif [ "$(grep -o '"step":[0-9]*,"loss":[^,]*' "$W/$1/metrics.jsonl")" != \
	       "$(grep -o '"step":[0-9]*,"loss":[^,]*' "$W/$2/metrics.jsonl")" ]; then
		ok 1 "$3: losses differ"
	else
		ok 0 "$3"
	fi
}

"$BIN" --version | grep -q 'cuda (FAKE' && ok 0 "the fake module loads" ||
	ok 1 "the fake module does not load: $("$BIN" --version)"

run cpu cpu
[ $rc = 0 ] || ok 1 "cpu run: $(tail -3 "$W/cpu.log")"
run dev cuda
[ $rc = 0 ] && grep -q '"device": "fake"' "$W/dev/summary.json" && ok 0 "device cuda ran on the (fake) device" ||
	ok 1 "device cuda -> $rc: $(tail -3 "$W/dev.log")"
same cpu dev "device == cpu: parameters, BN statistics, momentum, every loss"
grep '"test_acc"' "$W/cpu/summary.json" >"$W/a1"; grep '"test_acc"' "$W/dev/summary.json" >"$W/a2"
cmp -s "$W/a1" "$W/a2" && ok 0 "evaluation on the device == cpu" || ok 1 "test_acc: $(cat "$W/a1" "$W/a2")"

run cpu-rc cpu --set recompute=-1
run dev-rc cuda --set recompute=-1
same cpu-rc dev-rc "with recomputation: device == cpu"

# interrupted at step 5 (SIGTERM, exit 75) and resumed
for pair in "dev cuda cuda" "d2c cuda cpu" "c2d cpu cuda"; do
	set -- $pair
	n=$1
	run "$n" "$2" --set signal_at_step=5
	[ $rc = 75 ] || ok 1 "$n: interrupted run exited $rc: $(tail -3 "$W/$n.log")"
	"$BIN" - $S --set device="$3" --set output_dir="$W/$n" --resume >"$W/$n.2.log" 2>&1 ||
		ok 1 "$n: resumed run failed: $(tail -3 "$W/$n.2.log")"
	mv "$W/$n" "$W/$n-resumed"
	[ "$n" = dev ] && mv "$W/dev-resumed" "$W/dev-int"
done
same cpu dev-int "interrupted + resumed on the device == uninterrupted"
same cpu d2c-resumed "device checkpoint resumed on the cpu == uninterrupted"
same cpu c2d-resumed "cpu checkpoint resumed on the device == uninterrupted"

if [ -n "$MPIRUN" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	M="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 timeout -k 5 90 $MPIRUN --oversubscribe --allow-run-as-root -np 2"
	$M "$BIN" - $S --set device=cpu --set output_dir="$W/mpi-cpu" >"$W/mpi-cpu.log" 2>&1 ||
		ok 1 "2 ranks cpu: $(tail -3 "$W/mpi-cpu.log")"
	$M "$BIN" - $S --set device=cuda --set output_dir="$W/mpi-dev" >"$W/mpi-dev.log" 2>&1 ||
		ok 1 "2 ranks device: $(tail -3 "$W/mpi-dev.log")"
	same mpi-cpu mpi-dev "2 ranks: device == cpu"
	out=$(PBX_FAKE_CUDA_NO_GPU_RANK=1 $M "$BIN" - $S --set device=auto --set output_dir="$W/mpi-auto" 2>&1); rc=$?
	n=$(printf '%s\n' "$out" | grep -c 'device auto: no usable GPU, training on the CPU: 1 of the 2 ranks have no usable GPU')
	if [ $rc = 0 ] && [ "$n" = 1 ] && grep -q '"device": "cpu"' "$W/mpi-auto/summary.json"; then
		same mpi-cpu mpi-auto "2 ranks, one without a GPU, auto: both on the cpu, one notice"
	else
		ok 1 "2 ranks, one without a GPU, auto -> $rc, $n notice(s): $out"
	fi
	out=$(PBX_FAKE_CUDA_NO_GPU_RANK=1 $M "$BIN" - $S --set device=cuda --set output_dir="$W/mpi-cuda" 2>&1); rc=$?
	if [ $rc != 0 ] && [ $rc != 124 ] &&
	   printf '%s' "$out" | grep -q 'error: device cuda: 1 of the 2 ranks have no usable GPU' &&
	   printf '%s' "$out" | grep -q 'error: device cuda: no GPU: the fake module gives local rank 1 none'; then
		ok 0 "2 ranks, one without a GPU, cuda: both fail, each saying why (exit $rc)"
	else
		ok 1 "2 ranks, one without a GPU, cuda -> $rc: $out"
	fi
fi
test_done
