#!/bin/sh
# t0250-multirank.sh - multi-rank tasks on a real local SLURM cluster under
# `pbx parrun`: an MPI program (tests/cli/mpi_allreduce.c) as a 2-node x
# 1-rank task and as a 1-node x 2-rank task with `launcher: mpi` (mpirun
# inside the allocation) completes with every rank in the allreduce, each
# rank on the node SLURM gave it; `launcher: srun` runs one copy per SLURM
# task; harvest and report show one curve per task.  A `train:` task finds
# pbx-train (the local build) on the nodes.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
	echo "1..0 # SKIP mpicc/mpirun missing (apt-get install libopenmpi-dev openmpi-bin)"
	rm -rf "$TEST_TMP"
	exit 0
fi
local_cluster mr slot "{ name: node, count: 2, gpus: 0, cpus: 2 }"
SHARED="$PBX_HOME/clusters/mr/shared"

mkdir -p "$TEST_TMP/mpi"
mpicc -O1 -o "$TEST_TMP/mpi/allreduce" "$PBX_SOURCE_DIR/tests/cli/mpi_allreduce.c"
ok $? "the MPI program builds"

run_pbx -q cluster start mr
ok $rc "cluster starts: $errout"

# exp NAME RESOURCES COMMAND: an experiment directory with the MPI program.
exp() {
	mkdir -p "$TEST_TMP/$1"
	cp "$TEST_TMP/mpi/allreduce" "$TEST_TMP/$1/"
	cat >"$TEST_TMP/$1/experiment.yaml" <<EOT
name: $1
command: $3
resources: $2
outputs: [metrics.jsonl]
EOT
}
exp mpi-2x1 "{ nodes: 2, ntasks-per-node: 1, launcher: mpi, time: '00:05:00' }" "./allreduce > metrics.jsonl"
exp mpi-1x2 "{ nodes: 1, ntasks-per-node: 2, launcher: mpi, time: '00:05:00' }" "./allreduce > metrics.jsonl"
exp srun-2 "{ ntasks: 2, launcher: srun, time: '00:05:00' }" 'echo "copy $SLURM_PROCID of $SLURM_NTASKS"'
for e in mpi-2x1 mpi-1x2 srun-2; do
	run_pbx parrun --json "$TEST_TMP/$e/experiment.yaml" mr
	ok $rc "parrun $e: $errout"
	echo "$out" | json_get 'd["package"]' >"$TEST_TMP/$e.pkg"
done

for e in mpi-2x1 mpi-1x2 srun-2; do
	wait_final "$e" 120
	is "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" "['COMPLETED']" \
		"$e completes"
done

tdir() { echo "$SHARED/pbx/$(cat "$TEST_TMP/$1.pkg")/tasks/0"; }
ranks() { grep '^rank ' "$(tdir "$1")/stderr" | sort | tr '\n' ';'; }
is "$(ranks mpi-2x1)" "rank 0 of 2 on node1;rank 1 of 2 on node2;" \
	"2 nodes x 1 rank: one rank on each node"
is "$(ranks mpi-1x2)" "rank 0 of 2 on node1;rank 1 of 2 on node1;" \
	"1 node x 2 ranks: both ranks on one node"
sums() { python3 -c 'import json,sys; print(" ".join("%g" % json.loads(l)["value"] for l in open(sys.argv[1])))' "$(tdir "$1")/metrics.jsonl"; }
is "$(sums mpi-2x1)" "3 5 7" "2x1: every rank is in the allreduce, rank 0 alone writes metrics"
is "$(sums mpi-1x2)" "3 5 7" "1x2: every rank is in the allreduce, rank 0 alone writes metrics"
is "$(grep '^copy ' "$(tdir srun-2)/stdout" | sort | tr '\n' ';')" "copy 0 of 2;copy 1 of 2;" \
	"launcher srun: one copy per SLURM task"

# --- harvest and report: one set of curves per task ----------------------
for e in mpi-2x1 mpi-1x2; do
	run_pbx -q harvest "$e"
	ok $rc "harvest $e: $errout"
	run_pbx report "$e" -f html -o "$TEST_TMP/$e.html"
	ok $rc "report $e: $errout"
	is "$(grep -o 'class="curve"[^>]*data-task="0"' "$TEST_TMP/$e.html" | wc -l | tr -d ' ')" "1" \
		"$e: the report has one learning curve for its task"
	run_pbx report "$e" -f json
	is "$(echo "$out" | json_get '(d["metrics"], d["rows"][0]["sum.final"])')" "(['sum'], 7)" \
		"$e: report's final sum is 7"
done

# --- a train: task finds pbx-train on the nodes --------------------------
mkdir -p "$TEST_TMP/tr"
cat >"$TEST_TMP/tr/experiment.yaml" <<'EOT'
name: tr
train: { model: mlp, dataset: synthetic, synthetic_n: 256, epochs: 1, batch_size: 64, threads: 1, output_dir: out }
resources: { time: "00:05:00" }
outputs: [out/metrics.jsonl, out/summary.json]
EOT
run_pbx parrun --json "$TEST_TMP/tr/experiment.yaml" mr
wait_final tr 120
is "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" "['COMPLETED']" \
	"a train: task runs the local build of pbx-train on a node"

# --- data-parallel train: tasks: 2 nodes x 1 rank and 1 node x 2 ranks ----
for shape in "2x1:2:1" "1x2:1:2"; do
	name=tr-${shape%%:*}
	rest=${shape#*:}
	mkdir -p "$TEST_TMP/$name"
	cat >"$TEST_TMP/$name/experiment.yaml" <<EOT
name: $name
train: { model: mlp, dataset: synthetic, synthetic_n: 256, epochs: 2, batch_size: 64, threads: 1, output_dir: out }
resources: { nodes: ${rest%%:*}, ntasks-per-node: ${rest#*:}, time: "00:05:00" }
outputs: [out/summary.json]
EOT
	run_pbx parrun --json "$TEST_TMP/$name/experiment.yaml" mr
	ok $rc "parrun $name: $errout"
	wait_final "$name" 120
	is "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" "['COMPLETED']" \
		"$name: a 2-rank train: task completes"
	P=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT short_id FROM packages WHERE name = '$name'")
	grep -q COMPLETED "$SHARED/pbx/$P/tasks/0/status" ||
		tail -n 15 "$SHARED/pbx/$P/tasks/0/status" "$SHARED/pbx/$P/tasks/0/stderr" | sed 's/^/# /'
	is "$(json_get 'd["world"], d["comm"], d["status"]' <"$SHARED/pbx/$P/tasks/0/out/summary.json")" \
		"2 mpi completed" "$name: pbx-train ran data-parallel over 2 MPI ranks"
done

# --- Downpour: 1 parameter server + 2 workers as one task of 3 SLURM tasks
mkdir -p "$TEST_TMP/dp"
cat >"$TEST_TMP/dp/experiment.yaml" <<'EOT'
name: dp
train: { mode: downpour, ps_ranks: 1, model: mlp, dataset: synthetic, synthetic_n: 512, epochs: 2, batch_size: 64, threads: 1, lr: 0.01, output_dir: out }
env: { OMPI_MCA_orte_enable_recovery: "1" }
resources: { ntasks: 3, time: "00:05:00" }
outputs: [out/summary.json, out/downpour.json]
EOT
run_pbx parrun --json "$TEST_TMP/dp/experiment.yaml" mr
ok $rc "parrun dp: $errout"
wait_final dp 120
is "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" "['COMPLETED']" \
	"dp: a Downpour train: task (3 ranks) completes"
P=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT short_id FROM packages WHERE name = 'dp'")
grep -q COMPLETED "$SHARED/pbx/$P/tasks/0/status" ||
	tail -n 15 "$SHARED/pbx/$P/tasks/0/status" "$SHARED/pbx/$P/tasks/0/stderr" | sed 's/^/# /'
is "$(json_get 'd["mode"], d["ps_ranks"], d["servers"][0]["workers_finished"] + d["servers"][0]["workers_lost"] >= 1' <"$SHARED/pbx/$P/tasks/0/out/downpour.json")" \
	"downpour 1 True" "dp: the first worker wrote downpour.json with the server's figures"
grep -q "parameter server rank 0: done: .* 2 of 2 workers finished, 0 lost" "$SHARED/pbx/$P/tasks/0/stderr"
ok $? "dp: the server served both workers to the end"
done_testing
