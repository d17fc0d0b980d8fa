#!/bin/sh
# t0270-environment.sh - an experiment's Python packages (environment:;
# docs/environments.md) on a local cluster whose tasks run as the task
# user: a requirements file naming a compiled wheel (numpy, from
# build/test-wheels: scripts/venv.sh) and a pure-Python one made here,
# installed from the experiment's own wheels with no index; one build job,
# a lock pinned with hashes, one archive; the tasks import both at the
# pinned versions from the node-local environment and record it
# (environment.txt, harvested); a second package with the same
# requirements neither resolves nor installs; a rerun uses the package's
# environment; a requirement that does not exist fails every task at once
# with the reason and `pbx log PKG:env` (a FIFO planted as its status
# hangs no submission); an inline list with shell
# metacharacters executes nothing; bad keys are refused with file, line and
# key.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

WHEELS=${PBX_SOURCE_DIR:-.}/build/test-wheels
numpy_whl=$(ls "$WHEELS"/numpy-*.whl 2>/dev/null | head -n 1)
[ -n "$numpy_whl" ]
ok $? "scripts/venv.sh fetched the test wheels into $WHEELS"

local_cluster ev slot "{ name: node, count: 2 }"
SHARED=$PBX_HOME/clusters/ev/shared

mkdir -p "$TEST_TMP/exp/wheels"
cp "$numpy_whl" "$TEST_TMP/exp/wheels/"
make_wheel "$TEST_TMP/exp/wheels" pbxdemo 1.0
make_wheel "$TEST_TMP/exp/wheels" pbxdemo 2.0
cat >"$TEST_TMP/exp/requirements.txt" <<'REQ'
numpy==1.26.4
pbxdemo<2
REQ
cat >"$TEST_TMP/exp/fit.py" <<'PY'
import os, sys
import numpy, pbxdemo
print("n=%s sum=%d numpy=%s pbxdemo=%s uid=%d" % (sys.argv[1], numpy.arange(int(sys.argv[1])).sum(),
      numpy.__version__, pbxdemo.__version__, os.getuid()))
print("prefix=" + sys.prefix)
PY
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: fit
command: python fit.py {n} && { [ {n} != 100 ] || [ -e "$PBX_RUN_DIR/again" ]; }
sweep: { grid: { n: [10, 100, 1000] } }
resources: { partition: main }
environment:
  python: requirements.txt
  wheels: wheels
EXP

run_pbx -q cluster start ev
ok $rc "the cluster starts: $errout"

run_pbx parrun "$TEST_TMP/exp/experiment.yaml" ev
ok $rc "parrun: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg" 300
is "$(task_states "$pkg")" "COMPLETED COMPLETED FAILED" "every task ran (task 1 fails on its first attempt, as it should)"
R=$SHARED/pbx/$pkg
[ "$(task_states "$pkg")" = "COMPLETED COMPLETED FAILED" ] || sed 's/^/# task 0: /' "$R/tasks/0/stderr"
outs=$(cat "$R"/tasks/*/stdout 2>/dev/null)
is "$(echo "$outs" | grep -c '^n=[0-9]* sum=[0-9]* numpy=1.26.4 pbxdemo=1.0 uid=2850$')" 3 \
	"each imported numpy 1.26.4 and pbxdemo 1.0 (the lock's, not 2.0), as the task user: $(echo "$outs" | head -n 2 | tr '\n' ' ')"
is "$(echo "$outs" | grep '^n=1000 ' | cut -d' ' -f2)" "sum=499500" "numpy computed"
key=$(sed -n 's/^READY //p' "$R/env/status")
[ -n "$key" ] && [ "$(echo "$outs" | grep -c "^prefix=$PBX_HOME/clusters/ev/nodes/head/var/tmp/pbx-env-2850/$key\$")" = 3 ]
ok $? "from the node-local environment $key: $(echo "$outs" | grep '^prefix=' | sort -u | tr '\n' ' ')"
grep -q '^numpy==1.26.4 --hash=sha256:[0-9a-f]\{64\}$' "$R/env/lock.txt" &&
	grep -q '^pbxdemo==1.0 --hash=sha256:[0-9a-f]\{64\}$' "$R/env/lock.txt"
ok $? "the lock pins both with their hashes: $(tr '\n' '|' <"$R/env/lock.txt")"
is "$(ls "$SHARED/pbx/envs" | grep -c '\.tar\.\(zst\|gz\)$')" 1 "one archive on the shared disk"
# zstd where the nodes have it (this machine's, for a local cluster)
if command -v zstd >/dev/null; then PACKED=zst; else PACKED=gz; fi
[ -f "$SHARED/pbx/envs/$key.tar.$PACKED" ]
ok $? "packed with $PACKED: $(ls "$SHARED/pbx/envs")"
(cd "$SHARED/pbx/envs" && [ "$(sha256sum <"$key.tar.$PACKED" | cut -d' ' -f1)" = "$(cat "$key.sha256")" ])
ok $? "its checksum is the one recorded"
is "$(stat -c %U "$R/env" "$SHARED/pbx/envs/$key.tar.$PACKED" | sort -u)" pbx-task "the build ran as the task user"
grep -q 'pbx-env: python 3\..* partition main$' "$R/env/build.log" &&
	grep -q 'resolving requirements.txt (its wheels, no index)' "$R/env/build.log"
ok $? "the build ran in the experiment's partition and resolved once, with no index: $(tr '\n' '|' <"$R/env/build.log")"

is "$("$PBX" state --json "$pkg" | json_get 'd["environment"]["state"] + " " + d["environment"]["key"]')" \
	"READY $key" "state --json: the environment READY, with its key"
run_pbx state -v "$pkg"
case $out in *"environment $key"*) r=0 ;; *) r=1 ;; esac
ok $r "state -v shows its key"
run_pbx log "$pkg:env"
case $out in *"ready: $key"*) r=0 ;; *) r=1 ;; esac
ok $r "pbx log PKG:env shows the build log"

run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
envtxt=$PBX_HOME/results/$pkg/0/environment.txt
grep -q "^environment $key\$" "$envtxt" && grep -q '^python 3\.' "$envtxt" &&
	grep -q '^numpy==1.26.4 --hash=' "$envtxt"
ok $? "environment.txt came home with the key, the Python and the lock: $(head -n 3 "$envtxt" 2>/dev/null | tr '\n' '|')"
is "$("$PBX" report "$pkg" -f json | json_get 'd["environment"]["state"] + " " + d["environment"]["key"] + " " + str(any(l.startswith("numpy==1.26.4 --hash=sha256:") for l in d["environment"]["record"]))')" \
	"READY $key True" "report -f json records the environment: its key and the lock"

# a second package with the same requirements: no resolve, no install
cp -r "$TEST_TMP/exp" "$TEST_TMP/exp2"
sed -i 's/^name: fit$/name: fit-two/' "$TEST_TMP/exp2/experiment.yaml"
run_pbx parrun "$TEST_TMP/exp2/experiment.yaml" ev
ok $rc "parrun of a second package: $errout"
pkg2=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg2" 300
is "$(task_states "$pkg2")" "COMPLETED COMPLETED FAILED" "its tasks ran"
log2=$(cat "$SHARED/pbx/$pkg2/env/build.log")
case $log2 in *"requirements resolved before"*"environment $key is built already"*) r=0 ;; *) r=1 ;; esac
ok $r "its build neither resolved nor installed: $(echo "$log2" | tr '\n' '|')"
is "$(ls "$SHARED/pbx/envs" | grep -c '\.tar\.\(zst\|gz\)$')" 1 "still one archive"

# a rerun: the package's environment, no build job
touch "$R/again"
run_pbx rerun --failed "$pkg"
ok $rc "rerun --failed: $errout"
wait_final "$pkg" 300
is "$(task_states "$pkg")" "COMPLETED COMPLETED COMPLETED" "the rerun task completed"
is "$(grep -c 'pbx-env: ready' "$R/env/build.log")" 1 "a rerun builds nothing"
grep -q "^environment $key\$" "$R/tasks/1/environment.txt"
ok $? "and ran in the same environment"

# a requirement that does not exist: every task fails at once, saying why
mkdir -p "$TEST_TMP/bad"
cp -r "$TEST_TMP/exp/wheels" "$TEST_TMP/bad/"
cat >"$TEST_TMP/bad/experiment.yaml" <<'EXP'
name: bad
command: python -c 'print(1)'
sweep: { grid: { i: [1, 2] } }
environment:
  python: ["numpy==1.26.4", "nosuchpackage==9.9"]
  wheels: wheels
EXP
run_pbx parrun "$TEST_TMP/bad/experiment.yaml" ev
ok $rc "parrun of a package with a missing requirement: $errout"
bad=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$bad" 300
is "$(task_states "$bad")" "FAILED FAILED" "both tasks failed"
grep -q 'the environment failed to build: cannot resolve requirements.txt: ERROR: .*nosuchpackage==9.9' \
	"$SHARED/pbx/$bad/tasks/0/stderr"
ok $? "each says why: $(grep pbx-env "$SHARED/pbx/$bad/tasks/0/stderr")"
[ ! -e "$SHARED/pbx/$bad/tasks/0/stdout" ] || [ ! -s "$SHARED/pbx/$bad/tasks/0/stdout" ]
ok $? "its command never ran"
run_pbx state "$bad"
case $out in *"environment failed: cannot resolve requirements.txt: ERROR: "*"nosuchpackage==9.9"*"'pbx log $bad:env' shows its build log"*) r=0 ;; *) r=1 ;; esac
ok $r "pbx state says the environment failed, why, and where the log is: $out"
is "$rc" 1 "and exits 1: every task ended, none completed (a script's test)"
is "$("$PBX" state --json "$bad" | json_get 'd["environment"]["state"] + " " + str("nosuchpackage" in d["environment"]["reason"])')" \
	"FAILED True" "state --json: the environment FAILED, with the reason"
run_pbx log "$bad:env"
case $out in *"No matching distribution found for nosuchpackage==9.9"*) r=0 ;; *) r=1 ;; esac
ok $r "pbx log PKG:env has pip's words"
is "$(ls "$SHARED/pbx/envs" | grep -c '\.tar\.\(zst\|gz\)$')" 1 "no archive was added"
# the run's env/ is the task user's: a FIFO planted as its status does not
# hang the submission (root reads it without blocking) and is replaced
rm -f "$SHARED/pbx/$bad/env/status"
mkfifo "$SHARED/pbx/$bad/env/status"
timeout 120 "$PBX" rerun --failed "$bad" >/dev/null 2>"$TEST_TMP/rerun.err"
is "$?" 0 "rerun with a FIFO as the environment's status returns: $(cat "$TEST_TMP/rerun.err")"
wait_final "$bad" 300
is "$(task_states "$bad")" "FAILED FAILED" "and builds again, failing again"
[ -f "$SHARED/pbx/$bad/env/status" ] && [ ! -p "$SHARED/pbx/$bad/env/status" ]
ok $? "the FIFO is gone: the status is a file again"

# hostile: a requirement line with shell metacharacters is pip's text,
# never a shell's
mkdir -p "$TEST_TMP/hostile"
cp -r "$TEST_TMP/exp/wheels" "$TEST_TMP/hostile/"
cat >"$TEST_TMP/hostile/experiment.yaml" <<EXP
name: hostile
command: "true"
environment:
  python: ['pbxdemo; python_version > "3" \$(touch $TEST_TMP/pwned) \`touch $TEST_TMP/pwned2\`']
  wheels: wheels
EXP
run_pbx parrun "$TEST_TMP/hostile/experiment.yaml" ev
hostile=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$hostile" 300
is "$(task_states "$hostile")" "FAILED" "a requirement with shell metacharacters fails to resolve"
[ ! -e "$TEST_TMP/pwned" ] && [ ! -e "$TEST_TMP/pwned2" ]
ok $? "and nothing in it was executed"

# cancel of a package whose environment is still to build: its build job
# goes too (every node held by a job of root's: the build job waits)
run_pbx cluster exec ev -- sh -c 'sbatch -N "$(sinfo -h -o %D)" --exclusive -J t0270-block -o /dev/null --wrap "sleep 600"'
ok $rc "a job holds every node: $errout"
sed 's/^name: fit$/name: fit-cancel/' "$TEST_TMP/exp/experiment.yaml" >"$TEST_TMP/exp/cancel.yaml"
run_pbx parrun "$TEST_TMP/exp/cancel.yaml" ev
cpkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
ok $rc "parrun while the nodes are busy: $out $errout"
run_pbx cluster exec ev -- squeue -h -n "pbx-$cpkg-env" -o %j
is "$out" "pbx-$cpkg-env" "its build job waits"
run_pbx cancel "$cpkg"
ok $rc "pbx cancel of the package: $errout"
# live_jobs: the package's jobs SLURM still has pending or running
live_jobs() { "$PBX" cluster exec ev -- squeue -h -t PENDING,RUNNING -n "pbx-$cpkg-env,pbx-$cpkg" -o %j 2>&1; }
wait_secs 30 prints "" live_jobs
is "$(live_jobs)" "" "its build job and arrays are gone"
run_pbx cluster exec ev -- scancel -n t0270-block
ok $rc "the nodes are free again: $errout"

# bad keys: file, line and key, exit 2, nothing submitted
bad_key() {
	printf 'name: k\ncommand: "true"\nenvironment:\n%s\n' "$1" >"$TEST_TMP/exp/k.yaml"
	run_pbx parrun "$TEST_TMP/exp/k.yaml" ev
	is "$rc" 2 "$2: exit 2"
	case $errout in *"k.yaml:$3: environment.$4"*) r=0 ;; *) r=1 ;; esac
	ok $r "$2: names the line and key: $errout"
}
bad_key "  python: ../requirements.txt" "a path above the experiment" 4 python
bad_key "  python: /etc/passwd" "an absolute path" 4 python
bad_key "  python: [\"--index-url=http://x\"]" "an option in an inline list" 4 python
bad_key "  python: missing.txt" "a file that is not shipped" 4 python
bad_key "  python: requirements.txt
  wheels: fit.py" "wheels that are a file" 5 wheels
bad_key "  pyton: requirements.txt" "a misspelt key" 4 pyton

run_pbx -q cluster stop --discard-results ev
ok $rc "stop: $errout"
done_testing
