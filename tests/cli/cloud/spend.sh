# cloud/spend.sh - one body for t0480 (CLOUD=gce) and t0485 (CLOUD=aws),
# sourced after lib.sh: what a cluster costs and its budget
# (docs/cost.md) on the emulators' node bodies.  Each node's running
# intervals are recorded with its price an hour (prices.hourly: the head
# 3600, the node 7200 an hour, so a second of both costs 3); `cluster
# show` and `list` give the price now and the spend since creation, which
# equals the sum of the intervals; an autostop while pbx is not looking
# ends the intervals at the cloud's own stop time (Compute Engine's
# lastStopTimestamp; EC2's state-transition reason, "User initiated
# (YYYY-MM-DD HH:MM:SS UTC)"), and a stopped cluster costs nothing more.
# Budget: one pbx cannot hold the cluster to (a node with no price, every
# price 0) is refused at start; at 80% a verb warns; spent, `start` and
# `parrun` are refused (exit 4, naming the budget) and nothing is started;
# with the budget raised, the head powers the cluster off by itself when
# the rest runs out (laptop away), keeping the disks, records why, and the
# spend stays within the budget; `stop` leaves nothing.  Addresses: the
# slot's $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24; SLURM ports from
# BODY_PORT_BASE + 64*8, below the kernel's ephemeral range.
# shellcheck disable=SC2154 # rc, out, errout: run_pbx's; the rest set in the steps
stop_at_exit sp
cloud_emulator
case $CLOUD in
gce)
	HEAD_TYPE=e2-standard-2 NODE_TYPE=e2-standard-4 UNPRICED=n2-custom-4-8192
	UP=RUNNING OFF=TERMINATED
	# states: NODE:STATE of the cluster's instances, sorted
	states() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted("%s:%s" % (i["name"].rsplit("-", 1)[-1], i["status"]) for i in json.load(sys.stdin)["instances"])))'; }
	# stopped_at NODE: its stop time as the cloud says it (unix s)
	stopped_at() {
		emu_get state | python3 -c 'import json, sys, datetime
for i in json.load(sys.stdin)["instances"]:
    if i["name"].endswith("-" + sys.argv[1]):
        print(int(datetime.datetime.fromisoformat(i["lastStopTimestamp"]).timestamp()))' "$1"
	}
	made() { emu_get state | json_get 'len(d["instances"])'; }
	calls_made() { :; }
	started_nothing() { is "$(states)" "head:$OFF node1:$OFF" "nothing was started"; }
	left() { emu_get state | json_get 'len(d["instances"]), len(d["firewalls"])'; }
	NOTHING="0 0" LEFT="instance or firewall rule"
	;;
aws)
	HEAD_TYPE=m5.large NODE_TYPE=t3.large UNPRICED=t3.nano
	UP=running OFF=stopped
	states() {
		h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["sp"]}])["Reservations"]:
    for i in r["Instances"]:
        out.append("%s:%s" % (node_of(i), i["State"]["Name"]))
print(" ".join(sorted(out)))
PY
	}
	stopped_at() {
		h_py "$1" <<'PY'
import calendar, re, time
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["sp"]}])["Reservations"]:
    for i in r["Instances"]:
        if node_of(i) != sys.argv[1]:
            continue
        m = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (UTC|GMT)\)", i.get("StateTransitionReason", ""))
        print(calendar.timegm(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) if m else "-")
PY
	}
	made() { holds | cut -d' ' -f1; }
	calls_made() { echo "$(calls calls StartInstances) $(calls calls RunInstances)"; }
	started_nothing() {
		is "$(states):$(calls_made)" "head:$OFF node1:$OFF:$before_calls" \
			"nothing was started (no StartInstances, no RunInstances)"
	}
	left() { holds; }
	NOTHING="0 0 0" LEFT="instance, security group or key pair"
	;;
esac
# config BUDGET-LINE [NODE-TYPE [HEAD-PRICE NODE-PRICE]]: the template sp
# (its node of NODE-TYPE, else NODE_TYPE) and the prices of HEAD_TYPE and
# NODE_TYPE (3600 and 7200 unless given)
config() {
	cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(cloud_template sp "$PBX_HOME/id" \
		"autostop: 12s" "$1" "head: { machine_type: $HEAD_TYPE }" \
		"node_groups:" "  - { name: node, count: 1, machine_type: ${2:-$NODE_TYPE} }")" \
		"prices:
  hourly: { $HEAD_TYPE: ${3:-3600}, $NODE_TYPE: ${4:-7200} }"
}
# the head begins to stop the cluster PBX_BUDGET_MARGIN_S before the
# budget runs out (20 s: at 10 s a loaded machine's head once overran the
# budget by 2, under 1 s of both nodes); RAISE: what the budget is raised by
MARGIN=20 RAISE=120
export PBX_AUTOSTOP_TICK=1 PBX_BUDGET_MARGIN_S="$MARGIN"
db() { sqlite3 "$PBX_HOME/pbx.db" "$1"; }
show() { "$PBX" cluster show --json sp 2>/dev/null | json_get "$1"; }
# the runs' spend as the store holds them: sum of seconds x price an hour
runs_spend() { db "SELECT printf('%.4f', sum((coalesce(ended, strftime('%s','now')) - started) * nanos / 3600.0 / 1e9)) FROM node_runs"; }

# a budget pbx cannot hold the cluster to (a node with no price, or every
# price 0) is refused at start, before anything is made, saying what to set
test_expect_success 'a budget with no price to hold it to is refused' '
	config "budget: 5" "$UNPRICED"
	run_pbx -q cluster start sp
	is "$rc" 2 "a budget with a node of no price: start refused (exit 2)"
	case $errout in *"cluster sp has a budget, and no price to hold it to: node ($UNPRICED): "*"prices.hourly.$UNPRICED"*"or set budget: off"*) r=0 ;; *) r=1 ;; esac
	ok $r "saying which price to set: $errout"
	config "budget: 5" "" 0 0
	run_pbx -q cluster start sp
	is "$rc" 2 "a budget with every price 0: start refused (exit 2)"
	case $errout in *"no price to hold it to: every node'"'"'s price is 0"*) r=0 ;; *) r=1 ;; esac
	ok $r "saying so: $errout"
	is "$(made)" 0 "nothing was made"
'
test_expect_success 'each node runs at its price; show and list give price and spend' '
	config "budget: off"
	t0=$(date +%s)
	run_pbx -q cluster start sp
	ok $rc "the cluster starts ($(($(date +%s) - t0)) s): $errout"
	is "$(states)" "head:$UP node1:$UP" "two instances run"
	is "$(db "SELECT group_concat(node || '"':'"' || (ended IS NULL) || '"':'"' || nanos || '"':'"' || currency, '"' '"') FROM (SELECT * FROM node_runs ORDER BY node)")" \
		"head:1:3600000000000:USD node1:1:7200000000000:USD" "each node has an open run with its price an hour"
	is "$(show "d[\"hourly\"], d[\"currency\"], d[\"budget\"]")" "10800.0 USD None" "show --json: 10800 USD an hour now (the sum), no budget"
	run_pbx cluster show sp
	echo "$out" | grep -q "^cost: 10800.0000 USD/h now; spent [0-9.]* USD since "
	ok $? "show says the price now and the spend: $(echo "$out" | grep "^cost")"
	run_pbx cluster list
	echo "$out" | grep -q "^sp .* 10800.0000 USD  *[0-9.]* USD *\$"
	ok $? "list has the price an hour and the spend: $out"
	# the body slurmctld runs in
	head_log=$(find "$BODIES" -path "*/var/log/slurm/slurmctld.log" | head -n 1)
	head_root=${head_log%/var/log/slurm/slurmctld.log}
	ok $([ -n "$head_log" ] && [ -d "$head_root/var/lib/pbx" ]; echo $?) "the head'"'"'s body is $head_root"
'
test_expect_success 'an autostop while pbx looks away: the runs end when the cloud says' '
	t0=$(date +%s)
	wait_secs 300 prints "head:$OFF node1:$OFF" states
	is "$(states)" "head:$OFF node1:$OFF" "idle for 12 s, both instances stopped themselves ($(($(date +%s) - t0)) s)"
	sleep 3 # pbx learns of it later than it happened
	run_pbx cluster list --refresh --json
	is "$(echo "$out" | json_get "[c[\"state\"] for c in d if c[\"name\"] == \"sp\"][0]")" "stopped" "cluster list --refresh: stopped"
	head_at=$(stopped_at head)
	is "$(db "SELECT ended FROM node_runs WHERE node = '"'head'"'")" "$head_at" \
		"the head'"'"'s run ends at the cloud'"'"'s stop time, not when pbx learnt it"
	is "$(db "SELECT ended FROM node_runs WHERE node = '"'node1'"'")" "$(stopped_at node1)" \
		"the node'"'"'s run ends at its own stop time (the head'"'"'s: $head_at)"
	is "$(db "SELECT count(*) FROM node_runs WHERE ended IS NULL")" "0" "no run is open"
	spent=$(show "d[\"spent\"]")
	is "$(printf "%.4f" "$spent")" "$(runs_spend)" "the spend is the sum of the runs: $spent"
	sleep 2
	is "$(show "d[\"spent\"]"):$(show "d[\"hourly\"]")" "$spent:0.0" "a stopped cluster costs nothing more"
'
test_expect_success 'at 80% of the budget a verb warns; spent, start and parrun are refused' '
	config "budget: $(python3 -c "print(round($spent / 0.85, 4))")"
	run_pbx cluster show sp
	case $errout in *"warning: cluster sp has spent "*" of its budget "*" USD (8"*"%)"*) r=0 ;; *) r=1 ;; esac
	ok $r "at 85% of the budget a verb warns: $errout"
	case $errout in *"refused"*) r=1 ;; *) r=0 ;; esac
	ok $r "and refuses nothing yet"
	config "budget: $(python3 -c "print(round($spent * 0.75, 4))")"
	before_calls=$(calls_made)
	run_pbx cluster start sp
	is "$rc" "4" "a start over budget is refused (exit 4)"
	case $errout in *"start refused: cluster sp has spent "*" of its budget "*"raise budget:"*) r=0 ;; *) r=1 ;; esac
	ok $r "naming the budget: $errout"
	started_nothing
	mkdir -p "$TEST_TMP/exp"
	printf "%s\n" "name: e" "command: \"echo {x}\"" "sweep: { grid: { x: [1, 2] } }" >"$TEST_TMP/exp/e.yaml"
	run_pbx parrun "$TEST_TMP/exp/e.yaml" sp
	is "$rc" "4" "a parrun over budget is refused (exit 4)"
	case $errout in *"parrun refused: cluster sp has spent "*"budget"*) r=0 ;; *) r=1 ;; esac
	ok $r "naming the budget: $errout"
	is "$(db "SELECT count(*) FROM submissions")" "0" "nothing was submitted or recorded"
	is "$(show "d[\"spent\"]")" "$spent" "the spend did not change while stopped"
'
# raised by RAISE (RAISE/3 s of both nodes): the head stops the cluster by
# itself, beginning PBX_BUDGET_MARGIN_S before the budget runs out
test_expect_success 'with the budget raised, the head powers the cluster off when it runs out' '
	before=$spent
	budget=$(python3 -c "print(round($spent + $RAISE, 4))")
	config "budget: $budget"
	run_pbx cluster price sp
	echo "$out" | grep -q "^  budget $(printf "%.2f" "$budget") USD: $(printf "%.4f" "$spent") spent, about 0.0 h of this cluster left\$"
	ok $? "cluster price says the budget, the spend and the hours left: $(echo "$out" | tail -n 1)"
	run_pbx cluster price --json sp
	is "$(echo "$out" | json_get "d[\"budget\"], d[\"spent\"]")" "$budget $spent" "price --json: budget and spent"
	t0=$(date +%s)
	run_pbx -q cluster start sp --autostop off
	ok $rc "with the budget raised the cluster starts again, autostop off ($(($(date +%s) - t0)) s): $errout"
	is "$(states)" "head:$UP node1:$UP" "both instances run"
	wait_secs 300 prints "head:$OFF node1:$OFF" states
	is "$(states)" "head:$OFF node1:$OFF" "the head powered the cluster off when the budget ran out ($(($(date +%s) - t0)) s after the start began)"
	is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
	is "$(find "$BODIES" -name slurm.conf -path "*/etc/slurm/*" | grep -c .)" 2 "both bodies'"'"' disks are kept"
	grep -q "^reason=budget spent" "$head_root/var/lib/pbx/autostop.last"
	ok $? "the head'"'"'s disk is kept, with its record of why"
	run_pbx cluster show sp
	echo "$out" | grep -q "last: stopped itself at .*budget spent"
	ok $? "the head recorded why: $(echo "$out" | grep "autostop:")"
	is "$(db "SELECT ended FROM node_runs WHERE node = '"'head'"' ORDER BY id DESC LIMIT 1")" "$(stopped_at head)" \
		"the head'"'"'s run ends at the cloud'"'"'s stop time"
	is "$(db "SELECT count(*) FROM node_runs WHERE ended IS NULL"):$(db "SELECT count(*) FROM node_runs")" "0:4" \
		"no run is open; each node ran twice"
	is "$(show "d[\"budget\"]")" "$budget" "show --json has the budget"
	spent=$(show "d[\"spent\"]")
	is "$(printf "%.4f" "$spent")" "$(runs_spend)" "the spend is still the sum of the runs: $spent"
	python3 -c "import sys; sys.exit(not $spent <= $budget)"
	ok $? "and it stayed within the budget: $spent of $budget"
	python3 -c "import sys; sys.exit(not $spent >= $before + $RAISE - 3 * $MARGIN)"
	ok $? "the head waited for its time (the budget less $MARGIN s of both nodes at least): $before before the start"
'
test_expect_success 'stop leaves nothing' '
	run_pbx -q cluster stop --discard-results sp
	ok $rc "stop: $errout"
	is "$(left)" "$NOTHING" "no $LEFT is left"
	is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
'
test_done
