#!/bin/sh
# t0467-gce-power-spend.sh - the user's spend of a power-saving cluster on
# Compute Engine counts the nodes its head makes exactly (docs/cost.md,
# "Spend"; the emulator's node bodies): a job wakes node1 and the head
# deletes it after suspend_time with no verb of the user's pbx looking
# (the laptop off for the night); `cluster show` then takes the head's
# runs (`pbx cluster runs` on the head, one SSH exec) into the user's
# store, so node1's run begins and ends when its instance was made and
# deleted as the emulator says (within 2 s), priced from the user's price
# cache, and the node-hours count it.  A second show changes nothing.  A
# run the user's own view opened (exec -n) is replaced by the head's,
# never counted twice; a node up now has one open run.  A hostile reply is
# refused whole, with one warning, and no run changes; `cluster price`
# does not ask the head.  `state` a while after the head deleted node2
# ends its run at the deletion, not when it looked.  Addresses: the
# slot's $SLOT_NET.1.0/24 (private) and $SLOT_NET.2.0/24 (public); SLURM
# ports from BODY_PORT_BASE + 64*8.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
cloud_power_cluster ps "{ name: node, count: 2, min: 0, machine_type: e2-standard-2, cpus: 2 }" \
	"{ suspend_time: 20s, resume_timeout: 240s }"
cat >>"$PBX_HOME/config.yaml" <<'CONFIG'
prices:
  hourly: { e2-standard-4: 3600, e2-standard-2: 7200 }
CONFIG
instances() { emu_instances; }
db() { sqlite3 "$PBX_HOME/pbx.db" "$1"; }
power_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null | tail -20 | sed 's/^/#   /'; }
# runs NODE: "STARTED-ENDED:PRICE" of each of NODE's runs in the user's
# store (ENDED empty while open)
runs() { db "SELECT group_concat(started || '-' || coalesce(ended, '') || ':' || coalesce(nanos, '?'), ' ') FROM (SELECT * FROM node_runs WHERE node = '$1' ORDER BY started)"; }
# list_calls: the user's pbx's instance lists (its request log)
list_calls() { db "SELECT count(*) FROM events WHERE kind = 'http' AND detail LIKE '%GET %/aggregated/instances?%'"; }
# emu_deleted NODE: when the last deletion of NODE's instance ended (unix
# s), from the zone's operations (the emulator's API, with a token)
emu_deleted() {
	python3 - "$PORT" "$1" <<'PY'
import datetime, json, sys, urllib.request
base, node = "http://127.0.0.1:%s" % sys.argv[1], sys.argv[2]
req = urllib.request.Request(base + "/_emulator/token", data=b"{}", headers={"Content-Type": "application/json"})
auth = {"Authorization": "Bearer " + json.load(urllib.request.urlopen(req))["access_token"]}
url, page, ends = base + "/compute/v1/projects/pbx-test/zones/us-central1-a/operations", "", []
while True:
    r = json.load(urllib.request.urlopen(urllib.request.Request(url + page, headers=auth)))
    ends += [datetime.datetime.fromisoformat(o["endTime"]).timestamp() for o in r.get("items", [])
             if o["operationType"] == "delete" and o["targetLink"].endswith("-" + node) and o.get("endTime")]
    if not r.get("nextPageToken"):
        break
    page = "?pageToken=" + r["nextPageToken"]
print("%.3f" % max(ends) if ends else "")
PY
}
show() { "$PBX" cluster show --json ps 2>"$TEST_TMP/show.err" | json_get "$1"; }
running() { case $(instances) in *"$1=RUNNING"*) return 0 ;; esac; return 1; }
gone() { case $(instances) in *"$1="*) return 1 ;; esac; return 0; }

run_pbx -q cluster start ps
ok $rc "a Compute Engine cluster with min: 0 starts: $errout"
is "$(instances)" "head=RUNNING" "only the head's instance is made"
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)

# a job wakes node1; nothing of the user's pbx looks while it runs and
# after the head deletes it (exec on the head lists nothing)
calls0=$(list_calls)
run_pbx cluster exec ps -- sbatch -w node1 -c2 --wrap 'sleep 2'
ok $rc "a job for node1 is submitted on the head: $errout"
wait_for 2400 running node1
ok $? "the head made node1's instance: $(instances)"
made1=$(emu_created node1)
wait_for 2400 gone node1
ok $? "after 20 s idle the head deleted it: $(instances)"
gone node1 || power_log
deleted1=$(emu_deleted node1)
is "$(( $(list_calls) - calls0 ))" 0 "no verb of the user's pbx listed the instances meanwhile"
is "$(runs node1)" "" "the user's store has no run of node1"
is "$("$pbx_head" cluster runs ps | json_get '" ".join(r["node"] + ":" + str(r["ended"] is not None) for r in d["runs"])')" \
	"node1:True" "the head's store has node1's run, ended (and no run of the head)"

# show takes the head's runs: node1's run is its instance's life
t_show=$(date +%s)
hours0=$(show 'd["node_hours"]')
ok $? "show --json works: $(cat "$TEST_TMP/show.err")"
r1=$(runs node1)
s1=${r1%%-*} e1=${r1#*-} e1=${e1%%:*}
near "$s1" "$made1" && near "$e1" "$deleted1"
ok $? "node1's run is from its instance's creation to its deletion: $r1 (emulator: $made1 to $deleted1)"
is "${r1##*:}" "7200000000000" "  priced from the user's cache (e2-standard-2: 7200 an hour)"
# node-seconds: the head's run so far and node1's instance's life
head_s=$(db "SELECT sum(coalesce(ended, $t_show) - started) FROM node_runs WHERE node = 'head'")
want=$(python3 -c "print($head_s + $deleted1 - $made1)")
got=$(python3 -c "print($hours0 * 3600)")
near "$got" "$want"
ok $? "show's node_hours count node1's run beside the head's: $got s, $want s from the emulator"
is "$(cat "$TEST_TMP/show.err")" "" "  with no warning"
events=$(db "SELECT count(*) FROM events WHERE kind = 'spend.head'")
show 'd["spent"]' >/dev/null
is "$(runs node1)" "$r1" "a second show changes nothing"
is "$(db "SELECT count(*) FROM events WHERE kind = 'spend.head'")" "$events" "  and records no change"

# node2 up now (a package's task): the user's view opens a run (exec -n
# learns it up), which the head's run, open, replaces: one run from its
# instance's creation
mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/e.yaml" <<'EXP'
name: spend
command: "sleep 25"
EXP
run_pbx parrun "$TEST_TMP/exp/e.yaml" ps --cpus-per-task=2 --nodelist=node2
ok $rc "a task for node2 is submitted: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_for 2400 running node2
ok $? "the head made node2's instance: $(instances)"
made2=$(emu_created node2)
run_pbx cluster exec -n node2 ps -- true
ok $rc "exec -n node2 reaches it: $errout"
is "$(runs node2 | grep -c -- '-:')" "1" "the user's view opened a run of node2: $(runs node2)"
show 'd["hourly"]' >/dev/null
r2=$(runs node2)
case $r2 in *" "*) r=1 ;; *-:7200000000000) near "${r2%%-*}" "$made2"; r=$? ;; *) r=1 ;; esac
ok $r "after show, node2 has one run, open, from its instance's creation: $r2 (emulator: $made2)"
is "$(runs node1)" "$r1" "  node1's stays"

# a hostile head: its reply refused whole, once, and the store's runs stay
cp "$pbx_head" "$TEST_TMP/pbx-head.real"
hostile() {
	cat >"$pbx_head" <<EOF
#!/bin/sh
case "\$*" in *"cluster runs"*) printf '%s\n' '$1'; exit 0 ;; esac
exec sh "$TEST_TMP/pbx-head.real" "\$@"
EOF
}
uid=$(db "SELECT uid FROM clusters WHERE name = 'ps'")
before=$(db "SELECT group_concat(node || started || '-' || coalesce(ended, ''), ' ') FROM node_runs")
for reply in \
	'{"version":1,"cluster":"ps","id":"'"$uid"'","runs":[{"node":"head","started":1,"ended":null}]}' \
	'{"version":1,"cluster":"ps","id":"'"$uid"'","runs":[{"node":"node1","started":9999999999,"ended":null}]}' \
	'{"version":1,"cluster":"ps","id":"'"$uid"'","runs":[{"node":"node1","started":1,"ended":2,"x":1}]}' \
	'{"version":1,"cluster":"ps","id":"0","runs":[]}' 'not json'; do
	hostile "$reply"
	run_pbx cluster show --json ps
	n=$(printf '%s\n' "$errout" | grep -c "warning: cluster ps: the head's node runs")
	is "$rc:$n" "0:1" "show works with a hostile reply, one warning: $errout"
done
is "$(db "SELECT group_concat(node || started || '-' || coalesce(ended, ''), ' ') FROM node_runs")" "$before" \
	"  and no run changed"
cp "$TEST_TMP/pbx-head.real" "$pbx_head"

# cluster price never asks the head
cat >"$pbx_head" <<EOF
#!/bin/sh
echo asked >>"$TEST_TMP/asked"
exec sh "$TEST_TMP/pbx-head.real" "\$@"
EOF
run_pbx cluster price ps
ok $rc "cluster price: $errout"
[ ! -e "$TEST_TMP/asked" ]
ok $? "  does not run the head's pbx"
cp "$TEST_TMP/pbx-head.real" "$pbx_head"

# state (which reaches the head) a while after the head deleted node2
wait_for 3000 gone node2
ok $? "the head deleted node2 after its task: $(instances)"
deleted2=$(emu_deleted node2)
sleep 5
run_pbx state "$pkg"
ok $rc "state: $errout"
r2=$(runs node2)
e2=${r2#*-} e2=${e2%%:*}
near "$e2" "$deleted2"
ok $? "state ends node2's run at its instance's deletion, not when it learnt it: $r2 (emulator: $deleted2)"

run_pbx cluster stop --discard-results ps
ok $rc "the user's stop: $errout"
is "$(emu_get state | json_get 'len(d["instances"])')" "0" "no instance is left"
done_testing
