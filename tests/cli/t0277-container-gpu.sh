#!/bin/sh
# t0277-container-gpu.sh - a GPU node's NVIDIA driver in a container image
# (environment: container:; docs/environments.md, "GPU nodes"): the
# driver's user libraries are the node's, never the image's.  This machine
# has no GPU, so the driver is a stand-in made here: libcuda.so.1 and
# libnvidia-ml.so.1 built from C (cuInit, cuDriverGetVersion), listed in
# the node bodies' dynamic linker cache (ROOT/etc/ld.so.cache, as a GPU
# VM's /etc/ld.so.cache lists its driver).  A program in the image loads
# libcuda.so.1 by its soname and gets the node's: copied into the unpacked
# image at /usr/local/lib/pbx-gpu, the image's own ldconfig run; the
# driver updated on the node: the next task gets the new one; an image
# with a link where the driver goes is refused with the reason, nothing
# written through it; an image without ldconfig still runs, its stderr
# says where the driver is.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

command -v ch-run >/dev/null 2>&1 && [ -x /bin/busybox ] && command -v cc >/dev/null 2>&1
ok $? "ch-run, busybox and cc are installed (scripts/install-deps.sh)"

local_cluster cg slot "{ name: node, count: 2 }"
SHARED=$PBX_HOME/clusters/cg/shared

# driver VERSION: the stand-in driver's libraries in TEST_TMP/driver
driver() {
	mkdir -p "$TEST_TMP/driver"
	cat >"$TEST_TMP/cuda.c" <<C
int cuInit(unsigned flags) { return flags ? 101 : 0; }
int cuDriverGetVersion(int *v) { *v = $1; return 0; }
C
	echo 'int nvmlInit_v2(void) { return 0; }' >"$TEST_TMP/nvml.c"
	# linked with librt, as NVIDIA's is (with libdl, libpthread, libm)
	cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$TEST_TMP/driver/libcuda.so.1" "$TEST_TMP/cuda.c" -Wl,--no-as-needed -l:librt.so.1 &&
		cc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$TEST_TMP/driver/libnvidia-ml.so.1" "$TEST_TMP/nvml.c"
}
# linker_caches: each node body's ROOT/etc/ld.so.cache lists the system's
# libraries and TEST_TMP/driver's (ldconfig -X: no links made anywhere)
linker_caches() {
	echo "$TEST_TMP/driver" >"$TEST_TMP/ld.so.conf"
	for root in "$PBX_HOME"/clusters/cg/nodes/*; do
		mkdir -p "$root/etc" && ldconfig -X -C "$root/etc/ld.so.cache" -f "$TEST_TMP/ld.so.conf" || return 1
	done
}

# the image: busybox, the probe (a C program loading libcuda.so.1 by its
# soname, as CUDA programs do) with its libraries, and glibc's ldconfig
cat >"$TEST_TMP/probe.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
int main(void)
{
	struct link_map *map = NULL;
	int (*init)(unsigned), (*version)(int *), v = 0;
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
	if (!cuda) {
		printf("cuda=none\n");
		return 0;
	}
	init = (int (*)(unsigned))dlsym(cuda, "cuInit");
	version = (int (*)(int *))dlsym(cuda, "cuDriverGetVersion");
	version(&v);
	dlinfo(cuda, RTLD_DI_LINKMAP, &map);
	printf("cuda=%d version=%d from=%s nvml=%s\n", init(0), v, map->l_name,
	       dlopen("libnvidia-ml.so.1", RTLD_NOW) ? "yes" : "no");
	return 0;
}
C
# image DIR [no-ldconfig]: the root file system
image() {
	mkdir -p "$1/bin" "$1/etc" "$1/sbin"
	cp /bin/busybox "$1/bin/busybox"
	for c in sh cat echo ls test; do ln -s busybox "$1/bin/$c"; done
	cp "$TEST_TMP/probe" "$1/bin/probe"
	copy_libs "$1" "$TEST_TMP/probe" "$TEST_TMP/driver/libcuda.so.1"
	[ "${2:-}" = no-ldconfig ] || cp /sbin/ldconfig "$1/sbin/ldconfig"
}
# experiment DIR NAME: an experiment of 4 probes in an image made in DIR
experiment() {
	mkdir -p "$1"
	tar -C "$1/rootfs" -czf "$1/image.tar.gz" .
	rm -rf "$1/rootfs"
	printf 'name: %s\ncommand: probe {i}\nsweep: { grid: { i: [1, 2, 3, 4] } }\nenvironment:\n  container: image.tar.gz\n' \
		"$2" >"$1/experiment.yaml"
}
# run_probes DIR: parrun, then PKG and OUTS (the tasks' stdout)
run_probes() {
	run_pbx parrun "$1/experiment.yaml" cg
	ok $rc "parrun ${1##*/}: $errout"
	PKG=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
	wait_final "$PKG" 300
	OUTS=$(cat "$SHARED/pbx/$PKG"/tasks/*/stdout 2>/dev/null)
}

cc -o "$TEST_TMP/probe" "$TEST_TMP/probe.c" && driver 12040
ok $? "the probe and the stand-in driver are built"
image "$TEST_TMP/exp/rootfs"
experiment "$TEST_TMP/exp" gpu-probe
run_pbx -q cluster start cg
ok $rc "the cluster starts: $errout"
linker_caches
ok $? "the node bodies' linker caches list the driver: $(ldconfig -p -C "$(ls -d "$PBX_HOME"/clusters/cg/nodes/* | head -n 1)/etc/ld.so.cache" | grep -c 'libcuda\|libnvidia')"

run_probes "$TEST_TMP/exp"
PKG_FIRST=$PKG
is "$(task_states "$PKG")" "COMPLETED COMPLETED COMPLETED COMPLETED" "every probe ran in the image"
[ "$(task_states "$PKG")" = "COMPLETED COMPLETED COMPLETED COMPLETED" ] || sed 's/^/# task 0: /' "$SHARED/pbx/$PKG/tasks/0/stderr"
is "$(echo "$OUTS" | grep -c '^cuda=0 version=12040 from=/usr/local/lib/pbx-gpu/libcuda.so.1 nvml=yes$')" 4 \
	"each loaded the node's driver by its soname from the image's /usr/local/lib/pbx-gpu: $(echo "$OUTS" | head -n 1)"
img=$(ls -d "$PBX_HOME"/clusters/cg/nodes/*/var/tmp/pbx-env-2850/[0-9a-f]* | head -n 1)
cmp -s "$img/usr/local/lib/pbx-gpu/libcuda.so.1" "$TEST_TMP/driver/libcuda.so.1" &&
	grep -q "^libcuda.so.1 $TEST_TMP/driver/libcuda.so.1 [0-9]* [0-9]*\$" "$img/.pbx-gpu"
ok $? "the unpacked image holds the node's library and its stamp: $(tr '\n' '|' <"$img/.pbx-gpu")"
[ "$(stat -c %U "$img/usr/local/lib/pbx-gpu/libcuda.so.1")" = pbx-task ] && [ ! -e "$TEST_TMP/driver/ld.so.cache" ]
ok $? "copied as the task user, nothing written into the node's driver directory"

# the node's driver updated: the next package's tasks load the new one
sleep 1
driver 12050 && linker_caches
cp -r "$TEST_TMP/exp" "$TEST_TMP/exp2" && sed -i 's/^name: gpu-probe$/name: gpu-probe-two/' "$TEST_TMP/exp2/experiment.yaml"
run_probes "$TEST_TMP/exp2"
is "$(echo "$OUTS" | grep -c '^cuda=0 version=12050 from=/usr/local/lib/pbx-gpu/libcuda.so.1 nvml=yes$')" 4 \
	"after the driver's update the same unpacked image has the new one: $(echo "$OUTS" | head -n 1)"

# an image with a link where the driver goes: refused, nothing written
# through it
mkdir -p "$TEST_TMP/outside/lib/pbx-gpu" "$TEST_TMP/linked/rootfs/usr"
echo keep >"$TEST_TMP/outside/lib/pbx-gpu/keep"
# the task user's own, so only pbx-env's care keeps it from removing them
chown -R 2850 "$TEST_TMP/outside"
image "$TEST_TMP/linked/rootfs"
ln -s "$TEST_TMP/outside" "$TEST_TMP/linked/rootfs/usr/local"
experiment "$TEST_TMP/linked" gpu-linked
run_probes "$TEST_TMP/linked"
is "$(task_states "$PKG")" "FAILED FAILED FAILED FAILED" "an image with a link at /usr/local: every task failed"
grep -q "the image has a link at /usr/local, where the node's GPU driver /usr/local/lib/pbx-gpu goes" "$SHARED/pbx/$PKG/tasks/0/stderr"
ok $? "each says why: $(grep pbx-env "$SHARED/pbx/$PKG/tasks/0/stderr" | head -n 1)"
is "$(find "$TEST_TMP/outside" | sort | tr '\n' ' ')" "$TEST_TMP/outside $TEST_TMP/outside/lib $TEST_TMP/outside/lib/pbx-gpu $TEST_TMP/outside/lib/pbx-gpu/keep " \
	"nothing was written or removed through the link"

# an image without ldconfig: the tasks run; the driver is there, and
# stderr says how to reach it
image "$TEST_TMP/noldc/rootfs" no-ldconfig
experiment "$TEST_TMP/noldc" gpu-noldc
run_probes "$TEST_TMP/noldc"
is "$(echo "$OUTS" | grep -c '^cuda=none$')" 4 "no ldconfig in the image: the probes ran, without the driver in their path"
is "$(grep -l "the image has no ldconfig: the node's GPU driver is in /usr/local/lib/pbx-gpu there" "$SHARED/pbx/$PKG"/tasks/*/stderr | wc -l)" 4 \
	"and each one's stderr says where the driver is: $(grep pbx-env "$SHARED/pbx/$PKG/tasks/0/stderr" | head -n 1)"

# an image without a library the driver links (librt): the probes run
# without the driver, and each one's stderr says what the image lacks
image "$TEST_TMP/nort/rootfs"
rt=$(ldd "$TEST_TMP/driver/libcuda.so.1" | sed -n 's/^[[:space:]]*librt\.so\.1 => \(\/[^ ]*\) .*/\1/p')
[ -n "$rt" ] && rm "$TEST_TMP/nort/rootfs$rt"
ok $? "an image without librt.so.1 ($rt), which the stand-in driver links"
experiment "$TEST_TMP/nort" gpu-nort
run_probes "$TEST_TMP/nort"
is "$(echo "$OUTS" | grep -c '^cuda=none$')" 4 "the probes ran, unable to load the driver"
is "$(grep -l "the image lacks librt.so.1, which the node's GPU driver (libcuda.so.1) links" "$SHARED/pbx/$PKG"/tasks/*/stderr | wc -l)" 4 \
	"each one's stderr says what the image lacks: $(grep pbx-env "$SHARED/pbx/$PKG/tasks/0/stderr" | head -n 1)"
is "$(ls "$SHARED/pbx/$PKG_FIRST"/tasks/*/stderr | wc -l) $(grep -l 'lacks' "$SHARED/pbx/$PKG_FIRST"/tasks/*/stderr | wc -l)" "4 0" \
	"the 4 tasks of a whole image were told nothing of the kind"

# no driver on the nodes (the bodies' caches gone, and this machine has
# none): nothing added, the probes find no libcuda
if ldconfig -p | grep -q 'libcuda\.so'; then
	skip "this machine has an NVIDIA driver: the nodes without one cannot be shown here"
else
	rm -f "$PBX_HOME"/clusters/cg/nodes/*/etc/ld.so.cache
	cp -r "$TEST_TMP/exp" "$TEST_TMP/exp3" && sed -i 's/^name: gpu-probe$/name: gpu-probe-three/' "$TEST_TMP/exp3/experiment.yaml"
	run_probes "$TEST_TMP/exp3"
	is "$(echo "$OUTS" | grep -c '^cuda=none$')" 4 "a node without a driver: the image's tasks find none"
	[ ! -e "$img/usr/local/lib/pbx-gpu" ] && [ ! -e "$img/.pbx-gpu" ]
	ok $? "and the driver the image held is gone from it"
fi

run_pbx -q cluster stop --discard-results cg
ok $rc "stop: $errout"
done_testing
