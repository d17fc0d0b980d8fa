#!/bin/sh
# wrapper.sh - the real templates/pbx-task.sh, run locally without SLURM
# (the SLURM_* variables set by hand) on packages written by exp_pack and
# extracted with tar:
#   1. hostile parameter values arrive byte-exact as PBX_PARAM_V, in
#      params.json and as ONE argv word through {v}; nothing injected runs;
#   2. exit codes and states: COMPLETED, FAILED 3, CANCELLED on SIGTERM and
#      SIGINT (forwarded: the program's traps run), SIGUSR1 forwarded
#      without cancelling, attempts, PBX_TASK_INDEX, offsets, a task outside
#      the package; status is always one well-formed line;
#   3. exit 75 (checkpointed) in a SLURM job: the wrapper requeues the job
#      (a stand-in scontrol records the call) and says REQUEUED; when SLURM
#      refuses (a job being cancelled), CANCELLED as before;
#   4. PBX_LAUNCHER=mpi asks mpirun (a stand-in) for one rank per SLURM
#      task, or one per GPU (CUDA_VISIBLE_DEVICES) of a one-task job;
#   6. under a real mpirun, SIGTERM reaches both ranks as SIGUSR1 (mpirun
#      would end them on SIGTERM and exit 1): exit 75, requeued.
# Usage: wrapper.sh EXP_PACK SOURCE_DIR
set -eu
PACK=${1:?usage: wrapper.sh EXP_PACK SOURCE_DIR}
# shellcheck source=tests/cli/harness.sh
. "${2:?usage: wrapper.sh EXP_PACK SOURCE_DIR}/tests/cli/harness.sh"
command -v python3 >/dev/null 2>&1 || test_skip_all "python3 missing"
SH="sh"
if command -v dash >/dev/null 2>&1; then SH=dash; fi
unset PBX_TASK_INDEX PBX_TASK_OFFSET SLURM_ARRAY_TASK_ID SLURM_ARRAY_JOB_ID SLURM_JOB_ID \
	SLURMD_NODENAME SLURM_RESTART_COUNT PBX_TEMPLATES 2>/dev/null || true

T=$(mktemp -d /tmp/pbx-exp-wrapper.XXXXXX)
cleanup() {
	rc=$?
	if [ "$rc" -ne 0 ] && [ -n "${PBX_TEST_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_task PKG RUN INDEX [VAR=VALUE...]: the wrapper as sbatch would start it
run_task() {
	pkg=$1 runrun=$2 i=$3
	shift 3
	env PBX_PKG_DIR="$pkg" PBX_RUN_DIR="$runrun" PBX_TASK_OFFSET=0 SLURM_ARRAY_TASK_ID="$i" \
		SLURM_ARRAY_JOB_ID=77 SLURMD_NODENAME=node1 SLURM_RESTART_COUNT=0 "$@" \
		$SH "$pkg/pbx-task.sh"
}

# check_status FILE 'EXPECTED REGEX'
check_status() {
	[ -f "$1" ] || fail "no status file $1"
	[ "$(wc -l <"$1")" -eq 1 ] || fail "$1 is not one line: $(cat "$1")"
	grep -Eq "^$2\$" "$1" || fail "$1: '$(cat "$1")' does not match '$2'"
}

wait_for() {
	n=0
	while [ ! -e "$1" ]; do
		n=$((n + 1))
		# 60 s: the whole suite at once on 2 cores has taken over 5
		[ "$n" -lt 1200 ] || fail "timed out waiting for $1"
		sleep 0.05
	done
}

# ---- 1. hostile values --------------------------------------------------
mkdir -p "$T/exp1" "$T/want" "$T/pkg1" "$T/run1"
python3 - "$T" <<'EOF'
import json, sys
t = sys.argv[1]
p = lambda n: t + "/pwned" + str(n)
values = [
    "it's", 'say "hi"', "$(touch %s)" % p(1), "`touch %s`" % p(2), "a; touch %s" % p(3),
    "a && touch %s" % p(4), "a | touch %s" % p(5), "'; touch %s; '" % p(6),
    '"; touch %s; "' % p(7), "x\ntouch %s\n" % p(8), "line1\nline2\n", "\ttab\tbed\t",
    "  spaces  around  ", "-n", "--help", "*", "~", "~root", "$HOME", "${PATH}", "$((1+1))",
    "back\\slash\\\\", "naïve café ü", "😀🎉", "", "{other}", "{{v}}", "%s%d%n%%", "!", "a\rb",
    "\n", "-", "a=b", "\\'", "0.10",
    ("ab'\"$`\\;|&<>(){} \t\n" * 300)[:4096],
]
with open(t + "/exp1/experiment.yaml", "w", encoding="utf-8") as f:
    f.write("name: hostile\n")
    f.write("command: " + json.dumps("printf '%s' {v} >out.bin; set -- {v}; echo $# >argc.txt; "
                                     "printf '%s' \"$PBX_PARAM_V\" >env.bin") + "\n")
    f.write("sweep:\n  list:\n")
    for v in values:
        f.write("    - {v: " + json.dumps(v, ensure_ascii=False) + "}\n")
for i, v in enumerate(values):
    with open("%s/want/%d.bin" % (t, i), "wb") as f:
        f.write(v.encode())
EOF
N=$(find "$T/want" -name '*.bin' | wc -l)
[ "$N" -ge 20 ] || fail "only $N hostile values"
"$PACK" "$T/exp1/experiment.yaml" "$T/pkg1.tar" >"$T/pack1.out" || fail "exp_pack failed"
tar -xf "$T/pkg1.tar" -C "$T/pkg1" || fail "tar -x failed"
i=0
while [ "$i" -lt "$N" ]; do
	run_task "$T/pkg1" "$T/run1" "$i" || fail "task $i exited $?"
	d=$T/run1/tasks/$i
	cmp -s "$T/want/$i.bin" "$d/out.bin" || fail "task $i: {v} placeholder differs"
	cmp -s "$T/want/$i.bin" "$d/env.bin" || fail "task $i: PBX_PARAM_V differs"
	[ "$(cat "$d/argc.txt")" = 1 ] || fail "task $i: {v} was not one word"
	check_status "$d/status" "$i COMPLETED 0 node1 1 [0-9]+ [0-9]+ 77_$i"
	i=$((i + 1))
done
python3 - "$T" "$N" <<'EOF' || fail "params.json differs"
import json, sys
t, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    got = json.load(open("%s/run1/tasks/%d/params.json" % (t, i), encoding="utf-8"))
    want = open("%s/want/%d.bin" % (t, i), "rb").read()
    if list(got) != ["v"] or got["v"].encode() != want:
        sys.exit("task %d: params.json has %r" % (i, got))
EOF
for f in "$T"/pwned*; do
	[ ! -e "$f" ] || fail "an injected command ran: $f exists"
done
ok 0 "$N hostile values byte-exact via env, params.json and {v}; nothing injected ran"

# ---- 2. states, signals, attempts ---------------------------------------
mkdir -p "$T/exp2" "$T/pkg2" "$T/run2"
cat >"$T/exp2/prog.sh" <<'EOF'
#!/bin/sh
# test program: one behaviour per mode
loop() { i=0; while [ ! -f "$1" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done; }
case $1 in
ok)
	echo '{"step":1,"loss":0.5}' >metrics.jsonl
	env | grep -E '^(PBX_|GREETING=)' | sort >env.txt
	pwd -P >pwd.txt
	echo fine ;;
fail) echo failing >&2; exit 3 ;;
term) trap 'echo term >term.marker; exit 75' TERM; : >ready; loop never; exit 0 ;;
usr1) trap 'echo usr1 >usr1.marker' USR1; : >ready; loop usr1.marker; exit 0 ;;
int) trap 'echo int >int.marker; exit 130' INT; : >ready; loop never; exit 0 ;;
mpi)
	r=$OMPI_COMM_WORLD_RANK
	trap 'echo term >"term.$r"' TERM
	trap 'echo usr1 >"usr1.$r"; exit 75' USR1
	: >"ready.$r"
	i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done; exit 0 ;;
esac
EOF
cat >"$T/exp2/experiment.yaml" <<'EOF'
name: states
command: sh ./prog.sh {mode}; rc=$?; echo $rc >after.txt; exit $rc
sweep:
  list:
    - {mode: ok}
    - {mode: fail}
    - {mode: term}
    - {mode: usr1}
    - {mode: int}
    - {mode: mpi}
env:
  GREETING: "hello 'world'"
outputs: [metrics.jsonl]
EOF
"$PACK" "$T/exp2/experiment.yaml" "$T/pkg2.tar" >/dev/null || fail "exp_pack 2 failed"
tar -xf "$T/pkg2.tar" -C "$T/pkg2"
R=$T/run2/tasks

run_task "$T/pkg2" "$T/run2" 0 || fail "ok task exited $?"
check_status "$R/0/status" "0 COMPLETED 0 node1 1 [0-9]+ [0-9]+ 77_0"
if [ ! -f "$R/0/metrics.jsonl" ] || [ -L "$R/0/metrics.jsonl" ]; then fail "output not in the task dir"; fi
[ ! -e "$T/pkg2/code/metrics.jsonl" ] || fail "output written into the package"
[ -L "$R/0/prog.sh" ] || fail "code entries are not linked into the task dir"
[ "$(cat "$R/0/pwd.txt")" = "$(cd "$R/0" && pwd -P)" ] || fail "cwd is not the task dir"
grep -qx "GREETING=hello 'world'" "$R/0/env.txt" || fail "env: not exported"
grep -qx "PBX_PARAM_MODE=ok" "$R/0/env.txt" || fail "PBX_PARAM_MODE missing"
grep -qx "PBX_TASK_INDEX=0" "$R/0/env.txt" || fail "PBX_TASK_INDEX missing"
grep -qx "PBX_REPEAT=0" "$R/0/env.txt" || fail "PBX_REPEAT missing"
grep -qx "PBX_TASK_DIR=$R/0" "$R/0/env.txt" || fail "PBX_TASK_DIR missing"
grep -qx "PBX_EXPERIMENT=states" "$R/0/env.txt" || fail "PBX_EXPERIMENT missing"
grep -q '^=== pbx task 0 attempt 1 node node1 job 77_0 start [0-9]* ===$' "$R/0/stderr" ||
	fail "no attempt header in stderr"
[ "$(cat "$R/0/stdout")" = fine ] || fail "stdout is not exactly the program's stdout"
ok 0 "COMPLETED; env, cwd, code links, outputs in the task dir"

set +e
run_task "$T/pkg2" "$T/run2" 1
rc=$?
set -e
[ "$rc" -eq 3 ] || fail "failing task: wrapper exited $rc, not 3"
check_status "$R/1/status" "1 FAILED 3 node1 1 [0-9]+ [0-9]+ 77_1"
grep -qx failing "$R/1/stderr" || fail "program stderr missing"
set +e
run_task "$T/pkg2" "$T/run2" 1 SLURM_RESTART_COUNT=2
set -e
check_status "$R/1/status" "1 FAILED 3 node1 3 [0-9]+ [0-9]+ 77_1"
[ "$(grep -c '^=== pbx task 1 attempt .* start' "$R/1/stderr")" -eq 2 ] || fail "stderr not appended per attempt"
[ "$(grep -cx failing "$R/1/stderr")" -eq 2 ] || fail "the program's stderr of each attempt not kept"
ok 0 "exit 3 gives FAILED 3; a requeued attempt counts 3 and appends"

# signal_task INDEX SIGNAL MARKER: runs the task in the background, signals
# the wrapper once the program is ready, returns the wrapper's exit status
signal_task() {
	env --default-signal=INT true 2>/dev/null || { echo "# no env --default-signal"; return 0; }
	env PBX_PKG_DIR="$T/pkg2" PBX_RUN_DIR="$T/run2" SLURM_ARRAY_TASK_ID="$1" \
		SLURM_ARRAY_JOB_ID=77 SLURMD_NODENAME=node1 \
		env --default-signal=INT $SH "$T/pkg2/pbx-task.sh" &
	pid=$!
	wait_for "$R/$1/ready"
	check_status "$R/$1/status" "$1 RUNNING - node1 1 [0-9]+ - 77_$1"
	kill -s "$2" "$pid"
	src=0
	wait "$pid" || src=$?
	wait_for "$R/$1/$3"
	return "$src"
}
set +e
signal_task 2 TERM term.marker
rc=$?
set -e
[ "$rc" -eq 75 ] || fail "TERM: wrapper exited $rc, not the program's 75"
check_status "$R/2/status" "2 CANCELLED 75 node1 1 [0-9]+ [0-9]+ 77_2"
[ ! -e "$R/2/after.txt" ] || fail "the command went on after SIGTERM"
[ "$(cat "$R/0/after.txt")" = 0 ] || fail "the command's second part did not run"
ok 0 "SIGTERM forwarded (the program's trap ran), CANCELLED with its exit 75, the command stops"

signal_task 3 USR1 usr1.marker || fail "USR1: wrapper exited $?"
check_status "$R/3/status" "3 COMPLETED 0 node1 1 [0-9]+ [0-9]+ 77_3"
ok 0 "SIGUSR1 forwarded, the task goes on to COMPLETED"

set +e
signal_task 4 INT int.marker
rc=$?
set -e
[ "$rc" -eq 130 ] || fail "INT: wrapper exited $rc, not 130"
check_status "$R/4/status" "4 CANCELLED 130 node1 1 [0-9]+ [0-9]+ 77_4"
ok 0 "SIGINT forwarded, CANCELLED 130"

# ---- 3. task addressing -------------------------------------------------
env PBX_PKG_DIR="$T/pkg2" PBX_RUN_DIR="$T/run3" PBX_TASK_INDEX=0 $SH "$T/pkg2/pbx-task.sh" ||
	fail "PBX_TASK_INDEX run failed"
check_status "$T/run3/tasks/0/status" "0 COMPLETED 0 - 1 [0-9]+ [0-9]+ -"
mkdir -p "$T/pkg4"
"$PACK" "$T/exp2/experiment.yaml" "$T/pkg4.tar" 1 1 >/dev/null || fail "exp_pack range failed"
tar -xf "$T/pkg4.tar" -C "$T/pkg4"
set +e
run_task "$T/pkg4" "$T/run4" 0 PBX_TASK_OFFSET=1
rc=$?
set -e
[ "$rc" -eq 3 ] || fail "offset 1 + array id 0 did not run task 1 ($rc)"
check_status "$T/run4/tasks/1/status" "1 FAILED 3 node1 1 [0-9]+ [0-9]+ 77_0"
set +e
run_task "$T/pkg4" "$T/run4" 1 PBX_TASK_OFFSET=1 2>/dev/null
rc=$?
set -e
[ "$rc" -eq 125 ] || fail "a task outside the package exited $rc, not 125"
check_status "$T/run4/tasks/2/status" "2 FAILED 125 node1 1 [0-9]+ [0-9]+ 77_1"
grep -q 'not in this package' "$T/run4/tasks/2/stderr" || fail "no setup message in stderr"
ok 0 "PBX_TASK_INDEX, PBX_TASK_OFFSET + array id, a task outside the package (125)"

# ---- 4. status fields stay one word each --------------------------------
run_task "$T/pkg2" "$T/run5" 0 SLURMD_NODENAME='node 1;$(x)' SLURM_ARRAY_JOB_ID='7 7' ||
	fail "task with odd node and job names failed"
check_status "$T/run5/tasks/0/status" "0 COMPLETED 0 node_1___x_ 1 [0-9]+ [0-9]+ 7_7_0"
ok 0 "node and job names outside [A-Za-z0-9._:+-] become '_' in the status line"

# ---- 5. exit 75 requeues ------------------------------------------------
mkdir -p "$T/bin"
printf '#!/bin/sh\necho "$*" >>"%s/scontrol.args"\nexit "${FAKE_SCONTROL_RC:-0}"\n' "$T" >"$T/bin/scontrol"
chmod +x "$T/bin/scontrol"
# requeue_task RUN SCONTROL_RC: task 2 (traps TERM, exits 75) in job 1234,
# TERM once it is ready; the wrapper's exit status is left in rc.
requeue_task() {
	env PATH="$T/bin:$PATH" FAKE_SCONTROL_RC="$2" PBX_PKG_DIR="$T/pkg2" PBX_RUN_DIR="$1" \
		SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_JOB_ID=77 SLURM_JOB_ID=1234 SLURMD_NODENAME=node1 \
		$SH "$T/pkg2/pbx-task.sh" &
	pid=$!
	wait_for "$1/tasks/2/ready"
	kill -s TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
}
requeue_task "$T/run6" 0
[ "$rc" -eq 75 ] || fail "requeue: wrapper exited $rc, not 75"
check_status "$T/run6/tasks/2/status" "2 REQUEUED 75 node1 1 [0-9]+ [0-9]+ 77_2"
[ "$(cat "$T/scontrol.args")" = "requeue 1234" ] || fail "scontrol got '$(cat "$T/scontrol.args")'"
grep -q '^=== pbx task 2 attempt 1 REQUEUED exit 75 end [0-9]* ===$' "$T/run6/tasks/2/stderr" ||
	fail "no REQUEUED line in stderr"
requeue_task "$T/run7" 1
[ "$rc" -eq 75 ] || fail "refused requeue: wrapper exited $rc, not 75"
check_status "$T/run7/tasks/2/status" "2 CANCELLED 75 node1 1 [0-9]+ [0-9]+ 77_2"
ok 0 "exit 75 in a job: scontrol requeue JOB, REQUEUED; refused by SLURM: CANCELLED"

# ---- 4. the mpi launcher: one rank per SLURM task, or per GPU of a
# one-task job (--gres=gpu:N: CUDA_VISIBLE_DEVICES); a stand-in mpirun
# records its ranks and runs the task once
printf '#!/bin/sh\nnp=\nwhile [ $# -gt 0 ]; do case $1 in --bind-to) shift 2 ;; -np) np=$2; shift 2 ;; *) break ;; esac; done\necho "np=$np" >>"%s/mpirun.args"\nexec "$@"\n' "$T" >"$T/bin/mpirun"
chmod +x "$T/bin/mpirun"
# mpi_np RUN VAR=VALUE...: the ranks mpirun was asked for
mpi_np() {
	r=$1; shift
	rm -f "$T/mpirun.args"
	run_task "$T/pkg2" "$r" 0 PATH="$T/bin:$PATH" PBX_LAUNCHER=mpi "$@" || fail "mpi task exited $?"
	cat "$T/mpirun.args"
}
[ "$(mpi_np "$T/run8" SLURM_NTASKS=3)" = "np=3" ] || fail "3 tasks: mpirun $(cat "$T/mpirun.args")"
[ "$(mpi_np "$T/run9" SLURM_NTASKS=1 CUDA_VISIBLE_DEVICES=0,1)" = "np=2" ] ||
	fail "1 task, 2 GPUs: mpirun $(cat "$T/mpirun.args")"
[ "$(mpi_np "$T/run10" SLURM_NTASKS=1 CUDA_VISIBLE_DEVICES=3)" = "np=1" ] ||
	fail "1 task, 1 GPU: mpirun $(cat "$T/mpirun.args")"
[ "$(mpi_np "$T/run11" SLURM_NTASKS=2 CUDA_VISIBLE_DEVICES=0,1,2,3)" = "np=2" ] ||
	fail "2 tasks, 4 GPUs: mpirun $(cat "$T/mpirun.args")"
[ "$(mpi_np "$T/run12" SLURM_NTASKS=1 CUDA_VISIBLE_DEVICES=NoDevFiles)" = "np=1" ] ||
	fail "no GPU files: mpirun $(cat "$T/mpirun.args")"
check_status "$T/run9/tasks/0/status" "0 COMPLETED 0 node1 1 [0-9]+ [0-9]+ 77_0"
ok 0 "mpi launcher: a rank per SLURM task; a one-task job gets a rank per GPU"

# ---- 6. a real mpirun: SIGTERM (pbx-preempt's notice) reaches every rank
# as SIGUSR1, which mpirun forwards (on SIGTERM it would end them and exit
# 1); they exit 75, so does mpirun, and the task is requeued
command -v mpirun >/dev/null 2>&1 || fail "no mpirun (openmpi-bin: scripts/install-deps.sh)"
mkdir -p "$T/bin2"
cp "$T/bin/scontrol" "$T/bin2/scontrol"
rm -f "$T/scontrol.args"
M=$T/run13/tasks/5
env PATH="$T/bin2:$PATH" PBX_LAUNCHER=mpi SLURM_NTASKS=2 OMPI_MCA_rmaps_base_oversubscribe=1 \
	PBX_PKG_DIR="$T/pkg2" PBX_RUN_DIR="$T/run13" SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_JOB_ID=77 \
	SLURM_JOB_ID=1235 SLURMD_NODENAME=node1 $SH "$T/pkg2/pbx-task.sh" &
pid=$!
i=0
until { [ -e "$M/ready.0" ] && [ -e "$M/ready.1" ]; } || [ $i -ge 600 ]; do
	sleep 0.05
	i=$((i + 1))
done
[ -e "$M/ready.1" ] && [ -e "$M/ready.0" ] || fail "the 2 ranks did not start: $(cat "$M/stderr")"
kill -s TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 75 ] || fail "mpi TERM: wrapper exited $rc, not 75: $(cat "$M/stderr")"
[ -e "$M/usr1.0" ] && [ -e "$M/usr1.1" ] || fail "a rank got no SIGUSR1: $(ls "$M")"
[ ! -e "$M/term.0" ] && [ ! -e "$M/term.1" ] || fail "a rank got SIGTERM: $(ls "$M")"
check_status "$M/status" "5 REQUEUED 75 node1 1 [0-9]+ [0-9]+ 77_5"
[ "$(cat "$T/scontrol.args")" = "requeue 1235" ] || fail "scontrol got '$(cat "$T/scontrol.args")'"
ok 0 "mpi launcher, real mpirun: SIGTERM reaches both ranks as SIGUSR1, exit 75, requeued"

n=$(cat "$T"/run1/tasks/*/status "$T"/run2/tasks/*/status | wc -l)
[ "$n" -eq $((N + 5)) ] || fail "cat tasks/*/status gave $n lines"
ok 0 "cat tasks/*/status: one line per task"
test_done
