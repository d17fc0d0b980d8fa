#!/bin/sh
# cmake_cuda.sh SOURCE_DIR WORKDIR - the CUDA backend's build switch
# (src/train/cuda/CMakeLists.txt), configure only:
#   -DPBX_CUDA=OFF           off, one status line saying so
#   nvcc missing, AUTO       off, one status line naming what is missing,
#                            and the configuration succeeds
#   nvcc missing, ON         configuring fails naming what is missing
set -u
SRC=$1
# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"
W=$2
rm -rf "$W"; mkdir -p "$W"
conf() { # conf NAME EXPECTED_EXIT PATTERN cmake-args...
	name=$1; code=$2; pat=$3; shift 3
	out=$(cmake -S "$SRC" -B "$W/$name" "$@" 2>&1); rc=$?
	n=$(printf '%s\n' "$out" | grep -c 'pbx-train CUDA backend')
	if [ "$rc" != "$code" ] || ! printf '%s' "$out" | grep -q -- "$pat" || [ "$n" != 1 ]; then
		ok 1 "$name: exit $rc (want $code), $n status line(s): $(printf '%s\n' "$out" | grep -i -A2 'cuda')"
	else
		ok 0 "$name: $pat"
	fi
}
conf off 0 "pbx-train CUDA backend: off (-DPBX_CUDA=OFF)" -DPBX_CUDA=OFF
conf missing 0 "pbx-train CUDA backend: off (not found: nvcc" -DPBX_NVCC=/nonexistent/nvcc
conf required 1 "pbx-train CUDA backend: -DPBX_CUDA=ON but not found: nvcc" -DPBX_NVCC=/nonexistent/nvcc -DPBX_CUDA=ON
rm -rf "$W"
test_done
