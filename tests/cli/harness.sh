# harness.sh - the shell tests' one TAP harness (sourced; plain POSIX sh).
#
# tests/cli/lib.sh sources it first; a test that needs no slot, no
# PBX_HOME and no emulator (tests/bootstrap, tests/scripts, ...) sources
# it alone.  It has no side effect but defining these and two counters.
# git's t/test-lib.sh is the model (its names, not its code):
#
#   test_expect_success [PREREQS] NAME BODY
#                   runs BODY (a string, eval'd in this shell: variables it
#                   sets stay set for the next steps) as step NAME: one
#                   line `ok N - NAME` or `not ok N - NAME`.  The step fails
#                   when BODY's status is not 0 or an assertion in it (ok,
#                   is, fail) failed.  Its output is kept and shown (as "# "
#                   lines) only when it fails.  PREREQS (A,B,!C) not all
#                   met: `ok N # skip NAME (missing A: why)`, BODY not run.
#                   Chain BODY's commands with && (set -e is off in a step)
#                   and leave $1... alone (they are the harness's).
#   test_when_finished CMD
#                   in a step: CMD runs after the step's BODY, passed or
#                   failed (the last registered first); a failing CMD fails
#                   the step.
#   test_set_prereq NAME                 prerequisite NAME is met
#   test_lazy_prereq NAME SCRIPT [WHY]   NAME is met when SCRIPT succeeds
#                                        (run once, when first asked; WHY
#                                        goes in the skip line)
#   test_have_prereq A,B,!C              whether all are met (!C: C is not)
#   test_skip_all WHY                    `1..0 # SKIP WHY`, exit 77 (ctest's
#                                        SKIP_RETURN_CODE)
#   bail_out WHY    `Bail out! WHY`, exit 1: the test cannot go on (what a
#                   step needs could not be made)
#   test_done       prints the plan `1..N`; exits 1 when a step or check
#                   failed, else 0 (done_testing is the same)
#
#   ok RC DESC      a check: RC 0 passes.  Outside a step: its own TAP line
#                   `ok N - DESC`; inside a step: a line in the step's
#                   output ("#   ok: DESC", or "FAIL: DESC" and the step
#                   fails), and ok returns 1 (so
#                   `is A B DESC && ...` ends a chain; outside a step the
#                   checks return 0 and the test goes on)
#   is GOT WANT DESC     ok, when GOT equals WANT (prints both when not)
#   fail DESC       a failed check (ok 1 DESC): in a step it returns 1, so
#                   `cmd || fail "why"` also ends an && chain; outside one
#                   it ends the test (exit 1)
#   skip DESC       outside a step: `ok N # skip DESC`
#
# Debugging (environment): PBX_TEST_VERBOSE=1 shows every step's output
# as it runs; PBX_TEST_TRACE=1 runs each BODY under set -x;
# PBX_TEST_IMMEDIATE=1 stops at the first failed step (after its cleanup),
# leaving what it made (the EXIT trap of lib.sh still runs).

tap_n=0
tap_failed=0
_tl_in_step=
_tl_step_bad=
_tl_prereqs=' '
_tl_lazy=

ok() {
	if [ -n "$_tl_in_step" ]; then
		if [ "$1" -eq 0 ] 2>/dev/null; then
			echo "#   ok: $2"
			return 0
		fi
		_tl_step_bad=1
		echo "FAIL: $2"
		return 1
	fi
	tap_n=$((tap_n + 1))
	if [ "$1" -eq 0 ] 2>/dev/null; then
		echo "ok $tap_n - $2"
	else
		echo "not ok $tap_n - $2"
		tap_failed=$((tap_failed + 1))
	fi
}

is() {
	if [ "$1" = "$2" ]; then
		ok 0 "$3"
	else
		ok 1 "$3"
		_tl_is=$?
		printf '#   got:  %s\n#   want: %s\n' "$1" "$2" | sed '2,$s/^/#         /;1!{/^#   want/!s/^#         #/#/}'
		return $_tl_is
	fi
}

fail() {
	ok 1 "$*"
	[ -n "$_tl_in_step" ] || exit 1
	return 1
}

skip() {
	tap_n=$((tap_n + 1))
	echo "ok $tap_n # skip $*"
}

test_done() {
	echo "1..$tap_n"
	[ "$tap_failed" -eq 0 ] || {
		echo "# $tap_failed of $tap_n failed"
		exit 1
	}
	exit 0
}
done_testing() { test_done; }

bail_out() {
	echo "Bail out! $*"
	exit 1
}

test_skip_all() {
	echo "1..0 # SKIP $*"
	exit 77
}

test_set_prereq() { _tl_prereqs="$_tl_prereqs$1 "; }

# the lazy ones as lines "NAME<tab>SCRIPT<tab>WHY"
test_lazy_prereq() {
	_tl_lazy="$_tl_lazy$1	$2	${3:-}
"
}

# _tl_why NAME: the WHY of lazy prerequisite NAME (empty when none)
_tl_why() { printf '%s' "$_tl_lazy" | awk -F'\t' -v n="$1" '$1 == n { print $3; exit }'; }

# _tl_have1 NAME: whether NAME is met, running its lazy script the first
# time (in a subshell, so it cannot change the test's state)
_tl_have1() {
	case $_tl_prereqs in *" $1 "*) return 0 ;; *" !$1 "*) return 1 ;; esac
	_tl_script=$(printf '%s' "$_tl_lazy" | awk -F'\t' -v n="$1" '$1 == n { print $2; exit }')
	if [ -n "$_tl_script" ] && (eval "$_tl_script") >/dev/null 2>&1; then
		test_set_prereq "$1"
		return 0
	fi
	_tl_prereqs="$_tl_prereqs!$1 "
	return 1
}

test_have_prereq() {
	_tl_missing=
	_tl_save_ifs=$IFS
	IFS=,
	for _tl_p in $1; do
		IFS=$_tl_save_ifs
		case $_tl_p in
		!*) ! _tl_have1 "${_tl_p#!}" || _tl_missing=${_tl_missing:-$_tl_p} ;;
		*) _tl_have1 "$_tl_p" || _tl_missing=${_tl_missing:-$_tl_p} ;;
		esac
	done
	IFS=$_tl_save_ifs
	[ -z "$_tl_missing" ]
}

test_when_finished() {
	[ -n "$_tl_in_step" ] || {
		echo "Bail out! test_when_finished outside test_expect_success: $1"
		exit 1
	}
	_tl_cleanup="$1
${_tl_cleanup:-}"
}

# _tl_run_step BODY: runs BODY, then the cleanups, with output to fd 1;
# sets _tl_step_bad when either fails
_tl_run_step() {
	if [ -n "${PBX_TEST_TRACE:-}" ]; then set -x; fi
	eval "$1"
	_tl_rc=$?
	set +x
	[ "$_tl_rc" -eq 0 ] || {
		_tl_step_bad=1
		echo "FAIL: the step's commands ended with status $_tl_rc"
	}
	while [ -n "$_tl_cleanup" ]; do
		_tl_c=${_tl_cleanup%%
*}
		_tl_cleanup=${_tl_cleanup#*
}
		[ -z "$_tl_c" ] || eval "$_tl_c" || {
			_tl_step_bad=1
			echo "FAIL: cleanup failed: $_tl_c"
		}
	done
}

test_expect_success() {
	if [ $# -eq 3 ]; then
		_tl_need=$1
		shift
		if ! test_have_prereq "$_tl_need"; then
			_tl_w=$(_tl_why "${_tl_missing#!}")
			skip "$1 (missing $_tl_missing${_tl_w:+: $_tl_w})"
			return 0
		fi
	fi
	[ $# -eq 2 ] || {
		echo "Bail out! test_expect_success takes [PREREQS] NAME BODY, not $# arguments"
		exit 1
	}
	_tl_in_step=1 _tl_step_bad='' _tl_cleanup=''
	# set -e would end the test at a step's first failing command, before
	# its cleanup and its `not ok` line: off for the step, as in git's
	case $- in *e*) _tl_errexit=1 && set +e ;; *) _tl_errexit='' ;; esac
	if [ -n "${PBX_TEST_VERBOSE:-}" ]; then
		echo "# step $((tap_n + 1)): $1"
		_tl_run_step "$2"
	else
		_tl_log=$(mktemp "${TMPDIR:-/tmp}/pbx-step.XXXXXX")
		_tl_run_step "$2" >"$_tl_log" 2>&1
	fi
	_tl_in_step=
	[ -z "$_tl_errexit" ] || set -e
	if [ -z "$_tl_step_bad" ]; then
		ok 0 "$1"
	else
		ok 1 "$1"
		[ -n "${PBX_TEST_VERBOSE:-}" ] || sed '/^#/!s/^/#   /' "$_tl_log"
	fi
	[ -n "${PBX_TEST_VERBOSE:-}" ] || rm -f "$_tl_log"
	[ -z "$_tl_step_bad" ] || [ -z "${PBX_TEST_IMMEDIATE:-}" ] || {
		echo "# stopped at the first failed step (PBX_TEST_IMMEDIATE)"
		test_done
	}
	return 0
}
