#!/bin/sh
# downpour.sh CASE PBX_TRAIN WORKDIR [EXP_PACK] - Downpour SGD (mode: downpour) under
# mpirun --enable-recovery, oversubscribed on this 2-core machine:
#   train:    lenet on synthetic data, 1 server + 2 workers: completes;
#             outputs come from the first worker alone (one metrics.jsonl,
#             summary.json, downpour.json); the server applied every push
#             of both workers (updates = 2 x the steps of one, less the
#             first gradient of the second worker, dropped); the test
#             accuracy is far above chance (>= 0.8; chance is 0.1);
#             staleness is logged by the server and in downpour.json
#   shards:   2 servers (each a shard of the parameters), SGD with momentum,
#             n_push 2, n_fetch 3, TFRecord data (each worker reads its own
#             file): completes with every push applied by both servers
#   kill:     SIGKILL to a worker (rank 2) mid-run: the job goes on and
#             finishes (summary.json "completed"), the server names the
#             lost worker
#   killps:   SIGKILL to the server (rank 0) mid-run: the job ends within
#             60 s, non-zero, with a message naming parameter server rank 0
#   task:     a train: experiment in mode downpour (3 SLURM tasks, the
#             recovery switch in its env:) packaged by pbx and run by the
#             real task wrapper with the mpi launcher (SLURM_NTASKS=3, no
#             SLURM): COMPLETED, the outputs in the task directory
#   allreduce: (synchronous mode) TFRecord shards split unevenly between 2
#             ranks: both take the smaller share's steps and finish
#   usage:    mode downpour with one rank, or as many ranks as ps_ranks:
#             exit 2 with a message
set -eu
CASE=$1
BIN=$2
W=$3
rm -rf "$W"
mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 mpirun --oversubscribe --allow-run-as-root --enable-recovery"
DP="--set mode=downpour --set model=lenet --set dataset=synthetic --set synthetic_n=2048
 --set test_subset=512 --set batch_size=32 --set threads=1 --set log_every=10
 --set seed=1 --set lr=0.01 --set ps_timeout=10"
. "$(dirname "$0")/lib.sh"
jget() { sed -n "s/.*\"$2\": \\([0-9.e+-]*\\).*/\\1/p" "$1" | head -1; }

# starts a long run, waits for progress, SIGKILLs rank $1; sets T (seconds
# until mpirun ended) and RC
disrupt() {
	mpi_disrupt KILL "$1" 100 120 $MPIRUN -np 3 "$BIN" - $DP --set synthetic_n=16384 \
		--set epochs=$2 --set output_dir="$W/d"
	echo "SIGKILL to rank $1: job ended in ${T} s, mpirun exit $RC"
}

# synthetic IDX files (mnist names) in $W, classes as bright bands: pack
# reads IDX, so TFRecord shards of a learnable set are packed from these
mkdata() {
	python3 - "$W" <<'PY'
import gzip, random, struct, sys
w = sys.argv[1]
random.seed(3)
for split, n in (("train", 1200), ("t10k", 300)):
    labels = [random.randrange(10) for _ in range(n)]
    pix = bytearray()
    for y in labels:  # class y: a bright band at rows 2y..2y+5
        for r in range(28):
            for c in range(28):
                on = 2 * y <= r < 2 * y + 6
                pix.append(min(255, (200 if on else 20) + random.randrange(40)))
    with gzip.open(f"{w}/{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(pix))
    with gzip.open(f"{w}/{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))
PY
}

case $CASE in
train)
	# --resume as pbx runs train: tasks (no checkpoint yet: a fresh start)
	$MPIRUN -np 3 "$BIN" - $DP --set epochs=6 --set output_dir="$W/o" --resume >"$W/o.log" 2>&1 ||
		{ cat "$W/o.log"; fail "mpirun failed"; }
	cat "$W/o.log"
	grep -q '"status": "completed"' "$W/o/summary.json" || fail "summary.json not completed"
	[ "$(grep -c '"test_acc"' "$W/o/metrics.jsonl")" = 6 ] || fail "not one writer of metrics.jsonl"
	acc=$(jget "$W/o/summary.json" test_acc)
	steps=$(jget "$W/o/downpour.json" worker_steps)
	# the server's last line has the totals (downpour.json: as of the first
	# worker's end, when the other may still be pushing)
	upd=$(sed -n 's/.*parameter server rank 0: done: \([0-9]*\) updates.*/\1/p' "$W/o.log")
	echo "test_acc $acc, worker steps $steps, server updates $upd"
	[ "$steps" = $((6 * 1024 / 32)) ] || fail "worker steps $steps"
	# the second worker drops its first gradient (it fetches instead)
	[ "$upd" = $((2 * steps - 1)) ] || fail "server applied $upd updates, want $((2 * steps - 1))"
	awk -v a="$acc" 'BEGIN { exit !(a >= 0.8) }' || fail "test_acc $acc < 0.8"
	grep -q "parameter server rank 0: done: $upd updates, .* staleness mean [0-9.]* max [0-9]*; 2 of 2 workers finished, 0 lost" "$W/o.log" &&
	grep -q "parameter server rank 0: [0-9]* updates, staleness mean [0-9.]* max [0-9]* over the last" "$W/o.log" ||
		fail "no staleness summary from the server"
	grep -q '"staleness_mean"' "$W/o/downpour.json" || fail "no staleness in downpour.json"
	;;
shards)
	"$BIN" pack mnist "$W/none" "$W/x" >/dev/null 2>&1 && fail "pack of a missing data set succeeded"
	mkdata
	"$BIN" pack mnist "$W" "$W/tfr" --shards 4 >/dev/null
	"$BIN" pack mnist "$W" "$W/tfr" --split test >/dev/null
	$MPIRUN -np 4 "$BIN" - $DP --set ps_ranks=2 --set ps_optimizer=sgd --set lr=0.01 \
		--set momentum=0.5 --set n_push=2 --set n_fetch=3 --set epochs=4 \
		--set dataset=tfrecord --set train_files="$W/tfr/mnist-train-*" \
		--set test_files="$W/tfr/mnist-test-*" --set output_dir="$W/o" >"$W/o.log" 2>&1 ||
		{ cat "$W/o.log"; fail "mpirun failed"; }
	cat "$W/o.log"
	# 1200 records in 4 files: each worker reads 2 (600 records, 18 steps)
	grep -q "lenet on tfrecord (600 train, 300 test)" "$W/o.log" || fail "worker share"
	steps=$(jget "$W/o/downpour.json" worker_steps)
	[ "$steps" = $((4 * 18)) ] || fail "worker steps $steps"
	for s in 0 1; do
		# 36 pushes from the first worker, 35 from the other (its first
		# gradient dropped)
		grep -q "parameter server rank $s: done: 71 updates" "$W/o.log" ||
			fail "server $s did not apply $steps updates"
	done
	acc=$(jget "$W/o/summary.json" test_acc)
	echo "test_acc $acc"
	awk -v a="$acc" 'BEGIN { exit !(a >= 0.8) }' || fail "test_acc $acc < 0.8"
	;;
kill)
	disrupt 2 3
	[ "$RC" = 0 ] || fail "mpirun exited $RC after a worker was lost"
	grep -q "parameter server rank 0: lost worker rank 2" "$W/d.log" || fail "lost worker not named"
	grep -q "1 of 2 workers finished, 1 lost" "$W/d.log" || fail "no final count"
	grep -q '"status": "completed"' "$W/d/summary.json" || fail "the run did not complete"
	;;
killps)
	disrupt 0 1000
	[ "$RC" != 0 ] || fail "mpirun exited 0 after the server was killed"
	[ "$T" -le 60 ] || fail "the job took $T s to end"
	grep -q "parameter server rank 0 has not answered for 10 s" "$W/d.log" || fail "no message naming the server"
	;;
task)
	PACK=$4
	mkdir -p "$W/exp"
	cat >"$W/exp/experiment.yaml" <<EOT
name: dp-task
train: { mode: downpour, ps_ranks: 1, model: lenet, dataset: synthetic, synthetic_n: 1024,
         test_subset: 256, epochs: 2, batch_size: 32, threads: 1, lr: 0.01, output_dir: . }
env: { OMPI_MCA_orte_enable_recovery: "1" }
resources: { ntasks: 3, time: "00:05:00" }
EOT
	"$PACK" "$W/exp/experiment.yaml" "$W/pkg.tar" >/dev/null
	mkdir -p "$W/pkg"
	tar -xf "$W/pkg.tar" -C "$W/pkg"
	# 3 ranks on 2 cores: mpirun outside SLURM needs leave to oversubscribe
	rc=0
	env PATH="$(dirname "$BIN"):$PATH" PBX_PKG_DIR="$W/pkg" PBX_RUN_DIR="$W/run" \
		PBX_TASK_INDEX=0 PBX_LAUNCHER=mpi SLURM_NTASKS=3 \
		OMPI_MCA_rmaps_base_oversubscribe=1 sh "$W/pkg/pbx-task.sh" || rc=$?
	D=$W/run/tasks/0
	cat "$D/stderr"
	[ "$rc" = 0 ] || fail "the task wrapper exited $rc"
	grep -q "^0 COMPLETED 0 " "$D/status" || fail "status: $(cat "$D/status")"
	grep -q "parameter server rank 0: done: .* 2 of 2 workers finished" "$D/stderr" ||
		fail "no server summary"
	grep -q '"status": "completed"' "$D/summary.json" || fail "no summary.json in the task directory"
	grep -q '"mode": "downpour"' "$D/downpour.json" || fail "no downpour.json"
	;;
allreduce)
	# synchronous data parallelism from TFRecord: 3 files on 2 ranks give
	# rank 0 files 0 and 2 (800 records), rank 1 file 1 (400): both must
	# take the same number of steps (the smaller share) or the allreduce
	# would wait for ever
	mkdata
	"$BIN" pack mnist "$W" "$W/tfr" --shards 3 >/dev/null
	"$BIN" pack mnist "$W" "$W/tfr" --split test >/dev/null
	env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 mpirun --oversubscribe \
		--allow-run-as-root -np 2 "$BIN" - --set model=lenet --set dataset=tfrecord \
		--set train_files="$W/tfr/mnist-train-*" --set test_files="$W/tfr/mnist-test-*" \
		--set batch_size=64 --set epochs=2 --set threads=1 --set lr=0.01 --set seed=1 \
		--set comm_timeout=20 --set output_dir="$W/o" >"$W/o.log" 2>&1 ||
		{ cat "$W/o.log"; fail "mpirun failed"; }
	cat "$W/o.log"
	# 400 examples per rank: 12 steps of 32 per epoch
	[ "$(jget "$W/o/summary.json" train_examples)" = 400 ] || fail "train_examples"
	[ "$(jget "$W/o/summary.json" steps)" = 24 ] || fail "steps"
	;;
usage)
	out=$("$BIN" - $DP --set epochs=1 2>&1) && fail "one process in mode downpour succeeded"
	echo "$out" | grep -q "downpour needs more MPI ranks than ps_ranks (1), got 1" || fail "message: $out"
	out=$($MPIRUN -np 2 "$BIN" - $DP --set ps_ranks=2 --set epochs=1 2>&1) && fail "2 servers, no worker succeeded"
	echo "$out" | grep -q "downpour needs more MPI ranks than ps_ranks (2), got 2" || fail "message: $out"
	;;
*)
	fail "unknown case $CASE"
	;;
esac
ok 0 "$CASE"
test_done
