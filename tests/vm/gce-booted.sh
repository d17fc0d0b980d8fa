#!/bin/sh
# gce-booted.sh - the Compute Engine path on booted Debian 12 VMs: the
# emulator's instances are QEMU machines (tests/emulators/gce/vms.py) made
# from an image shaped like Compute Engine's debian-12 (tests/vm/image.sh),
# whose guest agent makes the login user from the ssh-keys metadata.
# `pbx cluster start` of a gce template (head + 2 compute nodes, login user
# pbx, not root) -> pbx's bootstrap in systemd mode (units, munge, NFS from
# the head) -> every node idle -> a sweep of 4 tasks and a 2-node pbx-train
# MPI task across two VMs -> harvest -> report -> `pbx cluster ssh` to a
# compute node through the head -> autostop (every VM powers itself off,
# TERMINATED) -> start boots the kept disks, a job runs -> stop -> no
# instance, no VM, no process.
# Compute nodes have no address this machine can reach: only the head's
# port 22 is forwarded to a loopback address (127.0.92.0/24).
#
# PBX_VM_IMAGE picks the image (default: the prebaked one, so no apt;
# PBX_VM_IMAGE=stock runs the real apt path); images are built once into
# PBX_VM_IMAGES (default: build/vm-images) by tests/vm/image.sh.
# Skipped, with the reason, where this machine cannot boot VMs.
. "$PBX_SOURCE_DIR/tests/cli/lib.sh"

. "$PBX_SOURCE_DIR/tests/vm/lib.sh"
IMAGES=${PBX_VM_IMAGES:-$(dirname "$PBX")/../../vm-images}
KIND=${PBX_VM_IMAGE:-baked}
vm_skip_unless "$(vm_why_not)"

gce_vm_test_exit v1
emu_holds() { emu_get state | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["instances"]), len(d["firewalls"]), len(d["routers"]))'; }

vm_images_ready "$KIND" "$IMAGES"
vm_user_key gce-booted
gce_vm_emulator "$TEST_TMP" "$IMAGES/$KIND" 127.0.92.0/24
ok $? "the emulator runs with its VM network: $(tail -n 3 "$TEST_TMP/emu.out")"
gce_vm_config "$PBX_HOME" v1 "$TEST_TMP/sa.json" "$PBX_HOME/id" "{ name: cpu, count: 2, machine_type: e2-standard-2 }"

# ------------------------------------------------------------- start
t0=$(date +%s)
run_pbx cluster start v1
ok $rc "start on booted VMs ($(($(date +%s) - t0)) s): $errout"
echo "# start took $(($(date +%s) - t0)) s" >&2
run_pbx cluster exec v1 -- sinfo -h -N -o '%N %t'
is "$out" "cpu1 idle
cpu2 idle" "every compute node is idle"
run_pbx cluster exec -n cpu2 v1 -- sh -c 'id -un; hostname; findmnt -n -o FSTYPE /shared; systemctl is-active slurmd munge'
is "$out" "root
v1-$(sqlite3 "$PBX_HOME/pbx.db" "SELECT substr(uid, 1, 12) FROM clusters WHERE state != 'deleted'")-cpu2
nfs4
active
active" "a compute node: root through sudo, its hostname from the metadata, /shared over NFS, units active"
run_pbx cluster exec -n cpu2 v1 -- sh -c 'hostname -f; grep "^search" /etc/resolv.conf'
is "$out" "v1-$(sqlite3 "$PBX_HOME/pbx.db" "SELECT substr(uid, 1, 12) FROM clusters WHERE state != 'deleted'")-cpu2.c.pbx-test.internal
search c.pbx-test.internal" "its DNS domain is the project's, as on Compute Engine (c.PROJECT.internal): $errout"

# ------------------------------------------------------------- a sweep
mkdir -p "$TEST_TMP/sweep"
cat >"$TEST_TMP/sweep/experiment.yaml" <<'EOF'
name: booted
command: echo "x=$PBX_PARAM_X as $(id -un):$(id -u) on $(hostname)" > result.txt
sweep: { grid: { x: [1, 2, 3, 4] } }
outputs: ["result.txt"]
EOF
run_pbx parrun --json "$TEST_TMP/sweep/experiment.yaml" v1
ok $rc "parrun of a 4-task sweep: $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG" 300
is "$(json_get '" ".join(sorted({t["state"] for t in d["tasks"]}))' <"$TEST_TMP/state.json")" "COMPLETED" \
	"the 4 tasks COMPLETED"
run_pbx harvest "$PKG"
ok $rc "harvest: $errout"
is "$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null | sed 's/ as .*//' | sort | tr '\n' ' ')" \
	"x=1 x=2 x=3 x=4 " "the results came home"
is "$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null | sed 's/.* as //; s/ on .*//' | sort -u)" \
	"pbx-task:2850" "every task ran as the task user, not root (docs/SECURITY.md)"
# root_squash: a compute node's root is uid 65534 on the shared disk
run_pbx cluster exec -n cpu2 v1 -- sh -c 'touch /shared/by-node-root 2>/dev/null && echo wrote || echo refused; grep -c " /shared nfs4 " /proc/mounts'
is "$out" "refused
1" \
	"a compute node's root cannot write the shared disk's top (exported root_squash): $errout"
run_pbx report -f csv "$PKG"
is "$(echo "$out" | grep -c COMPLETED)" "4" "report lists the 4 tasks"

# ------------------------------------- pbx-train over MPI across two VMs
mkdir -p "$TEST_TMP/tr"
cat >"$TEST_TMP/tr/experiment.yaml" <<'EOT'
name: tr-2x1
train: { model: mlp, dataset: synthetic, synthetic_n: 256, epochs: 2, batch_size: 64, threads: 1, output_dir: out }
resources: { nodes: 2, ntasks-per-node: 1, time: "00:10:00" }
outputs: [out/summary.json]
EOT
run_pbx parrun --json "$TEST_TMP/tr/experiment.yaml" v1
ok $rc "parrun of a 2-node pbx-train task: $errout"
TPKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$TPKG" 300
is "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" "['COMPLETED']" \
	"the 2-node train: task completes"
run_pbx harvest "$TPKG"
is "$(json_get 'd["world"], d["comm"], d["status"]' <"$PBX_HOME/results/$TPKG/0/out/summary.json" 2>&1)" \
	"2 mpi completed" "pbx-train ran data-parallel over 2 MPI ranks, one per VM: $errout"

# ------------------------------------------------------- pbx cluster ssh
run_pbx cluster ssh v1 cpu1 -- hostname
is "$rc:${out##*-}" "0:cpu1" "cluster ssh to a compute node, through the head: $errout"
head_private=$(emu_get state | python3 -c 'import json,sys; print([i["networkIP"] for i in json.load(sys.stdin)["instances"] if i["name"].endswith("-cpu1")][0])')
case $head_private in 10.128.*) r=0 ;; *) r=1 ;; esac
ok $r "compute nodes have private addresses only ($head_private)"

# ------------------------------------------- autostop on booted machines
# pbx-autostop.service on every VM: idle for 20 s, the compute nodes power
# off on the head's request, then the head; each VM's `systemctl poweroff`
# ends its QEMU and the emulator turns the instance TERMINATED, as Compute
# Engine does for a guest shutdown (docs/autostop.md).  start boots the
# same disks again.
statuses() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted(i["status"] for i in json.load(sys.stdin)["instances"])))'; }
# the grace counts from when a VM came up (its first watcher since boot;
# docs/autostop.md); pbx reaches a VM within seconds of that (default 600)
export PBX_AUTOSTOP_BOOT_GRACE=300
run_pbx -q cluster start v1 --autostop 20s
ok $rc "start --autostop 20s on the running cluster: $errout"
t0=$(date +%s)
while [ "$(statuses)" != "TERMINATED TERMINATED TERMINATED" ] && [ $(($(date +%s) - t0)) -lt 400 ]; do sleep 5; done
is "$(statuses)" "TERMINATED TERMINATED TERMINATED" \
	"idle 20 s: every VM powered itself off and is TERMINATED ($(($(date +%s) - t0)) s)"
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM runs"
run_pbx -q cluster exec v1 -- hostname
echo "$errout" | grep -q "cluster v1 is stopped"
ok $? "exec says the cluster is stopped: $errout"
t0=$(date +%s)
run_pbx cluster start v1 --autostop off
ok $rc "start boots the stopped VMs again ($(($(date +%s) - t0)) s): $errout"
run_pbx cluster exec v1 -- sh -c 'srun -N2 hostname | sort; cat /etc/pbx/autostop.conf'
echo "$out" | grep -q -- "-cpu2"
ok $? "a job runs on both compute nodes after the restart: $out $errout"
run_pbx harvest "$PKG"
is "$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null | grep -c .)" "4" "the results are still there"
# the compute nodes answered the head's request through /shared, which
# squashes their root to uid 65534 (templates/autostop.sh, ANSWER_UID)
run_pbx cluster exec v1 -- sh -c 'grep "answered=" /var/lib/pbx/autostop.last'
is "$out" "answered=cpu1 cpu2
unanswered=" "both compute nodes answered the head's stop request over root_squash NFS: $errout"

# ------------------------------------------------------------- stop
run_pbx cluster stop --discard-results v1
ok $rc "stop: $errout"
is "$(emu_holds)" "0 0 0" "the emulator holds no instance, no firewall rule and no router"
sleep 1
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM is left running"

done_testing
