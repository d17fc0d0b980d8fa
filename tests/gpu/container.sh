#!/bin/sh
# tests/gpu/container.sh - a container task on a real GPU node: pbx-env.sh
# (templates/pbx-env.sh) unpacks an image and puts the node's NVIDIA driver
# libraries into it (gpu_driver: from the node's linker cache, as
# `ch-fromhost --nvidia` does), then a CUDA program in the image, run with
# ch-run the way pbx-task.sh runs a task, must find the GPU, run a kernel
# and have loaded the driver from /usr/local/lib/pbx-gpu.  NOT part of
# ctest or CI (no GPU there: exit 2 without one); t0277 checks the same
# path with a stand-in driver on every CI run.
#
# The image is made here from the probe and its and the driver's libraries
# (ldd), a static
# busybox and a static ldconfig, with no /etc/ld.so.conf (pbx-env.sh writes
# the include a minimal image lacks).  Where the node's /etc/ld.so.cache
# does not list libcuda.so.1 (a driver found through LD_LIBRARY_PATH), the
# script says so and makes the cache a node body reads (PBX_ROOT) from the
# driver's directory.
#
# usage: tests/gpu/container.sh
# env:   PROBE=a prebuilt probe (default: built with nvcc from the source
#        below)  BUSYBOX=/bin/busybox  LDCONFIG=/sbin/ldconfig  CH_RUN=ch-run
#        OUT=tests/gpu/out-container
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/tests/gpu/out-container}
# shellcheck source=tests/cli/harness.sh
. "$ROOT/tests/cli/harness.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$ROOT/tests/gpu/common.sh"
gpu_require
rm -rf "$OUT"
mkdir -p "$OUT"
CH_RUN=${CH_RUN:-ch-run}
command -v "$CH_RUN" >/dev/null 2>&1 || gpu_die "no ch-run (Debian: charliecloud-runtime; or set CH_RUN)"
PATH=$(dirname "$(command -v "$CH_RUN")"):$PATH
export PATH USER="${USER:-$(id -un)}"

# the probe: CUDA's runtime (linked statically, as nvcc does by default)
# loads libcuda.so.1 by its soname; it prints the devices, a kernel's
# result and the libcuda the process mapped
if [ -z "${PROBE:-}" ]; then
	cat >"$OUT/probe.cu" <<'CU'
#include <cstdio>
#include <cstring>
__global__ void twice(int *v, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		v[i] = 2 * i;
}
int main()
{
	int n = 0, drv = 0, bad = 0, len = 1 << 20;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		printf("cuda=error %s\n", cudaGetErrorString(e));
		return 1;
	}
	cudaDeviceProp p;
	cudaGetDeviceProperties(&p, 0);
	cudaDriverGetVersion(&drv);
	int *d, *h = new int[len];
	cudaMalloc(&d, len * sizeof(int));
	twice<<<(len + 255) / 256, 256>>>(d, len);
	e = cudaMemcpy(h, d, len * sizeof(int), cudaMemcpyDeviceToHost);
	for (int i = 0; i < len; i++)
		bad += h[i] != 2 * i;
	char line[4096], lib[4096] = "none";
	FILE *maps = fopen("/proc/self/maps", "r");
	while (maps && fgets(line, sizeof line, maps))
		if (strstr(line, "libcuda.so")) {
			sscanf(strchr(line, '/') ? strchr(line, '/') : line, "%4095s", lib);
			break;
		}
	printf("devices=%d name=%s driver=%d kernel=%s libcuda=%s\n", n, p.name, drv,
	       e == cudaSuccess && !bad ? "ok" : "wrong", lib);
	return e != cudaSuccess || bad;
}
CU
	command -v nvcc >/dev/null 2>&1 || PATH=$PATH:/usr/local/cuda/bin
	nvcc -O2 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
		-o "$OUT/probe" "$OUT/probe.cu" >"$OUT/nvcc.log" 2>&1 || gpu_die "nvcc failed (see $OUT/nvcc.log)"
	PROBE=$OUT/probe
fi

# the image: the probe with its libraries, busybox, ldconfig
IMG=$OUT/image
mkdir -p "$IMG/bin" "$IMG/sbin" "$IMG/lib64" "$IMG/etc"
cp "$PROBE" "$IMG/probe"
cp "${BUSYBOX:-/bin/busybox}" "$IMG/bin/busybox" && ln -s busybox "$IMG/bin/sh"
cp "${LDCONFIG:-/sbin/ldconfig}" "$IMG/sbin/ldconfig"
# with what the driver itself links (libdl, libpthread, librt: glibc's
# stubs, in every distribution's image; without them libcuda.so.1 does not
# load and CUDA's runtime says "driver version is insufficient")
drvlib=$(ldconfig -p | awk '$1 == "libcuda.so.1" {print $NF; exit}')
ldd "$PROBE" ${drvlib:+"$drvlib"} | awk 'NF > 1 && $3 ~ /^\// {print $3} NF > 1 && $1 ~ /^\// {print $1}' | sort -u | while read -r lib; do
	mkdir -p "$IMG$(dirname "$lib")" && cp -L "$lib" "$IMG$lib"
done
tar -C "$IMG" -cf "$OUT/image.tar" .
ok $? "an image of $(tar -tf "$OUT/image.tar" | wc -l) members: the probe, its libraries, busybox, ldconfig"

# the node's driver, as the node's linker cache lists it
W=$OUT/node
mkdir -p "$W/pkg/env" "$W/run/env" "$W/shared" "$W/local"
ln -s "$OUT/image.tar" "$W/pkg/env/image"
echo "READY $(sha256sum <"$OUT/image.tar" | cut -d' ' -f1)" >"$W/run/env/status"
if ldconfig -p | grep -q 'libcuda\.so\.1 '; then
	echo "# the node's /etc/ld.so.cache lists $(ldconfig -p | grep -m1 'libcuda\.so\.1 ' | sed 's/.*=> //')"
	unset PBX_ROOT
else
	drv=$(for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu $(echo "${LD_LIBRARY_PATH:-}" | tr : ' '); do
		[ -e "$d/libcuda.so.1" ] && echo "$d" && break
	done)
	[ -n "$drv" ] || drv=$(dirname "$(find / -xdev -name libcuda.so.1 2>/dev/null | grep -v stubs | head -1)")
	[ -n "$drv" ] && [ "$drv" != . ] || [ "${PBX_GPU_SELFTEST:-0}" = 1 ] || gpu_die "no libcuda.so.1 on this machine"
	echo "# the node's /etc/ld.so.cache does not list libcuda.so.1 (found in $drv): a cache for PBX_ROOT made from it"
	export PBX_ROOT="$W/root"
	mkdir -p "$PBX_ROOT/etc"
	echo "$drv" >"$W/ld.so.conf"
	ldconfig -X -C "$PBX_ROOT/etc/ld.so.cache" -f "$W/ld.so.conf"
fi

# pbx-env.sh unpack, as pbx-task.sh calls it
u=$(PBX_PKG_DIR=$W/pkg PBX_RUN_DIR=$W/run PBX_SHARED=$W/shared PBX_ENV_DIR=$W/local \
	sh "$ROOT/templates/pbx-env.sh" unpack 2>"$OUT/unpack.err")
rc=$?
ok $rc "pbx-env.sh unpack: $u $(cat "$OUT/unpack.err")"
echo "# put into the image: $(find "$u/usr/local/lib/pbx-gpu" -mindepth 1 -printf '%f ' 2>/dev/null)"
[ -e "$u/usr/local/lib/pbx-gpu/libcuda.so.1" ] && [ -s "$u/.pbx-gpu" ] &&
	grep -qx /usr/local/lib/pbx-gpu "$u/etc/ld.so.conf.d/000-pbx-gpu.conf"
ok $? "the node's libcuda.so.1 is in the image, with its stamp and linker configuration"

# the task, as pbx-task.sh runs it
out=$("$CH_RUN" --unset-env=LD_LIBRARY_PATH --unset-env=LD_PRELOAD -c / "$u" -- /probe 2>&1)
rc=$?
echo "# in the image: $out"
case $rc,$out in
0,*kernel=ok*libcuda=/usr/local/lib/pbx-gpu/libcuda.so*) ok 0 "a CUDA kernel ran in the image, on the node's driver from /usr/local/lib/pbx-gpu" ;;
*) ok 1 "the probe in the image (exit $rc): $out" ;;
esac

# the probe outside, for the figures beside it
echo "# on the node: $("$PROBE" 2>&1)"
test_done
