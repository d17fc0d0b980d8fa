#!/bin/sh
# t0255-preempt.sh - preemption and resubmission on a real local SLURM
# cluster.  A pbx-train task sent SIGTERM mid-run (scancel --signal=TERM
# --batch, as a preempting scheduler does) checkpoints, exits 75, is
# requeued by its wrapper, resumes from its checkpoint and completes, with
# final parameters bit-identical to an uninterrupted run of the same
# configuration (its twin, repeat 1); `pbx state` shows attempt 2.  A
# 2-rank MPI task sent SIGTERM the same way is requeued too: its wrapper
# passes the signal to mpirun as SIGUSR1, which mpirun forwards to every
# rank (SIGTERM would make mpirun end them and exit 1); a 2-copy task under
# srun likewise (srun SIGKILLs its copies on SIGTERM), copy 1 saving a
# second after copy 0 has exited.  `pbx
# rerun` of a throttled sweep keeps the throttle (%1: its tasks never
# overlap).
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster pe slot "{ name: node, count: 3, gpus: 0, cpus: 2 }"
SHARED="$PBX_HOME/clusters/pe/shared"
run_pbx -q cluster start pe
ok $rc "cluster starts: $errout"

# --- preemption: SIGTERM, requeue, resume ---------------------------------
mkdir -p "$TEST_TMP/pre"
cat >"$TEST_TMP/pre/experiment.yaml" <<'EOF2'
name: preempt
train:
  model: mlp
  dataset: synthetic
  synthetic_n: 2048
  epochs: 200              # 8 s optimised, minutes under ASan and load
  batch_size: 64
  lr: 0.05
  threads: 1
  deterministic: true
  log_every: 50
  output_dir: out
sweep:
  repeats: 2               # two identical runs: 0 is preempted, 1 is not
resources: { time: "00:05:00" }
outputs: [out/metrics.jsonl, out/summary.json]
EOF2
# A 2-rank task under the mpi launcher: the wrapper's SIGTERM reaches every
# rank as SIGUSR1 through mpirun; each exits 75, so mpirun does, and the
# task is requeued.
mkdir -p "$TEST_TMP/mpi"
cat >"$TEST_TMP/mpi/rank.sh" <<'EOF2'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-$SLURM_PROCID}
if [ -e "stopped.$r" ]; then echo "rank $r resumed"; exit 0; fi
trap 'sleep "$((r * ${STAGGER:-0}))"; echo "rank $r: USR1" >>marks; : >"stopped.$r"; exit 75' USR1
trap 'echo "rank $r: TERM" >>marks' TERM
: >"ready.$r"
i=0
while [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
EOF2
chmod +x "$TEST_TMP/mpi/rank.sh"
cat >"$TEST_TMP/mpi/experiment.yaml" <<'EOF2'
name: preempt-mpi
command: ./rank.sh
resources: { nodes: 1, ntasks-per-node: 2, launcher: mpi, time: "00:05:00" }
EOF2
mkdir -p "$TEST_TMP/srun"
cp "$TEST_TMP/mpi/rank.sh" "$TEST_TMP/srun/rank.sh"
{
	sed 's/launcher: mpi/launcher: srun/; s/preempt-mpi/preempt-srun/' "$TEST_TMP/mpi/experiment.yaml"
	echo 'env: { STAGGER: "1" }'
} >"$TEST_TMP/srun/experiment.yaml"

run_pbx parrun --json "$TEST_TMP/pre/experiment.yaml" pe
ok $rc "parrun preempt: $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
T0="$SHARED/pbx/$PKG/tasks/0"
run_pbx parrun --json "$TEST_TMP/mpi/experiment.yaml" pe
ok $rc "parrun preempt-mpi: $errout"
MPKG=$(echo "$out" | json_get 'd["package"]')
M0="$SHARED/pbx/$MPKG/tasks/0"
run_pbx parrun --json "$TEST_TMP/srun/experiment.yaml" pe
ok $rc "parrun preempt-srun: $errout"
SPKG=$(echo "$out" | json_get 'd["package"]')
S0="$SHARED/pbx/$SPKG/tasks/0"
# Preempt each task once it is ready, and not before: its wrapper has
# written RUNNING (its batch script runs), SLURM has its job RUNNING (an
# array element is a job of its own only once it starts; scancel refuses
# an id it does not list, or a job that has ended, with "Invalid job id
# specified") and the program is where the test wants it (task 0
# training: its metrics have begun; the launcher tasks: both ranks up).
# Task 0 first: it ends on its own within a minute, the others wait 2.
# preempt DIR WHAT READY...: waits (120 s at most) until task directory
# DIR is ready so and READY succeeds, then scancel --signal=TERM --batch
# its job (2 checks).
preempt() {
	_pd=$1 _pw=$2
	shift 2
	_pj=
	wait_secs 120 preempt_ready "$_pd" "$@"
	ok $? "$_pw runs and is ready to be preempted (job '$_pj' $(job_state pe "$_pj"); status: $(cat "$_pd/status" 2>&1))"
	run_pbx cluster exec pe -- scancel --signal=TERM --batch "$_pj"
	ok $rc "scancel --signal=TERM --batch $_pj ($_pw): $errout"
}
preempt_ready() {
	_d=$1
	shift
	task_running "$_d" && "$@" || return 1
	_pj=$(cut -d' ' -f8 "$_d/status")
	job_is pe "$_pj" RUNNING
}
training() { [ -s "$T0/out/metrics.jsonl" ]; }
ranks_up() { [ -e "$1/ready.0" ] && [ -e "$1/ready.1" ]; }
preempt "$T0" "task 0 (pbx-train)" training
preempt "$M0" "the 2-rank mpi task" ranks_up "$M0"
preempt "$S0" "the 2-copy srun task" ranks_up "$S0"
wait_final "$SPKG" 180
is "$(json_get '[(t["state"], t["attempt"]) for t in d["tasks"]]' <"$TEST_TMP/state.json")" \
	"[('COMPLETED', 2)]" "the 2-copy srun task completes on its second attempt"
# copy 0's exit 75 ends the step (--kill-on-bad-exit): copy 1 gets SIGTERM
# and SLURM's KillWait to finish its save (under load its USR1 may come
# late enough that it has saved before: the TERM line is not required)
is "$(grep -v '^rank 1: TERM$' "$S0/marks" | sort | tr '\n' ';')" "rank 0: USR1;rank 1: USR1;" \
	"both srun copies got SIGUSR1 and saved, copy 1 a second after copy 0"
grep -q "^=== pbx task 0 attempt 1 REQUEUED exit 75 " "$S0/stderr"
ok $? "the srun task's wrapper requeued it after exit 75"
wait_final "$MPKG" 180
is "$(json_get '[(t["state"], t["attempt"]) for t in d["tasks"]]' <"$TEST_TMP/state.json")" \
	"[('COMPLETED', 2)]" "the 2-rank task completes on its second attempt"
is "$(sort "$M0/marks" | tr '\n' ';')" "rank 0: USR1;rank 1: USR1;" "SIGUSR1, and no SIGTERM, reached both ranks"
is "$(grep -c '^rank [01] resumed$' "$M0/stdout")" "2" "both ranks ran again"
# A task whose status says REQUEUED but whose job SLURM no longer has (the
# requeued job vanished) is MISSING, which rerun --failed picks up, not a
# state that never ends.
printf '0 REQUEUED 75 node1 1 1 2 1_0\n' >"$M0/status"
run_pbx state --json "$MPKG"
is "$(echo "$out" | json_get '[t["state"] for t in d["tasks"]]')" "['MISSING']" \
	"REQUEUED without a job reads MISSING"
# both run 200 epochs, attempt 2 the rest: minutes under ASan on a loaded
# machine
wait_final "$PKG" 600
ok $? "both tasks end"
is "$(json_get '[(t["state"], t["attempt"]) for t in d["tasks"]]' <"$TEST_TMP/state.json")" \
	"[('COMPLETED', 2), ('COMPLETED', 1)]" "the preempted task completes on its second attempt"
grep -q '^pbx-train: SIGTERM at step [0-9]*: checkpoint written' "$T0/stderr"
ok $? "it checkpointed on SIGTERM"
grep -q "^=== pbx task 0 attempt 1 REQUEUED exit 75 " "$T0/stderr"
ok $? "its wrapper requeued it after exit 75"
grep -q '^pbx-train: resumed from out/checkpoint.pbxt' "$T0/stderr"
ok $? "attempt 2 resumed from the checkpoint"
sha() { json_get 'd["params_sha256"]' <"$SHARED/pbx/$PKG/tasks/$1/out/summary.json"; }
s0=$(sha 0)
s1=$(sha 1)
[ -n "$s0" ] && [ "$s0" = "$s1" ]
ok $? "final parameters equal an uninterrupted run's ($s0 / $s1)"

# --- rerun keeps the throttle ---------------------------------------------
mkdir -p "$TEST_TMP/thr"
cat >"$TEST_TMP/thr/experiment.yaml" <<'EOF2'
name: throttled
# attempt 1 fails; attempt 2 records when it ran
command: |
  if [ ! -e tried ]; then touch tried; exit 3; fi
  date +%s.%N > start; sleep 2; date +%s.%N > end
sweep:
  list: [{ k: a }, { k: b }, { k: c }]
resources: { throttle: 1, time: "00:05:00" }
EOF2
run_pbx parrun --json "$TEST_TMP/thr/experiment.yaml" pe
TPKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$TPKG" 120
is "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" \
	"['FAILED', 'FAILED', 'FAILED']" "the throttled sweep's first attempts fail"
run_pbx rerun --failed "$TPKG"
is "$rc:$out" "0:resubmitted 3 tasks of $TPKG" "rerun --failed resubmits the 3 tasks"
wait_final "$TPKG" 120
is "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" \
	"['COMPLETED', 'COMPLETED', 'COMPLETED']" "the rerun completes"
python3 - "$SHARED/pbx/$TPKG/tasks" >"$TEST_TMP/overlap.out" <<'EOF2'
import sys
iv = sorted((float(open("%s/%d/start" % (sys.argv[1], i)).read()),
             float(open("%s/%d/end" % (sys.argv[1], i)).read())) for i in range(3))
print("overlaps", sum(1 for a, b in zip(iv, iv[1:]) if b[0] < a[1]))
EOF2
is "$(cat "$TEST_TMP/overlap.out")" "overlaps 0" "rerun kept throttle 1: no two tasks ran at once"
done_testing
