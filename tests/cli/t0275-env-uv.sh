#!/bin/sh
# t0275-env-uv.sh - the installer of an experiment's Python environment
# (docs/environments.md, "The installer") on a local cluster whose tasks
# run as the task user, with no index: the experiment's wheels hold a uv
# wheel, so uv is installed once for the cluster (SHARED/pbx/envs/tools/uv)
# and resolves and installs (a lock pinned with its hash, the tasks import
# the pinned versions, environment.txt says uv and its version); a second
# package does not install uv again; installer: pip keeps to pip and
# yields the same lock and environment; installer: uv without a uv wheel
# fails every task saying how to bring one; a requirement that does not
# exist fails with uv's words; a bad installer value is refused with file,
# line and key.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

WHEELS=${PBX_SOURCE_DIR:-.}/build/test-wheels
uv_whl=$(ls "$WHEELS"/uv-*.whl 2>/dev/null | head -n 1)
numpy_whl=$(ls "$WHEELS"/numpy-*.whl 2>/dev/null | head -n 1)
[ -n "$uv_whl" ] && [ -n "$numpy_whl" ]
ok $? "scripts/venv.sh fetched uv's and numpy's wheels into $WHEELS"

local_cluster uv slot "{ name: node, count: 1 }"
SHARED=$PBX_HOME/clusters/uv/shared

# exp NAME INSTALLER [UV]: an experiment importing numpy and pbxdemo 1.0
# from its wheels (with uv's wheel among them unless UV is 0); one pbxdemo
# wheel for all, so that their locks can be the same
mkdir -p "$TEST_TMP/common"
make_wheel "$TEST_TMP/common" pbxdemo 1.0
exp() {
	mkdir -p "$TEST_TMP/$1/wheels"
	cp "$numpy_whl" "$TEST_TMP/common"/pbxdemo-*.whl "$TEST_TMP/$1/wheels/"
	[ "${3:-1}" = 0 ] || cp "$uv_whl" "$TEST_TMP/$1/wheels/"
	printf 'numpy==1.26.4\npbxdemo==1.0\n' >"$TEST_TMP/$1/requirements.txt"
	cat >"$TEST_TMP/$1/experiment.yaml" <<EXP
name: $1
command: python -c 'import numpy, pbxdemo; print(numpy.__version__, pbxdemo.__version__, {i})'
sweep: { grid: { i: [1, 2] } }
environment: { python: requirements.txt, wheels: wheels${2:+, installer: $2} }
EXP
}
submit() {
	run_pbx parrun "$TEST_TMP/$1/experiment.yaml" uv
	pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
	wait_final "$pkg" 300
	echo "$pkg"
}

run_pbx -q cluster start uv
ok $rc "the cluster starts: $errout"

exp withuv ""
p1=$(submit withuv)
R=$SHARED/pbx/$p1
is "$(task_states "$p1")" "COMPLETED COMPLETED" "the tasks ran"
is "$(cat "$R"/tasks/*/stdout | sort | tr '\n' '|')" "1.26.4 1.0 1|1.26.4 1.0 2|" "each imported the pinned numpy and pbxdemo"
grep -q '^pbx-env: installer uv 0\.13\.9' "$R/env/build.log"
ok $? "uv resolved and installed: $(grep installer "$R/env/build.log")"
[ -x "$SHARED/pbx/envs/tools/uv/bin/uv" ]
ok $? "installed once for the cluster, from the experiment's wheels"
grep -q '^numpy==1.26.4 --hash=sha256:[0-9a-f]\{64\}$' "$R/env/lock.txt" &&
	grep -q '^pbxdemo==1.0 --hash=sha256:[0-9a-f]\{64\}$' "$R/env/lock.txt"
ok $? "the lock pins each with its hash, one line a package: $(tr '\n' '|' <"$R/env/lock.txt")"
run_pbx -q harvest "$p1"
grep -q '^installer uv 0\.13\.9' "$PBX_HOME/results/$p1/0/environment.txt"
ok $? "environment.txt names the installer: $(grep installer "$PBX_HOME/results/$p1/0/environment.txt")"
key=$(sed -n 's/^READY //p' "$R/env/status")

# a second package, its own requirements order: resolves, but no uv install
exp second ""
sed -i 's/^numpy==1.26.4$/numpy == 1.26.4/' "$TEST_TMP/second/requirements.txt"
tools_before=$(stat -c %Y "$SHARED/pbx/envs/tools/uv")
p2=$(submit second)
is "$(task_states "$p2")" "COMPLETED COMPLETED" "a second package runs"
is "$(stat -c %Y "$SHARED/pbx/envs/tools/uv")" "$tools_before" "uv is not installed again"
is "$(sed -n 's/^READY //p' "$SHARED/pbx/$p2/env/status")" "$key" "the same lock: the same environment"

# installer: pip keeps to pip, and makes the same lock and environment
exp withpip pip
p3=$(submit withpip)
is "$(task_states "$p3")" "COMPLETED COMPLETED" "installer: pip runs"
grep -q 'installer' "$SHARED/pbx/$p3/env/build.log" && r=1 || r=0
ok $r "no uv in its build: $(grep -c . "$SHARED/pbx/$p3/env/build.log") lines"
cmp -s "$R/env/lock.txt" "$SHARED/pbx/$p3/env/lock.txt"
ok $? "pip's lock is uv's, line for line"

# installer: uv with no uv wheel and no index: every task fails, saying how
exp nouv uv 0
rm -rf "$SHARED/pbx/envs/tools"
p4=$(submit nouv)
is "$(task_states "$p4")" "FAILED FAILED" "installer: uv without a uv wheel fails"
grep -q 'installer: uv, but the experiment.s wheels hold no uv wheel (pip download uv -d WHEELS)' "$SHARED/pbx/$p4/tasks/0/stderr"
ok $? "saying how to bring one: $(grep pbx-env "$SHARED/pbx/$p4/tasks/0/stderr")"

# a requirement that does not exist: uv's words
exp missing ""
echo "nosuchpackage==9.9" >>"$TEST_TMP/missing/requirements.txt"
p5=$(submit missing)
is "$(task_states "$p5")" "FAILED FAILED" "a missing requirement fails every task"
grep -q 'cannot resolve requirements.txt: .*nosuchpackage' "$SHARED/pbx/$p5/tasks/0/stderr"
ok $? "saying which: $(grep pbx-env "$SHARED/pbx/$p5/tasks/0/stderr")"

# a bad installer: file, line and key
printf 'name: k\ncommand: "true"\nenvironment:\n  python: [numpy]\n  installer: conda\n' >"$TEST_TMP/k.yaml"
run_pbx parrun "$TEST_TMP/k.yaml" uv
is "$rc" 2 "installer: conda is refused"
case $errout in *"k.yaml:5: environment.installer"*"auto, uv or pip"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the line and key: $errout"

run_pbx -q cluster stop --discard-results uv
ok $rc "stop: $errout"
done_testing
