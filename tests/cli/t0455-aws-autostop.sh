#!/bin/sh
# t0455-aws-autostop.sh - autostop on EC2 (moto with the harness's
# lifecycle, node bodies for the instances; docs/autostop.md): an idle
# cluster (a head, an on-demand node and a one-time Spot node, autostop
# 12 s) powers itself off from inside, with no credential on the head.
# EC2 stops the head and the on-demand node (shutdown behaviour `stop`,
# StateReason Client.InstanceInitiatedShutdown) and terminates the Spot
# node (a one-time Spot instance cannot be stopped); no body process is
# left and the stopped bodies' disks stay.  `cluster show` and `exec` say
# the cluster is stopped; `cluster start` sends one StartInstances for
# both stopped instances, makes the Spot node again, the same head disk
# comes back and a job runs on every node.  The head runs with instance
# profile pbx-head, the nodes with none: the head's IMDS gives it the
# role's credentials (a node's none), and pbx run with them alone deletes
# the cluster by its id; the user's `stop` then finds nothing and forgets
# it.  A profile the account does not have is refused and leaves nothing.
# Addresses: subnets $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24; SLURM ports from
# BODY_PORT_BASE + 64*8.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE H_CLUSTERS="au"
. "$(dirname "$0")/aws_lib.sh"

h_start
h_template au "$(json_get 'd["ami"]' <"$TEST_TMP/env.json")"
sed -i '/^  au:$/a\    autostop: 12s' "$PBX_HOME/config.yaml"
sed -i '/^  au:$/,/^clouds:/s/    head: { machine_type: m5.large }/    head: { machine_type: m5.large, instance_profile: pbx-head }/' "$PBX_HOME/config.yaml"
sed -i '/name: cpu, count: 1, machine_type: t3.large/a\      - { name: sp, count: 1, machine_type: t3.large, spot: true }' "$PBX_HOME/config.yaml"
export PBX_AUTOSTOP_TICK=1
# The cluster's instances as ROLE:STATE[:REASON CODE], sorted.
states() {
	h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["au"]}])["Reservations"]:
    for i in r["Instances"]:
        tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
        s = "%s:%s" % (tags.get("pbx-role", "?"), i["State"]["Name"])
        if i["State"]["Name"] in ("stopped", "terminated"):
            s += ":" + i.get("StateReason", {}).get("Code", "-")
        out.append(s)
print(" ".join(sorted(out)))
PY
}
BODIES=$TEST_TMP/h/bodies

run_pbx -q cluster start au
ok $rc "the cluster starts: $errout"
is "$(states)" "cpu:running head:running sp:running" "three instances run"
is "$(h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["au"]}])["Reservations"]:
    for i in r["Instances"]:
        tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
        out.append("%s=%s" % (tags["pbx-role"], i.get("IamInstanceProfile", {}).get("Arn", "-").rsplit("/", 1)[-1]))
print(" ".join(sorted(out)))
PY
)" "cpu=- head=pbx-head sp=-" "the head has its instance profile, the nodes none"
run_pbx cluster show au --json
is "$(echo "$out" | json_get 'd["autostop"]')" 12 "show --json: autostop 12 s"
HEAD_ID=$(echo "$out" | json_get '[n["instance_id"] for n in d["nodes"] if n["role"] == "head"][0]')
# a body's root: bodies.py's Bodies.root of ec2_harness.py's Inst (named by the id's last 12)
HEAD_ROOT=$BODIES/aws/n/$(printf %s "$HEAD_ID" | tail -c 12 | sha1sum | cut -c1-10)
ok $([ -d "$HEAD_ROOT" ]; echo $?) "the head's body is $HEAD_ROOT"

want="cpu:stopped:Client.InstanceInitiatedShutdown head:stopped:Client.InstanceInitiatedShutdown sp:terminated:Client.InstanceInitiatedShutdown"
i=0
while [ "$(states | sed 's/:Client[^ ]*//g')" != "cpu:stopped head:stopped sp:terminated" ] && [ $i -lt 90 ]; do
	sleep 1
	i=$((i + 1))
done
is "$(states)" "$want" "idle for 12 s: head and node stopped by their own shutdown, the Spot node terminated (${i} s)"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
ok $([ -f "$HEAD_ROOT/var/lib/pbx/autostop.last" ]; echo $?) "the head's disk is kept, with its record of why"
list_state() { "$PBX" cluster list --json "$@" | json_get '[c["state"] for c in d if c["name"] == "au"][0]'; }
is "$(list_state)" "up" "cluster list, offline, shows the state recorded at the start"
is "$(list_state --refresh)" "stopped" "cluster list --refresh asks the cloud: stopped"
is "$(list_state)" "stopped" "and records it"
run_pbx -q cluster exec au -- hostname
is "$rc" 1 "exec on the stopped cluster fails"
echo "$errout" | grep -q "cluster au is stopped: its head instance is stopped.*pbx cluster start au"
ok $? "it says the head instance is stopped and how to start it: $errout"
run_pbx cluster show au --json
is "$(echo "$out" | json_get 'd["stopped"] is not None, d["last_autostop"] is not None')" "True True" \
	"show --json: stopped, and the head's record"

starts=$(calls calls StartInstances)
runs=$(calls calls RunInstances)
run_pbx cluster start au --autostop off
ok $rc "start brings it back: $errout"
echo "$errout" | grep -q "starting (was stopped)"
ok $? "progress says the stopped instances are started"
is "$(( $(calls calls StartInstances) - starts )):$(( $(calls calls RunInstances) - runs ))" "1:1" \
	"one StartInstances for both stopped instances, one RunInstances for the Spot node"
is "$(states | tr ' ' '\n' | grep -c ':running$')" 3 "three instances run again"
is "$(states | tr ' ' '\n' | grep '^head:')" "head:running" "the head is the same instance"
ok $([ -f "$HEAD_ROOT/var/lib/pbx/autostop.last" ]; echo $?) "on the same disk"
run_pbx cluster exec au -- timeout 60 srun -N2 sh -c 'echo $SLURMD_NODENAME'
is "$rc:$(echo "$out" | sort | tr '\n' ' ')" "0:cpu1 sp1 " "a job runs on both compute nodes, the remade Spot node too: $errout"
[ $rc = 0 ] || { run_pbx cluster exec au -- sinfo -N; printf "# %s\n" "$out"; }
is "$(list_state)" "up" "after the start, cluster list says up"
run_pbx cluster show au
echo "$out" | grep -q "last: stopped itself at .*idle for 12 s (autostop)"
ok $? "show reads the head's record of its last autostop"

# The head's own identity (docs/head-identity.md): its IMDS gives it its
# role's temporary credentials (IMDSv2), which EC2 takes; a node, with no
# instance profile, gets none.
ip_of() {
	h_py "$1" <<'PY'
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["au"]},
                                       {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"]:
    for i in r["Instances"]:
        if {t["Key"]: t["Value"] for t in i.get("Tags", [])}.get("pbx-role") == sys.argv[1]:
            print(i["PrivateIpAddress"])
PY
}
HEAD_IP=$(ip_of head)
NODE_IP=$(ip_of cpu)
imds() {
	_t=$(curl -s -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "http://$1/latest/api/token")
	curl -s -o "$TEST_TMP/md" -w '%{http_code}' -H "X-aws-ec2-metadata-token: $_t" "http://$1/latest/meta-data/$2"
}
is "$(imds "$HEAD_IP" iam/security-credentials/):$(cat "$TEST_TMP/md")" "200:pbx-role" "the head's IMDS names its role"
is "$(imds "$HEAD_IP" iam/security-credentials/pbx-role):$(json_get 'd["Type"], d["Code"], bool(d["Token"])' <"$TEST_TMP/md")" \
	"200:AWS-HMAC Success True" "and gives it the role's session credentials"
is "$(imds "$NODE_IP" iam/security-credentials/)" 404 "a node, with no instance profile, gets none"

# pbx run as the head (no credentials but the IMDS's, found by
# AWS_EC2_METADATA_SERVICE_ENDPOINT as on a VM at 169.254.169.254) deletes
# the cluster by its id: what a head does when it deletes its own cluster.
HEAD_HOME=$TEST_TMP/head-home
mkdir -p "$HEAD_HOME"
cp "$PBX_HOME/config.yaml" "$HEAD_HOME/config.yaml"
CID=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT uid FROM clusters WHERE name = 'au' AND state != 'deleted'")
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_EC2_METADATA_DISABLED HOME="$HEAD_HOME" \
	AWS_EC2_METADATA_SERVICE_ENDPOINT="http://$HEAD_IP" PBX_HOME="$HEAD_HOME" PBX_CONFIG="$HEAD_HOME/config.yaml" \
	"$PBX" -q cluster stop --discard-results --id "$CID" au 2>&1)
ok $? "pbx with the head's role stops the cluster by its id: $out"
is "$(calls role_credentials pbx-role)" 1 "with the credentials the head's IMDS gave out (one set)"
is "$(holds)" "0 0 0" "no instance, security group or key pair is left"
# the bodies' last processes may still be ending (ASan, load): 30 s
wait_secs 30 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
run_pbx -q cluster stop --discard-results au
ok $rc "the user's stop then finds nothing left and forgets the cluster: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM clusters WHERE name = 'au'")" "deleted" "the store says deleted"

# an instance profile the account does not have: EC2 refuses, nothing is left
h_template np "$(json_get 'd["ami"]' <"$TEST_TMP/env.json")"
sed -i '/^  np:$/,/^clouds:/s/    head: { machine_type: m5.large }/    head: { machine_type: m5.large, instance_profile: nope }/' "$PBX_HOME/config.yaml"
run_pbx -q cluster start np
is "$rc" 1 "a start with an unknown instance profile fails"
echo "$errout" | grep -q "InvalidParameterValue.*iamInstanceProfile.name is invalid"
ok $? "with EC2's reason: $errout"
"$PBX" -q cluster stop --discard-results np >/dev/null 2>&1
is "$(holds)" "0 0 0" "and leaves nothing"
done_testing
