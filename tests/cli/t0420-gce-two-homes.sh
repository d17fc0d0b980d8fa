#!/bin/sh
# t0420-gce-two-homes.sh - two pbx homes (two users) of one Compute Engine
# project both start a cluster called `gpu` (head + 1 node) against the
# emulator: each gets its own cluster id, instances, firewall rules and
# network tags; a stop from a third, empty home deletes nothing and lists
# both clusters' resources with their ids; `stop --id ID` from there
# deletes exactly one; each home's stop leaves the other's cluster whole
# and working (its instances running, its rules there, SLURM answering);
# both share the one Cloud NAT of the region, which the last stop deletes.
# Emulator addresses $SLOT_NET.1.0/24 (private) and $SLOT_NET.2.0/24 (public);
# SLURM ports from BODY_PORT_BASE + 64*8 (home A; B +64, C +128), below
# the kernel's ephemeral range (32768-60999): slurmctld listens on every
# address, so a port any program got from the kernel would be taken.
. "$(dirname "$0")/lib.sh"

A="$TEST_TMP/a" B="$TEST_TMP/b" C="$TEST_TMP/c"
stop_at_exit "$A:gpu" "$B:gpu"
mkdir -p "$A" "$B" "$C"

# One service account (one project), used by every home.
gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24"

# home DIR SLURM_PORT_BASE: its own login key and config (template gpu)
home() {
	ssh-keygen -q -t ed25519 -N "" -C "$(basename "$1")" -f "$1/id"
	cat >"$1/config.yaml" <<CONFIG
clusters:
  gpu:
    cloud: gce
    login_user: pbx
    ssh_key: $1/id
    image: projects/debian-cloud/global/images/family/debian-12
    node_groups:
      - { name: node, count: 1, machine_type: e2-standard-4 }
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
  local: { slurm_port_base: $2 }
CONFIG
	chmod 600 "$1/config.yaml"
}
home "$A" "$BODY_PORT_BASE"
home "$B" "$((BODY_PORT_BASE + 64))"
home "$C" "$((BODY_PORT_BASE + 128))"
# What the emulator holds: one line per resource, "KIND NAME ID" (instances
# by their pbx-cluster-id label, rules by the id their description ends in)
emu_list() {
	python3 -c 'import json, sys, urllib.request
d = json.load(urllib.request.urlopen("http://127.0.0.1:%s/_emulator/state" % sys.argv[1]))
for i in d["instances"]:
    print("instance", i["name"], i.get("status"), i["labels"].get("pbx-cluster-id"))
for f in d["firewalls"]:
    print("firewall", f["name"], "-", f.get("description", "").rsplit("=", 1)[-1])
for r in d["routers"]:
    print("router", r["name"], r["region"].rsplit("/", 1)[-1], "shared")' "$PORT" | sort
}
holding() { emu_list | grep -c " $1\$"; }   # resources carrying id $1
uid() { sqlite3 "$1/pbx.db" "SELECT uid FROM clusters WHERE name = 'gpu' AND state != 'deleted'"; }
# sinfo of home $1's cluster, through pbx cluster exec (SLURM answering)
slurm() { in_home "$1" cluster exec gpu -- sinfo -h -N -o '%N %t'; echo "$rc:$out"; }

# ------------------------------------------------- two clusters, one name
in_home "$A" cluster start gpu
ok $rc "home A starts gpu: $errout"
in_home "$B" cluster start gpu
ok $rc "home B starts gpu in the same project: $errout"
IDA=$(uid "$A") IDB=$(uid "$B")
echo "$IDA $IDB" | grep -Eq '^[0-9a-f]{32} [0-9a-f]{32}$' && [ "$IDA" != "$IDB" ]
ok $? "each home recorded its own 128-bit cluster id ($IDA, $IDB)"
PA=$(echo "$IDA" | cut -c1-12) PB=$(echo "$IDB" | cut -c1-12)
is "$(emu_list | grep " $IDA\$" | cut -d' ' -f1,2 | tr '\n' ' ')" \
	"firewall pbx-gpu-$PA-internal firewall pbx-gpu-$PA-ssh instance gpu-$PA-head instance gpu-$PA-node1 " \
	"A's instances and rules carry its id (label, description) and its prefix in their names"
is "$(holding "$IDB")" "4" "B has its own 2 instances and 2 rules"
is "$(emu_list | wc -l)" "9" "nothing else is there but one router"
is "$(emu_list | grep '^router' | cut -d' ' -f1-3)" "router pbx-nat-default us-central1" \
	"both clusters' compute nodes go out through one Cloud NAT (one NAT per network and region)"
in_home "$A" cluster list --json
is "$(echo "$out" | json_get 'd[0]["id"]')" "$IDA" "cluster list --json shows the id"
in_home "$A" cluster show gpu
echo "$out" | grep -q "^cluster gpu (gce, id $IDA): up"
ok $? "cluster show shows the id: $out"

# -------------------------------------------- a stop from an empty store
in_home "$C" cluster stop --discard-results gpu
is "$rc" "3" "a stop from a home that does not know gpu fails (exit 3)"
echo "$errout" | grep -q "nothing was deleted.*pbx cluster stop --id ID gpu"
ok $? "saying nothing was deleted and how to delete: $errout"
is "$(echo "$out" | grep -c " $IDA\$"):$(echo "$out" | grep -c " $IDB\$")" "4:4" \
	"it lists both clusters' instances and rules with their ids"
is "$(emu_list | wc -l)" "9" "and deletes nothing"
in_home "$C" cluster stop --discard-results --dry-run gpu
is "$rc:$(echo "$out" | grep -vc '^GET ')" "0:0" "its dry run sends GETs only"

# ------------------------------------ each stop leaves the other whole
in_home "$B" cluster stop --discard-results gpu
ok $rc "home B stops its gpu: $errout"
is "$(holding "$IDB"):$(holding "$IDA")" "0:4" "B's resources are gone, A's all there"
is "$(emu_list | grep -c " RUNNING $IDA\$")" "2" "A's instances are running"
is "$(slurm "$A")" "0:node1 idle" "A's SLURM still answers, its node idle"
is "$(emu_list | grep -c '^router pbx-nat-default ')" "1" "the NAT stays: A's nodes still use it"

in_home "$B" cluster start gpu
ok $rc "home B starts gpu again: $errout"
IDB=$(uid "$B")
in_home "$A" cluster stop --discard-results gpu
ok $rc "home A stops its gpu: $errout"
is "$(holding "$IDA"):$(holding "$IDB")" "0:4" "A's resources are gone, B's all there"
is "$(slurm "$B")" "0:node1 idle" "B's SLURM still answers, its node idle"
is "$(emu_list | grep -c '^router pbx-nat-default ')" "1" "the NAT stays: B's nodes still use it"

# ------------------------------------------- --id deletes exactly one
in_home "$A" cluster start gpu
ok $rc "home A starts gpu again: $errout"
IDA=$(uid "$A")
in_home "$C" cluster stop --discard-results --id 0123456789abcdef0123456789abcdef gpu
is "$rc:$(emu_list | wc -l)" "3:9" "--id of no cluster's id deletes nothing (exit 3)"
in_home "$A" cluster stop --discard-results --id "$IDB" gpu
is "$rc:$(emu_list | wc -l)" "2:9" "--id with another id than the store's is refused (exit 2)"
in_home "$C" cluster stop --discard-results --id "$IDB" gpu
ok $rc "stop --id B's id from the empty home: $errout"
is "$(holding "$IDB"):$(holding "$IDA")" "0:4" "it deleted exactly B's resources"
is "$(slurm "$A")" "0:node1 idle" "A's SLURM still answers"
in_home "$A" cluster stop --discard-results gpu
ok $rc "home A stops gpu: $errout"
is "$(emu_list | wc -l)" "0" "the project is empty: the last stop in the region deleted the NAT too"
done_testing
