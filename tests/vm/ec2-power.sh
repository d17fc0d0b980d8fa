#!/bin/sh
# ec2-power.sh - SLURM power saving on booted Debian 12 VMs behind the EC2
# harness (docs/power-saving.md, "On a booted VM"): the head is a VM with
# the instance profile pbx-head, and its nodes are made by the head itself,
# with the laptop's pbx idle.  An aws template whose group has min: 0
# starts with the head alone -> a 2-task sweep wakes both nodes: slurmctld
# runs pbx-resume, the sudo rule runs the head's pbx, which calls EC2 at
# https://ec2.us-east-1.amazonaws.com (the harness's proxy in front of
# moto, behind the namespace's gateway with a certificate the image
# trusts; the head's configuration names no endpoint) with its role's
# credentials from IMDS (IMDSv2), makes both instances in one RunInstances
# and bootstraps them -> both tasks complete, one per woken VM -> `exec -n`
# reaches a woken VM through the head, /shared over NFS -> harvest -> after
# SuspendTime the head terminates them -> stop -> nothing left in moto, no
# VM, no process, no namespace.  The subnet 10.95.1.0/24 exists only in the
# harness's namespace; public addresses come from 127.0.140.0/24.
#
# PBX_VM_IMAGE picks the image kind as for ec2-booted.sh (default: baked,
# i.e. ec2-baked); images are built once into PBX_VM_IMAGES (default:
# build/vm-images) by tests/vm/image.sh.  Skipped, with the reason, where
# this machine cannot boot VMs.
. "$PBX_SOURCE_DIR/tests/cli/lib.sh"
. "$PBX_SOURCE_DIR/tests/vm/lib.sh"

ec2_vm_test_setup p1

# h_py: Python (stdin) with `c`, a boto3 EC2 client of the harness's admin on moto itself
h_py() {
	python3 -c "import boto3, json, sys
e = json.load(open('$TEST_TMP/env.json'))
c = boto3.client('ec2', region_name='us-east-1', endpoint_url=e['moto_url'],
                 aws_access_key_id=e['admin']['access_key'], aws_secret_access_key=e['admin']['secret_key'])
exec(sys.stdin.read())"
}
# the live instances as ROLE=STATE (their pbx-role tag), sorted
instances() {
	h_py <<'PY'
out = []
for r in c.describe_instances()["Reservations"]:
    for i in r["Instances"]:
        if i["State"]["Name"] not in ("terminated", "shutting-down"):
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            out.append("%s=%s" % (tags.get("pbx-role", "?"), i["State"]["Name"]))
print(" ".join(sorted(out)))
PY
}
calls() { python3 -c 'import json, sys, urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1] + "_harness/calls"))[sys.argv[2]].get(sys.argv[3], 0))' "$URL" "$@"; }
on_head() { "$PBX" -q cluster exec p1 -- "$@" 2>&1; }
power_log() { on_head cat /var/log/pbx-power.log; }
show_power_log() { power_log | tail -n 30 | sed 's/^/#   /' >&2; }

# ------------------------------------------------------------ the images
vm_images_ready "$KIND" "$IMAGES"
vm_user_key ec2-power
ec2_vm_harness 95 127.0.140.0/24
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  p1:
    cloud: aws
    login_user: admin
    ssh_key: $PBX_HOME/id
    image: $(env_get 'd["ami"]')
    boot_timeout: 900
    head: { machine_type: m5.large, instance_profile: $(env_get 'd["instance_profile"]') }
    slurm: { suspend_time: 300s, resume_timeout: 1200s }   # a node that finished its task waits for the other (its boot here: up to 15 min apart)
    node_groups:
      - { name: cpu, count: 2, min: 0, machine_type: m5.large }
clouds:
  aws: { region: us-east-1, endpoint: "$URL", subnet: $(env_get 'd["subnets"][0]') }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"

# ------------------------------------------------- start: the head alone
t0=$(date +%s)
run_pbx cluster start p1
ok $rc "start of a cluster with min: 0 on booted VMs ($(($(date +%s) - t0)) s): $errout"
echo "# start took $(($(date +%s) - t0)) s" >&2
is "$(instances)" "head=running" "only the head's instance exists"
run_pbx cluster exec p1 -- sinfo -h -N -o '%N %t'
is "$out" "cpu1 idle~
cpu2 idle~" "SLURM knows both nodes powered down"
is "$(on_head sh -c 'stat -c "%U %a" /var/log/pbx-power.log; visudo -cqf /etc/sudoers.d/pbx-power && echo rule ok')" \
	"slurm 640
rule ok" "the power log is SlurmUser's, the sudo rule passes visudo"
is "$(on_head sh -c 'grep -c "127\.0\.0\.1\|endpoint" /etc/pbx/head-config.yaml')" "0" \
	"the head's configuration names no endpoint (the head calls EC2's own name)"
# the head's view of EC2, as its pbx sees it: the role's credentials from
# IMDSv2 and EC2's API by its name, over https with the world CA
imds=http://169.254.169.254/latest
is "$(on_head sh -c "t=\$(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' $imds/api/token) && curl -sf -H \"X-aws-ec2-metadata-token: \$t\" $imds/meta-data/iam/security-credentials/; echo; curl -s -o /dev/null -w '%{http_code}' https://ec2.us-east-1.amazonaws.com/_harness/calls")" \
	"pbx-role
404" "the head's IMDS names its role; EC2's name serves https (the image trusts the certificate) and no harness control"

# --------------------------------------- a sweep wakes both nodes
mkdir -p "$TEST_TMP/sweep"
cat >"$TEST_TMP/sweep/experiment.yaml" <<'EOF'
name: woken
command: echo "x=$PBX_PARAM_X on $(hostname)" > result.txt
sweep: { grid: { x: [1, 2] } }
outputs: ["result.txt"]
EOF
runs0=$(calls calls RunInstances)
t0=$(date +%s)
run_pbx parrun --json "$TEST_TMP/sweep/experiment.yaml" p1
ok $rc "parrun of a 2-task sweep: $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG" 1500
wf=$?
is "$(json_get '" ".join(sorted({t["state"] for t in d["tasks"]}))' <"$TEST_TMP/state.json")" "COMPLETED" \
	"both tasks COMPLETED on woken VMs ($(($(date +%s) - t0)) s)"
[ "$wf" = 0 ] || show_power_log
echo "# the sweep took $(($(date +%s) - t0)) s (nodes made, booted and bootstrapped by the head)" >&2
is "$(instances)" "cpu=running cpu=running head=running" "the head made both node instances (pbx-role: the group)"
is "$(($(calls calls RunInstances) - runs0))" "1" "in one RunInstances"
roles=$(calls role_credentials pbx-role)
[ "${roles:-0}" -ge 1 ]
ok $? "the head's IMDS gave out its role's credentials ($roles)"
run_pbx cluster exec -n cpu2 p1 -- sh -c 'findmnt -n -o FSTYPE /shared; systemctl is-active slurmd munge'
is "$out" "nfs4
active
active" "a woken node (the laptop learns it from the cloud): /shared over NFS, units active: $errout"
names=""
for n in cpu1 cpu2; do
	run_pbx cluster exec -n $n p1 -- hostname
	names="$names$out "
done
run_pbx harvest "$PKG"
ok $rc "harvest: $errout"
got=$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null | sed 's/.* on //' | sort | tr '\n' ' ')
is "$got" "$(echo $names | tr ' ' '\n' | sort | tr '\n' ' ')" "one task ran on each woken node ($names)"
is "$(power_log | grep -c ' resume cpu\[1-2\]$')" "1" "pbx-power.log has one resume of cpu[1-2]"

# --------------------------------------- idle: the head terminates them
t0=$(date +%s)
while [ "$(instances)" != "head=running" ] && [ $(($(date +%s) - t0)) -lt 900 ]; do sleep 5; done
is "$(instances)" "head=running" "after SuspendTime the head terminated both nodes ($(($(date +%s) - t0)) s)"
[ "$(instances)" = "head=running" ] || show_power_log
sleep 2
is "$(pgrep -f "qemu-system.*$TEST_TMP/h/vm/i-" | wc -l)" "1" "only the head's VM runs"
t0=$(date +%s)
until run_pbx cluster exec p1 -- sinfo -h -N -o '%N %t' && [ "$out" = "cpu1 idle~
cpu2 idle~" ] || [ $(($(date +%s) - t0)) -ge 120 ]; do sleep 5; done
is "$out" "cpu1 idle~
cpu2 idle~" "SLURM has them powered down again"
is "$(power_log | grep -ci 'error\|fail')" "0" "no error in the power log"
[ "$(power_log | grep -ci 'error\|fail')" = 0 ] || show_power_log

# ------------------------------------------------------------- stop
run_pbx cluster stop --discard-results p1
ok $rc "stop: $errout"
is "$(ec2_vm_holds)" "0 0 0" "moto holds no instance, no security group and no key pair"
sleep 1
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM is left running"
ns=pbxvm-$H_PID
h_stop
is "$(ip netns list | grep -c "^$ns\b")" "0" "the harness's namespace is gone"
is "$(pgrep -f "$TEST_TMP/h" | wc -l)" "0" "no process of the harness is left"

done_testing
