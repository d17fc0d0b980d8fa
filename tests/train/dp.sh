#!/bin/sh
# dp.sh CASE PBX_TRAIN CKPT_CMP WORKDIR - data-parallel pbx-train under
# mpirun (oversubscribed: this machine has 2 cores; one mpirun at a time).
#   equal:   lenet (no BN, no dropout), global batch 64, seed 1, 50 steps on
#            1, 2 and 4 ranks: parameters within 1e-4 of their RMS
#            (measured 1.4e-5; float sums reassociated)
#   syncbn:  a BN net on 2 ranks with sync_bn equals one process on the whole
#            batch within 1e-4 (measured 1.1e-6); without sync_bn it must NOT
#            (measured 0.3: per-rank batch statistics)
#   resume:  2 ranks, 20 steps + resume to 40 == 40 straight (checkpoint
#            payload byte for byte); a 2-rank checkpoint resumed on 4 ranks
#            works, says so, and stays within 1e-4 of the 2-rank run
#   kill:    SIGKILL to rank 1 mid-run: the job ends within 60 s and the
#            output names rank 1
#   hang:    SIGSTOP to rank 1 mid-run with comm_timeout 5: the job ends
#            within 60 s with rank 0's message naming rank 1
#   hang0:   the same with rank 0 stopped: rank 1 names rank 0
set -eu
CASE=$1
BIN=$2
CMP=$3
W=$4
SRC=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"
mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Under ASan, OpenMPI's own allocations (many in plugins it has unloaded
# by exit, so no suppression can name them) read as leaks: leak checking is
# off for ranks, and stays on for the one-process runs, which run the same
# trainer code apart from comm_mpi.c.
MPIRUN="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 mpirun --oversubscribe --allow-run-as-root"
LENET="--set model=lenet --set dataset=synthetic --set synthetic_n=2048
 --set test_subset=256 --set epochs=2 --set batch_size=64 --set threads=1
 --set log_every=10 --set eval_every=0 --set seed=1"
. "$(dirname "$0")/lib.sh"

# payload of a checkpoint (after the 208-byte header, which holds times)
payload() { tail -c +209 "$1"; }

# starts a long 2-rank run, waits for progress, sends $1 to rank $2 and
# checks that the job ends within 60 s
disrupt() {
	mpi_disrupt "$1" "$2" 30 60 $MPIRUN -np 2 "$BIN" - $LENET --set synthetic_n=16384 \
		--set epochs=1000 --set comm_timeout=5 --set output_dir="$W/d"
	[ "$RC" != 0 ] || fail "mpirun exited 0 after SIG$1 to rank $2"
	echo "SIG$1 to rank $2: job ended in ${T} s, mpirun exit $RC"
}

case $CASE in
equal)
	for n in 1 2 4; do
		$MPIRUN -np $n "$BIN" - $LENET --set max_steps=50 \
			--set output_dir="$W/w$n" 2>"$W/w$n.log" || { cat "$W/w$n.log"; fail "$n ranks"; }
		grep -q "\"world\": $n" "$W/w$n/summary.json" || fail "summary of $n ranks has no world $n"
	done
	# rank 0 alone writes outputs: one TensorBoard file (each writer opens one)
	[ "$(ls "$W/w4" | grep -c '^events.out.tfevents')" = 1 ] || fail "more than one rank wrote TensorBoard files: $(ls "$W/w4")"
	for n in 2 4; do
		"$CMP" "$W/w1/checkpoint.pbxt" "$W/w$n/checkpoint.pbxt" 1e-4 || fail "1 vs $n ranks"
	done
	# one process without mpirun is the same as mpirun -np 1, bit for bit
	"$BIN" - $LENET --set max_steps=50 --set output_dir="$W/plain" 2>"$W/plain.log"
	payload "$W/plain/checkpoint.pbxt" > "$W/p0"; payload "$W/w1/checkpoint.pbxt" > "$W/p1"
	cmp -s "$W/p0" "$W/p1" || fail "no mpirun vs mpirun -np 1"
	grep -q '"comm": "self"' "$W/plain/summary.json" || fail "plain run used MPI"
	# a global batch that does not split over the ranks: exit 2, named
	rc=0
	$MPIRUN -np 4 "$BIN" - $LENET --set batch_size=66 --set output_dir="$W/odd" >"$W/odd.log" 2>&1 || rc=$?
	[ "$rc" = 2 ] && grep -q "global batch 66 does not split evenly over 4 ranks" "$W/odd.log" ||
		{ cat "$W/odd.log"; fail "odd batch: exit $rc"; }
	;;
syncbn)
	Y="$SRC/dp-bn.yaml"
	"$BIN" "$Y" --set max_steps=50 --set output_dir="$W/one" 2>"$W/one.log"
	$MPIRUN -np 2 "$BIN" "$Y" --set max_steps=50 --set sync_bn=true \
		--set output_dir="$W/sync" 2>"$W/sync.log" || { cat "$W/sync.log"; fail "sync run"; }
	$MPIRUN -np 2 "$BIN" "$Y" --set max_steps=50 \
		--set output_dir="$W/local" 2>"$W/local.log" || { cat "$W/local.log"; fail "local-BN run"; }
	"$CMP" "$W/one/checkpoint.pbxt" "$W/sync/checkpoint.pbxt" 1e-4 || fail "sync BN on 2 ranks differs from one process"
	if "$CMP" "$W/one/checkpoint.pbxt" "$W/local/checkpoint.pbxt" 1e-4; then
		fail "per-rank BN equals the whole batch's: the test cannot tell"
	fi
	;;
resume)
	Y="$SRC/dp-bn.yaml"
	$MPIRUN -np 2 "$BIN" "$Y" --set max_steps=40 --set output_dir="$W/a" 2>"$W/a.log"
	$MPIRUN -np 2 "$BIN" "$Y" --set max_steps=20 --set output_dir="$W/b" 2>"$W/b1.log"
	$MPIRUN -np 2 "$BIN" "$Y" --set max_steps=40 --set output_dir="$W/b" --resume 2>"$W/b2.log"
	grep -q "resumed from" "$W/b2.log" || fail "no resume"
	payload "$W/a/checkpoint.pbxt" > "$W/pa"; payload "$W/b/checkpoint.pbxt" > "$W/pb"
	cmp "$W/pa" "$W/pb" || fail "2 ranks: resumed != uninterrupted"
	[ "$(wc -l < "$W/a/metrics.jsonl")" = "$(wc -l < "$W/b/metrics.jsonl")" ] || fail "metrics lines differ"
	ok 0 "2 ranks resumed at step 20 == uninterrupted (params, BN stats, optimiser state)"
	# another world size: lenet (no BN) checkpointed on 2, resumed on 4
	$MPIRUN -np 2 "$BIN" - $LENET --set max_steps=40 --set output_dir="$W/c" 2>"$W/c.log"
	$MPIRUN -np 2 "$BIN" - $LENET --set max_steps=20 --set output_dir="$W/d" 2>"$W/d1.log"
	$MPIRUN -np 4 "$BIN" - $LENET --set max_steps=40 --set output_dir="$W/d" --resume 2>"$W/d2.log"
	grep -q "written by 2 rank(s), resuming on 4" "$W/d2.log" || { cat "$W/d2.log"; fail "no world-size notice"; }
	"$CMP" "$W/c/checkpoint.pbxt" "$W/d/checkpoint.pbxt" 1e-4 || fail "2 -> 4 ranks resume"
	;;
kill)
	disrupt KILL 1
	grep -q "rank 1" "$W/d.log" || fail "no message names rank 1"
	;;
hang)
	disrupt STOP 1
	grep -q "not answering: rank 1" "$W/d.log" || fail "rank 0 did not name rank 1"
	;;
hang0)
	disrupt STOP 0
	grep -q "rank 1: .*not answering: rank 0" "$W/d.log" || fail "rank 1 did not name rank 0"
	;;
*)
	fail "unknown case $CASE"
	;;
esac
ok 0 "$CASE"
test_done
