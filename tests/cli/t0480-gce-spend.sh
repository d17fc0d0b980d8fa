#!/bin/sh
# t0480-gce-spend.sh - what a cluster costs and its budget on Compute
# Engine (the emulator's node bodies; docs/cost.md): each node's running
# intervals are recorded with its price an hour (prices.hourly: the head
# 3600, the node 7200 an hour, so a second of both costs 3); `cluster show`
# and `list` give the price now and the spend since creation, which equals
# the sum of the intervals; an autostop while pbx is not looking ends the
# intervals at the cloud's own stop time (lastStopTimestamp), and a
# stopped cluster costs nothing more.  Budget: at 80% a verb warns; spent,
# `start` and `parrun` are refused (exit 4, naming the budget); with the
# budget raised, the head powers the cluster off by itself when the rest
# runs out (laptop away), keeping the disks, and records why.  Emulator
# addresses $SLOT_NET.1.0/24 (private) and $SLOT_NET.2.0/24 (public); SLURM
# ports from 16000 + 64*8, below the kernel's ephemeral range.
. "$(dirname "$0")/lib.sh"

stop_at_exit sp
gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24"
mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C t0480 -f "$PBX_HOME/id"
config() {   # config BUDGET-LINE
	cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  sp:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    autostop: 12s
    $1
    head: { machine_type: e2-standard-2 }
    node_groups:
      - { name: node, count: 1, machine_type: e2-standard-4 }
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
  local: { slurm_port_base: $BODY_PORT_BASE }
prices:
  hourly: { e2-standard-2: 3600, e2-standard-4: 7200 }
CONFIG
	chmod 600 "$PBX_HOME/config.yaml"
}
config "budget: off"
export PBX_AUTOSTOP_TICK=1 PBX_BUDGET_MARGIN_S=10
statuses() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted(i["status"] for i in json.load(sys.stdin)["instances"])))'; }
db() { sqlite3 "$PBX_HOME/pbx.db" "$1"; }
show() { "$PBX" cluster show --json sp 2>/dev/null | json_get "$1"; }
# the runs' spend as the store holds them: sum of seconds x price an hour
runs_spend() { db "SELECT printf('%.4f', sum((coalesce(ended, strftime('%s','now')) - started) * nanos / 3600.0 / 1e9)) FROM node_runs"; }
BODIES=$TEST_TMP/emu/bodies

# a budget pbx cannot hold the cluster to (a node with no price, or every
# price 0) is refused at start, before anything is made, saying what to set
config "budget: 5"
sed -i "s/machine_type: e2-standard-4 }/machine_type: n2-custom-4-8192 }/" "$PBX_HOME/config.yaml"
run_pbx -q cluster start sp
is "$rc" 2 "a budget with a node of no price: start refused (exit 2)"
case $errout in *"cluster sp has a budget, and no price to hold it to: node (n2-custom-4-8192): "*"prices.hourly.n2-custom-4-8192"*"or set budget: off"*) r=0 ;; *) r=1 ;; esac
ok $r "saying which price to set: $errout"
config "budget: 5"
sed -i 's/e2-standard-2: 3600, e2-standard-4: 7200/e2-standard-2: 0, e2-standard-4: 0/' "$PBX_HOME/config.yaml"
run_pbx -q cluster start sp
is "$rc" 2 "a budget with every price 0: start refused (exit 2)"
case $errout in *"no price to hold it to: every node's price is 0"*) r=0 ;; *) r=1 ;; esac
ok $r "saying so: $errout"
is "$(emu_get state | json_get 'len(d["instances"])')" 0 "nothing was made"
config "budget: off"

run_pbx -q cluster start sp
ok $rc "the cluster starts: $errout"
is "$(db "SELECT group_concat(node || ':' || (ended IS NULL) || ':' || nanos || ':' || currency, ' ') FROM node_runs ORDER BY node")" \
	"head:1:3600000000000:USD node1:1:7200000000000:USD" "each node has an open run with its price an hour"
is "$(show 'd["hourly"], d["currency"], d["budget"]')" "10800.0 USD None" "show --json: 10800 USD an hour now, no budget"
run_pbx cluster show sp
echo "$out" | grep -q "^cost: 10800.0000 USD/h now; spent [0-9.]* USD since "
ok $? "show says the price now and the spend: $(echo "$out" | grep '^cost')"
run_pbx cluster list
echo "$out" | grep -q "^sp .* 10800.0000 USD  *[0-9.]* USD *$"
ok $? "list has the price an hour and the spend: $out"

# autostop while pbx looks away: the runs end when the cloud says
i=0
while [ "$(statuses)" != "TERMINATED TERMINATED" ] && [ $i -lt 90 ]; do sleep 1; i=$((i + 1)); done
is "$(statuses)" "TERMINATED TERMINATED" "idle for 12 s, both instances stopped themselves"
sleep 3   # pbx learns of it later than it happened
run_pbx cluster list --refresh --json
stopped() { emu_get state | python3 -c 'import json, sys, datetime
for i in json.load(sys.stdin)["instances"]:
    if i["name"].endswith("-" + sys.argv[1]):
        print(int(datetime.datetime.fromisoformat(i["lastStopTimestamp"]).timestamp()))' "$1"; }
is "$(db "SELECT ended FROM node_runs WHERE node = 'head'")" "$(stopped head)" \
	"the head's run ends at the cloud's lastStopTimestamp, not when pbx learnt it"
is "$(db "SELECT ended FROM node_runs WHERE node = 'node1'")" "$(stopped node1)" \
	"the node's run ends at its own lastStopTimestamp"
is "$(db "SELECT count(*) FROM node_runs WHERE ended IS NULL")" "0" "no run is open"
spent=$(show 'd["spent"]')
is "$(printf '%.4f' "$spent")" "$(runs_spend)" "the spend is the sum of the runs: $spent"
sleep 2
is "$(show 'd["spent"]'):$(show 'd["hourly"]')" "$spent:0.0" "a stopped cluster costs nothing more"

# budget: 80% warns, 100% refuses start and parrun
config "budget: $(python3 -c "print(round($spent / 0.85, 4))")"
run_pbx cluster show sp
case $errout in *"warning: cluster sp has spent "*" of its budget "*" USD (8"*"%)"*) r=0 ;; *) r=1 ;; esac
ok $r "at 85% of the budget a verb warns: $errout"
case $errout in *"refused"*) r=1 ;; *) r=0 ;; esac
ok $r "and refuses nothing yet"
config "budget: $(python3 -c "print(round($spent * 0.75, 4))")"
run_pbx cluster start sp
is "$rc" "4" "a start over budget is refused (exit 4)"
case $errout in *"start refused: cluster sp has spent "*" of its budget "*"raise budget:"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the budget: $errout"
is "$(statuses)" "TERMINATED TERMINATED" "nothing was started"
mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/e.yaml" <<'EXP'
name: e
command: "echo {x}"
sweep: { grid: { x: [1, 2] } }
EXP
run_pbx parrun "$TEST_TMP/exp/e.yaml" sp
is "$rc" "4" "a parrun over budget is refused (exit 4)"
case $errout in *"parrun refused: cluster sp has spent "*"budget"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the budget: $errout"
is "$(db "SELECT count(*) FROM submissions")" "0" "nothing was submitted or recorded"

# raised by 60 (20 s of both nodes): the head stops the cluster by itself,
# beginning PBX_BUDGET_MARGIN_S before the budget runs out
budget=$(python3 -c "print(round($spent + 60, 4))")
config "budget: $budget"
run_pbx cluster price sp
echo "$out" | grep -q "^  budget $(printf '%.2f' "$budget") USD: $(printf '%.4f' "$spent") spent, about 0.0 h of this cluster left$"
ok $? "cluster price says the budget, the spend and the hours left: $(echo "$out" | tail -n 1)"
run_pbx cluster price --json sp
is "$(echo "$out" | json_get 'd["budget"], d["spent"]')" "$budget $spent" "price --json: budget and spent"
run_pbx -q cluster start sp --autostop off
ok $rc "with the budget raised the cluster starts again (autostop off): $errout"
is "$(statuses)" "RUNNING RUNNING" "both instances run"
i=0
while [ "$(statuses)" != "TERMINATED TERMINATED" ] && [ $i -lt 90 ]; do sleep 1; i=$((i + 1)); done
is "$(statuses)" "TERMINATED TERMINATED" "the head powered the cluster off when the budget ran out (${i} s)"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
is "$(find "$BODIES" -name slurm.conf -path '*/etc/slurm/*' | grep -c .)" 2 "both bodies' disks are kept"
run_pbx cluster show sp
echo "$out" | grep -q "last: stopped itself at .*budget spent"
ok $? "the head recorded why: $(echo "$out" | grep 'autostop:')"
is "$(db "SELECT count(*) FROM node_runs WHERE ended IS NULL")" "0" "no run is open"
spent=$(show 'd["spent"]')
is "$(printf '%.4f' "$spent")" "$(runs_spend)" "the spend is still the sum of the runs: $spent"
python3 -c "import sys; sys.exit(not $spent <= $budget)"
ok $? "and it stayed within the budget: $spent of $budget"

run_pbx -q cluster stop --discard-results sp
ok $rc "stop: $errout"
is "$(emu_get state | json_get 'len(d["instances"]), len(d["firewalls"])')" "0 0" \
	"no instance and no firewall rule is left"
done_testing
