#!/bin/sh
# t0125-aws-dry-run.sh - `pbx cluster start|stop --dry-run [--json]` for an
# EC2 template: the Query API requests pbx would send, one JSON object
# {method, url, body} a line, with the parameters EC2 expects (one
# RunInstances per node kind with MinCount = MaxCount, a ClientToken,
# TagSpecifications for instances and volumes, the root volume, spot
# through InstanceMarketOptions, the template's subnet before
# clouds.aws.subnet, the security group's rules,
# ImportKeyPair with the base64 public key) and nothing sent and nothing
# signed: no credentials anywhere (IMDS off), the endpoint a port nobody
# listens on.  Talks to no network at all.  A new cluster carries a fresh
# cluster id (tag pbx-cluster-id, in the key pair and group names
# pbx-NAME-ID, in every Describe filter); a stop of a name the store does
# not know only lists by name, with --id ID by name and id.
. "$(dirname "$0")/lib.sh"
trap 'rm -rf "$TEST_TMP"' EXIT
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION \
	AWS_DEFAULT_REGION AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE
export AWS_EC2_METADATA_DISABLED=true HOME="$TEST_TMP/user"

mkdir -p "$PBX_HOME" "$HOME"
ssh-keygen -q -t ed25519 -N "" -C t0125 -f "$PBX_HOME/id"
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  a1:
    cloud: aws
    login_user: ubuntu
    ssh_key: $PBX_HOME/id
    image: ami-0123456789abcdef0
    subnet: subnet-0t                    # before clouds.aws.subnet
    ssh_from: [203.0.113.7/32, 198.51.100.0/24]
    head: { instance_profile: pbx-head }
    node_groups:
      - { name: gpu, count: 2, machine_type: g4dn.xlarge, gpus: 1, gpu_type: t4, spot: true }
      - { name: cpu, count: 1, machine_type: c5.large }
  a2:
    cloud: aws
    login_user: ubuntu
    ssh_key: $PBX_HOME/id
    image: ami-0123456789abcdef0
    head: { instance_profile: pbx-head }
    node_groups:
      - { name: node, count: 3, min: 1, machine_type: c5.large }
clouds:
  aws: { region: eu-west-1, endpoint: "http://127.0.0.1:1/", subnet: subnet-0a, disk_gb: 80 }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"

run_pbx cluster start --dry-run --json a1
ok $rc "start --dry-run --json succeeds without credentials: $errout"
printf '%s\n' "$out" >"$TEST_TMP/req.jsonl"
cat >"$TEST_TMP/check.py" <<'PY'
import base64, json, sys
from urllib.parse import parse_qs
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
pub = open(sys.argv[2]).read().strip()
assert all(r["method"] == "POST" and r["url"] == "http://127.0.0.1:1/" for r in reqs), reqs
forms = [{k: v[0] for k, v in parse_qs(r["body"], keep_blank_values=True).items()} for r in reqs]
for f in forms:
    assert f["Version"] == "2016-11-15", f
acts = [f["Action"] for f in forms]
print(" ".join(acts))
run = [f for f in forms if f["Action"] == "RunInstances"]
head, gpu, cpu = run
ID = [f["TagSpecification.1.Tag.%d.Value" % i] for i in range(1, 4) if f["TagSpecification.1.Tag.%d.Key" % i] == "pbx-cluster-id"][0]
assert len(ID) == 32 and all(c in "0123456789abcdef" for c in ID), ID
RES = "pbx-a1-" + ID   # the key pair and group carry the full id in their names
assert head["InstanceType"] == "m5.xlarge" and head["MinCount"] == head["MaxCount"] == "1"
assert gpu["InstanceType"] == "g4dn.xlarge" and gpu["MinCount"] == gpu["MaxCount"] == "2"
assert cpu["MinCount"] == cpu["MaxCount"] == "1"
tokens = {f["ClientToken"] for f in run}
assert len(tokens) == 3 and all(0 < len(t) <= 64 for t in tokens), tokens
for f in run:
    assert f["SubnetId"] == "subnet-0t" and f["KeyName"] == RES and f["ImageId"] == "ami-0123456789abcdef0"
    assert f["BlockDeviceMapping.1.DeviceName"] == "/dev/xvda"
    assert f["BlockDeviceMapping.1.Ebs.VolumeSize"] == "80" and f["BlockDeviceMapping.1.Ebs.DeleteOnTermination"] == "true"
    assert f["TagSpecification.1.ResourceType"] == "instance" and f["TagSpecification.2.ResourceType"] == "volume"
    tags = {f["TagSpecification.1.Tag.%d.Key" % i]: f["TagSpecification.1.Tag.%d.Value" % i] for i in range(1, 4)}
    assert tags["pbx-cluster"] == "a1" and tags["pbx-cluster-id"] == ID, tags
# each launch names its instances' nodes in its instance tags (not its
# volumes'): the head by pbx-node, a group by its nodes' numbers in launch
# order (src/cloud/aws/launch.c)
def all_tags(f, n):
    out, i = {}, 1
    while "TagSpecification.%d.Tag.%d.Key" % (n, i) in f:
        out[f["TagSpecification.%d.Tag.%d.Key" % (n, i)]] = f["TagSpecification.%d.Tag.%d.Value" % (n, i)]
        i += 1
    return out
assert all_tags(head, 1).get("pbx-node") == "head" and "pbx-launch" not in all_tags(head, 1), all_tags(head, 1)
assert all_tags(gpu, 1).get("pbx-launch") == "1-2" and all_tags(gpu, 1).get("pbx-role") == "gpu", all_tags(gpu, 1)
assert all_tags(cpu, 1).get("pbx-launch") == "1" and all_tags(cpu, 1).get("pbx-role") == "cpu", all_tags(cpu, 1)
assert not any(k in all_tags(f, 2) for f in run for k in ("pbx-node", "pbx-launch"))
assert gpu["InstanceMarketOptions.MarketType"] == "spot"
assert gpu["InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"] == "terminate"
assert "InstanceMarketOptions.MarketType" not in cpu and "InstanceMarketOptions.MarketType" not in head
# a shutdown on the machine (autostop) stops it; a one-time Spot instance cannot stop
assert head["InstanceInitiatedShutdownBehavior"] == cpu["InstanceInitiatedShutdownBehavior"] == "stop"
assert gpu["InstanceInitiatedShutdownBehavior"] == "terminate"
# the head's own identity, on the head only
assert head["IamInstanceProfile.Name"] == "pbx-head"
assert "IamInstanceProfile.Name" not in gpu and "IamInstanceProfile.Name" not in cpu
assert base64.b64decode(head["UserData"]).decode() == "#cloud-config\nhostname: a1-head\n"
auth = [f for f in forms if f["Action"] == "AuthorizeSecurityGroupIngress"][0]
assert auth["IpPermissions.1.FromPort"] == "22" and auth["IpPermissions.1.IpRanges.1.CidrIp"] == "203.0.113.7/32"
assert auth["IpPermissions.1.IpRanges.2.CidrIp"] == "198.51.100.0/24" and "IpPermissions.1.IpRanges.3.CidrIp" not in auth
assert auth["IpPermissions.2.IpProtocol"] == "-1" and auth["IpPermissions.2.Groups.1.GroupId"] == auth["GroupId"]
key = [f for f in forms if f["Action"] == "ImportKeyPair"][0]
assert base64.b64decode(key["PublicKeyMaterial"]).decode() == pub and key["KeyName"] == RES
sg = [f for f in forms if f["Action"] == "CreateSecurityGroup"][0]
assert sg["GroupName"] == RES and sg["TagSpecification.1.ResourceType"] == "security-group"
for f in (key, sg):
    tags = {f["TagSpecification.1.Tag.%d.Key" % i]: f["TagSpecification.1.Tag.%d.Value" % i] for i in range(1, 4)}
    assert tags == {"pbx-cluster": "a1", "pbx-cluster-id": ID, "Name": RES}, tags
# every Describe filters by the name and the id
for f in forms:
    if f["Action"] in ("DescribeSecurityGroups", "DescribeKeyPairs", "DescribeInstances"):
        assert f["Filter.1.Name"] == "tag:pbx-cluster" and f["Filter.1.Value.1"] == "a1", f
        assert f["Filter.2.Name"] == "tag:pbx-cluster-id" and f["Filter.2.Value.1"] == ID, f
PY
python3 "$TEST_TMP/check.py" "$TEST_TMP/req.jsonl" "$PBX_HOME/id.pub" >"$TEST_TMP/acts" 2>"$TEST_TMP/why"
ok $? "the requests carry what EC2 expects: $(cat "$TEST_TMP/why")"
is "$(cat "$TEST_TMP/acts")" "DescribeImages DescribeSecurityGroups DescribeSubnets CreateSecurityGroup AuthorizeSecurityGroupIngress DescribeKeyPairs ImportKeyPair DescribeInstances RunInstances RunInstances RunInstances" \
	"the order: image, group and its rules, key pair, one RunInstances per node kind"
echo "$out" | grep -q -i -e "Signature" -e "AWS4-HMAC" -e "X-Amz" -e "Credential"
ok $((! $?)) "nothing signed, no credentials in the output"
[ ! -e "$PBX_HOME/pbx.db" ] || [ "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM clusters")" = 0 ]
ok $? "the store records no cluster"

run_pbx cluster start --dry-run a1
ok $rc "start --dry-run (text) succeeds: $errout"
echo "$out" | grep -q "^POST http://127.0.0.1:1/"
ok $? "the text form names method and URL"

# power saving: the head makes the nodes above min: as they are needed
run_pbx cluster start --dry-run --json a2
counts=$(echo "$out" | python3 -c 'import json,sys; from urllib.parse import parse_qs
for l in sys.stdin:
    if not l.strip(): continue
    f = {k: v[0] for k, v in parse_qs(json.loads(l)["body"]).items()}
    if f["Action"] == "RunInstances":
        print("%s=%s" % (f["TagSpecification.1.Tag.4.Value"], f["MaxCount"]))')
is "$rc:$(echo $counts)" "0:a2-head=1 a2-node=1" \
	"power saving (min: 1 of 3): the start makes the head and node1; node2 and node3 start asleep"

# ACTION and its tag filters (name=value,...) for each request of a stop
stop_calls() {
	echo "$out" | python3 -c 'import json,sys; from urllib.parse import parse_qs
for l in sys.stdin:
    if not l.strip(): continue
    f = {k: v[0] for k, v in parse_qs(json.loads(l)["body"]).items()}
    tags = [f["Filter.%d.Name" % i][4:] + "=" + f["Filter.%d.Value.1" % i] for i in range(1, 4)
            if f.get("Filter.%d.Name" % i, "").startswith("tag:")]
    print(f["Action"], ",".join(tags))'
}
run_pbx cluster stop --discard-results --dry-run --json a1
ok $rc "stop --dry-run --json succeeds: $errout"
is "$(stop_calls)" "DescribeInstances pbx-cluster=a1
DescribeSecurityGroups pbx-cluster=a1
DescribeKeyPairs pbx-cluster=a1" \
	"a name the store does not know: stop only lists what carries the name by tag, deletes nothing"
ID=0123456789abcdef0123456789abcdef
run_pbx cluster stop --discard-results --dry-run --json --id $ID a1
ok $rc "stop --dry-run --id succeeds: $errout"
is "$(stop_calls)" "DescribeInstances pbx-cluster=a1,pbx-cluster-id=$ID
DescribeSecurityGroups pbx-cluster=a1,pbx-cluster-id=$ID
DescribeKeyPairs pbx-cluster=a1,pbx-cluster-id=$ID
DescribeSecurityGroups pbx-cluster=a1,pbx-cluster-id=$ID
DescribeKeyPairs pbx-cluster=a1,pbx-cluster-id=$ID" \
	"with --id: finds the instances, group and key pair by name and id"

# Without a region anywhere: a clear error naming the key.
sed -i 's/region: eu-west-1, //' "$PBX_HOME/config.yaml"
run_pbx cluster start --dry-run a1
is "$rc" "2" "no region: a usage error"
echo "$errout" | grep -q "clouds.aws.region: required"
ok $? "naming clouds.aws.region: $errout"
AWS_REGION=us-west-2 run_pbx cluster start --dry-run --json a1
ok $rc "AWS_REGION gives the region: $errout"
echo "$out" | head -1 | grep -q '"url":"http://127.0.0.1:1/"'
ok $? "and the endpoint override still applies"
done_testing
