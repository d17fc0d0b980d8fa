#!/bin/sh
# t0261-task-user-private-home.sh - tasks run as the task user on a local
# cluster of a home others cannot pass through (the default /root/.pbx;
# here the test's own 0700 home; docs/SECURITY.md, "Who is who on a
# node"): root's cluster lives under /var/lib/pbx/nodes/ID (ID: the first
# 12 hex digits of its cluster id, every directory on the way passable),
# named by a link in the home; every task of a sweep runs as pbx-task,
# harvest brings its files home, `exec -n` finds a node body's env.sh
# under the root its sshd names (not a stale one in the store), and stop
# removes the directory and the link.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

unset PBX_LOCAL_BODIES_DIR # the default, as a user's pbx has it
chmod 700 "$PBX_HOME"      # as /root/.pbx (under /root, 0700)
[ "$(stat -c %a "$PBX_HOME")" = 700 ]
ok $? "the home is private (its directory 0700)"
local_cluster ph slot "{ name: node, count: 2 }"
HANDLE=$PBX_HOME/clusters/ph

run_pbx -q cluster start ph
ok $rc "the cluster starts: $errout"
real=$(readlink "$HANDLE")
id=$(cat "$HANDLE/cluster-id" 2>/dev/null)
[ -L "$HANDLE" ] && [ "$real" = "/var/lib/pbx/nodes/$(printf '%.12s' "$id")" ]
ok $? "its directory is /var/lib/pbx/nodes/ID behind a link in the home ($HANDLE -> $real, id $id)"
d=$real
passable=0
while [ "$d" != / ]; do
	case $(stat -c %A "$d") in *x) ;; *) passable=1; echo "# not passable: $(stat -c '%A %n' "$d")" ;; esac
	d=${d%/*}
	[ -n "$d" ] || d=/
done
ok $passable "others may pass through every directory on the way to it"

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/who.yaml" <<'EXP'
name: who
command: echo "uid=$(id -u) user=$(id -un) node=$SLURMD_NODENAME pbx_node=$PBX_NODE" && echo {i} >out.txt
sweep: { grid: { i: [1, 2, 3, 4] } }
outputs: [out.txt]
EXP
run_pbx parrun "$TEST_TMP/exp/who.yaml" ph
ok $rc "a 4-task sweep is submitted: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg" 120
is "$(task_states "$pkg")" "COMPLETED COMPLETED COMPLETED COMPLETED" "every task completed"
outs=$(cat "$HANDLE/shared/pbx/$pkg"/tasks/*/stdout 2>/dev/null)
is "$(echo "$outs" | grep -c '^uid=2850 user=pbx-task node=node[12] ')" 4 \
	"each ran as pbx-task, not root: $(echo "$outs" | sort -u | tr '\n' ' ')"
is "$(echo "$outs" | grep -c '^.* node=\(node[12]\) pbx_node=\1$')" 4 "PBX_NODE names the node it ran on, not the head"
run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
is "$(cat "$PBX_HOME/results/$pkg"/*/out.txt 2>/dev/null | sort | tr '\n' ' ')" "1 2 3 4 " "it brought their files home"

# a node body's root as the store had it before its instance was made anew
# (power saving, on the emulators): the body's own sshd names its root
sqlite3 "$PBX_HOME/pbx.db" "UPDATE nodes SET root = '/nonexistent/old-body' WHERE name = 'node1' AND cluster_id = (SELECT max(id) FROM clusters)"
run_pbx cluster exec -n node1 ph -- sh -c 'echo "$SLURM_CONF"'
case $out in "$real/nodes/node1/"*) r=0 ;; *) r=1 ;; esac
ok $r "exec -n reaches a node whose root the store has wrong, with its own env.sh: $out $errout"

run_pbx -q cluster stop --discard-results ph
ok $rc "stop: $errout"
[ ! -e "$real" ] && [ ! -L "$HANDLE" ]
ok $? "stop removed the directory and the link"
done_testing
