# tests/gpu/common.sh - sourced by tests/gpu/run.sh and bench/gpu.sh: stop
# loudly without a GPU, and build pbx-train with its CUDA backend.
#   gpu_require           exit 2 unless nvidia-smi lists a GPU; sets NGPU
#   (PBX_GPU_SELFTEST=1: no GPU needed, NGPU=0; the scripts then train on
#   the CPU where they would use the GPU, to test themselves; NGPU=2)
#   gpu_build ROOT BUILD  configures BUILD with -DPBX_CUDA=ON (Release) and
#                         builds pbx-train and train_ckpt_cmp, unless BUILD
#                         already has a pbx-train with the CUDA backend
#                         (a selftest takes BUILD's pbx-train as it is)
# shellcheck shell=sh

gpu_die() { echo "$0: $*" >&2; exit 2; }

gpu_require() {
	if [ "${PBX_GPU_SELFTEST:-0}" = 1 ]; then
		echo "# SELFTEST: no GPU used; 'cuda' runs on the CPU (checks the script, not the GPU code)"
		NGPU=2
		return 0
	fi
	command -v nvidia-smi >/dev/null 2>&1 ||
		gpu_die "no nvidia-smi: this machine has no NVIDIA driver, so no GPU (this script needs one; CI has none and does not run it)"
	NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
	[ "$NGPU" -ge 1 ] || gpu_die "nvidia-smi lists no GPU"
	echo "# $(nvidia-smi -L | head -4 | tr '\n' ' ')"
	echo "# driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
}

gpu_build() {
	_bin=$2/src/train/pbx-train
	# a selftest takes the CPU build it is given as it is
	[ "${PBX_GPU_SELFTEST:-0}" = 1 ] && [ -x "$_bin" ] && return 0
	if ! [ -x "$_bin" ] || ! "$_bin" --version 2>/dev/null | grep -q 'cuda (sm_'; then
		cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DPBX_CUDA=ON >"$2.cmake.log" 2>&1 ||
			gpu_die "configuring with -DPBX_CUDA=ON failed (see $2.cmake.log)"
		cmake --build "$2" -j"$(nproc)" --target pbx-train train_ckpt_cmp >"$2.build.log" 2>&1 ||
			gpu_die "building pbx-train failed (see $2.build.log)"
	fi
	"$_bin" --version | grep -q 'cuda (sm_' || gpu_die "$_bin has no CUDA backend"
	echo "# $("$_bin" --version)"
}
