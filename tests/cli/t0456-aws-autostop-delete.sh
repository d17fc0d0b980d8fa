#!/bin/sh
# t0456-aws-autostop-delete.sh - autostop_action: delete on EC2 (moto with
# the harness's lifecycle and IMDS, node bodies; docs/autostop.md): a
# cluster whose head runs with instance profile pbx-head, autostop 12 s.
# While a finished task's results are not harvested, the idle cluster
# stops (instances `stopped`) and the head records why; once `pbx harvest`
# has brought everything home, the idle head deletes the cluster with its
# role's credentials from its IMDS, itself last: no instance and no body
# process is left, and no security group or key pair either (the head
# leaves the group before deleting it); the user's `stop` then finds
# nothing and forgets the cluster.  Addresses: subnets $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24;
# SLURM ports from BODY_PORT_BASE + 64*8.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE H_CLUSTERS="ae"
. "$(dirname "$0")/aws_lib.sh"

h_start
h_template ae "$(json_get 'd["ami"]' <"$TEST_TMP/env.json")"
sed -i '/^  ae:$/a\    autostop: 12s\n    autostop_action: delete' "$PBX_HOME/config.yaml"
sed -i '/^  ae:$/,/^clouds:/s/    head: { machine_type: m5.large }/    head: { machine_type: m5.large, instance_profile: pbx-head }/' "$PBX_HOME/config.yaml"
export PBX_AUTOSTOP_TICK=1
# The cluster's instances' states, sorted ("-": none).
states() {
	h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["ae"]}])["Reservations"]:
    for i in r["Instances"]:
        if i["State"]["Name"] != "terminated":
            out.append(i["State"]["Name"])
print(" ".join(sorted(out)) or "-")
PY
}
BODIES=$TEST_TMP/h/bodies

run_pbx -q cluster start ae
ok $rc "the cluster starts: $errout"
is "$("$PBX" cluster show ae --json | json_get 'd["autostop_action"]')" "delete" "show --json: autostop_action delete"
# pbx on the head (docs/head-identity.md): its own key, authorized on both
# nodes; its store took in the cluster's record; it reaches cpu1 with it.
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
is "$(find "$BODIES" -name id_ed25519 | wc -l)" 1 "the head made a key of its own, on the head only"
is "$(find "$BODIES" -path '*/.ssh/authorized_keys' -exec grep -l " pbx-head:ae\$" {} + | wc -l)" 2 \
	"both nodes authorize it for the login user"
nodes_of() { json_get 'd["state"] + " " + " ".join("%s=%s@%s" % (n["name"], n["state"], n["address"]) for n in d["nodes"])'; }
is "$("$pbx_head" cluster show ae --json | nodes_of)" "$("$PBX" cluster show ae --json | nodes_of)" \
	"pbx-head's store knows the cluster's nodes as the user's does"
is "$("$pbx_head" -q cluster exec -n cpu1 ae -- sh -c 'echo reached' 2>&1)" "reached" \
	"pbx-head runs a command on cpu1 with the head's key"
# As EC2 does, the harness refuses to delete a group instances still run in.
in_use=$(python3 - "$TEST_TMP/env.json" <<'PY'
import boto3, botocore, json, sys
e = json.load(open(sys.argv[1]))
c = boto3.client("ec2", region_name="us-east-1", endpoint_url=e["url"],
                 aws_access_key_id=e["pbx"]["access_key"], aws_secret_access_key=e["pbx"]["secret_key"],
                 config=botocore.config.Config(retries={"max_attempts": 10, "mode": "standard"}))
g = c.describe_security_groups(Filters=[{"Name": "tag:pbx-cluster", "Values": ["ae"]}])["SecurityGroups"][0]
try:
    c.delete_security_group(GroupId=g["GroupId"])
    print("deleted")
except botocore.exceptions.ClientError as x:
    print(x.response["Error"]["Code"])
PY
)
is "$in_use" "DependencyViolation" "the cluster's group cannot be deleted while its instances run in it"
two_echo_tasks ae

# As in t0451: what a task can write in SHARED decides nothing
# (docs/SECURITY.md): a forged harvested mark deletes nothing; a FIFO and
# a link where the head writes its stop request, and a FIFO where it reads
# a node's answer, neither hang its stop nor get followed.
shared_run=$(find "$TEST_TMP" -path '*/pbx/*/tasks/0/status' | head -1)
shared_run=${shared_run%/tasks/0/status}
cat "$shared_run"/tasks/*/status >"$shared_run/.pbx-harvested"
req_dir=${shared_run%/pbx/*}/.pbx-autostop
echo untouched >"$TEST_TMP/victim"
mkdir -p "$req_dir/off" && mkfifo "$req_dir/request.new" "$req_dir/off/cpu1" &&
	ln -s "$TEST_TMP/victim" "$req_dir/request" && chown -R nobody "$req_dir"
i=0
while [ "$(states)" != "stopped stopped" ] && [ $i -lt 90 ]; do sleep 1; i=$((i + 1)); done
is "$(states)" "stopped stopped" "idle with results not harvested (a forged mark, FIFOs and a link planted): both instances stopped, not deleted (${i} s)"
is "$(cat "$TEST_TMP/victim")" "untouched" "the file a planted link named is untouched"
is "$(stat -c %U "$req_dir")" root "the head made the request's directory its own"
alogs() { find "$BODIES" -name pbx-autostop.log -exec cat {} +; }
is "$(alogs | grep -c 'not answered')" 0 "the head had cpu1's own answer, not the planted FIFO's: $(alogs | grep 'not answered')"
last=$(find "$BODIES" -path '*/var/lib/pbx/autostop.last' -exec cat {} + 2>/dev/null)
echo "$last" | grep -q "^reason=idle for 12 s (autostop).*; stopped, not deleted: the results of 2 task(s) are not harvested"
ok $? "the head records why it did not delete: $(echo "$last" | grep "^reason=")"

# as in t0450: the harness says stopped only once the guest's shutdown
# has completed (the watcher, which ends last, included), so the start
# cannot find the old watcher alive
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
run_pbx -q cluster start ae
ok $rc "start brings it back: $errout"
run_pbx -q harvest del
ok $rc "harvest brings the results home: $errout"
is "$(cat "$PBX_HOME"/results/*/1/stdout 2>/dev/null)" "result-1" "a task's output is home"

i=0
while [ "$(states)" != "-" ] && [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done
is "$(states)" "-" "idle with everything harvested: the head terminated every instance, itself last (${i} s)"
[ "$(states)" = "-" ] || find "$BODIES" \( -name delete.log -o -name 'pbx-autostop.log' \) \
	-exec sh -c 'echo "# $1:"; grep -v "cannot open /proc" "$1" | tail -8 | sed "s/^/#   /"' _ {} \;
is "$(calls role_credentials pbx-role)" 1 "with its role's credentials from its IMDS"
# The group cannot go while the head runs in it (the harness refuses, as
# EC2 does: DependencyViolation): the head moves itself into its VPC's
# default group first, then deletes the cluster's group and key pair, and
# terminates itself last.  Nothing is left.
is "$(holds)" "0 0 0" "no instance, security group or key pair is left"
[ "$(holds)" = "0 0 0" ] || find "$BODIES" -name delete.log -exec sh -c 'echo "# $1:"; tail -8 "$1" | sed "s/^/#   /"' _ {} \;
is "$(calls faults DependencyViolation)" 1 "the head never tried to delete a group still in use (the one refusal: the test's own, above)"
wait_for 100 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"

is "$("$PBX" cluster list --refresh --json | json_get '[c["state"] for c in d if c["name"] == "ae"][0]')" "stopped" \
	"cluster list --refresh asks the cloud: no longer running"
run_pbx cluster show ae
echo "$out $errout" | grep -q "its head instance i-[0-9a-f]* no longer exists (deleted: by the head itself with autostop_action: delete, or outside pbx)"
ok $? "show says the head instance no longer exists: $out $errout"
run_pbx -q cluster stop --discard-results ae
ok $rc "the user's stop finds nothing left and forgets the cluster: $errout"
is "$(holds)" "0 0 0" "nothing is left"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM clusters WHERE name = 'ae'")" "deleted" "the store says deleted"
done_testing
