#!/bin/sh
# gce-image.sh - prebaked images on booted VMs: `pbx image build` of a gce
# template whose image is the STOCK one (shaped like Compute Engine's
# debian-12, no SLURM: the real apt-get path, measured) -> the emulator
# converts the stopped builder's qcow2 disk into a new image -> clusters of
# 1 and 3 compute nodes (plus the head) started from that image, by its
# bare name: their bootstrap finds SLURM, munge and NFS installed and skips
# apt.  Prints the seconds of each build stage and, per cluster, from
# `start` to every node idle; then stops them and deletes the image:
# nothing left.  PBX_VM_STOCK_START=1 also starts the 1-node cluster from
# the stock image (apt on every node) for the comparison.
# The head's port 22 is forwarded to 127.0.93.0/24.  Images come from
# PBX_VM_IMAGES (default build/vm-images; tests/vm/image.sh builds them).
# Skipped, with the reason, where this machine cannot boot VMs.
. "$PBX_SOURCE_DIR/tests/cli/lib.sh"

. "$PBX_SOURCE_DIR/tests/vm/lib.sh"
IMAGES=${PBX_VM_IMAGES:-$(dirname "$PBX")/../../vm-images}
vm_skip_unless "$(vm_why_not)"

cleanup() {
	for c in p1 p3 s1; do "$PBX" -q cluster stop --discard-results $c >/dev/null 2>&1; done
	"$PBX" -q image delete vmimg >/dev/null 2>&1
	gce_vm_emulator_stop
	vm_apt_cache_release
	rm -rf "$TEST_TMP"
}
trap cleanup EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM
emu_holds() { emu_get state | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["instances"]), len(d["firewalls"]), len(d["routers"]), len(d["images"]))'; }

vm_images_ready stock "$IMAGES"
vm_user_key gce-image
gce_vm_emulator "$TEST_TMP" "$IMAGES/stock" 127.0.93.0/24
ok $? "the emulator runs with its VM network: $(tail -n 3 "$TEST_TMP/emu.out")"
tmpl() {   # tmpl NAME IMAGE COUNT
	printf '  %s:\n    cloud: gce\n    login_user: pbx\n    ssh_key: %s\n    image: %s\n    boot_timeout: 900\n' "$1" "$PBX_HOME/id" "$2"
	printf '    node_groups:\n      - { name: cpu, count: %s, machine_type: e2-standard-2 }\n' "$3"
}
{
	echo "clusters:"
	tmpl b projects/debian-cloud/global/images/family/debian-12 1
	tmpl s1 projects/debian-cloud/global/images/family/debian-12 1
	tmpl p1 vmimg 1
	tmpl p3 vmimg 3
	echo "clouds:"
	echo "  gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,"
	echo "         endpoint: \"http://127.0.0.1:$PORT/compute/v1/\" }"
} >"$PBX_HOME/config.yaml"
chmod 600 "$PBX_HOME/config.yaml"

# ------------------------------------------------------------ the build
run_pbx image build --json b vmimg
ok $rc "image build from the stock image: $errout"
secs=$(echo "$out" | json_get '" ".join("%s=%.0f" % (k, v) for k, v in sorted(d["seconds"].items()))' 2>/dev/null)
echo "# image build (stock, real apt-get): $secs" >&2
echo "# image build (stock, real apt-get): $secs"
dir=$(emu_get state | python3 -c 'import json,sys; print([i["dir"] for i in json.load(sys.stdin)["images"] if i["name"] == "vmimg"][0])')
[ -s "$dir/rootfs.img" ] && [ -s "$dir/vmlinuz" ]
ok $? "the emulator made an image directory from the builder's disk ($dir)"
is "$(emu_holds)" "0 0 0 1" "the builder is gone, the image stays"

# ------------------------------------- clusters from the prebaked image
start_timed() {   # start_timed CLUSTER WANT_SINFO
	t0=$(date +%s)
	run_pbx cluster start "$1"
	took=$(($(date +%s) - t0))
	ok $rc "start $1 ($took s): $errout"
	run_pbx cluster exec "$1" -- sinfo -h -N -o '%N %t'
	is "$out" "$2" "every compute node of $1 is idle"
	echo "# $1: start to every node idle: $took s" >&2
	echo "# $1: start to every node idle: $took s"
}
start_timed p1 "cpu1 idle"
run_pbx cluster exec -n cpu1 p1 -- sh -c 'systemctl is-active slurmd munge; systemctl is-enabled slurmctld; findmnt -n -o FSTYPE /shared'
is "$(echo "$out" | tail -n 4 | tr '\n' ' ')" "active active disabled nfs4 " \
	"a node from the image: units active, the image's slurmctld disabled, /shared over NFS"
run_pbx cluster stop --discard-results p1
ok $rc "stop p1: $errout"
start_timed p3 "cpu1 idle
cpu2 idle
cpu3 idle"
run_pbx cluster stop --discard-results p3
ok $rc "stop p3: $errout"
if [ "${PBX_VM_STOCK_START:-0}" = 1 ]; then
	start_timed s1 "cpu1 idle"
	run_pbx cluster stop --discard-results s1
	ok $rc "stop s1: $errout"
fi

# ------------------------------------------------------------ delete
run_pbx image delete vmimg
ok $rc "image delete: $errout"
is "$(emu_holds)" "0 0 0 0" "the emulator holds nothing"
[ ! -e "$dir" ]
ok $? "the image directory is gone"
sleep 1
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM is left running"

done_testing
