#!/bin/sh
# t0485-aws-spend.sh - what a cluster costs and its budget on EC2 (moto
# with the harness's lifecycle, node bodies for the instances;
# docs/cost.md), as t0480 on Compute Engine: each node's running intervals
# are recorded with its price an hour (prices.hourly: the head m5.large
# 3600, the node t3.large 7200 an hour, so a second of both costs 3);
# `cluster show` and `list` give the price now and the spend, which equals
# the sum of the intervals; an autostop while pbx is not looking (EC2
# `stopped` by the guests' own shutdown) ends the intervals at the time in
# EC2's state-transition reason ("User initiated (YYYY-MM-DD HH:MM:SS
# UTC)"), and a stopped cluster costs nothing more.  Budget: at 80% a verb
# warns; spent, `start` and `parrun` are refused (exit 4, naming the
# budget) and nothing is started; with the budget raised, the head powers
# the cluster off by itself when the rest runs out (both instances
# `stopped`, disks kept), records why, and the spend stays within the
# budget; `stop` leaves nothing.  Subnets 127.0.109.0/24 and
# 127.0.110.0/24; SLURM ports from 10000 + 64*8 (clear of bootstrap.direct's 18500-18519), below the kernel's
# ephemeral range.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=127.0.109.0/24 H_SUBNET2=127.0.110.0/24 H_SLURM_PORT_BASE=10000 H_CLUSTERS=sp
. "$(dirname "$0")/aws_lib.sh"

h_start
AMI=$(json_get 'd["ami"]' <"$TEST_TMP/env.json")
config() {   # config BUDGET-LINE
	cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  sp:
    cloud: aws
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: $AMI
    autostop: 12s
    $1
    head: { machine_type: m5.large }
    node_groups:
      - { name: cpu, count: 1, machine_type: t3.large }
clouds:
  aws: { region: us-east-1, endpoint: "$URL", subnet: $SUB1 }
  local: { slurm_port_base: 10000 }
prices:
  hourly: { m5.large: 3600, t3.large: 7200 }
CONFIG
	chmod 600 "$PBX_HOME/config.yaml"
}
config "budget: off"
export PBX_AUTOSTOP_TICK=1 PBX_BUDGET_MARGIN_S=20
BODIES=$TEST_TMP/h/bodies
# The cluster's instances as ROLE:STATE, sorted.
states() {
	h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["sp"]}])["Reservations"]:
    for i in r["Instances"]:
        tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
        out.append("%s:%s" % (tags.get("pbx-role", "?"), i["State"]["Name"]))
print(" ".join(sorted(out)))
PY
}
# ROLE's stop time as EC2 says it (StateTransitionReason "User initiated
# (YYYY-MM-DD HH:MM:SS UTC)"), in unix seconds.
stopped_at() {
	h_py "$1" <<'PY'
import calendar, re, time
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["sp"]},
                                       {"Name": "tag:pbx-role", "Values": [sys.argv[1]]}])["Reservations"]:
    for i in r["Instances"]:
        m = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (UTC|GMT)\)", i.get("StateTransitionReason", ""))
        print(calendar.timegm(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) if m else "-")
PY
}
db() { sqlite3 "$PBX_HOME/pbx.db" "$1"; }
show() { "$PBX" cluster show --json sp 2>/dev/null | json_get "$1"; }
# the runs' spend as the store holds them: sum of seconds x price an hour
runs_spend() { db "SELECT printf('%.4f', sum((coalesce(ended, strftime('%s','now')) - started) * nanos / 3600.0 / 1e9)) FROM node_runs"; }

t0=$(date +%s)
run_pbx -q cluster start sp
ok $rc "the cluster starts ($(($(date +%s) - t0)) s): $errout"
is "$(states)" "cpu:running head:running" "two instances run"
is "$(db "SELECT group_concat(node || ':' || (ended IS NULL) || ':' || nanos || ':' || currency, ' ') FROM (SELECT * FROM node_runs ORDER BY node)")" \
	"cpu1:1:7200000000000:USD head:1:3600000000000:USD" "each node has an open run with its price an hour"
is "$(show 'd["hourly"], d["currency"], d["budget"]')" "10800.0 USD None" "show --json: 10800 USD an hour now (the sum), no budget"
run_pbx cluster show sp
echo "$out" | grep -q "^cost: 10800.0000 USD/h now; spent [0-9.]* USD since "
ok $? "show says the price now and the spend: $(echo "$out" | grep '^cost')"
run_pbx cluster list
echo "$out" | grep -q "^sp .* 10800.0000 USD  *[0-9.]* USD *$"
ok $? "list has the price an hour and the spend: $out"
HEAD_ID=$("$PBX" cluster show --json sp 2>/dev/null | json_get '[n["instance_id"] for n in d["nodes"] if n["role"] == "head"][0]')
# a body's root: bodies.py's Bodies.root of ec2_harness.py's Inst (named by the id's last 12)
HEAD_ROOT=$BODIES/aws/n/$(printf %s "$HEAD_ID" | tail -c 12 | sha1sum | cut -c1-10)
ok $([ -d "$HEAD_ROOT" ]; echo $?) "the head's body is $HEAD_ROOT"

# autostop while pbx looks away: the runs end when EC2 says
t0=$(date +%s)
wait_for 900 prints "cpu:stopped head:stopped" states
is "$(states)" "cpu:stopped head:stopped" "idle for 12 s, both instances stopped themselves ($(($(date +%s) - t0)) s)"
sleep 3   # pbx learns of it later than it happened
run_pbx cluster list --refresh --json
is "$(echo "$out" | json_get '[c["state"] for c in d if c["name"] == "sp"][0]')" "stopped" "cluster list --refresh: stopped"
head_at=$(stopped_at head)
cpu_at=$(stopped_at cpu)
is "$(db "SELECT ended FROM node_runs WHERE node = 'head'")" "$head_at" \
	"the head's run ends at the time in EC2's reason, not when pbx learnt it"
cpu_end=$(db "SELECT ended FROM node_runs WHERE node = 'cpu1'")
is "$cpu_end" "$cpu_at" "the node's run ends at its own stop time in EC2's reason (the head's: $head_at)"
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
starts=$(calls calls StartInstances)
runs=$(calls calls RunInstances)
run_pbx cluster start sp
is "$rc" "4" "a start over budget is refused (exit 4)"
case $errout in *"start refused: cluster sp has spent "*" of its budget "*"raise budget:"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the budget: $errout"
is "$(states):$(( $(calls calls StartInstances) - starts )):$(( $(calls calls RunInstances) - runs ))" \
	"cpu:stopped head:stopped:0:0" "nothing was started (no StartInstances, no RunInstances)"
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
is "$(show 'd["spent"]')" "$spent" "the spend did not change while stopped"

# raised by 120 (40 s of both nodes): the head stops the cluster by itself,
# beginning PBX_BUDGET_MARGIN_S (20 s) before the budget runs out
before=$spent
budget=$(python3 -c "print(round($spent + 120, 4))")
config "budget: $budget"
t0=$(date +%s)
run_pbx -q cluster start sp --autostop off
ok $rc "with the budget raised the cluster starts again, autostop off ($(($(date +%s) - t0)) s): $errout"
is "$(states)" "cpu:running head:running" "both instances run"
wait_for 900 prints "cpu:stopped head:stopped" states
is "$(states)" "cpu:stopped head:stopped" "the head powered the cluster off when the budget ran out ($(($(date +%s) - t0)) s after the start began)"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
grep -q "^reason=budget spent" "$HEAD_ROOT/var/lib/pbx/autostop.last"
ok $? "the head's disk is kept, with its record of why"
run_pbx cluster show sp
echo "$out" | grep -q "last: stopped itself at .*budget spent"
ok $? "the head recorded why: $(echo "$out" | grep 'autostop:')"
is "$(db "SELECT ended FROM node_runs WHERE node = 'head' ORDER BY id DESC LIMIT 1")" "$(stopped_at head)" \
	"the head's run ends at the time in EC2's reason"
is "$(db "SELECT count(*) FROM node_runs WHERE ended IS NULL"):$(db "SELECT count(*) FROM node_runs")" "0:4" \
	"no run is open; each node ran twice"
is "$(show 'd["budget"]')" "$budget" "show --json has the budget"
spent=$(show 'd["spent"]')
is "$(printf '%.4f' "$spent")" "$(runs_spend)" "the spend is still the sum of the runs: $spent"
python3 -c "import sys; sys.exit(not $spent <= $budget)"
ok $? "and it stayed within the budget: $spent of $budget"
python3 -c "import sys; sys.exit(not $spent >= $before + 60)"
ok $? "the head waited for its time (20 s of both nodes at least): $before before the start"

run_pbx -q cluster stop --discard-results sp
ok $rc "stop: $errout"
is "$(holds)" "0 0 0" "no instance, security group or key pair is left"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
done_testing
