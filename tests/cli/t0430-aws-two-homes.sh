#!/bin/sh
# t0430-aws-two-homes.sh - two pbx homes (two users) of one AWS account
# both start a cluster called `e1` (head + 1 node) against moto: each gets
# its own cluster id, instances, security group and key pair (named
# pbx-e1-ID, so neither launches with the other's key); a stop from a
# third, empty home deletes nothing and lists both clusters' resources with
# their ids; `stop --id ID` from there deletes exactly one; each home's
# stop leaves the other's cluster whole and working (its instances
# running, its group and key pair there, SLURM answering).  Subnets
# $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24; SLURM ports from BODY_PORT_BASE + 64*8 (home A)
# and BODY_PORT_BASE + 64 + 64*8 (home B; C +128), below the kernel's ephemeral range (32768-60999):
# slurmctld listens on every address.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE
. "$(dirname "$0")/aws_lib.sh"

A="$PBX_HOME" B="$TEST_TMP/b" C="$TEST_TMP/c"
stop_at_exit "$A:e1" "$B:e1"

h_start
# one node per cluster; homes B and C: their own login key and SLURM ports
sed -i 's/count: 2/count: 1/' "$A/config.yaml"
for h in "$B" "$C"; do
	mkdir -p "$h"
	ssh-keygen -q -t ed25519 -N "" -C "$(basename "$h")" -f "$h/id"
	sed -e "s#$A/id#$h/id#" -e "s/slurm_port_base: $BODY_PORT_BASE/slurm_port_base: $((BODY_PORT_BASE + 64 * $(basename "$h" | tr bc 12)))/" \
		"$A/config.yaml" >"$h/config.yaml"
	chmod 600 "$h/config.yaml"
done
uid() { sqlite3 "$1/pbx.db" "SELECT uid FROM clusters WHERE name = 'e1' AND state != 'deleted'"; }
# What moto holds, one line per resource: "KIND NAME-OR-ID STATE CLUSTER-ID"
moto_list() {
	python3 - "$TEST_TMP/env.json" <<'PY' | sort
import boto3, json, sys
e = json.load(open(sys.argv[1]))
c = boto3.client("ec2", region_name="us-east-1", endpoint_url=e["moto_url"],
                 aws_access_key_id=e["admin"]["access_key"], aws_secret_access_key=e["admin"]["secret_key"])
tag = lambda x: {t["Key"]: t["Value"] for t in x.get("Tags", [])}.get("pbx-cluster-id", "-")
for r in c.describe_instances(Filters=[{"Name": "instance-state-name", "Values": [
        "pending", "running", "stopping", "stopped", "shutting-down"]}])["Reservations"]:
    for i in r["Instances"]:
        print("instance", i["InstanceId"], i["State"]["Name"], tag(i))
for s in c.describe_security_groups()["SecurityGroups"]:
    if s["GroupName"] != "default":
        print("group", s["GroupName"], "-", tag(s))
for k in c.describe_key_pairs()["KeyPairs"]:
    print("key", k["KeyName"], "-", tag(k))
PY
}
holding() { moto_list | grep -c " $1\$"; }   # resources carrying id $1
slurm() { in_home "$1" cluster exec e1 -- sinfo -h -N -o '%N %t'; echo "$rc:$out"; }

# ------------------------------------------------- two clusters, one name
in_home "$A" cluster start e1
ok $rc "home A starts e1: $errout"
in_home "$B" cluster start e1
ok $rc "home B starts e1 in the same account: $errout"
IDA=$(uid "$A") IDB=$(uid "$B")
echo "$IDA $IDB" | grep -Eq '^[0-9a-f]{32} [0-9a-f]{32}$' && [ "$IDA" != "$IDB" ]
ok $? "each home recorded its own 128-bit cluster id ($IDA, $IDB)"
is "$(moto_list | grep " $IDA\$" | cut -d' ' -f1,2 | grep -v '^instance' | tr '\n' ' ')" \
	"group pbx-e1-$IDA key pbx-e1-$IDA " "A's group and key pair carry its id (tag and name)"
is "$(moto_list | grep -c "^instance .* running $IDA\$"):$(holding "$IDB")" "2:4" \
	"A has 2 running instances; B its own 2 instances, group and key pair"
is "$(moto_list | wc -l)" "8" "nothing else: no resource is shared"
sqlite3 "$B/pbx.db" "SELECT instance_id FROM nodes" | sort >"$TEST_TMP/b.ids"
moto_list | grep " $IDB\$" | grep '^instance' | cut -d' ' -f2 | sort | cmp -s - "$TEST_TMP/b.ids"
ok $? "B's store records B's instances"

# -------------------------------------------- a stop from an empty store
in_home "$C" cluster stop --discard-results e1
is "$rc" "3" "a stop from a home that does not know e1 fails (exit 3)"
echo "$errout" | grep -q "nothing was deleted.*pbx cluster stop --id ID e1"
ok $? "saying nothing was deleted and how to delete: $errout"
is "$(echo "$out" | grep -c " $IDA\$"):$(echo "$out" | grep -c " $IDB\$")" "4:4" \
	"it lists both clusters' instances, groups and key pairs with their ids"
is "$(moto_list | wc -l)" "8" "and deletes nothing"

# ------------------------------------ each stop leaves the other whole
in_home "$B" cluster stop --discard-results e1
ok $rc "home B stops its e1: $errout"
is "$(holding "$IDB"):$(holding "$IDA")" "0:4" "B's resources are gone, A's all there"
is "$(moto_list | grep -c "^instance .* running $IDA\$")" "2" "A's instances are running"
is "$(slurm "$A")" "0:gpu1 idle" "A's SLURM still answers, its node idle"

in_home "$B" cluster start e1
ok $rc "home B starts e1 again: $errout"
IDB=$(uid "$B")
in_home "$A" cluster stop --discard-results e1
ok $rc "home A stops its e1: $errout"
is "$(holding "$IDA"):$(holding "$IDB")" "0:4" "A's resources are gone, B's all there"
is "$(slurm "$B")" "0:gpu1 idle" "B's SLURM still answers, its node idle"

# ------------------------------------------- --id deletes exactly one
in_home "$A" cluster start e1
ok $rc "home A starts e1 again: $errout"
IDA=$(uid "$A")
in_home "$C" cluster stop --discard-results --id "$IDB" e1
ok $rc "stop --id B's id from the empty home: $errout"
is "$(holding "$IDB"):$(holding "$IDA")" "0:4" "it deleted exactly B's resources"
is "$(slurm "$A")" "0:gpu1 idle" "A's SLURM still answers"
in_home "$A" cluster stop --discard-results e1
ok $rc "home A stops e1: $errout"
is "$(moto_list | wc -l)" "0" "the account is empty"
done_testing
