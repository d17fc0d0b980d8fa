#!/bin/sh
# t0200-experiments.sh - experiments on a real local SLURM cluster: a 3x4
# grid with 2 repeats (24 tasks) with --gres=gpu:1 completes, each task
# seeing its own parameters; parrun again submits nothing; a task exiting 3
# is FAILED with exit code 3 and `rerun --failed` resubmits only it, `rerun
# PKG:TASK` a COMPLETED task (and a missing one is refused); hostile
# parameter values arrive byte-exact through SLURM; log and ls work; a
# task's terminal escapes reach a terminal only made visible (\x1b...).
. "$(dirname "$0")/lib.sh"

local_cluster ex slot "{ name: node, count: 2, gpus: 2 }" "slurm: { max_array_size: 1001 }"
SHARED="$PBX_HOME/clusters/ex/shared"

run_pbx -q cluster start ex
ok $rc "cluster starts: $errout"

# --- the 24-task sweep ---------------------------------------------------
DEMO="$PBX_SOURCE_DIR/templates/experiments/sweep-demo/experiment.yaml"
run_pbx parrun --json "$DEMO" ex --gres=gpu:1
ok $rc "parrun sweep-demo: $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
is "$(echo "$out" | json_get 'd["tasks"], d["submitted"], d["round_trips"]')" "24 24 2" \
	"24 tasks submitted in 2 round trips"
wait_final "$PKG" 120
ok $? "all 24 tasks ended"
is "$(json_get 'd["counts"]' <"$TEST_TMP/state.json")" "{'COMPLETED': 24}" "24 COMPLETED"
bad=0
for i in $(seq 0 23); do
	want=$(json_get "'lr=%(lr)s width=%(width)s repeat=%(repeat)s' % d['tasks'][$i]['params']" <"$TEST_TMP/state.json")
	first=$(head -n 1 "$SHARED/pbx/$PKG/tasks/$i/stdout")   # the program's own first line
	case $first in "task $i: $want "*) ;; *) bad=$((bad + 1)); echo "# task $i: '$first' lacks '$want'" ;; esac
done
is "$bad" "0" "each task's output shows its own parameters"
run_pbx log "$PKG:7"
echo "$out" | grep -q "^task 7: lr=0.1 width=128 repeat=1 "
ok $? "pbx log PKG:7 shows task 7's output"
run_pbx parrun --json "$DEMO" ex --gres=gpu:1
is "$(echo "$out" | json_get 'd["submitted"], d["already_submitted"], d["pushed"]')" "0 24 False" \
	"parrun again submits nothing and pushes nothing"

# --- a failing task and rerun --failed -----------------------------------
mkdir -p "$TEST_TMP/fail"
cat >"$TEST_TMP/fail/experiment.yaml" <<'EOF'
name: fail-demo
command: echo code {code} "user-env=${SLURM_GET_USER_ENV:-no}"; exit {code}
sweep:
  list:
    - { code: 0 }
    - { code: 3 }
    - { code: 0 }
EOF
run_pbx parrun --json "$TEST_TMP/fail/experiment.yaml" ex
FPKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$FPKG" 60
is "$(json_get '[(t["state"], t["exit_code"]) for t in d["tasks"]]' <"$TEST_TMP/state.json")" \
	"[('COMPLETED', 0), ('FAILED', 3), ('COMPLETED', 0)]" "the task that exits 3 is FAILED with exit code 3"
run_pbx state "$FPKG"
case $out in *"3 tasks: 2 COMPLETED, 1 FAILED"*"first failure: task 1 FAILED (exit 3) on "*": 'pbx log $FPKG:1' shows its output"*) r=0 ;; *) r=1 ;; esac
ok $r "pbx state names the first failure and how to see it: $out"
run_pbx report "$FPKG"
case $errout in *"nothing of $FPKG is home yet: 'pbx harvest $FPKG' brings the tasks' results and metrics"*) r=0 ;; *) r=1 ;; esac
ok $r "report before a harvest says what brings the results: $errout"
run_pbx report -m loss "$FPKG"
case $rc:$errout in 2:*"no metric of $FPKG is home yet: 'pbx harvest $FPKG' brings them"*) r=0 ;; *) r=1 ;; esac
ok $r "report -m before a harvest: the same, not 'no metric named': $errout"
run_pbx rerun --failed "$FPKG"
is "$rc:$out" "0:resubmitted 1 task of $FPKG" "rerun --failed resubmits one task"
wait_final "$FPKG" 60
heads=$(for i in 0 1 2; do grep -c '^=== pbx task .* start' "$SHARED/pbx/$FPKG/tasks/$i/stderr"; done | tr '\n' ' ')
is "$heads" "1 2 1 " "only the failed task ran again"
# pbx passes its variables in sbatch's environment, not as --export=ALL,VAR=...
# (SLURM turns that form into --get-user-env: a login shell per task).
is "$(grep -h '^code ' "$SHARED/pbx/$FPKG/tasks/0/stdout")" "code 0 user-env=no" \
	"tasks do not make slurmd load the user's login environment"
# one named task runs again however it ended (COMPLETED too)
run_pbx rerun "$FPKG:2"
is "$rc:$out" "0:resubmitted 1 task of $FPKG" "rerun PKG:TASK of a COMPLETED task resubmits it"
wait_final "$FPKG" 60
is "$(grep -c '^=== pbx task .* start' "$SHARED/pbx/$FPKG/tasks/2/stderr")" 2 "and it ran again"
run_pbx rerun "$FPKG:9"
is "$rc" 3 "rerun of a task the package lacks: exit 3"
case $errout in *"$FPKG has no task 9 (tasks 0 to 2)"*) r=0 ;; *) r=1 ;; esac
ok $r "saying which tasks it has: $errout"

# --- hostile parameter values through SLURM -------------------------------
mkdir -p "$TEST_TMP/hostile"
cat >"$TEST_TMP/hostile/experiment.yaml" <<'EOF'
name: hostile
command: printf '%s' {v} > out.bin
sweep:
  list:
    - { v: "it's" }
    - { v: '$(touch /tmp/pbx-pwned-t0200)' }
    - { v: "`touch /tmp/pbx-pwned-t0200`" }
    - { v: "a; touch /tmp/pbx-pwned-t0200" }
    - { v: "line1\nline2" }
    - { v: "  spaces  and\ttab " }
    - { v: "-n" }
    - { v: "héllo wörld ✓" }
    - { v: '"double" \back' }
    - { v: "{v}" }
EOF
rm -f /tmp/pbx-pwned-t0200
run_pbx parrun --json "$TEST_TMP/hostile/experiment.yaml" ex
HPKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$HPKG" 60
python3 - "$SHARED/pbx/$HPKG/tasks" >"$TEST_TMP/hostile.out" <<'EOF'
import sys
want = ["it's", "$(touch /tmp/pbx-pwned-t0200)", "`touch /tmp/pbx-pwned-t0200`",
        "a; touch /tmp/pbx-pwned-t0200", "line1\nline2", "  spaces  and\ttab ", "-n",
        "héllo wörld ✓", '"double" \\back', "{v}"]
bad = 0
for i, w in enumerate(want):
    try:
        got = open("%s/%d/out.bin" % (sys.argv[1], i), "rb").read()
    except OSError as e:
        got = repr(e).encode()
    if got != w.encode():
        bad += 1
        print("task %d: got %r want %r" % (i, got, w))
print("bad", bad)
EOF
is "$(tail -n 1 "$TEST_TMP/hostile.out")" "bad 0" "10 hostile values arrive byte-exact: $(head -n 3 "$TEST_TMP/hostile.out" | tr '\n' ' ')"
[ ! -e /tmp/pbx-pwned-t0200 ]
ok $? "no injected command ran"

# --- a task's escape sequences reach no terminal raw -----------------------
mkdir -p "$TEST_TMP/esc"
cat >"$TEST_TMP/esc/experiment.yaml" <<'EOF'
name: esc
command: printf 'before\033]0;pwned\007\033[2Jafter\n'; printf 'err\033[2J\n' >&2
sweep:
  list:
    - { x: 1 }
EOF
run_pbx parrun --json "$TEST_TMP/esc/experiment.yaml" ex
EPKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$EPKG" 60
ESC=$(printf '\033')
"$PBX" log -o "$EPKG:0" >"$TEST_TMP/esc.pipe"
grep -q "^before${ESC}]0;pwned$(printf '\007')${ESC}\[2Jafter\$" "$TEST_TMP/esc.pipe"
ok $? "pbx log into a pipe: the task's bytes as they are (data)"
script -qec "'$PBX' log '$EPKG:0'" /dev/null </dev/null >"$TEST_TMP/esc.tty" 2>&1
grep -q 'before\\x1b]0;pwned\\x07\\x1b\[2Jafter' "$TEST_TMP/esc.tty" &&
	grep -q 'err\\x1b\[2J' "$TEST_TMP/esc.tty"
ok $? "pbx log on a terminal: ESC ]0;title BEL and ESC [2J shown as \\x1b..., stdout and stderr"
! grep -q "$ESC" "$TEST_TMP/esc.tty"
ok $? "no raw ESC reaches the terminal: $(od -c "$TEST_TMP/esc.tty" | head -n 3 | tr '\n' ' ')"
script -qec "'$PBX' cluster exec ex -- printf 'x\\033[2Jy\\n'" /dev/null </dev/null >"$TEST_TMP/exec.tty" 2>&1
grep -q 'x\\x1b\[2Jy' "$TEST_TMP/exec.tty" && ! grep -q "$ESC" "$TEST_TMP/exec.tty"
ok $? "pbx cluster exec on a terminal: escapes shown: $(head -c 80 "$TEST_TMP/exec.tty")"

run_pbx ls --json
is "$(echo "$out" | json_get 'len(d)')" "4" "pbx ls lists the 4 experiments"
done_testing
