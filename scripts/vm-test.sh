#!/bin/sh
# vm-test.sh - runs the booted-machine tests (ctest label "vm",
# tests/vm/README.md): the cloud path on QEMU VMs made from Debian 12
# images.  Builds pbx (optimised) if needed; images are built once into
# build/vm-images.  Needs root; installs QEMU, dnsmasq, socat, debootstrap.
#   sh scripts/vm-test.sh [ctest args]      e.g. PBX_VM_IMAGE=stock for the apt path
#                                           (the stock images: stock, ec2-stock)
set -eu
cd "$(dirname "$0")/.."
. scripts/vm-tools.sh
. scripts/venv.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)"
export AWS_EC2_METADATA_DISABLED=true GCE_METADATA_HOST=127.0.0.1:1
cd build && ctest --output-on-failure -L vm "$@"
