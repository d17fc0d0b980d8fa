#!/bin/sh
# t0487-experiment-cost.sh - node-hours and estimated cost per experiment
# (`pbx ls`) and per task (`pbx report`), issue 20.  On a local cluster (2
# nodes of 2 GPUs) a GPU sweep (--gres=gpu:1: half a node) and a CPU
# experiment (the whole node) run; a local cluster has no node runs, so
# node-hours show and the cost is "-"/null and the report has no cost
# columns.  Then node runs with known prices are written into the store
# (node1: a run before the tasks at another price, then the one covering
# them) and every figure is checked exactly against a computation in Python
# from the tasks table: each task's cost in 1e-9 units (rounded half up),
# the experiment's the exact sum; an unknown price makes the task's and
# the experiment's cost null while node-hours stay.
. "$(dirname "$0")/lib.sh"

local_cluster co slot "{ name: node, count: 2, gpus: 2 }"
DB="$PBX_HOME/pbx.db"

run_pbx -q cluster start co
ok $rc "cluster starts: $errout"

mkdir -p "$TEST_TMP/gpu" "$TEST_TMP/cpu"
cat >"$TEST_TMP/gpu/experiment.yaml" <<'EOF'
name: cost-gpu
command: sleep {s}
sweep:
  list:
    - { s: 1 }
    - { s: 2 }
    - { s: 1 }
    - { s: 3 }
EOF
cat >"$TEST_TMP/cpu/experiment.yaml" <<'EOF'
name: cost-cpu
command: sleep {s}
sweep:
  list:
    - { s: 2 }
    - { s: 1 }
EOF
run_pbx parrun --json "$TEST_TMP/gpu/experiment.yaml" co --gres=gpu:1
ok $rc "parrun cost-gpu --gres=gpu:1: $errout"
GPKG=$(echo "$out" | json_get 'd["package"]')
run_pbx parrun --json "$TEST_TMP/cpu/experiment.yaml" co
ok $rc "parrun cost-cpu: $errout"
CPKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$GPKG" 120
ok $? "the GPU sweep ended"
wait_final "$CPKG" 120
ok $? "the CPU experiment ended"

# check.py MODE: compares `pbx ls --json` ($TEST_TMP/ls.json) and the two
# reports ($TEST_TMP/report-PKG.json) with the store; prints "ok" or what
# differs.  MODE local: no node runs (no cost); priced: every cost known;
# unknown: task 0 of cost-gpu ran on a node whose run has no price.
cat >"$TEST_TMP/check.py" <<'PY'
import json, sqlite3, sys
mode, db, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
con = sqlite3.connect(db)
bad = []
def cost_of(pkg_id):
    """[(idx, node_hours, nanos or None, currency)] of the package's tasks."""
    sub, cluster, res = con.execute(
        "SELECT id, cluster_id, resources_json FROM submissions WHERE package_id = ?"
        " ORDER BY id DESC LIMIT 1", (pkg_id,)).fetchone()
    gpus_asked = 0
    for k, v in json.loads(res)["options"]:
        if k == "gres":
            gpus_asked = int(v.split(":")[-1])
    runs = con.execute("SELECT node, started, ended, nanos, currency FROM node_runs"
                       " WHERE cluster_id = ?", (cluster,)).fetchall()
    out = []
    for idx, node, start, end in con.execute(
            "SELECT idx, node, start_time, end_time FROM tasks WHERE submission_id = ?"
            " ORDER BY idx", (sub,)):
        secs = end - start
        node_gpus = con.execute("SELECT gpus FROM nodes WHERE cluster_id = ? AND name = ?",
                                (cluster, node)).fetchone()[0]
        num, den = (gpus_asked, node_gpus) if gpus_asked and node_gpus else (1, 1)
        hours = secs * num / (den * 3600.0)
        cover = [r for r in runs if r[0] == node and r[1] <= start and
                 (r[2] is None or start < r[2])]
        nanos, cur = None, None
        if runs and cover and cover[0][3] is not None:
            q = den * 3600
            nanos = (2 * secs * num * cover[0][3] + q) // (2 * q)
            cur = cover[0][4]
        out.append((idx, hours, nanos, cur, secs))
    return out
ls = {e["name"]: e for e in json.load(open(tmp + "/ls.json"))}
for name in ("cost-gpu", "cost-cpu"):
    e = ls[name]
    tasks = cost_of(e["id"])
    if any(t[4] <= 0 for t in tasks):
        bad.append("%s: a task with no elapsed time" % name)
    hours = sum(t[1] for t in tasks)
    priced = all(t[2] is not None for t in tasks)
    total = sum(t[2] for t in tasks) if priced else None
    if (mode == "priced") != (total is not None) and not (mode == "unknown" and name == "cost-cpu"):
        bad.append("%s: the Python side finds cost %r in mode %s" % (name, total, mode))
    if abs(e["node_hours"] - hours) > 1e-12:
        bad.append("%s: ls node_hours %r, want %r" % (name, e["node_hours"], hours))
    if e["cost_nanos"] != total:
        bad.append("%s: ls cost_nanos %r, want %r" % (name, e["cost_nanos"], total))
    if (e["cost"] is None) != (total is None) or (total is not None and e["cost"] != total / 1e9):
        bad.append("%s: ls cost %r, want %r" % (name, e["cost"], total))
    currency = "USD" if any(t[3] for t in tasks) else None   # of the priced tasks
    if e["currency"] != currency:
        bad.append("%s: ls currency %r" % (name, e["currency"]))
    unpriced = sum(1 for t in tasks if t[2] is None)
    if e["unpriced_tasks"] != unpriced:
        bad.append("%s: ls unpriced_tasks %r, want %r" % (name, e["unpriced_tasks"], unpriced))
    r = json.load(open(tmp + "/report-%s.json" % name))
    if mode == "local":
        if "cost" in r["columns"] or "cost" in r or "node_hours" in r["rows"][0]:
            bad.append("%s: a local cluster's report has cost columns" % name)
        continue
    if r["columns"][-3:] != ["runtime", "node_hours", "cost"]:
        bad.append("%s: report columns %r" % (name, r["columns"]))
    if r["cost_nanos"] != total or r["currency"] != currency or \
            (total is not None and r["cost"] != total / 1e9) or abs(r["node_hours"] - hours) > 1e-12:
        bad.append("%s: report totals %r %r %r" % (name, r["cost"], r["cost_nanos"], r["node_hours"]))
    for row, t in zip(r["rows"], tasks):
        want = None if t[2] is None else t[2] / 1e9
        if row["task"] != t[0] or row["cost"] != want or abs(row["node_hours"] - t[1]) > 1e-12 \
                or row["runtime"] != t[4]:
            bad.append("%s task %d: report %r %r, want %r %r" % (name, t[0], row["node_hours"],
                                                              row["cost"], t[1], want))
    if priced and sum(round(row["cost"] * 1e9) for row in r["rows"]) != total:
        bad.append("%s: the rows do not add up to the total" % name)
print("; ".join(bad) if bad else "ok")
PY

cost_check() { # cost_check MODE: runs pbx ls and the reports, then check.py
	"$PBX" ls --json >"$TEST_TMP/ls.json" 2>"$TEST_TMP/ls.err" || echo "# ls: $(cat "$TEST_TMP/ls.err")"
	"$PBX" report -f json "$GPKG" >"$TEST_TMP/report-cost-gpu.json"
	"$PBX" report -f json "$CPKG" >"$TEST_TMP/report-cost-cpu.json"
	python3 "$TEST_TMP/check.py" "$1" "$DB" "$TEST_TMP" 2>&1 | tail -n 3
}

# --- a local cluster: node-hours, no price ---------------------------------
is "$(cost_check local)" "ok" "local cluster: node-hours from the tasks' times and shares, cost null"
run_pbx ls
echo "$out" | grep "^$GPKG " | grep -q -- ' -$'
ok $? "pbx ls: COST is - on a local cluster: $(echo "$out" | grep "^$GPKG ")"
echo "$out" | head -n 1 | grep -q 'TASKS  *NODE-H  *COST$'
ok $? "pbx ls: NODE-H and COST columns after TASKS: $(echo "$out" | head -n 1)"

# --- node runs with known prices ------------------------------------------
CID=$(sqlite3 "$DB" "SELECT id FROM clusters WHERE name = 'co' AND state != 'deleted'")
T0=$(sqlite3 "$DB" "SELECT min(start_time) FROM tasks")
sqlite3 "$DB" "INSERT INTO node_runs(cluster_id, node, started, ended, nanos, currency) VALUES
  ($CID, 'node1', $T0 - 7200, $T0 - 10, 99000000000, 'USD'),
  ($CID, 'node1', $T0 - 10, NULL, 1234567891, 'USD'),
  ($CID, 'node2', $T0 - 3600, NULL, 500000001, 'USD')"
ok $? "node runs written"
is "$(cost_check priced)" "ok" "priced: each task's cost and the experiment's exact sum, in ls and report"
run_pbx ls --json
WANT=$(echo "$out" | json_get '[e for e in d if e["name"] == "cost-gpu"][0]["cost_nanos"]')
TEXT=$(python3 -c "n = $WANT; r = (n + 50000) // 100000; print('%d.%04d USD' % (r // 10000, r % 10000))")
run_pbx ls
echo "$out" | grep "^$GPKG " | grep -q -- " $TEXT\$"
ok $? "pbx ls: COST $TEXT: $(echo "$out" | grep "^$GPKG ")"
run_pbx report -f json -s cost:desc "$GPKG"
is "$(echo "$out" | json_get '[r["cost"] for r in d["rows"]] == sorted([r["cost"] for r in d["rows"]], reverse=True)')" \
	"True" "report -s cost:desc: the dearest task first"
run_pbx report -f csv -w 'node_hours>0' "$CPKG"
is "$(echo "$out" | head -n 1)" "task,s,state,runtime,node_hours,cost" "report CSV: node_hours and cost columns"
is "$(echo "$out" | tail -n +2 | wc -l | tr -d ' ')" "2" "report -w node_hours>0 keeps both CPU tasks"
run_pbx report "$GPKG"
echo "$out" | head -n 1 | grep -q 'runtime  *node_hours  *cost$'
ok $? "report table: node_hours and cost last: $(echo "$out" | head -n 1)"

# --- an unknown price -------------------------------------------------------
N0=$(sqlite3 "$DB" "SELECT t.node FROM tasks t JOIN submissions s ON s.id = t.submission_id
  JOIN packages p ON p.id = s.package_id WHERE p.short_id = '$GPKG' AND t.idx = 0")
sqlite3 "$DB" "UPDATE node_runs SET nanos = NULL, currency = '' WHERE node = '$N0' AND ended IS NULL"
is "$(cost_check unknown)" "ok" "task 0's node has no price: its cost and the experiment's null, node-hours stay"
run_pbx report "$GPKG"
echo "$out" | awk '$1 == "0"' | grep -q ' -$'
ok $? "report table: task 0's cost is -: $(echo "$out" | awk '$1 == "0"')"
done_testing
