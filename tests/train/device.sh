#!/bin/sh
# $S is split into words on purpose; ok never fails:
# shellcheck disable=SC2086,SC2015
# device.sh PBX_TRAIN WORKDIR HAVE_CUDA [MPIRUN] - the `device` key (cpu, cuda, auto)
# as a machine without a GPU sees it, which is every CI machine:
#   - --version says whether this build has the CUDA backend, and it must
#     when CMake built it (HAVE_CUDA=ON), so CI proves the backend compiled
#     and loads; pbx-train itself links no CUDA library, and a missing
#     module is named
#   - a bad device name is a usage error naming the file, line and key
#   - device: cuda fails (exit 1) naming what is missing (the driver, a GPU,
#     or the backend in this build) before anything is written
#   - device: auto says so in ONE line and trains on the CPU: the same
#     parameters, BN statistics and optimiser state, byte for byte, as
#     device: cpu (the checkpoint payloads are compared)
#   - with MPIRUN, 2 ranks: auto prints its notice once and both train on
#     the CPU; cuda ends both ranks with the error (no rank waits)
# On a machine with a GPU (nvidia-smi lists one) and a CUDA build, cuda and
# auto must instead train on it (summary.json says "device": "cuda").
set -u
BIN=$1
W=$2
HAVE_CUDA=$3
MPIRUN=${4:-}   # mpirun, when pbx-train has MPI: the ranks must agree
rm -rf "$W"; mkdir -p "$W"
. "$(dirname "$0")/lib.sh"

S="--set dataset=synthetic --set synthetic_n=128 --set test_subset=32 --set batch_size=32 --set epochs=2 --set model=cnn-bn"

case $HAVE_CUDA in
ON|on|1|TRUE|true) expect 0 "cpu, cuda (sm_" -- "$BIN" --version ;;
*) expect 0 "cpu; no CUDA backend" -- "$BIN" --version ;;
esac
expect 0 "device (cpu)" -- "$BIN" --help
# pbx-train itself links no CUDA library (the backend is a module loaded
# for device cuda/auto), so it runs on nodes without them
if ldd "$BIN" | grep -q 'libcudart\|libcudnn\|libcublas\|libnccl'; then
	ok 1 "pbx-train links CUDA libraries: $(ldd "$BIN" | grep 'cuda\|cudnn\|cublas\|nccl')"
else
	ok 0 "pbx-train links no CUDA library"
fi
case $HAVE_CUDA in
ON|on|1|TRUE|true)
	# a module that is not there: named, for --version, cuda and auto
	M="$W/no/pbx-train-cuda.so"
	expect 0 "cpu; the CUDA backend was built but cannot load the CUDA backend: $M" -- \
		env PBX_TRAIN_CUDA_MODULE="$M" "$BIN" --version
	expect 1 "error: device cuda: cannot load the CUDA backend: $M: cannot open shared object file" -- \
		env PBX_TRAIN_CUDA_MODULE="$M" "$BIN" - $S --set device=cuda --set output_dir="$W/nomod"
	expect 0 "device auto: no usable GPU, training on the CPU: cannot load the CUDA backend: $M" -- \
		env PBX_TRAIN_CUDA_MODULE="$M" "$BIN" - $S --set device=auto --set output_dir="$W/nomod2"
	;;
esac
expect 2 "\-\-set: key 'device': expected cpu, cuda or auto, got 'gpu'" -- "$BIN" - --set device=gpu
printf 'model: mlp\nepochs: 1\ndevice: tpu\n' > "$W/dev.yaml"
expect 2 "dev.yaml:3: key 'device': expected cpu, cuda or auto, got 'tpu'" -- "$BIN" "$W/dev.yaml"

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
	gpu=1
fi
case $HAVE_CUDA in ON|on|1|TRUE|true) ;; *) gpu=0 ;; esac

# the reference: the CPU
expect 0 "completed" -- "$BIN" - $S --set device=cpu --set output_dir="$W/cpu"
grep -q '"device": "cpu"' "$W/cpu/summary.json" && ok 0 "summary: device cpu" ||
	ok 1 "summary.json of device cpu: $(cat "$W/cpu/summary.json")"

if [ $gpu = 1 ]; then
	expect 0 "device cuda: GPU" -- "$BIN" - $S --set device=cuda --set output_dir="$W/cuda"
	grep -q '"device": "cuda"' "$W/cuda/summary.json" && ok 0 "summary: device cuda" ||
		ok 1 "summary.json of device cuda: $(cat "$W/cuda/summary.json")"
	expect 0 "device cuda: GPU" -- "$BIN" - $S --set device=auto --set output_dir="$W/auto"
	test_done
fi

# device: cuda without a GPU: a clear error, nothing written
case $HAVE_CUDA in
ON|on|1|TRUE|true) why="device cuda: \(no NVIDIA driver: libcuda.so.1 could not be loaded\|no GPU: the NVIDIA driver sees no CUDA device\|the NVIDIA driver supports CUDA\)" ;;
*) why="device cuda: this pbx-train was built without the CUDA backend" ;;
esac
expect 1 "pbx-train: error: $why" -- "$BIN" - $S --set device=cuda --set output_dir="$W/cuda"
[ ! -e "$W/cuda" ] && ok 0 "device cuda: nothing written" || ok 1 "device cuda left $(ls -R "$W/cuda")"

# device: auto: one notice, then exactly the CPU's run
out=$("$BIN" - $S --set device=auto --set output_dir="$W/auto" 2>&1); rc=$?
n=$(printf '%s\n' "$out" | grep -c 'device auto')
if [ $rc = 0 ] && [ "$n" = 1 ] &&
   printf '%s\n' "$out" | grep -q '^pbx-train: device auto: no usable GPU, training on the CPU: .'; then
	ok 0 "device auto: one notice, exit 0"
else
	ok 1 "device auto -> $rc, $n notice line(s): $out"
fi
grep -q '"device": "cpu"' "$W/auto/summary.json" 2>/dev/null && ok 0 "summary: auto ran on the cpu" ||
	ok 1 "summary.json of device auto: $(cat "$W/auto/summary.json" 2>&1)"
# payload after the 208-byte header (magic, 24 words, CRC): params, BN
# buffers, optimiser state; the header differs only in the elapsed time
if cmp -s -i 208 "$W/cpu/checkpoint.pbxt" "$W/auto/checkpoint.pbxt"; then
	ok 0 "device auto == device cpu, checkpoint payload byte for byte"
else
	ok 1 "checkpoints of device auto and cpu differ: $(cmp -i 208 "$W/cpu/checkpoint.pbxt" "$W/auto/checkpoint.pbxt" 2>&1)"
fi

if [ -n "$MPIRUN" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	M="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 timeout -k 5 90 $MPIRUN --oversubscribe --allow-run-as-root -np 2"
	out=$($M "$BIN" - $S --set device=auto --set output_dir="$W/mpi-auto" 2>&1); rc=$?
	n=$(printf '%s\n' "$out" | grep -c 'device auto: no usable GPU, training on the CPU')
	if [ $rc = 0 ] && [ "$n" = 1 ] && grep -q '"world": 2' "$W/mpi-auto/summary.json" &&
	   grep -q '"device": "cpu"' "$W/mpi-auto/summary.json"; then
		ok 0 "2 ranks, device auto: one notice, both on the cpu"
	else
		ok 1 "2 ranks, device auto -> $rc, $n notice(s): $out"
	fi
	out=$($M "$BIN" - $S --set device=cuda --set output_dir="$W/mpi-cuda" 2>&1); rc=$?
	if [ $rc != 0 ] && [ $rc != 124 ] && printf '%s' "$out" | grep -q "error: device cuda: "; then
		ok 0 "2 ranks, device cuda: both end with the error (exit $rc)"
	else
		ok 1 "2 ranks, device cuda -> $rc: $out"
	fi
fi
test_done
