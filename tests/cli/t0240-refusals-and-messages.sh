#!/bin/sh
# t0240-refusals-and-messages.sh - on a real local cluster (addresses
# and ports: the test's slot, lib.sh): a second `cluster start` says the cluster is already up, having
# read the cluster's row once; `outputs`
# patterns bring back whole directories, `*.bin` stays at the top, and a
# pattern matching nothing is reported with its file and line; `pbx log`
# writes the program's stdout alone on stdout; and once the head's pinned
# host key no longer matches, every verb that connects over SSH exits 4
# (README: refused for safety), with one "node head:" prefix, leaving the
# cluster's recorded state alone.
. "$(dirname "$0")/lib.sh"

local_cluster ic slot "{ name: node, count: 1, gpus: 0, cpus: 2 }"
RESULTS="$PBX_HOME/results"

run_pbx -q cluster start ic
ok $rc "cluster starts: $errout"
PBX_STATS=1 run_pbx cluster start ic
is "$rc" "0" "a second start of a running cluster exits 0"
echo "$errout" | grep -q "^cluster ic is already up"
ok $? "... and says the cluster is already up: $(echo "$errout" | grep '^cluster ic')"
# The verb resolves its cluster once (src/cluster/target.c): one read of
# the cluster's row, price note, up check and start included.
is "$(echo "$errout" | sed -n 's/^pbx: stats: .* \([0-9]*\) cluster row reads$/\1/p')" "1" \
	"start reads the cluster's row from the store once"

# --- outputs patterns and pbx log -------------------------------------------
mkdir -p "$TEST_TMP/out"
cat >"$TEST_TMP/out/experiment.yaml" <<'EOF'
name: outputs
command: >
  mkdir -p d/sub e sub && printf a > d/a.txt && printf b > d/sub/b.txt && printf x > e/x.txt &&
  printf t > top.bin && printf n > sub/nested.bin && echo out-{i} && echo err-{i} >&2
sweep: { grid: { i: [0, 1] } }
outputs: [d, "e/", "*.bin",
  "logs/*.txt"]
EOF
run_pbx parrun --json "$TEST_TMP/out/experiment.yaml" ic
PKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG" 60
ok $? "the outputs experiment ends"
run_pbx harvest "$PKG"
ok $rc "harvest: $errout"
T0="$RESULTS/$PKG/0"
[ "$(cat "$T0/d/a.txt")$(cat "$T0/d/sub/b.txt")$(cat "$T0/e/x.txt")$(cat "$T0/top.bin")" = abxt ]
ok $? "'d' and 'e/' bring back their whole trees, '*.bin' the top-level file"
[ ! -e "$T0/sub/nested.bin" ]
ok $? "'*.bin' does not match sub/nested.bin ('*' does not match '/')"
echo "$errout" | grep -qx "warning: $TEST_TMP/out/experiment.yaml:7: outputs\[3\]: 'logs/\*.txt' matches nothing in the 2 ended tasks"
ok $? "a pattern matching nothing is reported with file and line"

"$PBX" log "$PKG:1" >"$TEST_TMP/log.out" 2>"$TEST_TMP/log.err"
is "$(cat "$TEST_TMP/log.out")" "out-1" "pbx log: stdout is the program's stdout alone"
grep -q '^=== pbx task 1 attempt 1 .* start' "$TEST_TMP/log.err" && grep -qx err-1 "$TEST_TMP/log.err"
ok $? "pbx log: the attempt header and the program's stderr on stderr"

# --- a changed host key is refused everywhere (exit 4) ------------------------
DB="$PBX_HOME/pbx.db"
HEADPIN=$(sqlite3 "$DB" "SELECT hostport FROM host_keys WHERE hostport LIKE 'ic/head@%'")
NODEPIN=$(sqlite3 "$DB" "SELECT hostport FROM host_keys WHERE hostport LIKE 'ic/node1@%'")
HEADKEY=$(sqlite3 "$DB" "SELECT key_b64 FROM host_keys WHERE hostport = '$HEADPIN'")
[ -n "$HEADPIN" ] && [ -n "$NODEPIN" ]
ok $? "host keys pinned for head and node1"
# The head's pin now holds node1's key: the head's real key no longer matches.
sqlite3 "$DB" "UPDATE host_keys SET key_b64 = (SELECT key_b64 FROM host_keys WHERE hostport = '$NODEPIN') WHERE hostport = '$HEADPIN'"
printf 'name: one\ncommand: echo one\n' >"$TEST_TMP/out/one.yaml"

refused() {   # refused DESCRIPTION PBX-ARGS...: exit 4 and the host-key message
	what=$1
	shift
	run_pbx "$@"
	case $rc:$errout in
	4:*"host key for ic/head@"*changed*) ok 0 "$what exits 4" ;;
	*) ok 1 "$what exits 4 (got $rc: $(echo "$errout" | tail -1))" ;;
	esac
}
refused "cluster start" cluster start ic
echo "$errout" | grep -q "node head: node head:"
ok $((! $?)) "the node is named once: $(echo "$errout" | grep -m1 'node head')"
is "$(sqlite3 "$DB" "SELECT state FROM clusters WHERE name = 'ic'")" "up" \
	"a refused start leaves the cluster's state as it was"
refused "cluster show" cluster show ic
echo "$out" | grep -Eq "^cluster ic \(local, id [0-9a-f]{32}\): up"
ok $? "cluster show still prints what the store knows"
refused "cluster show --json" cluster show --json ic
is "$(echo "$out" | json_get 'd["reachable"]')" "False" "... as JSON, not reachable"
refused "cluster exec" cluster exec ic -- true
refused "cluster ssh" cluster ssh ic
refused "state PKG" state "$PKG"
echo "$out" | grep -q "^$PKG"
ok $? "state shows the last known states"
refused "state (all packages)" state
refused "state --json" state --json "$PKG"
refused "parrun" parrun "$TEST_TMP/out/experiment.yaml" ic
refused "run" run "$TEST_TMP/out/one.yaml" ic
refused "log" log "$PKG:0"
refused "cancel" cancel "$PKG:0"
refused "rerun" rerun "$PKG:0"
refused "harvest" harvest "$PKG"

sqlite3 "$DB" "UPDATE host_keys SET key_b64 = '$HEADKEY' WHERE hostport = '$HEADPIN'"
run_pbx cluster exec ic -- true
ok $rc "with the right key back, the cluster answers: $errout"
done_testing
