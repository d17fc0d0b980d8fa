#!/bin/sh
# vm-test.sh - runs the booted-machine tests (ctest label "vm",
# tests/vm/README.md): the cloud path on QEMU VMs made from Debian 12
# images.  Builds pbx (optimised) if needed; images are built once into
# build/vm-images.  Needs root; installs QEMU, dnsmasq, socat, debootstrap.
#   sh scripts/vm-test.sh [ctest args]      e.g. PBX_VM_IMAGE=stock for the apt path
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		qemu-system-x86 qemu-utils dnsmasq-base socat debootstrap e2fsprogs iproute2 >/dev/null
fi
. scripts/venv.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)"
export AWS_EC2_METADATA_DISABLED=true GCE_METADATA_HOST=127.0.0.1:1
cd build && ctest --output-on-failure -L vm "$@"
