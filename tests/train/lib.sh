# lib.sh - helpers shared by the shell tests in tests/train (sourced, as
# . "$(dirname "$0")/lib.sh", after the test has set its own variables).
#
# The checks are the harness's (tests/cli/harness.sh: ok RC WHAT, fail,
# test_done), sourced here; tests that stop at the first failure run
# under set -e (dp.sh, downpour.sh), where a failed `fail` ends them.
#   expect CODE PATTERN -- COMMAND...
#                             runs COMMAND; ok when it exits CODE and its
#                             output (stdout and stderr) matches PATTERN
#                             (grep), else not ok with the command, status
#                             and output
#   rank_pid MPIRUN_PID RANK  the pid of MPI rank RANK among mpirun's
#                             children (status 1 when there is none)
#   mpi_disrupt SIG RANK STEP SECONDS COMMAND...
#                             runs the mpirun COMMAND in the background
#                             (output in $W/d.log, its run writing to
#                             $W/d), sends SIG to rank RANK once
#                             $W/d/metrics.jsonl has reached step STEP and
#                             waits at most SECONDS for mpirun to end; cats
#                             $W/d.log; its exit status in RC, the seconds
#                             it took to end after the signal in T

# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/../cli/harness.sh"
expect() {
	code=$1; pat=$2; shift 3
	out=$("$@" 2>&1); rc=$?
	if [ "$rc" != "$code" ] || ! printf '%s' "$out" | grep -q -- "$pat"; then
		ok 1 "$* -> $rc: $out"
	else
		ok 0 "$pat"
	fi
}

rank_pid() {
	for p in $(pgrep -P "$1"); do
		if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

mpi_disrupt() {
	_sig=$1 _rank=$2 _step=$3 _secs=$4
	shift 4
	"$@" >"$W/d.log" 2>&1 &
	MP=$!
	i=0
	while ! grep -q "\"step\":$_step" "$W/d/metrics.jsonl" 2>/dev/null; do
		sleep 0.1; i=$((i+1))
		[ $i -lt 600 ] || { kill $MP; cat "$W/d.log"; fail "no progress"; }
	done
	P=$(rank_pid $MP "$_rank") || { kill $MP; fail "rank $_rank not found"; }
	T0=$(date +%s)
	kill -"$_sig" "$P"
	i=0
	while kill -0 $MP 2>/dev/null; do
		sleep 0.5; i=$((i+1))
		if [ $i -gt $((_secs * 2)) ]; then
			pkill -KILL -P $MP 2>/dev/null || true
			kill -KILL $MP "$P" 2>/dev/null || true
			cat "$W/d.log"; fail "job still running $_secs s after SIG$_sig to rank $_rank"
		fi
	done
	RC=0; wait $MP || RC=$?
	T=$(( $(date +%s) - T0 ))
	cat "$W/d.log"
}
