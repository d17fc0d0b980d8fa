#!/bin/sh
# t0410-aws-moto.sh - `pbx cluster start` of an EC2 template against moto
# with signatures and credentials checked (tests/emulators/aws/
# ec2_harness.py: moto_server on 127.0.0.1, an IAM user's access key, a
# fault-injecting proxy, node bodies for running instances), end to end:
# head + 2 GPU nodes whose login user is not root -> every node idle in
# sinfo -> parrun of the example sweep with --gres=gpu:1 -> all 24 tasks
# COMPLETED -> harvest -> report -> resize +1 (only the new instance is
# made, it joins idle) and -1 -> stop -> the AWS CLI lists no live
# instance, no cluster security group and no key pair.  Then: 30% of calls
# throttled and start still succeeds; a capacity error leaves nothing (all
# or nothing), or moves to the next subnet of clouds.aws.subnets; a vCPU
# quota error says so; a wrong secret key fails with an authentication
# error and creates nothing, as does a user whose IAM policy only allows
# describing; session credentials (a token) work.  (pbx
# killed with -9 mid-start: t0411.)
# Addresses: subnets $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24 (node bodies' sshd on
# port 22); SLURM ports from BODY_PORT_BASE + 64*8 (node bodies of cloud clusters).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/aws_lib.sh"

# ------------------------------------------------------------ end to end
h_start
sed -i 's#^    head: #    ssh_from: [127.0.0.0/8, 203.0.113.0/24]\n    head: #' "$PBX_HOME/config.yaml"
run_pbx cluster start e1
ok $rc "start of an aws template against moto (signatures checked): $errout"
# What the nodes admit, as moto holds it: every instance is in the
# cluster's group alone, whose ingress is SSH from ssh_from and everything
# from the group itself, nothing else.
is "$(python3 - "$TEST_TMP/env.json" "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT uid FROM clusters WHERE name = 'e1' AND state != 'deleted'")" <<'PY'
import boto3, json, sys
e = json.load(open(sys.argv[1]))
c = boto3.client("ec2", region_name="us-east-1", endpoint_url=e["moto_url"],
                 aws_access_key_id=e["admin"]["access_key"], aws_secret_access_key=e["admin"]["secret_key"])
g = c.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["pbx-e1-" + sys.argv[2]]}])["SecurityGroups"][0]
for p in sorted(g["IpPermissions"], key=lambda p: p["IpProtocol"]):
    print(p["IpProtocol"], p.get("FromPort", "-"), p.get("ToPort", "-"),
          " ".join(sorted(r["CidrIp"] for r in p.get("IpRanges", []))) or "-",
          " ".join("self" if u["GroupId"] == g["GroupId"] else u["GroupId"] for u in p.get("UserIdGroupPairs", [])) or "-",
          len(p.get("Ipv6Ranges", [])) + len(p.get("PrefixListIds", [])))
ids = {i["InstanceId"]: [s["GroupId"] for s in i["SecurityGroups"]] for r in c.describe_instances(
    Filters=[{"Name": "tag:pbx-cluster", "Values": ["e1"]}, {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"]
    for i in r["Instances"]}
print(len(ids), all(v == [g["GroupId"]] for v in ids.values()))
PY
)" "-1 - - - self 0
tcp 22 22 127.0.0.0/8 203.0.113.0/24 - 0
3 True" "the group admits SSH from ssh_from and everything else only from itself; every node is in it alone"
run_pbx cluster show e1
echo "$out" | grep -q "SSH (port 22) reaches the nodes of the cluster's security group from 127.0.0.0/8, 203.0.113.0/24"
ok $? "cluster show says which blocks reach port 22: $out"
run_pbx cluster ssh e1 gpu2 -- sh -c 'echo "$PBX_BODY_ROOT"'
# (a body's root ends in the first 10 hex digits of the SHA-1 of its name,
# the instance id's last 12 characters)
is "$rc:$(basename "$out")" "0:$(sqlite3 "$PBX_HOME/pbx.db" "SELECT substr(instance_id, -12) FROM nodes WHERE name = 'gpu2'" | tr -d '\n' | sha1sum | cut -c1-10)" \
	"cluster ssh NAME NODE -- COMMAND runs on that node: $errout"
is "$(holds)" "3 1 1" "moto holds 3 instances, the cluster's security group and key pair"
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t %G'
is "$out" "gpu1 idle gpu:t4:1
gpu2 idle gpu:t4:1" "every compute node is idle with its GPU, typed t4 (gpu_type)"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(name || ':' || state || ':' || address, ' ') FROM nodes")" \
	"head:up:$SLOT_NET.1.4 gpu1:up:$SLOT_NET.1.5 gpu2:up:$SLOT_NET.1.6" "nodes are up on the instances' private addresses"
# each instance's tags name its node (pbx-node for the head; for a group,
# pbx-launch at the instance's launch index): the instance the store has
# for that node, with no CreateTags
named=$(h_py <<'PY'
print(" ".join(sorted("%s=%s" % (node_of(i), i["InstanceId"]) for r in c.describe_instances(
    Filters=[{"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"])))
PY
)
is "$named" "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(name || '=' || instance_id, ' ') FROM (SELECT * FROM nodes ORDER BY name)")" \
	"each instance's tags name the node the store has it for"
is "$(calls calls CreateTags)" 0 "  with no CreateTags"
run_pbx cluster exec -n gpu2 e1 -- id -un
is "$out" "root" "commands run as root through sudo -n (login user pbx)"
sweep_demo_round e1
# resize +1: only the new instance is made, it joins; resize -1: it goes.
runs=$(calls calls RunInstances)
run_pbx cluster resize e1 +1
ok $rc "resize +1: $errout"
is "$(($(calls calls RunInstances) - runs)):$(holds)" "1:4 1 1" "one RunInstances for the one new node; the group and key pair are reused"
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t'
is "$(echo $out)" "gpu1 idle gpu2 idle gpu3 idle" "the new node joined, idle"
run_pbx cluster resize e1 -1
ok $rc "resize -1: $errout"
is "$(holds)" "3 1 1" "its instance is terminated; the group and key pair stay"
run_pbx cluster exec e1 -- sinfo -h -N -o '%N %t'
is "$(echo $out)" "gpu1 idle gpu2 idle" "SLURM has the 2 nodes left"
run_pbx cluster stop --discard-results e1
ok $rc "stop: $errout"
is "$(holds)" "0 0 0" "the AWS CLI lists no live instance, no cluster security group, no key pair"
wait_for 300 prints 0 bodies   # the harness reaps a terminated instance's body within a round or two
is "$(bodies)" "0" "no node body is left"
sqlite3 "$PBX_HOME/pbx.db" "SELECT detail FROM events" >"$TEST_TMP/events"
! grep -q -e "$AWS_SECRET_ACCESS_KEY" -e "Signature=" -e "AWS4-HMAC" "$TEST_TMP/events"
ok $? "the request log holds neither the secret key nor a signature"
grep -q "ec2 POST" "$TEST_TMP/events"
ok $? "the request log names the EC2 calls"

# ------------------------------------------------------------- throttled
h_start --throttle 0.3
PBX_STATS=1 run_pbx cluster start e1
ok $rc "start succeeds with 30% of calls throttled (RequestLimitExceeded): $errout"
is "$(calls faults RequestLimitExceeded | awk '{print ($1 > 0)}')" "1" "the proxy throttled calls ($(calls faults RequestLimitExceeded))"
run_pbx cluster stop --discard-results e1
is "$rc:$(holds)" "0:0 0 0" "stop after a throttled start leaves nothing"

# ------------------------------------------------- capacity: all or nothing
h_start --capacity g4dn.xlarge
run_pbx cluster start e1
is "$rc" "1" "start fails when EC2 has no capacity for the GPU nodes"
echo "$errout" | grep -q "InsufficientInstanceCapacity" && echo "$errout" | grep -q "nothing was kept"
ok $? "the message names the error and says nothing was kept: $errout"
is "$(holds)" "0 0 0" "all or nothing: the head, group and key pair are gone too"
is "$(calls calls RunInstances)" "2" "capacity errors are not retried (head + one GPU attempt)"

# ------------------------------------------------- capacity: the next subnet
h_start --capacity $SLOT_NET.1.0/24
sed -i "s#subnet: $SUB1 }#subnet: $SUB1, subnets: [$SUB1, $SUB2] }#" "$PBX_HOME/config.yaml"
run_pbx cluster start e1
ok $rc "start succeeds when the first subnet has no capacity: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(DISTINCT zone) || ' ' || group_concat(address, ',') FROM nodes WHERE state = 'up'")" \
	"$SUB2 $SLOT_NET.2.4,$SLOT_NET.2.5,$SLOT_NET.2.6" "every instance landed in the second subnet"
run_pbx cluster stop --discard-results e1
is "$rc:$(holds)" "0:0 0 0" "stop removes them there"

# ------------------------------------------------------------ vCPU quota
h_start --vcpu-limit g4dn.xlarge
run_pbx cluster start e1
is "$rc" "1" "start fails on a vCPU quota"
echo "$errout" | grep -q "VcpuLimitExceeded" && echo "$errout" | grep -q "Service Quotas"
ok $? "the message names the quota and where to raise it: $errout"
is "$(holds)" "0 0 0" "and leaves nothing"
sqlite3 "$PBX_HOME/pbx.db" "SELECT detail FROM events WHERE kind = 'ec2.error'" | grep -q "^RunInstances: HTTP 400 VcpuLimitExceeded"
ok $? "the event log records EC2's error code"

# ------------------------------------------------------------ credentials
h_start
good=$AWS_SECRET_ACCESS_KEY
# Change the key's last character; moto's keys are random, so one that
# already ends in x gets a y (CI once drew such a key and "wrong" was right).
case "$good" in
*x) export AWS_SECRET_ACCESS_KEY="${good%?}y" ;;
*) export AWS_SECRET_ACCESS_KEY="${good%?}x" ;;
esac
run_pbx cluster start e1
is "$rc" "1" "a wrong secret key fails the start"
echo "$errout" | grep -q "authentication failed (AuthFailure"
ok $? "with a clear authentication error: $errout"
echo "$errout" | grep -q -e "$AWS_SECRET_ACCESS_KEY" -e "$good"
ok $((! $?)) "the error quotes no secret"
is "$(holds)" "0 0 0" "and nothing was created"
export AWS_SECRET_ACCESS_KEY="$good"
run_pbx cluster stop --discard-results e1
# An IAM user who may only describe: the first change is refused.
AWS_ACCESS_KEY_ID=$(json_get 'd["viewer"]["access_key"]' <"$TEST_TMP/env.json") \
AWS_SECRET_ACCESS_KEY=$(json_get 'd["viewer"]["secret_key"]' <"$TEST_TMP/env.json") \
	run_pbx cluster start e1
[ "$rc" = 1 ] && echo "$errout" | grep -q "EC2 CreateSecurityGroup in us-east-1: not authorized (AccessDenied" &&
	echo "$errout" | grep -q "IAM policy"
ok $? "a user without ec2:CreateSecurityGroup gets a clear authorization error: $errout"
is "$(holds)" "0 0 0" "and nothing was created"

# Session credentials (STS AssumeRole) from a profile in the shared
# credentials file named by AWS_SHARED_CREDENTIALS_FILE; the region from
# the config file named by AWS_CONFIG_FILE.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
python3 - "$TEST_TMP/env.json" "$TEST_TMP/creds" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["session"]
open(sys.argv[2], "w").write("[other]\naws_access_key_id = AKIAWRONG\naws_secret_access_key = wrong\n\n"
    "# the session\n[pbx-session]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
    "aws_session_token = %s\n" % (s["access_key"], s["secret_key"], s["token"]))
PY
printf '[profile pbx-session]\nregion = us-east-1\n' >"$TEST_TMP/awsconfig"
sed -i 's#region: us-east-1, ##' "$PBX_HOME/config.yaml"
AWS_SHARED_CREDENTIALS_FILE="$TEST_TMP/creds" AWS_CONFIG_FILE="$TEST_TMP/awsconfig" AWS_PROFILE=pbx-session \
	run_pbx cluster start e1
ok $rc "start with session credentials from a profile (token sent and accepted): $errout"
is "$(holds)" "3 1 1" "it made the cluster"
AWS_SHARED_CREDENTIALS_FILE="$TEST_TMP/creds" AWS_CONFIG_FILE="$TEST_TMP/awsconfig" AWS_PROFILE=pbx-session \
	run_pbx cluster stop --discard-results e1
is "$rc:$(holds)" "0:0 0 0" "stop with them leaves nothing"
sed -i "s#session_token = .*#session_token = bad#" "$TEST_TMP/creds"
AWS_SHARED_CREDENTIALS_FILE="$TEST_TMP/creds" AWS_CONFIG_FILE="$TEST_TMP/awsconfig" AWS_PROFILE=pbx-session \
	run_pbx cluster start e1
[ "$rc" = 1 ] && echo "$errout" | grep -q "AuthFailure.*profile pbx-session in $TEST_TMP/creds"
ok $? "a wrong session token is refused, naming where the credentials came from: $errout"
export AWS_ACCESS_KEY_ID="$(json_get 'd["pbx"]["access_key"]' <"$TEST_TMP/env.json")"
export AWS_SECRET_ACCESS_KEY="$good"

done_testing
