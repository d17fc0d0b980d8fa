#!/bin/sh
# t0260-task-user.sh - tasks run as the node's task user, never as root
# (docs/SECURITY.md, "Who is who on a node"): on a local cluster whose
# directories others may pass through (PBX_HOME 0711 here; a PBX_HOME in
# /root is not, and its tasks run as root, as every other test's do), every
# task of a sweep runs as pbx-task (uid 2850) with its own HOME; it cannot
# write the shared directory's top (where the head's control files would
# go), read munge's key or use sudo, and srun inside it works; harvest
# brings its files home; a package whose task directories root made (a
# cluster bootstrapped before the upgrade) runs again as the task user.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster tu slot "{ name: node, count: 2 }"
CDIR=$PBX_HOME/clusters/tu
SHARED=$CDIR/shared

run_pbx -q cluster start tu
ok $rc "the cluster starts: $errout"
is "$(getent passwd pbx-task | cut -d: -f3)" 2850 "the task user pbx-task exists with uid 2850"
for n in head node1 node2; do
	grep -qx "export PBX_TASK_USER=pbx-task" "$CDIR/nodes/$n/etc/pbx/env.sh"
	ok $? "$n's env.sh names the task user"
done

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/who.yaml" <<'EXP'
name: who
command: >-
  echo "uid=$(id -u) user=$(id -un) home=$HOME";
  if mkdir "$PBX_SHARED/.pbx-autostop-{i}" 2>/dev/null; then echo "wrote SHARED"; else echo "SHARED refused"; fi;
  if cat "$PBX_ROOT/etc/munge/munge.key" >/dev/null 2>&1; then echo "read munge.key"; else echo "munge.key refused"; fi;
  if sudo -n true 2>/dev/null; then echo "sudo let in"; else echo "sudo refused"; fi;
  echo "srun on $(srun -N1 -n1 sh -c 'echo $SLURMD_NODENAME')";
  echo result-{i} >out.txt;
  [ {i} != 2 ] || [ -e "$PBX_RUN_DIR/again" ] || exit 3
sweep: { grid: { i: [1, 2, 3, 4] } }
outputs: [out.txt]
EXP
run_pbx parrun "$TEST_TMP/exp/who.yaml" tu
ok $rc "a 4-task sweep is submitted: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg" 60
is "$(task_states "$pkg")" "COMPLETED COMPLETED COMPLETED FAILED" "every task ran; task 1 failed as it should on its first attempt"
outs=$(cat "$SHARED/pbx/$pkg"/tasks/*/stdout 2>/dev/null)
is "$(echo "$outs" | grep -c '^uid=2850 user=pbx-task home=/home/pbx-task$')" 4 \
	"each ran as pbx-task (uid 2850, not 0), with its own HOME: $(echo "$outs" | grep '^uid=' | sort -u | tr '\n' ' ')"
is "$(echo "$outs" | grep -c '^SHARED refused$')" 4 "none could write the shared directory's top"
[ -z "$(find "$SHARED" -maxdepth 1 -name '.pbx-autostop-*')" ]
ok $? "and nothing of theirs is there"
is "$(echo "$outs" | grep -c '^munge.key refused$')" 4 "none could read munge's key"
is "$(echo "$outs" | grep -c '^sudo refused$')" 4 "none could use sudo"
is "$(echo "$outs" | grep -c '^srun on node[12]$')" 4 "srun inside each task ran (SLURM's configuration and munge reached)"
is "$(stat -c %U "$SHARED/pbx/$pkg/tasks" "$SHARED/pbx/$pkg/slurm" | sort -u)" pbx-task \
	"the run's tasks/ and slurm/ are the task user's"
is "$(stat -c %U "$SHARED/pbx/$pkg/pkg")" root "its package stays root's (tasks read it)"

run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
is "$(cat "$PBX_HOME"/results/"$pkg"*/2/out.txt 2>/dev/null)" "result-3" "a task's file is home"

# a run whose task directories root made (a cluster bootstrapped before
# tasks ran as the task user): a rerun gives them to the task user, and the
# failed task runs again as it
chown -R root:root "$SHARED/pbx/$pkg/tasks" "$SHARED/pbx/$pkg/slurm"
touch "$SHARED/pbx/$pkg/again"
run_pbx -q rerun --failed "$pkg"
ok $rc "rerun of task 1: $errout"
wait_for 600 prints 2 sh -c "grep -c '^uid=' '$SHARED/pbx/$pkg/tasks/1/stdout' 2>/dev/null"
wait_final "$pkg" 60
is "$(task_states "$pkg")" "COMPLETED COMPLETED COMPLETED COMPLETED" "task 1 completed again"
is "$(stat -c %U "$SHARED/pbx/$pkg/tasks/1")" pbx-task "the rerun gave the old task directory to the task user"
is "$(grep -c '^uid=2850 ' "$SHARED/pbx/$pkg/tasks/1/stdout")" 2 "and ran it again as pbx-task"

run_pbx -q cluster stop --discard-results tu
ok $rc "stop: $errout"
done_testing
