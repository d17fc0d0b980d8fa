#!/bin/sh
# t0010-input.sh - bad input refused before anything is read or recorded,
# without a cluster: an experiment "file" that is a device, a FIFO or a
# directory; the documented limits of experiment files (a 70,000-point list
# loads, a command past the execve limit names its file and line); a
# PBX_HOME others can write (exit 4); cluster names with -t that are not
# names (../x, shell metacharacters, escapes); command lines in the docs, examples
# and help that name a verb or an argument order pbx does not have.
. "$(dirname "$0")/lib.sh"
trap 'rm -rf "$TEST_TMP"' EXIT

# --- experiment files that are not regular files ---------------------------
# (memory capped at 1 GiB, but for ASan builds, which reserve terabytes of
# address space, and time at 20 s: without the check pbx reads /dev/zero
# until it runs out of memory)
cap="ulimit -v 1048576;"
ldd "$PBX" 2>/dev/null | grep -q libasan && cap=
out=$(sh -c "$cap exec timeout -k 5 20 \"\$0\" parrun /dev/zero nosuch" "$PBX" 2>&1)
is "$?:$out" "2:pbx: error: /dev/zero: not a regular file" "parrun /dev/zero is refused before reading"
mkfifo "$TEST_TMP/fifo"
out=$(timeout -k 5 20 "$PBX" parrun "$TEST_TMP/fifo" nosuch 2>&1)
is "$?:$out" "2:pbx: error: $TEST_TMP/fifo: not a regular file" "a FIFO is refused without waiting for a writer"
out=$(timeout -k 5 20 "$PBX" run "$TEST_TMP" nosuch 2>&1)
is "$?:$out" "2:pbx: error: $TEST_TMP: not a regular file" "a directory is refused"
head -c $((16 * 1024 * 1024 + 1)) /dev/zero | tr '\0' '#' >"$TEST_TMP/huge.yaml"
out=$(timeout -k 5 20 "$PBX" parrun "$TEST_TMP/huge.yaml" nosuch 2>&1)
is "$?:$out" "2:pbx: error: $TEST_TMP/huge.yaml: larger than 16777216 bytes" "a file over 16 MiB is refused"

# --- limits ------------------------------------------------------------------
mkdir -p "$TEST_TMP/big"
awk 'BEGIN { print "name: big\ncommand: echo {a}\nsweep:\n  list:";
	for (i = 0; i < 70000; i++) printf "    - {a: %d}\n", i }' >"$TEST_TMP/big/experiment.yaml"
run_pbx parrun "$TEST_TMP/big/experiment.yaml" nosuch
is "$rc:$errout" "3:pbx: error: no cluster named 'nosuch' (pbx cluster list)" \
	"a 70,000-point list loads (FORMAT.md promises 100,000 tasks); only the cluster is missing"
v=$(head -c 60000 /dev/zero | tr '\0' v)
printf 'name: long\ncommand: echo {v} {v} {v}\nsweep:\n  grid:\n    v: [short, %s]\n' "$v" \
	>"$TEST_TMP/big/long.yaml"
run_pbx parrun "$TEST_TMP/big/long.yaml" nosuch
is "$rc:$errout" "2:pbx: error: $TEST_TMP/big/long.yaml:2: command: the command of task 1 is 180013 bytes once its parameters are substituted, more than 131000 (one argument of execve)" \
	"a command past the execve limit: file and line, before any cluster is asked"
grep -q "131000 bytes" "$PBX_SOURCE_DIR/src/experiment/FORMAT.md" &&
	grep -q "1000000 YAML nodes" "$PBX_SOURCE_DIR/src/experiment/FORMAT.md"
ok $? "FORMAT.md documents the command and YAML node limits"

# --- PBX_HOME others can write -------------------------------------------------
run_pbx ls
is "$rc" "0" "a private PBX_HOME is used"
chmod 770 "$PBX_HOME"
run_pbx ls
is "$rc:$errout" "4:pbx: error: $PBX_HOME is writable by others (mode 770); refusing to use it: run 'chmod go-w $PBX_HOME'" \
	"PBX_HOME writable by its group is refused with exit 4"
chmod 707 "$PBX_HOME"
run_pbx state
is "$rc" "4" "PBX_HOME writable by others is refused with exit 4"
chmod 700 "$PBX_HOME"

# --- cluster names given with -t ----------------------------------------------
# (the name becomes a directory, hostnames and cloud labels: it was taken
# as it came, so ../x made PBX_HOME/x)
printf 'clusters:\n  tpl:\n    cloud: local\n    node_groups:\n      - { name: node, count: 1 }\n' \
	>"$PBX_HOME/config.yaml"
chmod 600 "$PBX_HOME/config.yaml"
for n in ../x 'a b;touch pwned' "$(printf 'x\033[2J')" Upper -x x- ''; do
	run_pbx cluster start -t tpl -- "$n"
	shown=$(printf '%s' "$n" | sed 's/\x1b/\\x1b/g')
	is "$rc:$errout" "2:pbx: error: cluster name '$shown': 1 to 31 of a-z, 0-9 and '-', starting with a letter and not ending in '-'" \
		"cluster start -t tpl '$shown' is refused"
	run_pbx cluster start --dry-run -t tpl -- "$n"
	is "$rc" "2" "and so is its --dry-run"
done
[ ! -e "$PBX_HOME/x" ] && [ ! -e pwned ] && [ ! -e "$PBX_HOME/clusters" ]
ok $? "nothing was made: $(ls "$PBX_HOME" 2>&1 | tr '\n' ' ')"
is "$(sqlite3 "$PBX_HOME/pbx.db" 'SELECT count(*) FROM clusters' 2>/dev/null || echo 0)" "0" \
	"and nothing recorded"
rm -f "$PBX_HOME/config.yaml"

# --- the docs show real commands --------------------------------------------------
bad=$(python3 "$(dirname "$0")/doc_commands.py" "$PBX" "$PBX_SOURCE_DIR")
is "$?:$bad" "0:" "docs, examples and help show only real verbs, and EXPERIMENT before CLUSTER"
done_testing
