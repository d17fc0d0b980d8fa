# cloud/two-homes.sh - one body for t0420 (CLOUD=gce) and t0430
# (CLOUD=aws), sourced after lib.sh: two pbx homes (two users) of one
# Compute Engine project or AWS account both start a cluster called `th`
# (head + 1 node) against the emulator: each gets its own cluster id,
# instances and firewall rules (Compute Engine: named with the id's first
# 12 digits, its network tags) or security group and key pair (EC2: named
# pbx-th-ID, so neither launches with the other's key); a stop from a
# third, empty home deletes nothing and lists both clusters' resources
# with their ids; `stop --id ID` from there deletes exactly one; each
# home's stop leaves the other's cluster whole and working (its instances
# running, its rules or group and key pair there, SLURM answering).  On
# Compute Engine both share the one Cloud NAT of the region, which the
# last stop deletes; on EC2 nothing is shared.  Addresses: the slot's
# $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24; SLURM ports from BODY_PORT_BASE +
# 64*8 (home A; B +64, C +128), below the kernel's ephemeral range
# (32768-60999): slurmctld listens on every address, so a port any program
# got from the kernel would be taken.
A="$TEST_TMP/a" B="$TEST_TMP/b" C="$TEST_TMP/c"
stop_at_exit "$A:th" "$B:th"
cloud_emulator
case $CLOUD in
gce)
	NODE_TYPE=e2-standard-4 UP=RUNNING
	# res_list: what the emulator holds, one line per resource, "KIND NAME
	# STATE ID" (instances by their pbx-cluster-id label, rules by the id
	# their description ends in; the region's router is shared)
	res_list() {
		emu_get state | python3 -c 'import json, sys
d = json.load(sys.stdin)
for i in d["instances"]:
    print("instance", i["name"], i.get("status"), i["labels"].get("pbx-cluster-id"))
for f in d["firewalls"]:
    print("firewall", f["name"], "-", f.get("description", "").rsplit("=", 1)[-1])
for r in d["routers"]:
    print("router", r["name"], r["region"].rsplit("/", 1)[-1], "shared")' | sort
	}
	# named ID: what a cluster's id names, as res_list names it
	named() {
		p=$(echo "$1" | cut -c1-12)
		echo "firewall pbx-th-$p-internal firewall pbx-th-$p-ssh instance th-$p-head instance th-$p-node1 "
	}
	NAMED_WHAT="its instances and rules carry its id (label, description) and its prefix in their names"
	# one Cloud NAT per network and region, for every cluster's nodes
	SHARED="router pbx-nat-default us-central1 shared"
	# writes: the lines of a dry run (stdin) that are not a request that
	# only reads (a GET)
	writes() { grep -vc '^GET '; }
	;;
aws)
	NODE_TYPE=t3.large UP=running
	res_list() {
		h_py <<'PY' | sort
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
	named() { echo "group pbx-th-$1 key pbx-th-$1 "; }
	NAMED_WHAT="its group and key pair carry its id (tag and name)"
	SHARED=""
	# a request is "POST URL" and its form, which names the action
	writes() { grep -v '^POST ' | grep -vc '^  Action=Describe'; }
	;;
esac
# home DIR SLURM_PORT_BASE: its own login key and config (template th)
home() {
	mkdir -p "$1"
	ssh-keygen -q -t ed25519 -N "" -C "$(basename "$1")" -f "$1/id"
	cloud_config "$1/config.yaml" "$2" "$(cloud_template th "$1/id" \
		"node_groups:" "  - { name: node, count: 1, machine_type: $NODE_TYPE }")"
}
home "$A" "$BODY_PORT_BASE"
home "$B" "$((BODY_PORT_BASE + 64))"
home "$C" "$((BODY_PORT_BASE + 128))"
holding() { res_list | grep -c " $1\$"; } # resources carrying id $1
# the resources id $1 names (an EC2 instance's id is the cloud's own)
names_of() { res_list | grep " $1\$" | grep -v '^instance i-' | cut -d' ' -f1,2 | tr '\n' ' '; }
running() { res_list | grep -c "^instance .* $UP $1\$"; }
shared() { res_list | grep ' shared$'; }
ALL=$((8 + $(echo "$SHARED" | grep -c .)))
uid() { sqlite3 "$1/pbx.db" "SELECT uid FROM clusters WHERE name = 'th' AND state != 'deleted'"; }
# sinfo of home $1's cluster, through pbx cluster exec (SLURM answering)
# shellcheck disable=SC2154 # in_home's run_pbx sets rc and out
slurm() { in_home "$1" cluster exec th -- sinfo -h -N -o '%N %t'; echo "$rc:$out"; }

test_expect_success 'two homes start a cluster of one name, each with its own id' '
	in_home "$A" cluster start th
	ok $rc "home A starts th: $errout"
	in_home "$B" cluster start th
	ok $rc "home B starts th in the same project or account: $errout"
	IDA=$(uid "$A") IDB=$(uid "$B")
	echo "$IDA $IDB" | grep -Eq "^[0-9a-f]{32} [0-9a-f]{32}\$" && [ "$IDA" != "$IDB" ]
	ok $? "each home recorded its own 128-bit cluster id ($IDA, $IDB)"
	is "$(names_of "$IDA")" "$(named "$IDA")" "A: $NAMED_WHAT"
	is "$(running "$IDA"):$(holding "$IDB")" "2:4" \
		"A has 2 running instances; B its own 2 instances and 2 rules, or group and key pair"
	is "$(res_list | wc -l)" "$ALL" "nothing else is there but what is shared"
	is "$(shared)" "$SHARED" "what the clusters share: on Compute Engine one Cloud NAT, on EC2 nothing"
	sqlite3 "$B/pbx.db" "SELECT instance_id FROM nodes" | sort >"$TEST_TMP/b.ids"
	res_list | grep " $IDB\$" | grep "^instance" | cut -d" " -f2 | sort | cmp -s - "$TEST_TMP/b.ids"
	ok $? "B'"'"'s store records B'"'"'s instances"
	in_home "$A" cluster list --json
	is "$(echo "$out" | json_get "d[0][\"id\"]")" "$IDA" "cluster list --json shows the id"
	in_home "$A" cluster show th
	echo "$out" | grep -q "^cluster th ($CLOUD, id $IDA): up"
	ok $? "cluster show shows the id: $out"
'
test_expect_success 'a stop from an empty home deletes nothing and lists both ids' '
	in_home "$C" cluster stop --discard-results th
	is "$rc" "3" "a stop from a home that does not know th fails (exit 3)"
	echo "$errout" | grep -q "nothing was deleted.*pbx cluster stop --id ID th"
	ok $? "saying nothing was deleted and how to delete: $errout"
	is "$(echo "$out" | grep -c " $IDA\$"):$(echo "$out" | grep -c " $IDB\$")" "4:4" \
		"it lists both clusters'"'"' resources with their ids"
	is "$(res_list | wc -l)" "$ALL" "and deletes nothing"
	in_home "$C" cluster stop --discard-results --dry-run th
	is "$rc:$(echo "$out" | writes)" "0:0" "its dry run only reads: $out"
'
test_expect_success 'each home'"'"'s stop leaves the other'"'"'s cluster whole' '
	in_home "$B" cluster stop --discard-results th
	ok $rc "home B stops its th: $errout"
	is "$(holding "$IDB"):$(holding "$IDA")" "0:4" "B'"'"'s resources are gone, A'"'"'s all there"
	is "$(running "$IDA")" "2" "A'"'"'s instances are running"
	is "$(slurm "$A")" "0:node1 idle" "A'"'"'s SLURM still answers, its node idle"
	is "$(shared)" "$SHARED" "what is shared stays: A'"'"'s nodes still use it"
	in_home "$B" cluster start th
	ok $rc "home B starts th again: $errout"
	IDB=$(uid "$B")
	in_home "$A" cluster stop --discard-results th
	ok $rc "home A stops its th: $errout"
	is "$(holding "$IDA"):$(holding "$IDB")" "0:4" "A'"'"'s resources are gone, B'"'"'s all there"
	is "$(slurm "$B")" "0:node1 idle" "B'"'"'s SLURM still answers, its node idle"
	is "$(shared)" "$SHARED" "what is shared stays: B'"'"'s nodes still use it"
'
test_expect_success 'stop --id deletes exactly one cluster' '
	in_home "$A" cluster start th
	ok $rc "home A starts th again: $errout"
	IDA=$(uid "$A")
	in_home "$C" cluster stop --discard-results --id 0123456789abcdef0123456789abcdef th
	is "$rc:$(res_list | wc -l)" "3:$ALL" "--id of no cluster'"'"'s id deletes nothing (exit 3)"
	in_home "$A" cluster stop --discard-results --id "$IDB" th
	is "$rc:$(res_list | wc -l)" "2:$ALL" "--id with another id than the store'"'"'s is refused (exit 2)"
	in_home "$C" cluster stop --discard-results --id "$IDB" th
	ok $rc "stop --id B'"'"'s id from the empty home: $errout"
	is "$(holding "$IDB"):$(holding "$IDA")" "0:4" "it deleted exactly B'"'"'s resources"
	is "$(slurm "$A")" "0:node1 idle" "A'"'"'s SLURM still answers"
	in_home "$A" cluster stop --discard-results th
	ok $rc "home A stops th: $errout"
	is "$(res_list | wc -l)" "0" "nothing is left: on Compute Engine the last stop in the region deleted the NAT too"
'
test_done
