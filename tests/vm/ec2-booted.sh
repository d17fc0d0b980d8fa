#!/bin/sh
# ec2-booted.sh - the EC2 path on booted Debian 12 VMs: the EC2 harness's
# instances (moto, tests/emulators/aws/ec2_harness.py --backend vm) are
# QEMU machines (tests/emulators/gce/vms.py, EC2 flavour) made from an
# image shaped like Debian's EC2 AMI (tests/vm/image.sh ec2-*), whose
# cloud-init finds EC2 by the SMBIOS, reads IMDS (v2 tokens only: pbx
# launches with HttpTokens required) and makes the default user admin
# with the key pair's key; the head's host name comes from pbx's user data.
# `pbx cluster start` of an aws template (head + 1 compute node, login
# user admin) -> pbx's bootstrap in systemd mode -> every node idle -> a
# sweep of 2 tasks COMPLETED -> harvest -> autostop (both VMs power
# themselves off, EC2 stops them) -> start boots the kept disks, a job runs
# -> stop -> nothing left in moto,
# no VM, no process, no namespace.  The subnet 10.94.1.0/24 exists only in
# the harness's namespace; public addresses (mapped on launch) come from
# 127.0.94.0/24 and reach the VMs' port 22.
#
# PBX_VM_IMAGE picks the image kind as for gce-booted.sh (default: baked,
# i.e. ec2-baked, so no apt; PBX_VM_IMAGE=stock runs the real apt path on
# ec2-stock); images are built once into PBX_VM_IMAGES (default:
# build/vm-images) by tests/vm/image.sh.
# Skipped, with the reason, where this machine cannot boot VMs.
. "$PBX_SOURCE_DIR/tests/cli/lib.sh"
. "$PBX_SOURCE_DIR/tests/vm/lib.sh"

ec2_vm_test_setup e1

# ------------------------------------------------------------ the images
vm_images_ready "$KIND" "$IMAGES"
vm_user_key ec2-booted
ec2_vm_harness 94 127.0.94.0/24
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  e1:
    cloud: aws
    login_user: admin
    ssh_key: $PBX_HOME/id
    image: $(env_get 'd["ami"]')
    boot_timeout: 900
    head: { machine_type: m5.large }
    node_groups:
      - { name: cpu, count: 1, machine_type: m5.large }
clouds:
  aws: { region: us-east-1, endpoint: "$URL", subnet: $(env_get 'd["subnets"][0]') }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"

# ------------------------------------------------------------- start
t0=$(date +%s)
run_pbx cluster start e1
ok $rc "start on booted VMs ($(($(date +%s) - t0)) s): $errout"
echo "# start took $(($(date +%s) - t0)) s" >&2
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t'
is "$out" "cpu1 idle" "the compute node is idle"
run_pbx cluster exec e1 -- sh -c 'id -un; hostname; systemctl is-active slurmctld munge nfs-server'
is "$out" "root
e1-head
active
active
active" "the head: root through admin's sudo, its host name from pbx's user data, units active"
run_pbx cluster exec -n cpu1 e1 -- sh -c 'findmnt -n -o FSTYPE /shared; systemctl is-active slurmd munge; cloud-id'
is "$out" "nfs4
active
active
aws" "the compute node: /shared over NFS, units active, cloud-init took it for AWS"
run_pbx cluster show --json e1
head_public=$(echo "$out" | json_get '[n.get("public_address") for n in d["nodes"] if n["role"] == "head"][0]' 2>&1)
case $head_public in 127.0.94.*) r=0 ;; *) r=1 ;; esac
ok $r "the head is reached on its public address ($head_public)"

# ------------------------------------------------------------- a sweep
mkdir -p "$TEST_TMP/sweep"
cat >"$TEST_TMP/sweep/experiment.yaml" <<'EOF'
name: booted
command: echo "x=$PBX_PARAM_X as $(id -un):$(id -u) on $(hostname)" > result.txt
sweep: { grid: { x: [1, 2] } }
outputs: ["result.txt"]
EOF
run_pbx parrun --json "$TEST_TMP/sweep/experiment.yaml" e1
ok $rc "parrun of a 2-task sweep: $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG" 300
is "$(json_get '" ".join(sorted({t["state"] for t in d["tasks"]}))' <"$TEST_TMP/state.json")" "COMPLETED" \
	"the sweep's tasks COMPLETED"
run_pbx harvest "$PKG"
ok $rc "harvest: $errout"
is "$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null | sed 's/ as .*//' | sort | tr '\n' ' ')" \
	"x=1 x=2 " "the results came home"
is "$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null | sed 's/.* as //; s/ on .*//' | sort -u)" \
	"pbx-task:2850" "every task ran as the task user, not root (docs/SECURITY.md)"

# ------------------------------------------- autostop on booted machines
# pbx-autostop.service: idle for 20 s, the node and then the head run
# `systemctl poweroff`; each QEMU ends and the harness stops the instance
# as EC2 does for a guest shutdown (pbx launches with shutdown behaviour
# stop).  start sends StartInstances and the VMs boot their kept disks.
states() {
	python3 - "$TEST_TMP/env.json" <<'PY'
import boto3, json, sys
e = json.load(open(sys.argv[1]))
c = boto3.client("ec2", region_name="us-east-1", endpoint_url=e["moto_url"],
                 aws_access_key_id=e["admin"]["access_key"], aws_secret_access_key=e["admin"]["secret_key"])
print(" ".join(sorted("%s:%s" % (i["State"]["Name"], i.get("StateReason", {}).get("Code", "-"))
                      for r in c.describe_instances()["Reservations"] for i in r["Instances"]
                      if i["State"]["Name"] != "terminated")))
PY
}
export PBX_AUTOSTOP_BOOT_GRACE=180   # these VMs boot in about 80 s (default 600)
run_pbx -q cluster start e1 --autostop 20s
ok $rc "start --autostop 20s on the running cluster: $errout"
t0=$(date +%s)
want="stopped:Client.InstanceInitiatedShutdown stopped:Client.InstanceInitiatedShutdown"
while [ "$(states)" != "$want" ] && [ $(($(date +%s) - t0)) -lt 400 ]; do sleep 5; done
is "$(states)" "$want" "idle 20 s: both VMs powered themselves off, EC2 stopped them ($(($(date +%s) - t0)) s)"
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM runs"
t0=$(date +%s)
run_pbx cluster start e1 --autostop off
ok $rc "start boots the stopped VMs again ($(($(date +%s) - t0)) s): $errout"
run_pbx cluster exec e1 -- srun -N1 sh -c 'echo $SLURMD_NODENAME'
is "$rc:$out" "0:cpu1" "a job runs after the restart: $errout"
run_pbx harvest "$PKG"
is "$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null | grep -c .)" "2" "the results are still there"

# ------------------------------------------------------------- stop
run_pbx cluster stop --discard-results e1
ok $rc "stop: $errout"
is "$(ec2_vm_holds)" "0 0 0" "moto holds no instance, no security group and no key pair"
sleep 1
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM is left running"
ns=pbxvm-$H_PID
h_stop
is "$(ip netns list | grep -c "^$ns\b")" "0" "the harness's namespace is gone"
is "$(pgrep -f "$TEST_TMP/h" | wc -l)" "0" "no process of the harness is left"

done_testing
