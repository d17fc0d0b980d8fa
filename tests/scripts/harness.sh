#!/bin/sh
# scripts.test_harness: tests/cli/harness.sh, the shell tests' harness, does
# what tests/README.md says, under dash: named steps print `ok N - NAME` or
# `not ok N - NAME` with the failed step's output and exit status 1;
# test_when_finished runs after a step, passed or failed, last first; a
# missing prerequisite skips with its reason; in-step checks fail their
# step; test_skip_all exits 77; PBX_TEST_IMMEDIATE stops at the first
# failure.  Each sample script runs under dash (and bash when there is one).
# Usage: harness.sh SOURCE_DIR
src=${1:?source dir}
# shellcheck source=tests/cli/harness.sh
. "$src/tests/cli/harness.sh"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# sample NAME: writes the sample script NAME (its body from stdin) after a
# line that sources the harness; it runs with T set to $tmp
sample() {
	{
		echo ". '$src/tests/cli/harness.sh'"
		cat
	} >"$tmp/$1.sh"
}
# runs SHELL NAME [VAR=VALUE...]: runs sample NAME under SHELL; its output
# in $tmp/NAME.out, its status in $rc
runs() {
	_sh=$1 _name=$2
	shift 2
	env T="$tmp" "$@" "$_sh" "$tmp/$_name.sh" >"$tmp/$_name.out" 2>&1
	rc=$?
}

sample steps <<'EOF'
test_expect_success 'a step that passes' 'x=1 && [ "$x" = 1 ]'
test_expect_success 'its variables stay set' '[ "$x" = 1 ]'
test_expect_success 'a step that fails' '
	test_when_finished "echo first-registered >>$T/order"
	test_when_finished "echo last-registered >>$T/order"
	echo noise-of-the-failed-step
	false
'
test_expect_success 'a check in a step fails it' 'is "a" "b" "a is b"; true'
test_expect_success 'fail ends an && chain' 'false || fail "the reason" && echo never-printed'
ok 0 "a plain check"
test_expect_success 'cleanup after success' 'test_when_finished "echo cleaned >>$T/order"'
test_done
EOF
for shell in dash bash; do
	command -v "$shell" >/dev/null 2>&1 || {
		skip "$shell is not installed"
		continue
	}
	rm -f "$tmp/order"
	runs "$shell" steps
	is "$rc" 1 "$shell: a failed step makes the test exit 1"
	is "$(grep -v '^#' "$tmp/steps.out")" "ok 1 - a step that passes
ok 2 - its variables stay set
not ok 3 - a step that fails
not ok 4 - a check in a step fails it
not ok 5 - fail ends an && chain
ok 6 - a plain check
ok 7 - cleanup after success
1..7" "$shell: one TAP line per step and check, the plan last"
	grep -q '^#   noise-of-the-failed-step$' "$tmp/steps.out"
	ok $? "$shell: a failed step's output is shown"
	grep -q 'noise' "$tmp/steps.out" && ! grep -q '^# .*a step that passes' "$tmp/steps.out"
	ok $? "$shell: a passing step's output is not"
	grep -q '^#   FAIL: a is b$' "$tmp/steps.out" && grep -q '^#   got:  a$' "$tmp/steps.out"
	ok $? "$shell: a failed check names itself and what it got"
	grep -q '^#   FAIL: the reason$' "$tmp/steps.out" && ! grep -q never-printed "$tmp/steps.out"
	ok $? "$shell: fail gives its reason and ends the chain"
	is "$(cat "$tmp/order")" "last-registered
first-registered
cleaned" "$shell: test_when_finished runs after the step, failed or not, last registered first"
	runs "$shell" steps PBX_TEST_VERBOSE=1
	grep -q '^#   ok: a plain check' "$tmp/steps.out"
	ok $((! $?)) "$shell: a check outside a step is its own TAP line, not a step's"
	sample verbose <<'EOF2'
test_expect_success 'two checks' 'ok 0 "first check" && is x x "second check"'
test_done
EOF2
	runs "$shell" verbose PBX_TEST_VERBOSE=1
	is "$(grep -c '^#   ok: \(first\|second\) check$' "$tmp/verbose.out")" 2 "$shell: PBX_TEST_VERBOSE=1 shows each passing check of a step"
done

sample prereq <<'EOF'
test_set_prereq HAVE
test_lazy_prereq NEVER 'false' 'the thing is not installed'
test_lazy_prereq ALWAYS 'true'
test_expect_success HAVE 'a met prerequisite runs' 'true'
test_expect_success NEVER 'a missing one skips' 'echo ran >>$T/ran'
test_expect_success HAVE,!NEVER,ALWAYS 'negated and lazy ones' 'true'
test_expect_success !HAVE 'a negated met one skips' 'echo ran >>$T/ran'
test_have_prereq NEVER
ok $((! $?)) "test_have_prereq says no"
test_done
EOF
runs dash prereq
is "$rc:$(grep -v '^#' "$tmp/prereq.out")" "0:ok 1 - a met prerequisite runs
ok 2 # skip a missing one skips (missing NEVER: the thing is not installed)
ok 3 - negated and lazy ones
ok 4 # skip a negated met one skips (missing !HAVE)
ok 5 - test_have_prereq says no
1..5" "prerequisites: a skip says which is missing and why; skips do not fail"
[ ! -e "$tmp/ran" ]
ok $? "a skipped step's body does not run"

sample skipall <<'EOF'
test_skip_all 'no emulator here'
EOF
runs dash skipall
is "$rc:$(cat "$tmp/skipall.out")" "77:1..0 # SKIP no emulator here" "test_skip_all: the SKIP plan and exit 77"

sample immediate <<'EOF'
test_expect_success 'fails' 'false'
test_expect_success 'never reached' 'true'
test_done
EOF
runs dash immediate PBX_TEST_IMMEDIATE=1
is "$rc:$(grep -v '^#' "$tmp/immediate.out")" "1:not ok 1 - fails
1..1" "PBX_TEST_IMMEDIATE=1 stops at the first failed step"
runs dash immediate PBX_TEST_VERBOSE=1
grep -q '^# step 2: never reached$' "$tmp/immediate.out"
ok $? "PBX_TEST_VERBOSE=1 names each step as it starts"

sample errexit <<'EOF'
set -e
test_expect_success 'fails under set -e' 'test_when_finished "echo cleaned >>$T/errexit"; false'
test_expect_success 'the next step runs' 'true'
case $- in *e*) ok 0 "set -e is back after a step" ;; *) ok 1 "set -e is back after a step" ;; esac
test_done
EOF
runs dash errexit
is "$rc:$(grep -v '^#' "$tmp/errexit.out"):$(cat "$tmp/errexit" 2>/dev/null)" "1:not ok 1 - fails under set -e
ok 2 - the next step runs
ok 3 - set -e is back after a step
1..3:cleaned" "a test under set -e: a failed step still cleans up, says not ok, and the test goes on"

sample failout <<'EOF'
fail 'the reason'
ok 0 'never reached'
EOF
runs dash failout
is "$rc:$(cat "$tmp/failout.out")" "1:not ok 1 - the reason" "fail outside a step ends the test"

sample outside <<'EOF'
test_when_finished 'true'
EOF
runs dash outside
is "$rc:$(grep -c 'Bail out! test_when_finished outside' "$tmp/outside.out")" "1:1" \
	"test_when_finished outside a step bails out"
test_done
