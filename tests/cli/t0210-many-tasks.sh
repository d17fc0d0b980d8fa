#!/bin/sh
# t0210-many-tasks.sh - a sweep of 5,000 trivial tasks on a cluster with
# MaxArraySize=1001 is split into 5 arrays, submitted in 2 round trips and
# completes; running parrun again submits nothing.
. "$(dirname "$0")/lib.sh"

local_cluster many slot "{ name: node, count: 4, gpus: 0, cpus: 8 }" "slurm: { max_array_size: 1001 }"

mkdir -p "$TEST_TMP/many"
cat >"$TEST_TMP/many/experiment.yaml" <<'EOF'
name: many
command: "true"
sweep:
  grid:
    i: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    j: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    k: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  repeats: 5
EOF
run_pbx -q cluster start many
ok $rc "cluster starts: $errout"
run_pbx parrun --json "$TEST_TMP/many/experiment.yaml" many
ok $rc "parrun of 5000 tasks: $errout"
is "$(echo "$out" | json_get 'd["tasks"], d["submitted"], len(d["arrays"]), d["round_trips"]')" \
	"5000 5000 5 2" "5000 tasks in 5 arrays (MaxArraySize 1001), 2 round trips"
PKG=$(echo "$out" | json_get 'd["package"]')
run_pbx cluster exec many -- sh -c "squeue -h -n pbx-$PKG -o '%F' | sort -u | wc -l"
is "$out" "5" "SLURM holds 5 array jobs"
run_pbx parrun --json "$TEST_TMP/many/experiment.yaml" many
is "$(echo "$out" | json_get 'd["submitted"], d["already_submitted"]')" "0 5000" \
	"parrun again submits nothing"
# Waits while tasks keep completing: how fast SLURM runs trivial batch jobs
# depends on the machine and on the tests beside this one (29 a second in
# the suite on 2 cores, 7 when every task still started a login shell), so
# the limit is on a stall (2 minutes with none completed), plus an overall
# cap below ctest's timeout.
start=$(date +%s); last=-1; now=$start; moved=$start
while [ $((now - moved)) -lt 120 ] && [ $((now - start)) -lt 1300 ]; do
	"$PBX" state --json "$PKG" >"$TEST_TMP/state.json" 2>/dev/null
	done_n=$(json_get 'd["counts"].get("COMPLETED", 0)' <"$TEST_TMP/state.json")
	[ "$done_n" = 5000 ] && break
	now=$(date +%s)
	[ "$done_n" != "$last" ] && { last=$done_n; moved=$now; }
	sleep 2
done
is "$done_n" "5000" "all 5000 tasks COMPLETED (after $(($(date +%s) - start)) s)"
run_pbx parrun --json "$TEST_TMP/many/experiment.yaml" many
is "$(echo "$out" | json_get 'd["submitted"]')" "0" "parrun after completion submits nothing"
done_testing
