#!/bin/sh
# tests/gpu/pack.sh - packs a CUDA build of pbx-train made on Debian 12
# (BUILD: configured with -DPBX_CUDA=ON) for a GPU machine that is not
# Debian and has no build dependencies, such as a lent GPU machine with
# only CUDA, cuDNN, NCCL and PyTorch on it: the binaries in DIR/build (the
# layout tests/gpu/run.sh and bench/gpu.sh take as BUILD_DIR), the Debian
# libraries they need beyond glibc, libstdc++ and CUDA's in DIR/lib, ch-run
# and its libraries (xz-compressed), busybox and ldconfig (tests/gpu/container.sh), the
# container probe built with nvcc, and Fashion-MNIST when installed.
# DIR/env.sh, sourced there, puts DIR/lib and the machine's own CUDA,
# cuDNN and NCCL directories on LD_LIBRARY_PATH and sets PY to a python3
# that runs without them (PyTorch brings its own).
#
# usage: tests/gpu/pack.sh BUILD DIR
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$1
DIR=$2
rm -rf "$DIR"
mkdir -p "$DIR/build/src/train" "$DIR/build/tests/train" "$DIR/lib" "$DIR/bin" "$DIR/data"
cp "$BUILD/src/train/pbx-train" "$BUILD/src/train/pbx-train-cuda.so" "$DIR/build/src/train/"
cp "$BUILD/tests/train/train_ckpt_cmp" "$DIR/build/tests/train/"
cp "$(command -v ch-run)" /bin/busybox /sbin/ldconfig "$DIR/bin/"

# libs FILE...: the libraries FILEs load that the other machine may lack
libs() {
	ldd "$@" | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
		grep -v -E '^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so|/usr/local/cuda' |
		while read -r _ lib; do cp -L "$lib" "$DIR/lib/"; done
}
libs "$DIR/build/src/train/pbx-train" "$DIR/build/src/train/pbx-train-cuda.so" \
	"$DIR/build/tests/train/train_ckpt_cmp" "$DIR/bin/ch-run"

# xz: the libraries in a quarter of their size (OpenBLAS alone is 35 MB)
tar -C "$DIR" -cJf "$DIR/lib.tar.xz" lib && rm -rf "${DIR:?}/lib"

OUT=$DIR/probe-build PBX_GPU_SELFTEST=1 sh "$ROOT/tests/gpu/container.sh" >/dev/null 2>&1 || :
cp "$DIR/probe-build/probe" "$DIR/bin/probe"
rm -rf "$DIR/probe-build"
[ -d /usr/share/datasets/fashion-mnist ] && cp /usr/share/datasets/fashion-mnist/*.gz "$DIR/data/"

cat >"$DIR/env.sh" <<'SH'
# sourced from the repository's root on the GPU machine: PACK is this folder
[ -d "$PACK/lib" ] || tar -C "$PACK" -xJf "$PACK/lib.tar.xz"
cuda_dirs=$(find /usr/local /usr/lib /opt \( -name 'libcudnn.so.9' -o -name 'libnccl.so.2' -o -name 'libcublas.so.13' \
	-o -name 'libcudart.so.13' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' :)
export LD_LIBRARY_PATH="$PWD/$PACK/lib:${cuda_dirs}${LD_LIBRARY_PATH:-}"
export PATH="$PWD/$PACK/bin:$PATH:/usr/local/cuda/bin"
printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexec python3 "$@"\n' >"$PWD/$PACK/py" && chmod +x "$PWD/$PACK/py"
export PY="$PWD/$PACK/py" DATA_DIR="$PWD/$PACK/data" PROBE="$PWD/$PACK/bin/probe"
export BUSYBOX="$PWD/$PACK/bin/busybox" LDCONFIG="$PWD/$PACK/bin/ldconfig" CH_RUN="$PWD/$PACK/bin/ch-run"
SH
du -sh "$DIR"
