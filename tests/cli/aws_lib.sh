# aws_lib.sh - what the EC2 tests (t0410, t0411, t0430, t0445, t0458, ...) share,
# sourced after lib.sh: the moto harness (tests/emulators/aws/
# ec2_harness.py) started per scenario with h_start, config.yaml for
# template e1 (head + 2 GPU nodes, login user pbx) in subnet $SLOT_NET.1.0/24
# (fallback $SLOT_NET.2.0/24), more templates with h_template, what moto holds
# as the AWS CLI lists it (holds), the account's AMIs and CreateImage's
# snapshots (amis, snapshots), the bodies left (bodies), the proxy's
# counters (calls).  Skips (exit 77) without moto[server], boto3 or the
# node-body helper.  The VPC is the test slot's /16 (lib.sh); SLURM ports
# from BODY_PORT_BASE + 64*8.  A test that runs
# beside them sets H_SUBNET1, H_SUBNET2 and H_SLURM_PORT_BASE to its own,
# and H_CLUSTERS to the clusters the exit trap stops (default e1).
HARNESS=${PBX_EC2_HARNESS:-$PBX_SOURCE_DIR/tests/emulators/aws/ec2_harness.py}
HELPER=${PBX_NODE_BODY_HELPER:-$(dirname "$PBX")/../../tests/emulators/gce/pbx-node-body}
if ! python3 -c 'import moto.server, boto3' 2>/dev/null || [ ! -x "$HELPER" ]; then
	echo "1..0 # SKIP moto[server] and boto3 (scripts/test-requirements.txt) or $HELPER missing"
	rm -rf "$TEST_TMP"
	exit 77
fi
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_SECURITY_TOKEN AWS_PROFILE \
	AWS_DEFAULT_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE
export AWS_EC2_METADATA_DISABLED=true HOME="$TEST_TMP/user"   # no ~/.aws of the tester
mkdir -p "$HOME"

h_stop() {
	[ -n "${H_PID:-}" ] && kill "$H_PID" 2>/dev/null && wait "$H_PID" 2>/dev/null
	H_PID=
}
# shellcheck disable=SC2086 # one word per cluster
stop_at_exit ${H_CLUSTERS:-e1}

# h_start [harness options]: a fresh moto + proxy + bodies; sets the
# environment pbx signs with (the IAM user's key) and writes config.yaml.
h_start() {
	h_stop
	rm -rf "$TEST_TMP/h" "$TEST_TMP/env.json"
	# the slot's /16; the harness's own default for a test that still
	# names subnets of 127.0.0.0/16 (tests/cli/literals-allowed)
	case ${H_SUBNET1:-$SLOT_NET.} in "$SLOT_NET".*) h_vpc=$SLOT_NET.0.0/16 ;; *) h_vpc=127.0.0.0/16 ;; esac
	python3 "$HARNESS" --state-dir "$TEST_TMP/h" --env-file "$TEST_TMP/env.json" \
		--node-body-helper "$HELPER" --login-user pbx \
		--vpc "$h_vpc" --subnet "${H_SUBNET1:-$SLOT_NET.1.0/24}" --subnet "${H_SUBNET2:-$SLOT_NET.2.0/24}" "$@" \
		>"$TEST_TMP/h.log" 2>&1 &
	H_PID=$!
	wait_started "$TEST_TMP/env.json" "$H_PID" "$TEST_TMP/h.log" "the EC2 harness"
	env_get() { json_get "$1" <"$TEST_TMP/env.json"; }
	URL=$(env_get 'd["url"]')
	MOTO=$(env_get 'd["moto_url"]')
	SUB1=$(env_get 'd["subnets"][0]')
	SUB2=$(env_get 'd["subnets"][1]')
	export AWS_ACCESS_KEY_ID="$(env_get 'd["pbx"]["access_key"]')"
	export AWS_SECRET_ACCESS_KEY="$(env_get 'd["pbx"]["secret_key"]')"
	cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  e1:
    cloud: aws
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: $(env_get 'd["ami"]')
    head: { machine_type: m5.large }
    node_groups:
      - { name: gpu, count: 2, machine_type: g4dn.xlarge, gpus: 1, gpu_type: t4 }
clouds:
  aws: { region: us-east-1, endpoint: "$URL", subnet: $SUB1 }
  local: { slurm_port_base: ${H_SLURM_PORT_BASE:-$BODY_PORT_BASE} }
CONFIG
	chmod 600 "$PBX_HOME/config.yaml"
}

# What moto holds, as the AWS CLI (with the harness's admin key) lists it:
# "LIVE_INSTANCES CLUSTER_GROUPS KEY_PAIRS".
aws_cli() {
	AWS_ACCESS_KEY_ID=$(json_get 'd["admin"]["access_key"]' <"$TEST_TMP/env.json") \
	AWS_SECRET_ACCESS_KEY=$(json_get 'd["admin"]["secret_key"]' <"$TEST_TMP/env.json") \
		aws --endpoint-url "$MOTO" --region us-east-1 --output text "$@"
}
holds() {
	if command -v aws >/dev/null 2>&1; then
		n=$(aws_cli ec2 describe-instances --filters \
			Name=instance-state-name,Values=pending,running,stopping,stopped,shutting-down \
			--query 'length(Reservations[].Instances[])')
		g=$(aws_cli ec2 describe-security-groups --query "length(SecurityGroups[?GroupName!='default'])")
		k=$(aws_cli ec2 describe-key-pairs --query 'length(KeyPairs)')
		echo "$n $g $k"
	else
		python3 - "$TEST_TMP/env.json" <<'PY'
import boto3, json, sys
e = json.load(open(sys.argv[1]))
c = boto3.client("ec2", region_name="us-east-1", endpoint_url=e["moto_url"],
                 aws_access_key_id=e["admin"]["access_key"], aws_secret_access_key=e["admin"]["secret_key"])
n = sum(1 for r in c.describe_instances(Filters=[{"Name": "instance-state-name", "Values": [
    "pending", "running", "stopping", "stopped", "shutting-down"]}])["Reservations"] for i in r["Instances"])
g = sum(1 for s in c.describe_security_groups()["SecurityGroups"] if s["GroupName"] != "default")
k = len(c.describe_key_pairs()["KeyPairs"])
print(n, g, k)
PY
	fi
}
# h_template NAME IMAGE: adds template NAME (a head and one node, login
# user pbx) booting IMAGE to config.yaml.
h_template() {
	sed -i "/^clouds:/i\\
  $1:\\
    cloud: aws\\
    login_user: pbx\\
    ssh_key: $PBX_HOME/id\\
    image: $2\\
    head: { machine_type: m5.large }\\
    node_groups:\\
      - { name: cpu, count: 1, machine_type: t3.large }" "$PBX_HOME/config.yaml"
}

# aws_spot_interrupt ID: the harness sends spot instance ID a spot
# interruption notice of 30 s; prints its action, terminate (t0465, t0466,
# t0468).  aws_spot_instances: "ID@ADDRESS" of each running spot instance.
aws_spot_interrupt() {
	python3 -c 'import json, sys, urllib.request
r = urllib.request.Request(sys.argv[1] + "_harness/spot-interruption?instance=%s&notice=30" % sys.argv[2], data=b"")
print(json.load(urllib.request.urlopen(r))["action"])' "$URL" "$1"
}
aws_spot_instances() {
	h_py <<'PY'
print(" ".join("%s@%s" % (i["InstanceId"], i["PrivateIpAddress"]) for r in c.describe_instances()["Reservations"]
               for i in r["Instances"] if i.get("InstanceLifecycle") == "spot" and i["State"]["Name"] == "running"))
PY
}

# aws_power_cluster NAME GROUP SLURM: adds template NAME for SLURM power
# saving (login user pbx, a head with instance profile pbx-head, the map
# SLURM as its slurm:, the one node group GROUP) to config.yaml; BODIES is
# where the harness keeps the bodies.  aws_instances NAME: ROLE=STATE of
# the cluster's live instances (their pbx-role tag), sorted; "-" for none.
aws_power_cluster() {
	sed -i "/^clouds:/i\\
  $1:\\
    cloud: aws\\
    login_user: pbx\\
    ssh_key: $PBX_HOME/id\\
    image: $(json_get 'd["ami"]' <"$TEST_TMP/env.json")\\
    head: { machine_type: m5.large, instance_profile: pbx-head }\\
    slurm: $3\\
    node_groups:\\
      - $2" "$PBX_HOME/config.yaml"
	# shellcheck disable=SC2034 # the test's
	BODIES=$TEST_TMP/h/bodies
}
aws_instances() {
	h_py "$1" <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": [sys.argv[1]]}])["Reservations"]:
    for i in r["Instances"]:
        if i["State"]["Name"] not in ("terminated", "shutting-down"):
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            out.append("%s=%s" % (tags.get("pbx-role", "?"), i["State"]["Name"]))
print(" ".join(sorted(out)) or "-")
PY
}

# h_py SCRIPT ARGS: runs the Python SCRIPT (read from stdin) with `c`, a
# boto3 EC2 client of the harness's admin against moto itself.
# node_of(instance) there: the node an instance's tags name, as pbx reads
# them (src/cloud/aws/launch.c): its pbx-node tag, else the number of its
# launch's pbx-launch (e.g. 3-5,9) at its AmiLaunchIndex after its
# pbx-role; "?" when they name none.
h_py() {
	python3 -c "import boto3, json, sys
e = json.load(open('$TEST_TMP/env.json'))
c = boto3.client('ec2', region_name='us-east-1', endpoint_url=e['moto_url'],
                 aws_access_key_id=e['admin']['access_key'], aws_secret_access_key=e['admin']['secret_key'])
def node_of(i):
    tags = {t['Key']: t['Value'] for t in i.get('Tags', [])}
    if 'pbx-node' in tags:
        return tags['pbx-node']
    if 'pbx-launch' not in tags or 'pbx-role' not in tags:
        return '?'
    nums = []
    for r in tags['pbx-launch'].split(','):
        a, _, b = r.partition('-')
        nums += list(range(int(a), int(b or a) + 1))
    k = i.get('AmiLaunchIndex', -1)
    return tags['pbx-role'] + str(nums[k]) if 0 <= k < len(nums) else '?'
exec(sys.stdin.read())" "$@"
}
# The account's AMIs, as NAME:STATE:pbx-image-id (sorted), and how many
# snapshots CreateImage made that are still there.
amis() {
	h_py <<'PY'
out = []
for i in c.describe_images(Owners=["self"])["Images"]:
    tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
    out.append("%s:%s:%s" % (i["Name"], i["State"], tags.get("pbx-image-id", "-")))
print(" ".join(sorted(out)))
PY
}
snapshots() {
	h_py <<'PY'
print(sum(1 for s in c.describe_snapshots()["Snapshots"] if s.get("Description", "").startswith("Created by CreateImage")))
PY
}
bodies() { find "$TEST_TMP/h/bodies" -mindepth 3 -maxdepth 3 -type d 2>/dev/null | wc -l; }
calls() { python3 -c 'import json,sys,urllib.request; d=json.load(urllib.request.urlopen(sys.argv[1] + "_harness/calls")); print(d[sys.argv[2]].get(sys.argv[3], 0))' "$URL" "$1" "$2"; }

mkdir -p "$PBX_HOME"
chmod 755 "$TEST_TMP"   # sshd reads the login user's keys as that user
ssh-keygen -q -t ed25519 -N "" -C pbx-aws-test -f "$PBX_HOME/id"

