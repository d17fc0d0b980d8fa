#!/bin/sh
# t0462-gce-power-zone.sh - a resume on Compute Engine that meets a stockout
# (issue 19, section 2: "tries the next zone"; docs/power-saving.md): the
# cluster's zones are us-central1-a (the head's) and us-central1-b; with
# us-central1-a out of capacity, the head's resume of node1 gets
# ZONE_RESOURCE_POOL_EXHAUSTED there and makes node1 in us-central1-b.
# Zonal DNS does not answer node1's bare name from another zone (the
# emulator is as strict), so the head's pbx has written it into the block
# of every node's /etc/hosts, and the job runs on node1.  Once it sleeps, a
# resume with capacity back makes it in us-central1-a again, and a job runs.  The user's
# stop leaves nothing.  Emulator addresses $SLOT_NET.1.0/24 (private) and
# $SLOT_NET.2.0/24 (public); SLURM ports from BODY_PORT_BASE + 64*8.
. "$(dirname "$0")/lib.sh"

CLOUD=gce
cloud_power_cluster pz "{ name: node, count: 1, min: 0, machine_type: e2-standard-2, cpus: 2 }" \
	"{ suspend_time: 1h, resume_timeout: 240s }"
sed -i 's/zone: us-central1-a, /zone: us-central1-a, zones: [us-central1-a, us-central1-b], /' "$PBX_HOME/config.yaml"
# NAME=ZONE of each instance, sorted.
zones() { emu_get state | json_get '" ".join(sorted("%s=%s" % (i["name"].rsplit("-", 1)[-1], i["zone"].rsplit("/", 1)[-1]) for i in d["instances"]))'; }
hosts_block() { sed -n '/^# pbx: nodes of cluster pz that sleep (begin)$/,/(end)$/p' "$1" | grep -v '^#'; }

run_pbx -q cluster start pz
ok $rc "a cluster with min: 0 in zones a and b starts: $errout"
is "$(zones)" "head=us-central1-a" "the head is in us-central1-a"
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
head_root=${pbx_head%/usr/local/sbin/pbx-head}
iname=$(emu_get state | json_get 'd["instances"][0]["name"]')
iname=${iname%-head}

bulk() { grep -c "POST /compute/v1/projects/pbx-test/zones/$1/instances/bulkInsert" "$TEST_TMP/emu.log"; }
a0=$(bulk us-central1-a)
emu_post faults '{"stockout": ["us-central1-a"]}' >/dev/null
run_pbx cluster exec pz -- srun -N1 -w node1 -c2 hostname
ok $rc "a job wakes node1 while us-central1-a is out of capacity: $errout"
[ $rc = 0 ] || find "$BODIES" -path '*/var/log/pbx-power.log' -exec tail -20 {} + | sed 's/^/#   /'
is "$(zones)" "head=us-central1-a node1=us-central1-b" "node1 was made in the next zone"
is "$(( $(bulk us-central1-a) - a0 )) $(bulk us-central1-b)" "1 1" "one bulkInsert in us-central1-a (the stockout), then one in us-central1-b"
run_pbx cluster exec pz -- getent hosts "$iname-node1"
node1_ip=$(emu_get state | json_get '[i["networkIP"] for i in d["instances"] if i["name"].endswith("-node1")][0]')
is "$(echo "$out" | awk '{print $1}')" "$node1_ip" "the head resolves node1's bare name, which zonal DNS does not answer from us-central1-a"
is "$(hosts_block "$head_root/etc/hosts")" "$node1_ip $iname-node1" "through the block the head's pbx wrote"

"$pbx_head" -q cluster power pz suspend node1 >"$TEST_TMP/k.out" 2>&1
ok $? "node1 sleeps: $(cat "$TEST_TMP/k.out")"
emu_post faults '{"stockout": []}' >/dev/null
"$pbx_head" -q cluster power pz resume node1 >"$TEST_TMP/k.out" 2>&1
ok $? "with capacity back node1 wakes again: $(cat "$TEST_TMP/k.out")"
is "$(zones)" "head=us-central1-a node1=us-central1-a" "in the first zone"
run_pbx cluster exec pz -- srun -N1 -w node1 -c2 hostname
ok $rc "and runs a job, found at its new address: $errout"

run_pbx cluster stop --discard-results pz
ok $rc "the user's stop: $errout"
is "$(emu_get state | json_get 'len(d["instances"]), len(d["firewalls"]), len(d["routers"])')" "0 0 0" \
	"no instance, firewall rule or router is left"
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
done_testing
