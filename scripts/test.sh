#!/bin/sh
# test.sh - builds pbx twice (optimised, and with ASan/UBSan) and runs the
# ctest suite in both.  By default (what CI runs, about 25 minutes on two
# cores) the optimised build skips tests labelled "slow" and the sanitizer
# build also skips "nosan" (long, timing-bound CLI tests) and "emulator"
# (the Python emulators' own tests, no pbx code); --slow runs every test in
# the optimised build and all but "emulator" under the sanitizers (about 80
# minutes).  Tests labelled "vm" boot VMs: scripts/vm-test.sh.  Python
# test tools (scripts/test-requirements.txt: TensorBoard's reader, cryptography for the Compute Engine emulator's token endpoint,
# TensorFlow for the TFRecord interop test) go into a private virtual
# environment in build/venv, refreshed when that file changes.
# Usage: scripts/test.sh [--slow] [ctest args]
set -eu
opt_skip='vm|slow' asan_skip='vm|slow|nosan|emulator'
if [ "${1:-}" = --slow ]; then
  shift
  opt_skip='vm' asan_skip='vm|emulator'
fi
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

. scripts/venv.sh

# PBX_CUDA=ON (.ci/run) makes a missing CUDA toolkit fail the build
# instead of leaving pbx-train's CUDA backend out
cuda=${PBX_CUDA:-AUTO}
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPBX_CUDA="$cuda" >/dev/null
cmake --build build -j "$jobs"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPBX_SANITIZE=ON -DPBX_CUDA="$cuda" >/dev/null
cmake --build build-asan -j "$jobs"

# Tests talk to loopback only: no credential lookup may reach a cloud
# metadata server (tests/cli/lib.sh also points the credential files away).
export AWS_EC2_METADATA_DISABLED=true GCE_METADATA_HOST=127.0.0.1:1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
echo "== tests: optimised build"
(cd build && ctest --output-on-failure -j "$jobs" -LE "$opt_skip" "$@") || status=1
echo "== tests: ASan/UBSan build"
(cd build-asan && ctest --output-on-failure -j "$jobs" -LE "$asan_skip" "$@") || status=1
exit $status
