#!/bin/sh
# vm_start.sh - benchmark: `pbx cluster start` of a gce template against the
# Compute Engine emulator on booted Debian 12 VMs (tests/vm/README.md), from
# the stock image (the bootstrap apt-gets SLURM, munge, NFS and pbx-train's
# runtime) and from the prebaked one (it installs nothing), with 1 and 3
# compute nodes.  Prints, per run: seconds from start to every node idle,
# the boot (instances RUNNING -> every node answering SSH with its login
# user), the bootstrap (slowest node, first connect -> done) and its
# slowest stages, and the ratios prebaked/stock and 3/1 nodes.  QEMU runs
# with TCG on this machine's cores: VMs of one run share them, so the
# 3-node boot is not what a cloud's would be.  Needs root.
# Usage: bench/vm_start.sh [PBX] [IMAGES]   (IMAGES: where tests/vm/image.sh
# builds, default build/vm-images)
set -eu
PBX=${1:-build/src/cli/pbx}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
PBX_SOURCE_DIR=$(cd "$(dirname "$0")/.." && pwd)
export PBX_SOURCE_DIR
IMAGES=${2:-$PBX_SOURCE_DIR/build/vm-images}
. "$PBX_SOURCE_DIR/tests/vm/lib.sh"
why=$(vm_why_not)
[ -z "$why" ] || { echo "vm_start.sh: cannot boot VMs here: $why" >&2; exit 1; }
WORK=$(mktemp -d /tmp/pbx-bench.XXXXXX)
chmod 711 "$WORK"
cleanup() {
	PBX_HOME=$WORK/home "$PBX" -q cluster stop --discard-results b >/dev/null 2>&1 || true
	gce_vm_emulator_stop
	vm_apt_cache_release
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT; trap 'exit 143' TERM

vm_apt_cache "$IMAGES"
for kind in stock baked; do
	vm_image "$kind" "$IMAGES" "$WORK/image.log" || { tail -n 20 "$WORK/image.log" >&2; exit 1; }
done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; QEMU TCG, 1 vCPU and 1 GiB per VM"

# stage_times FILE: "boot S bootstrap S slowest: STAGE S, ..." from pbx's
# progress lines ("  NODE  STAGE (T s)")
stage_times() {
	tr '\r' '\n' <"$1" | awk '
		/^  [a-z0-9]+ +[a-z0-9-]+ \([0-9.]+s\)$/ {
			node = $1; stage = $2; t = substr($3, 2) + 0
			if (stage == "running" && t > run) run = t
			if (stage == "connecting") { if (t > conn) conn = t; start[node] = t }
			if (stage == "done") { d = t - start[node]; if (d > boot_max) boot_max = d }
			if (node in last) { dt = t - last[node]; if (dt > worst[lstage[node]]) worst[lstage[node]] = dt }
			last[node] = t; lstage[node] = stage
		}
		END {
			printf "boot %.0f s, bootstrap %.0f s; slowest stages:", conn - run, boot_max
			n = 0
			for (s in worst) if (s != "booting" && s != "ssh" && worst[s] >= 2) { printf " %s %.0f s", s, worst[s]; n++ }
			if (!n) printf " none over 2 s"
			printf "\n"
		}'
}

for kind in stock baked; do
	for n in 1 3; do
		gce_vm_emulator "$WORK" "$IMAGES/$kind" 127.0.98.0/24 || { cat "$WORK/emu.out" >&2; exit 1; }
		rm -rf "$WORK/home"
		mkdir -p "$WORK/home"
		ssh-keygen -q -t ed25519 -N "" -f "$WORK/home/id"
		gce_vm_config "$WORK/home" b "$WORK/sa.json" "$WORK/home/id" \
			"{ name: cpu, count: $n, machine_type: e2-standard-2 }"
		t0=$(date +%s.%N)
		PBX_HOME=$WORK/home "$PBX" cluster start b 2>"$WORK/start.err" ||
			{ tail -n 20 "$WORK/start.err" >&2; exit 1; }
		t=$(echo "$(date +%s.%N) - $t0" | bc)
		printf '%-6s %d compute node(s): start to idle %6.1f s; %s\n' "$kind" "$n" "$t" \
			"$(stage_times "$WORK/start.err")"
		eval "t_${kind}_$n=$t"
		PBX_HOME=$WORK/home "$PBX" -q cluster stop --discard-results b >/dev/null 2>&1
		gce_vm_emulator_stop
	done
done
printf 'prebaked/stock: 1 node %.2f, 3 nodes %.2f;  3 nodes/1 node: stock %.2f, prebaked %.2f (goal: prebaked flat in N)\n' \
	"$(echo "$t_baked_1 / $t_stock_1" | bc -l)" "$(echo "$t_baked_3 / $t_stock_3" | bc -l)" \
	"$(echo "$t_stock_3 / $t_stock_1" | bc -l)" "$(echo "$t_baked_3 / $t_baked_1" | bc -l)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
