#!/bin/sh
# t0100-cluster-local.sh - the local provider end to end: a real 3-node
# SLURM cluster (3 compute nodes x 2 GPU GRES) on node bodies; srun across
# all nodes; an array of 6 GPU tasks runs 2 per node at the same time; a
# killed slurmd is repaired by a second `start`; `stop` leaves no process,
# port or file behind; a node whose sshd cannot bind fails the start with
# sshd's reason; a node name too long for slurmd's sockets is refused.
. "$(dirname "$0")/lib.sh"

# addresses and ports: the test's slot (lib.sh; SSH_PORT is its)
ADDR=$SLOT_NET.0
CTLD_PORT=$SLURM_PORT_BASE
cat >"$PBX_HOME/config.yaml" <<EOF
clusters:
  t3:
    cloud: local
    node_groups:
      - name: gpu
        count: 3
        gpus: 2
clouds:
  local:
    address_base: $ADDR.0
    ssh_port: $SSH_PORT
    slurm_port_base: $CTLD_PORT
EOF
chmod 600 "$PBX_HOME/config.yaml"
CDIR="$PBX_HOME/clusters/t3"
stop_at_exit t3

run_pbx cluster start t3
ok $rc "cluster start t3 succeeds: $errout"
echo "$errout" | grep -q "gpu3  idle"
ok $? "progress shows gpu3 idle (plain lines when not a terminal)"

run_pbx cluster exec t3 -- sinfo -h -N -o '%N %t %G'
is "$out" "gpu1 idle gpu:2
gpu2 idle gpu:2
gpu3 idle gpu:2" "sinfo shows 3 idle nodes with 2 GPUs each"

run_pbx cluster exec t3 -- srun -N3 sh -c 'echo $SLURMD_NODENAME'
is "$(echo "$out" | sort | tr '\n' ' ')" "gpu1 gpu2 gpu3 " "srun -N3 runs on every node"

run_pbx cluster exec t3 -- sbatch --wait --array=0-5 --gres=gpu:1 -o 'arr-%a.out' \
	--wrap 'echo $SLURMD_NODENAME $(date +%s.%N); sleep 4; date +%s.%N'
ok $rc "an array of 6 tasks with --gres=gpu:1 completes: $errout"
per_node=$(cat "$CDIR"/shared/arr-*.out | awk 'NF==2 {print $1}' | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')
is "$per_node" "2 2 2 " "2 tasks ran on each node"
# All 6 ran at once: the latest start is before the earliest end.
overlap=$(for f in "$CDIR"/shared/arr-*.out; do sed -n '1p;2p' "$f" | tr '\n' ' '; echo; done |
	awk '{ if ($2 > maxs) maxs = $2; if (mine == "" || $3 < mine) mine = $3 }
	     END { print (maxs < mine) ? "yes" : "no" }')
is "$overlap" "yes" "the 6 tasks (2 per node) ran at the same time"

ctld_pid=$(cat "$CDIR/nodes/head/run/slurmctld.pid")
other_pid=$(cat "$CDIR/nodes/gpu1/run/slurmd-gpu1.pid")
old_pid=$(cat "$CDIR/nodes/gpu2/run/slurmd-gpu2.pid")
pkill -F "$CDIR/nodes/gpu2/run/slurmd-gpu2.pid"
sleep 1
proc_gone "$old_pid"
ok $? "gpu2's slurmd is dead"
run_pbx cluster start t3
ok $rc "start again repairs the cluster: $errout"
new_pid=$(cat "$CDIR/nodes/gpu2/run/slurmd-gpu2.pid")
kill -0 "$new_pid" 2>/dev/null && [ "$new_pid" != "$old_pid" ]
ok $? "gpu2 has a new slurmd"
is "$(cat "$CDIR/nodes/head/run/slurmctld.pid") $(cat "$CDIR/nodes/gpu1/run/slurmd-gpu1.pid")" \
	"$ctld_pid $other_pid" "healthy daemons were left alone"
run_pbx cluster exec t3 -- sinfo -h -n gpu2 -o '%t'
is "$out" "idle" "gpu2 is idle again"

run_pbx cluster show --json t3
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["nodes"])==4 and all(n["slurm_state"]=="idle" for n in d["nodes"][1:]), d'
ok $? "show --json lists the head and 3 idle nodes"

run_pbx cluster exec t3 -- sh -c 'echo to-stderr >&2; exit 3'
is "$rc:$errout" "3:to-stderr" "exec returns the remote status and stderr"
run_pbx cluster exec t3 -- 'echo a; echo b'
case $rc:$errout in 127:*"for a shell command line: pbx cluster exec t3 -- sh -c '...'"*) r=0 ;; *) r=1 ;; esac
ok $r "a command line given as one word: exit 127 and a hint for sh -c: $errout"

run_pbx cluster stop --discard-results t3
ok $rc "cluster stop succeeds: $errout"
is "$(procs_mentioning "$CDIR")" "" "no process of the cluster is left"
ports=$(ss -Hltn | awk '{print $4}' | awk -v a="$ADDR." -v lo="$CTLD_PORT" '{ n = split($0, p, ":") } index($0, a) == 1 || (p[n] >= lo && p[n] < lo + 64)' | wc -l)
is "$ports" "0" "no listening port of the cluster is left"
[ ! -e "$CDIR" ]
ok $? "the cluster's directory is gone"
run_pbx cluster list --all --json
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[0]["state"]=="deleted", d'
ok $? "the store marks the cluster deleted"

# A node whose sshd cannot listen (its address and port taken) fails the
# start at once, with sshd's own reason; stop still cleans up.
python3 -c 'import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("'"$ADDR.2"'", '"$SSH_PORT"')); s.listen(); time.sleep(120)' &
squatter=$!
i=0
until ss -Hltn | awk '{print $4}' | grep -qx "$ADDR.2:$SSH_PORT"; do
	i=$((i + 1)); [ "$i" -lt 100 ] || break; sleep 0.05
done
run_pbx cluster start t3
kill "$squatter" 2>/dev/null
[ "$rc" -ne 0 ] && echo "$errout" | grep -q "node gpu1: sshd did not start (exit status 255): Cannot bind any address"
ok $? "a node whose sshd cannot bind fails the start with sshd's reason: $errout"
run_pbx cluster stop --discard-results t3
is "$rc:$(procs_mentioning "$CDIR")" "0:" "stop after the failed start leaves no process"

# a node name so long that slurmd's step sockets would pass a Unix socket
# path's 108 bytes (slurmd then cannot start a job, which SLURM holds as
# "launch failed requeued held"): refused before any node is made
sed -i 's/^clusters:$/clusters:\n  tlong:\n    cloud: local\n    node_groups:\n      - { name: abcdefghijklmnopqrstuvwxyzabcd, count: 1 }/' \
	"$PBX_HOME/config.yaml"
run_pbx cluster start tlong
case "$rc $errout" in "2 "*"node abcdefghijklmnopqrstuvwxyzabcd1's SLURM sockets would be "*"more than a Unix socket's 107"*) r=0 ;; *) r=1 ;; esac
ok $r "a node whose SLURM sockets would not fit a Unix socket path is refused: $errout"
[ ! -e "$PBX_HOME/clusters/tlong/nodes" ]
ok $? "before any node is made"
run_pbx cluster stop --discard-results tlong
ok $rc "and the refused cluster is removed by stop: $errout"
done_testing
