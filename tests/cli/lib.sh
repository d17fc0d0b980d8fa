# lib.sh - what the shell tests in tests/cli (and tests/vm) share (sourced).
#
# The harness (named steps, checks, prerequisites, the TAP plan) is
# harness.sh beside this file, sourced first: test_expect_success,
# test_when_finished, test_set_prereq, test_have_prereq, test_done, and
# the checks ok, is, fail (tests/README.md, "Writing a test").  Here:
#
#   run_pbx ARGS...      runs $PBX with stdout/stderr in $out/$errout, status in $rc
#
# $PBX is the pbx binary under test (set by ctest).
#
# Addresses and ports: no test names a loopback address or a port of its
# own.  Sourcing this file takes the test a slot (test_slot, below): a
# number N in 0..63, held for the test's whole life by a lock on
# $PBX_TEST_SLOTS_DIR/N.lock (default /tmp/pbx-test-slots, shared by every
# run on the machine: ctest -j2, two checkouts, a test run twice at once).
# The first free slot is taken; the lock is an fd (7) of the test's shell,
# inherited by what it starts, so it goes when the test and everything it
# left running are gone (kill -9 included: reap_stale_tests ends what a
# killed test left, then its slot is free again).  From N:
#
#   SLOT_NET        127.(64+N): the slot's /16, 127.(64+N).0.0/16 (no
#                   literal in the tree, src/ included, is in 127.64-127)
#   LOOP_NET        $SLOT_NET.0.0: local clusters' address_base (cluster
#                   slot s takes .0.(32s+1)...; local_cluster NAME slot ...)
#   slot_net K      prints $SLOT_NET.K.0, the slot's K-th /24 (K 1..255):
#                   emulators' subnets, a second home's, listeners of a test
#   PORT_BLOCK      the slot's 256 ports: the N-th block of 256 from 8192
#                   that meets none of the fixed ports named elsewhere in the
#                   tree (SLOT_FIXED_PORTS: pbx's defaults 17000.. and 22022,
#                   tests/bootstrap's, bench/'s), all below 32768 (the
#                   kernel's ephemeral range is 32768..60999)
#   SLURM_PORT_BASE $PORT_BLOCK: local clusters' slurm_port_base; 64 ports
#                   per cluster slot, so at most 3 clusters of one address
#                   base live at once in a test ([0, 192) of the block)
#   SSH_PORT        $PORT_BLOCK + 192: the node bodies' sshd port
#   BODY_PORT_BASE  $SLURM_PORT_BASE - 512: the slurm_port_base of clusters
#                   on the emulators' node bodies, which take the block of
#                   cluster slot 8 + s (src/cluster/discover.c), so theirs
#                   is [SLURM_PORT_BASE, +192) too
#   slot_port K     prints $PORT_BLOCK + 193 + K (K 0..62): spare ports
#                   (a test's own sshd, an emulator with a fixed port)
#
# A listener that can take a port the kernel picks (port 0, then a port
# file) on 127.0.0.1 needs none of these.  scripts/check-test-literals.sh
# fails on a literal 127.0.x.y (other than 127.0.0.1) or a literal port
# in a tests/cli/t*.sh; tests/cli/literals-allowed lists what is left.

# The checkout: PBX_SOURCE_DIR, else the first folder above the script
# that holds tests/cli/harness.sh (scripts outside tests/cli source this
# file too: tests/emulators/gce/gcloud.sh)
_lib_src=${PBX_SOURCE_DIR:-$(cd "$(dirname "$0")" &&
	while [ ! -f tests/cli/harness.sh ] && [ "$PWD" != / ]; do cd ..; done && pwd)}
# shellcheck source=tests/cli/harness.sh
. "$_lib_src/tests/cli/harness.sh"

# The tests read pbx's store with the sqlite3 shell while pbx may be
# writing it: wait for its locks (as pbx does) instead of failing with
# "database is locked".
sqlite3() { command sqlite3 -cmd '.timeout 10000' "$@"; }

run_pbx() {
	out=$("$PBX" "$@" 2>"$TEST_TMP/stderr")
	rc=$?
	errout=$(cat "$TEST_TMP/stderr")
}
# in_home HOME ARGS...: run_pbx with PBX_HOME=HOME (tests of several homes)
in_home() { _ih=$PBX_HOME; PBX_HOME=$1; shift; run_pbx "$@"; PBX_HOME=$_ih; }

# image_row COLUMN NAME: COLUMN of the newest store row of image NAME
# (tests of `pbx image`).
image_row() { sqlite3 "$PBX_HOME/pbx.db" "SELECT $1 FROM images WHERE name = '$2' ORDER BY id DESC LIMIT 1"; }

# wait_for TENTHS CMD...: runs CMD until it succeeds, every 0.1 s, at most
# TENTHS times; its status is the last run's.
wait_for() {
	_n=$1
	shift
	_i=0
	until "$@"; do
		_i=$((_i + 1))
		[ $_i -ge "$_n" ] && return 1
		sleep 0.1
	done
}

# wait_secs SECONDS CMD...: runs CMD until it succeeds, every 0.2 s, for at
# most SECONDS seconds of wall time (wait_for counts tries, and a slow CMD
# makes its tries long); its status is the last run's.
wait_secs() {
	_wsd=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$_wsd" ] || return 1
		sleep 0.2
	done
}

# Acting on a SLURM job (scancel, scontrol requeue/update) right after a
# submit races with SLURM: the job may not exist yet, or not run yet (an
# array element is split off its array only when it starts), or have ended
# already.  First wait, with a bound, for the state the act needs:
# job_state CLUSTER JOB: SLURM's state of JOB (squeue %T: PENDING, RUNNING,
# ...; JOB may be ARRAY_TASK), nothing when squeue does not list it.
job_state() { "$PBX" cluster exec "$1" -- squeue -h -j "$2" -o %T 2>/dev/null | head -n 1; }
# job_is CLUSTER JOB STATE: whether SLURM has JOB in STATE
job_is() { [ "$(job_state "$1" "$2")" = "$3" ]; }
# job_gone CLUSTER JOB: whether squeue no longer lists JOB (ended, purged
# or never there)
job_gone() { [ -z "$(job_state "$1" "$2")" ]; }
# task_running DIR: whether the task wrapper of task directory DIR has
# written its RUNNING status line (its job's batch script runs)
task_running() { [ "$(cut -d' ' -f2 "$1/status" 2>/dev/null)" = RUNNING ]; }

# wait_started FILE PID LOG WHAT: waits until the server PID writes FILE
# (its port, its environment).  Seconds usually, but a loaded machine (the
# whole suite at once) has taken over 30 s: up to 2 minutes, then the test
# bails out with the end of LOG.
wait_started() {
	_ws_i=0
	while [ ! -s "$1" ] && [ $_ws_i -lt 1200 ] && kill -0 "$2" 2>/dev/null; do
		sleep 0.1
		_ws_i=$((_ws_i + 1))
	done
	[ -s "$1" ] && return 0
	echo "Bail out! $4 did not start in $((_ws_i / 10)) s; its log:"
	tail -n 20 "$3" | sed 's/^/# /'
	exit 1
}

# For the tests that kill pbx with -9 (SIGKILL) while it works:
# pbx_bg ARGS...: `pbx -q ARGS` in the background, output dropped, its pid
# in bg_pid.  wait_bg TRIES SECONDS CMD...: runs CMD until it succeeds or
# that pbx has ended, at most TRIES times, SECONDS apart.  kill9: kills
# that pbx with SIGKILL and reaps it; its exit status in krc (137 when
# the kill landed).
pbx_bg() {
	"$PBX" -q "$@" >/dev/null 2>&1 &
	bg_pid=$!
}
wait_bg() {
	_wb_n=$1 _wb_s=$2
	shift 2
	_wb_i=0
	until "$@"; do
		kill -0 "$bg_pid" 2>/dev/null || break
		_wb_i=$((_wb_i + 1))
		[ $_wb_i -ge "$_wb_n" ] && break
		sleep "$_wb_s"
	done
}
kill9() {
	kill -9 "$bg_pid" 2>/dev/null
	wait "$bg_pid" 2>/dev/null
	krc=$?
}
# gpu2_at POINT: whether node gpu2 of the newest cluster in the store is at
# POINT: its state (left in st) is POINT, or bootstrapping for "late"
gpu2_at() {
	st=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM nodes WHERE name = 'gpu2' AND cluster_id = (SELECT max(id) FROM clusters)" 2>/dev/null || true)
	[ "$st" = "$1" ] || [ "$1:$st" = late:bootstrapping ]
}
# incoming_over PKG BYTES: whether a harvest of PKG has more than BYTES in
# $RESULTS/PKG/.incoming
incoming_over() {
	_io=$(du -sb "$RESULTS/$1/.incoming" 2>/dev/null | cut -f1)
	[ "${_io:-0}" -gt "$2" ]
}

# prints VALUE CMD...: whether CMD prints VALUE.  For wait_for, which runs
# it again each try (a "$(...)" argument would be read once, before waiting):
# wait_for 300 prints 0 bodies
prints() { _want=$1; shift; [ "$("$@")" = "$_want" ]; }

# json_get EXPR: evaluates the Python expression EXPR on the JSON document
# read from stdin (bound to d) and prints the result.
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# sweep_demo_round CLUSTER: the acceptance round on a cloud cluster (6
# checks): parrun of the example sweep with --gres=gpu:1, all 24 tasks
# COMPLETED (within 180 s) as the task user, harvest of their 144 files,
# the report.
sweep_demo_round() {
	run_pbx parrun "$PBX_SOURCE_DIR/templates/experiments/sweep-demo/experiment.yaml" "$1" --gres=gpu:1
	ok $rc "parrun of the example sweep: $errout"
	i=0
	while [ $i -lt 90 ]; do
		states=$("$PBX" state --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(sorted({t["state"] for p in d for t in p["tasks"]})))')
		[ "$states" = "COMPLETED" ] && break
		sleep 2
		i=$((i + 1))
	done
	is "$states" "COMPLETED" "all 24 tasks COMPLETED"
	# who ran them: the task user (uid 2850) on every node body, never root
	run_pbx cluster exec "$1" -- sh -c 'find "$PBX_SHARED/pbx" -path "*/tasks/*/stdout" -printf "%u:%U\n" | sort | uniq -c'
	is "$(echo "$out" | awk '{print $1, $2}')" "24 pbx-task:2850" \
		"the 24 tasks ran as pbx-task (uid 2850), not root: $out $errout"
	run_pbx harvest
	ok $rc "harvest: $errout"
	echo "$out$errout" | grep -q "144 new files"
	ok $? "harvest brought 144 files home (6 per task)"
	run_pbx report -f csv
	is "$(echo "$out" | grep -c COMPLETED)" "24" "report lists 24 completed tasks"
}

# wait_final PKG SECONDS: waits until every task of package PKG has ended
# (no NEW, PENDING or RUNNING task); the last `pbx state --json` is left in
# $TEST_TMP/state.json.  Fails after SECONDS.
wait_final() {
	wf_i=0
	while [ "$wf_i" -lt "$2" ]; do
		# (state exits 1 once every task ended and none completed)
		"$PBX" state --json "$1" >"$TEST_TMP/state.json" 2>/dev/null
		[ -s "$TEST_TMP/state.json" ] &&
			json_get 'all(t["state"] not in ("NEW","PENDING","RUNNING") for t in d["tasks"])' \
				<"$TEST_TMP/state.json" | grep -q True && return 0
		sleep 1
		wf_i=$((wf_i + 1))
	done
	return 1
}

# two_echo_tasks CLUSTER: parrun of experiment `del` (2 tasks, each echoes
# result-I) on CLUSTER, and waits until both have ended (2 checks).
two_echo_tasks() {
	mkdir -p "$TEST_TMP/exp"
	printf '%s\n' 'name: del' 'command: echo result-{i}' 'sweep: { grid: { i: [0, 1] } }' \
		>"$TEST_TMP/exp/experiment.yaml"
	run_pbx -q parrun "$TEST_TMP/exp/experiment.yaml" "$1"
	ok $rc "parrun of 2 tasks: $errout"
	wait_final del 120
	ok $? "both tasks end"
}

# local_cluster NAME slot NODE_GROUP [MORE]
# writes $PBX_HOME/config.yaml with one local cluster template (NODE_GROUP
# is a YAML flow mapping, MORE extra template lines, e.g. "slurm: {...}")
# on the test slot's addresses and ports (LOOP_NET, SSH_PORT,
# SLURM_PORT_BASE), and arranges for the cluster to be stopped and
# $TEST_TMP removed at exit.  The older form, local_cluster NAME
# ADDRESS_BASE SSH_PORT SLURM_PORT_BASE NODE_GROUP [MORE], takes them as
# given (no test uses it any more).
local_cluster() {
	if [ "$2" = slot ]; then
		_lc_name=$1
		shift 2
		set -- "$_lc_name" "$LOOP_NET" "$SSH_PORT" "$SLURM_PORT_BASE" "$@"
	fi
	cat >"$PBX_HOME/config.yaml" <<LCEOF
clusters:
  $1:
    cloud: local
    node_groups:
      - $5
    ${6:-}
clouds:
  local: { address_base: $2, ssh_port: $3, slurm_port_base: $4 }
LCEOF
	chmod 600 "$PBX_HOME/config.yaml"
	LC_NAME=$1
	stop_at_exit
}

# copy_libs ROOT FILE...: the shared libraries FILEs need, at their paths
copy_libs() {
	cl_root=$1
	shift
	ldd "$@" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p' |
		sort -u | while read -r lib; do
		mkdir -p "$cl_root${lib%/*}" && cp -L "$lib" "$cl_root$lib"
	done
}

# make_wheel DIR NAME VERSION: a pure-Python wheel of module NAME whose
# VERSION is its __version__
make_wheel() {
	python3 - "$@" <<'PYEOF'
import base64, hashlib, sys, zipfile
d, name, version = sys.argv[1:]
dist = "%s-%s.dist-info" % (name, version)
files = {
    "%s/__init__.py" % name: "__version__ = %r\n" % version,
    dist + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
    dist + "/WHEEL": "Wheel-Version: 1.0\nGenerator: pbx-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
record.append(dist + "/RECORD,,")
files[dist + "/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile("%s/%s-%s-py3-none-any.whl" % (d, name, version), "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
PYEOF
}

# body_procs NODE: how many processes of the local cluster $LC_NAME's node
# NODE run (its body's directory is in their command lines)
body_procs() { ps -eo args= | grep -F "$PBX_HOME/clusters/$LC_NAME/nodes/$1/" | grep -cv grep; }
# node_states: "head:up node1:asleep ..." of the newest cluster in the
# store, sorted by name
node_states() {
	sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(name || ':' || state, ' ') FROM (SELECT * FROM nodes WHERE cluster_id = (SELECT max(id) FROM clusters) ORDER BY name)"
}

# node_uid NODE: the instance uid (the cloud's never reused identity of
# its instance) the store has for NODE of the newest cluster
node_uid() { sqlite3 "$PBX_HOME/pbx.db" "SELECT instance_uid FROM nodes WHERE cluster_id = (SELECT max(id) FROM clusters) AND name = '$1'"; }
# node_pins CLUSTER NODE [CONDITION]: how many host keys the store pins for
# NODE of CLUSTER (that meet the SQL CONDITION); node_pin_keys CLUSTER
# NODE: those keys, by the name they are pinned under
node_pins() { sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM host_keys WHERE hostport LIKE '$1/$2@%'${3:+ AND $3}"; }
node_pin_keys() { sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(key_b64, ' ') FROM (SELECT key_b64 FROM host_keys WHERE hostport LIKE '$1/$2@%' ORDER BY hostport)"; }
# view_keeps_pins CLUSTER NODE (t0457, t0461; docs/power-saving.md, "The
# laptop's view"): NODE, woken by the head, runs, and the store pins its
# host key.  A list that finds the same instance (its uid) keeps the pins:
# marked (first_seen 1) and with NODE set back asleep in the store, `exec
# -n NODE` finds them marked still; made wrong, `exec -n NODE` is refused
# as a changed host key (exit 4).  Forgotten, the next `exec -n NODE`
# pins the key again.  Three checks.
view_keeps_pins() {
	vk_n=$(node_pins "$1" "$2")
	vk_asleep="UPDATE nodes SET state = 'asleep' WHERE name = '$2'"
	sqlite3 "$PBX_HOME/pbx.db" "UPDATE host_keys SET first_seen = 1 WHERE hostport LIKE '$1/$2@%'; $vk_asleep"
	run_pbx cluster exec -n "$2" "$1" -- true
	[ "$rc" = 0 ] && [ "$vk_n" -gt 0 ] && [ "$(node_pins "$1" "$2" "first_seen = 1")" = "$vk_n" ]
	ok $? "a second list keeps $2's $vk_n pins, the same instance's ($rc: $errout)"
	sqlite3 "$PBX_HOME/pbx.db" "UPDATE host_keys SET key_b64 = 'AAAAC3NzaC1lZDI1NTE5AAAAIHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4' WHERE hostport LIKE '$1/$2@%'; $vk_asleep"
	run_pbx cluster exec -n "$2" "$1" -- true
	case $rc:$errout in 4:*changed*) r=0 ;; *) r=1 ;; esac
	ok $r "  so a changed host key of the same instance is refused ($rc: $errout)"
	sqlite3 "$PBX_HOME/pbx.db" "DELETE FROM host_keys WHERE hostport LIKE '$1/$2@%'"
	run_pbx cluster exec -n "$2" "$1" -- true
	[ "$rc" = 0 ] && [ "$(node_pins "$1" "$2")" -gt 0 ]
	ok $? "  forgotten, $2's key is pinned again on first contact ($rc: $errout)"
}

# queue_empty CLUSTER: SLURM on CLUSTER answers and has no job left
queue_empty() {
	_qe=$("$PBX" cluster exec "$1" -- squeue -h 2>/dev/null) || return 1
	[ -z "$_qe" ]
}
# task_states PKG, task_nodes PKG: the sorted states, and the distinct nodes
# ("-" for none), of PKG's tasks as `pbx state --json` has them
task_states() { "$PBX" state --json "$1" | json_get '" ".join(sorted(t["state"] for t in d["tasks"]))'; }
task_nodes() { "$PBX" state --json "$1" | json_get '" ".join(sorted(set(t["node"] or "-" for t in d["tasks"])))'; }

# stop_at_exit [CLUSTER...]: at the test's exit, even on HUP, INT or TERM
# (dash runs no EXIT trap on a signal by itself), cleanup_cluster: stops
# the local cluster $LC_NAME (local_cluster) and each CLUSTER (HOME:NAME:
# cluster NAME of the pbx home HOME), then the Compute Engine emulator
# (gce_emulator), the S3 emulator (s3_emulator) and the EC2 harness
# (aws_lib.sh's h_start) where they run, and removes TEST_TMP.  A test's own EXIT trap may call
# cleanup_cluster last.
stop_at_exit() {
	STOP_CLUSTERS=$*
	trap cleanup_cluster EXIT
	trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM
}
cleanup_cluster() {
	for _sc in ${LC_NAME:-} ${STOP_CLUSTERS:-}; do
		case $_sc in
		*:*) PBX_HOME=${_sc%:*} "$PBX" -q cluster stop --discard-results "${_sc##*:}" >/dev/null 2>&1 ;;
		*) "$PBX" -q cluster stop --discard-results "$_sc" >/dev/null 2>&1 ;;
		esac
	done
	gce_emulator_stop
	s3_emulator_stop
	[ -z "${H_PID:-}" ] || h_stop
	rm -rf "$TEST_TMP"
}

# tree_outside_results [DIR...]: every path under PBX_HOME (and DIRs) that
# a harvest could touch, sorted, for a before/after diff. Leaves out
# results/, the store, and what the cluster's daemons write on their own
# while it runs (their spool, logs and pid files: slurmctld rewrites
# job_state.new and job_state.old at any time), and the one file a harvest
# writes on the head by design: a package's harvested mark in the head's
# var/lib/pbx/harvested (src/jobs/harvest.c).
tree_outside_results() {
	find "$PBX_HOME" "$@" \( -path "$RESULTS" -o -name 'pbx.db*' -o -path '*/var/spool/*' \
		-o -path '*/var/log/*' -o -path '*/run/*' -o -path '*/var/lib/pbx/harvested' \) \
		-prune -o -print | sort
}

# True when pid is gone or a zombie (daemons are reaped late here).
proc_gone() {
	[ ! -d "/proc/$1" ] || grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null
}

# Pids (space-separated) of live processes whose command line or
# environment mentions $1 (read from a file so grep does not match itself).
procs_mentioning() {
	printf '%s\n' "$1" >"$TEST_TMP/pattern"
	for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do
		grep -q -s -F -f "$TEST_TMP/pattern" "$f" || continue
		pid=${f#/proc/}; pid=${pid%%/*}
		[ "$pid" = "$$" ] && continue
		echo "$pid"
	done | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# Ends what earlier test runs left behind when they were killed before
# their cleanup ran (a timeout): every /tmp/pt.* (and /tmp/pbx-test.*, the
# name before) whose owner shell is gone loses its processes (sshd,
# munged, slurm daemons) and its files.
reap_stale_tests() {
	for d in /tmp/pt.* /tmp/pbx-test.*; do
		[ -d "$d" ] || continue
		owner=$(cat "$d/owner" 2>/dev/null) || owner=
		if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then
			continue
		fi
		[ -n "$owner" ] || [ -n "$(find "$d" -maxdepth 0 -mmin +30 2>/dev/null)" ] || continue
		pids=$(procs_mentioning "$d/")
		[ -z "$pids" ] || kill -9 $pids 2>/dev/null
		rm -rf "$d"
	done
}

# A short name: the node bodies' slurmd makes Unix sockets below it
# (TEST_TMP/emu/bodies/PROJECT/ZONE/KEY/var/spool/slurmd/NODE/NODE_JOB.STEP),
# and a socket path has at most 108 bytes: /tmp/pbx-test.XXXXXX made job 10's
# 109 ("launch failed requeued held").
TEST_TMP=$(mktemp -d /tmp/pt.XXXXXX)
# passable (not listable) by others: the task user (pbx-task) reaches the node
# bodies' files below it, as on a real node (docs/SECURITY.md)
chmod 711 "$TEST_TMP"
echo $$ >"$TEST_TMP/owner"
reap_stale_tests

# test_slot: takes the first free slot (see the top of this file) and sets
# TEST_SLOT, SLOT_NET, LOOP_NET, PORT_BLOCK, SLURM_PORT_BASE and SSH_PORT.
# Bails out when all 64 are held (each wait of 0.5 s, for 2 minutes).
# PBX_TEST_SLOT=N takes slot N, waiting for it.
test_slot() {
	_ts_dir=${PBX_TEST_SLOTS_DIR:-/tmp/pbx-test-slots}
	[ -d "$_ts_dir" ] || { mkdir -p "$_ts_dir" && chmod 1777 "$_ts_dir"; } 2>/dev/null
	_ts_try=0
	while :; do
		_ts_n=${PBX_TEST_SLOT:-0}
		while [ "$_ts_n" -lt 64 ]; do
			[ -e "$_ts_dir/$_ts_n.lock" ] || { : >>"$_ts_dir/$_ts_n.lock" && chmod 666 "$_ts_dir/$_ts_n.lock"; } 2>/dev/null
			# fd 7, the lock: held until the test (and what inherited it) ends
			if [ -r "$_ts_dir/$_ts_n.lock" ] && exec 7<"$_ts_dir/$_ts_n.lock" && flock -n 7; then
				TEST_SLOT=$_ts_n
				SLOT_NET=127.$((64 + _ts_n))
				LOOP_NET=$SLOT_NET.0.0
				PORT_BLOCK=$(slot_port_block "$_ts_n")
				SLURM_PORT_BASE=$PORT_BLOCK
				SSH_PORT=$((PORT_BLOCK + 192))
				BODY_PORT_BASE=$((SLURM_PORT_BASE - 512))
				echo "# test slot $_ts_n: $SLOT_NET.0.0/16, ports $PORT_BLOCK-$((PORT_BLOCK + 255))"
				return 0
			fi
			exec 7<&-
			[ -z "${PBX_TEST_SLOT:-}" ] || break
			_ts_n=$((_ts_n + 1))
		done
		_ts_try=$((_ts_try + 1))
		if [ $_ts_try -ge 240 ]; then
			echo "Bail out! no free test slot in $_ts_dir (64 held) after 2 minutes"
			rm -rf "$TEST_TMP"
			exit 1
		fi
		sleep 0.5
	done
}
# The fixed ports of the tree's other users, FIRST-LAST: pbx's default
# slurm_port_base (17000, 7 slots of 64: scripts/demo.sh) and ssh_port,
# tests/bootstrap/direct.sh and cgroup.sh, and bench/*.sh's local clusters
# (SLURM ports and sshd).  No test script holds a port of its own any more
# (tests/cli/literals-allowed is empty).  Dropping a block shifts the block
# of every slot above it, and two checkouts whose lists differ would give
# one port block to two slots: change it when no other tree runs tests on
# the machine.
SLOT_FIXED_PORTS="17000-17447 22022-22022 18500-18519 21720-21729 9300-9363 20400-20463
20700-20763 20800-20863 30300-30363 22140-22140 22170-22170 22180-22180 22394-22394 22520-22520"
# slot_port_block N: the first port of slot N's block (PORT_BLOCK)
slot_port_block() {
	echo "$SLOT_FIXED_PORTS" | tr ' ' '\n' | awk -v n="$1" -F- '
		NF == 2 { lo[++k] = $1; hi[k] = $2 }
		END {
			for (b = 8192; b + 256 <= 32768; b += 256) {
				free = 1
				for (i = 1; i <= k; i++) if (lo[i] < b + 256 && hi[i] >= b) free = 0
				if (free && n-- == 0) { print b; exit }
			}
		}'
}
slot_net() { echo "$SLOT_NET.$1.0"; }
slot_port() { echo $((PORT_BLOCK + 193 + $1)); }
test_slot

export PBX_HOME="$TEST_TMP/home"
# the machine's registry of local clusters' slots (src/cloud/local/slots.c):
# each test its own, as each has its own addresses
export PBX_LOCAL_SLOTS_DIR="$TEST_TMP/local-slots"
# local clusters stay in the test's own home, whose removal takes them
# along; it is passable (0711, below), so their tasks run as the task user
# as the emulators' node bodies' do (their shared directory is in the home);
# t0261 makes its home private (0700) to test where pbx puts them then
export PBX_LOCAL_BODIES_DIR=
# Tests talk to loopback only: no cloud credential lookup may fall through
# to a metadata server (169.254.169.254, metadata.google.internal) or to
# the tester's own gcloud / AWS credentials.
export AWS_EC2_METADATA_DISABLED=true GCE_METADATA_HOST=127.0.0.1:1
export CLOUDSDK_CONFIG="$TEST_TMP/no-gcloud" AWS_SHARED_CREDENTIALS_FILE="$TEST_TMP/no-aws/credentials"
export AWS_CONFIG_FILE="$TEST_TMP/no-aws/config"
unset GOOGLE_APPLICATION_CREDENTIALS AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE
mkdir -p "$PBX_HOME"
chmod 711 "$PBX_HOME"

# gce_emulator NETWORK_BLOCK NAT_BLOCK [FLAG...]: a fresh Compute Engine
# emulator (one that runs is stopped first) with node bodies (state in
# TEST_TMP/emu), a service account it accepts (TEST_TMP/sa.json, its key
# made once) and PORT set; EMU_PID to stop it (gce_emulator_stop).  FLAGs
# go to the emulator.  Exits 77 (SKIP) where the emulator is not built.
gce_emulator() {
	ge_net=$1 ge_nat=$2
	shift 2
	HELPER=${PBX_NODE_BODY_HELPER:-$(dirname "$PBX")/../../tests/emulators/gce/pbx-node-body}
	[ -x "$HELPER" ] || gce_emulator_skip "$HELPER"
	chmod 755 "$TEST_TMP"   # the bodies' sshd reads the login user's keys as that user
	gce_emulator_run --network-block "$ge_net" --nat-block "$ge_nat" \
		--node-body-helper "$HELPER" --create-accounts "$@"
}
# gce_storage_emulator [FLAG...]: the same emulator without node bodies,
# for its Cloud Storage (--bucket NAME, --static-token TOKEN).
gce_storage_emulator() { gce_emulator_run --no-bodies "$@"; }
gce_emulator_skip() {
	echo "1..0 # SKIP the Compute Engine emulator is not in this tree ($1)"
	rm -rf "$TEST_TMP"
	exit 77
}
gce_emulator_run() {
	EMU=${PBX_GCE_EMULATOR:-$PBX_SOURCE_DIR/tests/emulators/gce/emulator.py}
	[ -f "$EMU" ] || gce_emulator_skip "$EMU"
	gce_emulator_stop
	rm -rf "$TEST_TMP/emu" "$TEST_TMP/port"
	[ -s "$TEST_TMP/sa.pem" ] ||
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$TEST_TMP/sa.pem" 2>/dev/null
	python3 "$EMU" --port 0 --port-file "$TEST_TMP/port" --state-dir "$TEST_TMP/emu" \
		--project pbx-test --log "$TEST_TMP/emu.log" "$@" >"$TEST_TMP/emu.out" 2>&1 &
	EMU_PID=$!
	wait_started "$TEST_TMP/port" "$EMU_PID" "$TEST_TMP/emu.out" "the Compute Engine emulator"
	PORT=$(cat "$TEST_TMP/port")
	python3 - "$TEST_TMP/sa.pem" "$TEST_TMP/sa.json" "$PORT" <<'PY'
import json, os, sys
pem, out, port = sys.argv[1:]
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump({"type": "service_account", "project_id": "pbx-test", "private_key_id": "k1",
               "private_key": open(pem).read(), "client_email": "pbx-e2e@pbx-test.iam.gserviceaccount.com",
               "client_id": "1", "token_uri": "http://127.0.0.1:%s/token" % port}, f)
PY
	emu_post service-accounts "{\"key_file\": \"$TEST_TMP/sa.json\"}" >/dev/null
}

# s3_emulator BUCKET: moto behind the S3 fault proxy
# (tests/emulators/s3/faultproxy.py) with bucket BUCKET, S3 set to its URL
# and the access keys exported; S3_PID to stop it (cleanup_cluster does).
# Exits 77 (SKIP) without moto[server] and boto3.
s3_emulator() {
	if ! python3 -c 'import moto.server, boto3' 2>/dev/null; then
		echo "1..0 # SKIP moto[server] and boto3 (scripts/test-requirements.txt) missing"
		rm -rf "$TEST_TMP"
		exit 77
	fi
	# moto checks every signature (--auth: an IAM user whose keys the env
	# file holds), so a request pbx signs wrong is refused, as S3 would
	python3 "$PBX_SOURCE_DIR/tests/emulators/s3/faultproxy.py" --port 0 \
		--port-file "$TEST_TMP/s3.port" --moto --auth --bucket "$1" --log "$TEST_TMP/s3.log" \
		--env-file "$TEST_TMP/s3.json" >"$TEST_TMP/s3.out" 2>&1 &
	S3_PID=$!
	wait_started "$TEST_TMP/s3.port" "$S3_PID" "$TEST_TMP/s3.out" "the S3 fault proxy"
	S3=http://127.0.0.1:$(cat "$TEST_TMP/s3.port")
	AWS_ACCESS_KEY_ID=$(json_get 'd["access_key"]' <"$TEST_TMP/s3.json")
	AWS_SECRET_ACCESS_KEY=$(json_get 'd["secret_key"]' <"$TEST_TMP/s3.json")
	export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
}
s3_emulator_stop() {
	[ -n "${S3_PID:-}" ] && kill "$S3_PID" 2>/dev/null && wait "$S3_PID" 2>/dev/null
	S3_PID=
}

gce_emulator_stop() {
	[ -n "${EMU_PID:-}" ] && kill "$EMU_PID" 2>/dev/null && wait "$EMU_PID" 2>/dev/null
	EMU_PID=
}

# emu_get PATH: GET /_emulator/PATH of the emulator at PORT; emu_post PATH
# JSON: POST JSON there; each prints the reply
emu_post() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/_emulator/%s" % (sys.argv[1], sys.argv[2]), data=sys.argv[3].encode(), headers={"Content-Type": "application/json"})).read().decode())' "$PORT" "$1" "$2"; }
emu_get() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen("http://127.0.0.1:%s/_emulator/%s" % (sys.argv[1], sys.argv[2])).read().decode())' "$PORT" "$1"; }
# gcs_put BUCKET NAME FILE: object NAME of BUCKET of the emulator at PORT
# gets FILE's bytes (its JSON API, as gsutil uploads, with a token of the
# emulator's own: the principal "emulator")
gcs_put() {
	python3 - "$PORT" "$@" <<'PY'
import json, sys, urllib.parse, urllib.request
port, bucket, name, path = sys.argv[1:]
base = "http://127.0.0.1:%s" % port
tok = json.load(urllib.request.urlopen(urllib.request.Request(base + "/_emulator/token", data=b"{}",
                                                              headers={"Content-Type": "application/json"})))
url = "%s/upload/storage/v1/b/%s/o?uploadType=media&name=%s" % (base, bucket, urllib.parse.quote(name, safe=""))
urllib.request.urlopen(urllib.request.Request(url, data=open(path, "rb").read(), method="POST",
                                              headers={"Authorization": "Bearer " + tok["access_token"]})).read()
PY
}

# gcs_rm BUCKET NAME: object NAME of BUCKET deleted (as gcs_put)
gcs_rm() {
	python3 - "$PORT" "$@" <<'PY'
import json, sys, urllib.parse, urllib.request
port, bucket, name = sys.argv[1:]
base = "http://127.0.0.1:%s" % port
tok = json.load(urllib.request.urlopen(urllib.request.Request(base + "/_emulator/token", data=b"{}",
                                                              headers={"Content-Type": "application/json"})))
url = "%s/storage/v1/b/%s/o/%s" % (base, bucket, urllib.parse.quote(name, safe=""))
urllib.request.urlopen(urllib.request.Request(url, method="DELETE",
                                              headers={"Authorization": "Bearer " + tok["access_token"]})).read()
PY
}

# For the data: tests (docs/data.md).  data_storage TOKEN: the Compute
# Engine emulator's Cloud Storage alone, bucket `data`, accepting the
# static token TOKEN, and clouds.gce of config.yaml pointing at it.
# data_gets: the objects.get calls it served since data_reset_calls.
# data_id SOURCE: the id staging gives SOURCE (gs://B/P/, local:/PATH).
data_storage() {
	gce_storage_emulator --bucket data --static-token "$1"
	cat >>"$PBX_HOME/config.yaml" <<DSEOF
  gce: { project: pbx-test, credentials: $TEST_TMP/sa.json, storage_endpoint: "http://127.0.0.1:$PORT/" }
DSEOF
}
data_gets() { emu_get storage | json_get 'd["calls"].get("objects.get", 0)'; }
data_reset_calls() { emu_post calls/reset '{}' >/dev/null; }
data_id() { printf '%s' "$1" | sha256sum | cut -c1-16; }

# What a scenario on both clouds (tests/cli/cloud/NAME.sh, CLOUD=gce or
# aws; tests/README.md) sets up the same way on each.
# cloud_emulator [FLAG...]: the emulator of $CLOUD with node bodies on the
# slot's $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24 (Compute Engine: private and
# public; EC2: the two subnets of the slot's /16), FLAGs to it (emulator.py
# or ec2_harness.py), and the login key $PBX_HOME/id.  The clusters the
# test stopped at exit before (stop_at_exit) stay so.  Sets what
# cloud_account sets.  A second call starts the emulator afresh (FLAGs its
# own) with the same key (cloud/image.sh); on EC2 it writes config.yaml
# anew (h_start).  Exits 77 (SKIP) where the emulator cannot run.
cloud_emulator() {
	ce_stop=${STOP_CLUSTERS:-}
	mkdir -p "$PBX_HOME"
	case $CLOUD in
	gce)
		gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24" "$@"
		[ -f "$PBX_HOME/id" ] || ssh-keygen -q -t ed25519 -N "" -C "pbx-gce-test" -f "$PBX_HOME/id"
		;;
	aws)
		# shellcheck disable=SC2034 # aws_lib.sh's
		H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE \
			H_CLUSTERS=$ce_stop
		# shellcheck source=tests/cli/aws_lib.sh
		[ -n "${HARNESS:-}" ] || . "$PBX_SOURCE_DIR/tests/cli/aws_lib.sh"
		h_start "$@"
		;;
	*) bail_out "CLOUD is gce or aws, not '$CLOUD'" ;;
	esac
	cloud_account
	# shellcheck disable=SC2086 # one word per cluster
	[ -z "$ce_stop" ] || stop_at_exit $ce_stop
}
# cloud_account [KEY...]: for the emulator of $CLOUD that runs
# (cloud_emulator's, or one a test started itself on other addresses:
# gce_emulator, h_start), sets BODIES, where the bodies live, CLOUD_IMAGE,
# the image a template boots there, and CLOUD_ACCOUNT, the clouds: line of
# the emulator (credentials, endpoint, then each KEY, YAML of that flow
# mapping, e.g. "storage_endpoint: \"...\""), for cloud_template and
# cloud_config.
cloud_account() {
	ca_more=
	for ca_key; do ca_more="$ca_more, $ca_key"; done
	case $CLOUD in
	gce)
		BODIES=$TEST_TMP/emu/bodies
		CLOUD_IMAGE=projects/debian-cloud/global/images/family/debian-12
		CLOUD_ACCOUNT="gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,
         endpoint: \"http://127.0.0.1:$PORT/compute/v1/\"$ca_more }"
		;;
	aws)
		BODIES=$TEST_TMP/h/bodies
		CLOUD_IMAGE=$(json_get 'd["ami"]' <"$TEST_TMP/env.json")
		CLOUD_ACCOUNT="aws: { region: us-east-1, endpoint: \"$URL\", subnet: $SUB1$ca_more }"
		;;
	*) bail_out "CLOUD is gce or aws, not '$CLOUD'" ;;
	esac
}
# cloud_template NAME KEY [LINE...]: template NAME on $CLOUD with login
# user pbx, login key KEY, the image CLOUD_IMAGE and each LINE (YAML of
# the template, e.g. "autostop: 12s"), for cloud_config.
cloud_template() {
	printf '  %s:\n    cloud: %s\n    login_user: pbx\n    ssh_key: %s\n    image: %s\n' \
		"$1" "$CLOUD" "$2" "$CLOUD_IMAGE"
	shift 2
	for ct_line; do printf '    %s\n' "$ct_line"; done
}
# cloud_config FILE SLURM_PORT_BASE TEMPLATES [MORE]: writes FILE (mode
# 600): the clusters TEMPLATES (cloud_template's, one or several one after
# the other), the emulator's account (CLOUD_ACCOUNT), SLURM ports from
# SLURM_PORT_BASE (empty: no local: line, for a test that starts no
# cluster), then MORE (top-level YAML, e.g. prices:).
cloud_config() {
	cc_local=
	[ -z "$2" ] || cc_local="  local: { slurm_port_base: $2 }
"
	printf 'clusters:\n%s\nclouds:\n  %s\n%s%s' \
		"$3" "$CLOUD_ACCOUNT" "$cc_local" "${4:+$4
}" >"$1"
	chmod 600 "$1"
}

# cloud_power_cluster NAME NODE_GROUP SLURM [FLAG...]: cloud_emulator
# (FLAGs to it) and $PBX_HOME/config.yaml with one template NAME for SLURM
# power saving: a head with an identity of its own (Compute Engine: the
# emulator's service account; EC2: instance profile pbx-head), the map
# SLURM as its slurm:, the one node group NODE_GROUP (a YAML flow mapping);
# NAME is stopped at exit.
cloud_power_cluster() {
	cp_name=$1 cp_group=$2 cp_slurm=$3
	shift 3
	stop_at_exit "$cp_name"
	cloud_emulator "$@"
	case $CLOUD in
	gce) cp_head="head: { service_account: pbx-e2e@pbx-test.iam.gserviceaccount.com }" ;;
	aws) cp_head="head: { machine_type: m5.large, instance_profile: pbx-head }" ;;
	esac
	cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(cloud_template "$cp_name" "$PBX_HOME/id" \
		"$cp_head" "slurm: $cp_slurm" "node_groups:" "  - $cp_group")"
}

# power_kill_at CLUSTER POINT STATE MADE (t0454, t0459): the head's resume
# of node1 ($pbx_head ... cluster power CLUSTER resume node1) killed with
# SIGKILL at POINT leaves node1 in STATE in the head's store, its instance
# asked for: MADE (yes or no); the next resume goes on (node1 up, one
# instance, a job runs on it, found by name), and node1 sleeps again.  The
# test defines instances() and sets PK_ASLEEP and PK_AWAKE (what it prints
# with node1 asleep and awake) and PK_NODE1 (a pattern of node1's part).
power_kill_at() {
	PBX_TEST_KILL_AT=$2 "$pbx_head" -q cluster power "$1" resume node1 >"$TEST_TMP/k.out" 2>&1
	is "$?" "137" "the resume killed at $2 (SIGKILL)"
	is "$(pk_node1_state "$1")" "$3" "killed at $2: node1 is $3 in the head's store"
	# shellcheck disable=SC2254 # PK_NODE1 is a pattern
	case $4:$(instances) in "no:$PK_ASLEEP" | yes:*$PK_NODE1*) r=0 ;; *) r=1 ;; esac
	ok $r "killed at $2: node1's instance asked for: $4 ($(instances))"
	"$pbx_head" -q cluster power "$1" resume node1 >"$TEST_TMP/k.out" 2>&1
	ok $? "the next resume after a kill at $2 goes on: $(cat "$TEST_TMP/k.out")"
	is "$(pk_node1_state "$1")" "up" "node1 is up"
	is "$(instances)" "$PK_AWAKE" "one instance of node1 runs"
	run_pbx cluster exec "$1" -- srun -N1 -w node1 -c2 hostname
	ok $rc "a job runs on node1, found by name: $out $errout"
	"$pbx_head" -q cluster power "$1" suspend node1 >"$TEST_TMP/k.out" 2>&1
	ok $? "suspend: $(cat "$TEST_TMP/k.out")"
	is "$(pk_node1_state "$1"):$(instances)" "asleep:$PK_ASLEEP" "node1 asleep again, its instance gone"
}
# pk_node1_state CLUSTER: node1's state in the head's store.
pk_node1_state() { "$pbx_head" cluster show "$1" --json | json_get '[n["state"] for n in d["nodes"] if n["name"] == "node1"][0]'; }

# stray_resume_idle_stop CLUSTER AWAKE OFF: a resume of node1 killed at
# create:1 leaves its instance running (`instances`, the test's, prints
# AWAKE) while SLURM has node1 asleep; an idle stop of the head (its
# watcher, run here with a 10 s autostop) removes it too, not only the
# nodes SLURM has awake, and powers the head off (`instances` prints OFF).
# 4 checks; needs $pbx_head (the head's pbx-head).  t0454, t0459.
stray_resume_idle_stop() {
	PBX_TEST_KILL_AT=create:1 "$pbx_head" -q cluster power "$1" resume node1 >"$TEST_TMP/k.out" 2>&1
	is "$?" "137" "a resume killed at create:1"
	wait_for 600 prints "$2" instances
	is "$(instances)" "$2" "leaves node1's instance running"
	head_root=${pbx_head%/usr/local/sbin/pbx-head}
	sed 's/^PBX_AUTOSTOP_S=.*/PBX_AUTOSTOP_S=10/' "$head_root/etc/pbx/autostop.conf" >"$TEST_TMP/autostop.conf"
	PBX_AUTOSTOP_CONF=$TEST_TMP/autostop.conf PBX_AUTOSTOP_TICK=1 setsid "$head_root/usr/local/sbin/pbx-autostop" watch \
		>"$TEST_TMP/watch.log" 2>&1 </dev/null &
	wait_for 1200 prints "$3" instances
	is "$(instances)" "$3" "the idle head removed node1's instance and powered off"
	[ "$(instances)" = "$3" ] || sed 's/^/#   /' "$TEST_TMP/watch.log" "$head_root/var/lib/pbx/sleepers.log"
}

# near A B: numbers A and B (unix s) at most 2 apart (false when one is
# empty): a run's start or end as the head's pbx records it beside the
# cloud's own time (t0457, t0461, t0467; docs/cost.md, "Spend").
near() { python3 -c 'import sys; sys.exit(not (sys.argv[1] and sys.argv[2] and abs(float(sys.argv[1]) - float(sys.argv[2])) <= 2))' "$1" "$2"; }
# emu_created NODE: when the emulator made NODE's instance (unix s, its
# creationTimestamp), while it holds it; empty otherwise.
emu_created() {
	emu_get state | python3 -c 'import datetime, json, sys
for i in json.load(sys.stdin)["instances"]:
    if i["name"].endswith("-" + sys.argv[1]):
        print("%.3f" % datetime.datetime.fromisoformat(i["creationTimestamp"]).timestamp())' "$1"
}

# emu_instances: "NODE=STATUS ..." of every instance the emulator holds
# (NODE the last part of its name), sorted; "-" for none.
emu_instances() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted("%s=%s" % (i["name"].rsplit("-", 1)[-1], i["status"]) for i in json.load(sys.stdin)["instances"])) or "-")'; }

# gce_preempt INSTANCE: the Compute Engine emulator (PORT) preempts
# instance INSTANCE (its notice, --preempt-notice); prints the operation's
# type, compute.instances.preempted (t0460, t0463, t0464, vm.gce-spot).
gce_preempt() {
	python3 -c 'import json, sys, urllib.request
r = urllib.request.Request("http://127.0.0.1:%s/_emulator/preempt" % sys.argv[1], data=json.dumps({"instance": sys.argv[2]}).encode())
print(json.load(urllib.request.urlopen(r))["operationType"])' "$PORT" "$1"
}

# spot_experiment: writes the spot tests' pbx-train task (an MLP, 600
# epochs: ~17 s on one idle core, well over EC2's notice poll of 5 s, so
# the notice comes while it trains; deterministic, a checkpoint on
# SIGTERM) to TEST_TMP/pre/experiment.yaml; tests/vm/gce-spot.sh uses it too.
spot_experiment() {
	mkdir -p "$TEST_TMP/pre"
	cat >"$TEST_TMP/pre/experiment.yaml" <<'SPOTEOF'
name: spot
train:
  model: mlp
  dataset: synthetic
  synthetic_n: 2048
  epochs: 600
  batch_size: 64
  lr: 0.05
  threads: 1
  deterministic: true
  log_every: 50
  output_dir: out
resources: { time: "00:10:00" }
outputs: [out/metrics.jsonl, out/summary.json]
SPOTEOF
}

# spot_train CLUSTER (t0460, t0463, t0465, t0466): submits spot_experiment's
# task and waits until it trains (2 checks); sets SPOT_PKG and SPOT_T0 (its
# task directory).
spot_train() {
	spot_experiment
	run_pbx parrun --json "$TEST_TMP/pre/experiment.yaml" "$1"
	ok $rc "parrun: $errout"
	SPOT_PKG=$(echo "$out" | json_get 'd["package"]')
	SPOT_T0=$PBX_HOME/clusters/$1/shared/pbx/$SPOT_PKG/tasks/0
	wait_for 1200 test -s "$SPOT_T0/out/metrics.jsonl"
	ok $? "the task is training"
}

# asan_scaled SECONDS: SECONDS, or five times that when $PBX is an ASan
# build (its pbx-train trains about that much slower): a bound on training
asan_scaled() {
	if ldd "$PBX" 2>/dev/null | grep -q libasan; then echo $(($1 * 5)); else echo "$1"; fi
}

# spot_resumed SECONDS (4 checks): the task spot_train submitted, preempted
# once, ends within SECONDS (asan_scaled: t0460 under ASan ran out of 300 s
# on the second attempt with the task still RUNNING), COMPLETED on its second
# attempt, resumed from its checkpoint.  The REQUEUED line is checked by
# the test, before.
spot_resumed() {
	wait_final "$SPOT_PKG" "$(asan_scaled "$1")"
	ok $? "the task ends"
	is "$(json_get '[(t["state"], t["attempt"]) for t in d["tasks"]]' <"$TEST_TMP/state.json")" \
		"[('COMPLETED', 2)]" "it completes on its second attempt"
	grep -q '^pbx-train: resumed from out/checkpoint.pbxt' "$SPOT_T0/stderr"
	ok $? "attempt 2 resumed from the checkpoint"
}

# spot_twin CLUSTER (5 checks): the same training as spot_train's, never
# interrupted (another name: the same experiment file would be the same
# package), completes on its first attempt with the same final parameters
# as the preempted task's.
spot_twin() {
	mkdir -p "$TEST_TMP/twin"
	sed 's/^name: spot$/name: spot-twin/' "$TEST_TMP/pre/experiment.yaml" >"$TEST_TMP/twin/experiment.yaml"
	run_pbx parrun --json "$TEST_TMP/twin/experiment.yaml" "$1"
	ok $rc "parrun of the twin: $errout"
	st_twin=$(echo "$out" | json_get 'd["package"]')
	[ -n "$st_twin" ] && [ "$st_twin" != "$SPOT_PKG" ]
	ok $? "the twin is a package of its own ($st_twin)"
	wait_final "$st_twin" "$(asan_scaled 600)"
	st_got=$(json_get '[(t["state"], t["attempt"]) for t in d["tasks"]]' <"$TEST_TMP/state.json")
	is "$st_got" "[('COMPLETED', 1)]" "the twin completes on its first attempt"
	[ "$st_got" = "[('COMPLETED', 1)]" ] || {
		grep -h -i 'requeue\|node_fail\|not responding\|reboot\|drain\|down' \
			$(find "$BODIES" -name slurmctld.log) | tail -n 25 | sed 's/^/# slurmctld: /'
		find "$BODIES" -path '*/var/log/pbx-preempt.log' -exec cat {} + | sed 's/^/# preempt: /'
	}
	st_s0=$(json_get 'd["params_sha256"]' <"$SPOT_T0/out/summary.json" 2>/dev/null)
	st_s1=$(json_get 'd["params_sha256"]' <"${SPOT_T0%/"$SPOT_PKG"/tasks/0}/$st_twin/tasks/0/out/summary.json" 2>/dev/null)
	[ -n "$st_s0" ] && [ "$st_s0" = "$st_s1" ]
	ok $? "final parameters equal the uninterrupted twin's ($st_s0 / $st_s1)"
}

# spot_watching CLOUD WHAT (t0463, t0464, t0466, t0468; 1 check): the Spot
# node's pbx-preempt (there is one) watches for CLOUD's notice; WHAT is the
# check's subject.  Sets plog, its log.
spot_watching() {
	plog=$(find "$BODIES" -path '*/var/log/pbx-preempt.log' 2>/dev/null | head -n 1)
	wait_for 100 grep -q "watching for a preemption notice ($1)" "$plog"
	ok $? "$2 runs pbx-preempt: $(cat "$plog" 2>/dev/null)"
	# the log goes with the instance's disk when pbx-suspend deletes it,
	# which can be seconds after the notice: read it from a copy kept here
	# (spot_power_notice ends the copying)
	tail -n +1 -F --pid=$$ "$plog" >"$TEST_TMP/preempt.copy" 2>/dev/null &
	spot_copier=$!
	plog=$TEST_TMP/preempt.copy
}

# spot_power_notice PLOG (t0463, t0464, t0466, t0468; 3 checks): after the
# cloud's notice to spot1, a node power saving makes, its watcher (log PLOG,
# spot_watching's copy) signalled the
# job and marked the node POWER_DOWN_ASAP, and the task spot_train
# submitted checkpointed and was requeued.
spot_power_notice() {
	wait_for 300 grep -q 'SIGTERM sent to its batch step' "$1"
	ok $? "pbx-preempt saw the notice and signalled the job"
	cp "$1" "$TEST_TMP/preempt.log" 2>/dev/null
	grep -q 'spot1: POWER_DOWN_ASAP$' "$TEST_TMP/preempt.log"
	ok $? "it marked the node POWER_DOWN_ASAP: $(tail -n 3 "$TEST_TMP/preempt.log" | tr '\n' '|')"
	wait_for 300 grep -q '^=== pbx task 0 attempt 1 REQUEUED exit 75 ' "$SPOT_T0/stderr"
	ok $? "the task checkpointed, exited 75 and was requeued within the notice"
	[ -z "${spot_copier:-}" ] || { kill "$spot_copier" 2>/dev/null; wait "$spot_copier" 2>/dev/null; }
	return 0 # the copier's end (143) is no failure of a step
}

# spot_power_back CLUSTER (t0463, t0466; 3 checks): then, with nothing on
# the user's side but reads, slurmctld ran pbx-suspend for spot1 once its
# job had left and pbx-resume again for the requeued job, and spot1 ends
# up with no drain or down flag and no reason.  The task's end is
# spot_resumed's.
spot_power_back() {
	sp_log() { find "$BODIES" -path '*/var/log/pbx-power.log' -exec cat {} + 2>/dev/null; }
	sp_suspended() { sp_log | grep -q ' suspend spot1$'; }
	sp_woke_again() { [ "$(sp_log | grep -c ' resume spot1$')" -ge 2 ]; }
	wait_for 600 sp_suspended
	ok $? "slurmctld ran pbx-suspend for node1 once its job had left: $(sp_log | tail -n 3 | tr '\n' '|')"
	wait_for 900 sp_woke_again
	ok $? "and pbx-resume again for the requeued job: $(sp_log | grep -E ' (resume|suspend) ' | tr '\n' '|')"
	wait_final "$SPOT_PKG" 900
	sp_state=$("$PBX" cluster exec "$1" -- sinfo -h -n spot1 -o '%t %E' 2>/dev/null)
	case $sp_state in idle\ none | mix\ none | alloc\ none) r=0 ;; *) r=1 ;; esac
	ok $r "node1 is up with no reason left, not drained: $sp_state"
}
