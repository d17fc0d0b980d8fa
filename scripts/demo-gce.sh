#!/bin/sh
# demo-gce.sh - docs/guide-gce.md without a Google account
# (`sh scripts/demo.sh gce` runs it): the Compute Engine emulator
# (tests/emulators/gce) on this machine, whose instances are booted Debian 12
# VMs (QEMU; tests/vm/README.md), and pbx driving it as it would drive
# Google: `pbx cluster start` of a gce template (head + 2 compute nodes
# that only the head reaches), a sweep with `pbx parrun`, `pbx state`,
# `pbx harvest`, `pbx report`, `pbx cluster ssh` to a compute node through
# the head, `pbx cluster stop`.  The first run builds the VM images
# (build/vm-images, or PBX_VM_IMAGES; about 8 minutes); PBX_VM_IMAGE=stock boots the stock
# image, so the bootstrap apt-gets SLURM as on a fresh cloud VM.  Needs
# root (network namespaces), installs QEMU, dnsmasq, socat and debootstrap.
# The demo's pbx home is build/demo-gce/home (PBX_HOME), kept afterwards.
set -eu
cd "$(dirname "$0")/.."
PBX_SOURCE_DIR=$(pwd)
export PBX_SOURCE_DIR
step() { printf '\n== %s\n' "$*"; }
[ "$(id -u)" = 0 ] || { echo "demo-gce.sh: run it as root (VMs need network namespaces and taps)" >&2; exit 2; }

step "tools: QEMU, dnsmasq, socat, debootstrap; pbx"
. scripts/vm-tools.sh
. scripts/venv.sh
if [ -z "${PBX:-}" ]; then
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
	PBX=$(pwd)/build/src/cli/pbx
fi
. tests/vm/lib.sh
why=$(vm_why_not)
[ -z "$why" ] || { echo "demo-gce.sh: this machine cannot boot the VMs: $why" >&2; exit 1; }

kind=${PBX_VM_IMAGE:-baked}
images=${PBX_VM_IMAGES:-$(pwd)/build/vm-images}
step "the $kind Debian 12 image (built once into $images)"
mkdir -p "$images"
vm_apt_cache "$images"
vm_image "$kind" "$images" "$images/build.log" || { tail -n 20 "$images/build.log" >&2; exit 1; }

DEMO=$(pwd)/build/demo-gce
PBX_HOME=$DEMO/home
export PBX_HOME
mkdir -p "$PBX_HOME"
chmod 711 "$DEMO"
[ -f "$PBX_HOME/id" ] || ssh-keygen -q -t ed25519 -N "" -C pbx-demo-gce -f "$PBX_HOME/id"

cluster_started=
on_exit() {
	rc=$?
	trap - EXIT
	if [ -n "$cluster_started" ]; then
		[ "$rc" = 0 ] || printf '\ndemo-gce.sh: failed (exit status %s); stopping the cluster\n' "$rc" >&2
		"$PBX" -q cluster stop demo >&2 || true
	fi
	gce_vm_emulator_stop
	vm_apt_cache_release
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP

step "the Compute Engine emulator, its instances booted VMs on a private network"
gce_vm_emulator "$DEMO" "$images/$kind" 127.0.97.0/24 ||
	{ cat "$DEMO/emu.out" >&2; exit 1; }
gce_vm_config "$PBX_HOME" demo "$DEMO/sa.json" "$PBX_HOME/id" "{ name: cpu, count: 2, machine_type: e2-standard-2 }"
echo "emulator on http://127.0.0.1:$PORT/compute/v1/; configuration in $PBX_HOME/config.yaml:"
sed 's/^/    /' "$PBX_HOME/config.yaml"

step "pbx cluster start demo --dry-run    (the requests, none sent)"
"$PBX" cluster start --dry-run demo | head -n 12
step "pbx cluster start demo"
cluster_started=1
"$PBX" cluster start demo
"$PBX" cluster show demo

step "pbx parrun: the example sweep (24 tasks), without its GPUs (these VMs have none)"
rm -rf "$DEMO/sweep-demo"
cp -r templates/experiments/sweep-demo "$DEMO/sweep-demo"
sed -i '/^resources:/,$d' "$DEMO/sweep-demo/experiment.yaml"
"$PBX" parrun "$DEMO/sweep-demo/experiment.yaml" demo
i=0
while "$PBX" state --json sweep-demo | python3 -c 'import json,sys
d = json.load(sys.stdin)
sys.exit(0 if any(t["state"] in ("NEW", "PENDING", "RUNNING") for t in d["tasks"]) else 1)'; do
	i=$((i + 1))
	[ $i -lt 300 ] || { echo "demo-gce.sh: the sweep did not end in 10 minutes" >&2; exit 1; }
	sleep 2
done
"$PBX" state sweep-demo | tail -n 5
"$PBX" state --json sweep-demo | python3 -c 'import json,sys
d = json.load(sys.stdin)
bad = [t for t in d["tasks"] if t["state"] != "COMPLETED"]
sys.exit("demo-gce.sh: %d tasks did not complete" % len(bad) if bad else 0)'

step "pbx harvest; pbx report"
"$PBX" harvest sweep-demo
"$PBX" report sweep-demo | head -n 12

step "pbx cluster ssh demo cpu1 -- ...    (a compute node, through the head)"
"$PBX" cluster ssh demo cpu1 -- sh -c 'echo "$(hostname): $(findmnt -n -o SOURCE /shared) on /shared"'

step "pbx cluster stop demo"
"$PBX" cluster stop demo
cluster_started=
echo "
demo-gce.sh: done. Results in $PBX_HOME/results; pbx's store in $PBX_HOME/pbx.db."
