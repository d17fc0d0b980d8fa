#!/bin/sh
# Direct mode for real (no SSH): a head and two compute node bodies on this
# machine, each with its own prefix, brought up by templates/bootstrap.sh in
# parallel; a GPU array job whose tasks on one node get different GPU
# indices; repair of a killed slurmd without touching the
# healthy daemons (held back while PBX_CTLD_LOCK is held); status; down
# leaves no process and no listening port.
# Addresses 127.0.3.1-3, ports 18500-18519 (reserved for this test).
set -eu

SRC=${1:?usage: direct.sh SOURCE_DIR RENDER}
RENDER=${2:?usage: direct.sh SOURCE_DIR RENDER} # tests/cluster/test_bootstrap_render
BOOT=$SRC/templates/bootstrap.sh
TEMPLATE=$SRC/templates/slurm.conf.in
PORT0=18500
SRUN_PORTS=18510-18519

# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"

for b in slurmctld slurmd munged munge sinfo sbatch squeue ss pgrep; do
	command -v "$b" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
	command -v "$b" >/dev/null 2>&1 || test_skip_all "$b missing"
done

if ss -ltnH 2>/dev/null | awk '{print $4}' | grep -Eq ':18(5[01][0-9])$'; then
	fail "a port in 18500-18519 is already in use"
fi

T=$(mktemp -d /tmp/pbx-bt-direct.XXXXXX)
NODES="head node1 node2"

cleanup() {
	rc=$?
	set +e
	for n in $NODES; do
		[ -d "$T/nodes/$n" ] || continue
		env_for "$n" sh "$BOOT" down >/dev/null 2>&1
	done
	# Anything of this test's tree still alive is ours; take it down too.
	for p in $(pgrep -f "$T"); do kill -KILL "$p" 2>/dev/null; done
	if [ "$rc" -ne 0 ]; then
		for f in "$T"/out/*.err "$T"/nodes/*/var/log/slurm/*.log; do
			[ -r "$f" ] && { echo "---- $f"; tail -n 20 "$f"; }
		done >&2
	fi
	if [ -n "${PBX_TEST_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

role_of() { [ "$1" = head ] && echo head || echo compute; }
gpus_of() { [ "$1" = head ] && echo 0 || echo 2; }
env_for() {
	n=$1
	shift
	env PBX_MODE=direct PBX_ROOT="$T/nodes/$n" PBX_ROLE="$(role_of "$n")" \
		PBX_NODE="$n" PBX_CLUSTER=bt PBX_STAGE="$T/stage" \
		PBX_GPUS="$(gpus_of "$n")" PBX_HEAD_ADDR=127.0.3.1 \
		PBX_SHARED="$T/shared" PBX_SLURM_USER=root "$@"
}

# ---- render slurm.conf the way pbx does (all placeholders but @ROOT@)
mkdir -p "$T/stage" "$T/out"
cpus=$(nproc 2>/dev/null || echo 1)
[ "$cpus" -le 2 ] || cpus=2
{
	echo "NodeName=node1 NodeHostname=localhost NodeAddr=127.0.3.2 Port=$((PORT0 + 1)) CPUs=$cpus Gres=gpu:2 State=UNKNOWN"
	echo "NodeName=node2 NodeHostname=localhost NodeAddr=127.0.3.3 Port=$((PORT0 + 2)) CPUs=$cpus Gres=gpu:2 State=UNKNOWN"
} >"$T/nodes.txt"
sed -e "s|@CLUSTER@|bt|g" -e "s|@CTLD_HOST@|$(hostname -s)|g" \
	-e "s|@CTLD_ADDR@|127.0.3.1|g" -e "s|@CTLD_PORT@|$PORT0|g" \
	-e "s|@SLURM_USER@|root|g" -e "s|@SRUN_PORTS@|$SRUN_PORTS|g" \
	-e "s|@PARTITION_NODES@|node1,node2|g" \
	-e "s|@EXTRA@|DebugFlags=NO_CONF_HASH|g" -e "s|@MAX_ARRAY_SIZE@|1001|g" -e "s|@MAX_JOB_COUNT@|10000|g" -e "s|@AUTH_OPTIONS@|,cred_expire=15|g" \
	-e "/@NODES@/{r $T/nodes.txt" -e "d}" "$TEMPLATE" >"$T/stage/slurm.conf"
grep -q '@ROOT@' "$T/stage/slurm.conf" || fail "rendered conf lost @ROOT@"
head -c 1024 /dev/urandom >"$T/stage/munge.key"
# each node's gres.conf as pbx renders it (src/cluster/bootstrap_render.c):
# stand-in devices under the node's root
for n in $NODES; do
	"$RENDER" gres "$n" "$(gpus_of "$n")" "" "$T/nodes/$n/dev/nvidia" >"$T/stage/gres-$n.conf"
done
# and each node's env.sh, and the task user's line that follows it where
# tasks run as that user
for n in $NODES; do
	"$RENDER" env "$n" bt "$T/nodes/$n" "$T/shared" direct >"$T/stage/env-$n.sh"
done
"$RENDER" task-user >"$T/stage/task-user.env.sh"

up_all() {
	for n in $NODES; do
		env_for "$n" sh "$BOOT" up >"$T/out/$n.up$1.out" 2>"$T/out/$n.up$1.err" &
		echo $! >"$T/out/$n.pid"
	done
	for n in $NODES; do
		wait "$(cat "$T/out/$n.pid")" || fail "up #$1 on $n failed: $(cat "$T/out/$n.up$1.out")"
		want="munge config shared $([ "$n" = head ] && echo slurmctld || echo slurmd) done"
		got=$(sed -n 's/^PBX-STAGE //p' "$T/out/$n.up$1.out" | tr '\n' ' ')
		[ "$got" = "install $want " ] || fail "up #$1 on $n: stages '$got'"
		! grep -v '^PBX-STAGE ' "$T/out/$n.up$1.out" || fail "up #$1 on $n: stray stdout"
	done
}

export SLURM_CONF="$T/nodes/head/etc/slurm/slurm.conf"

# wait_idle NODE...: every NODE idle (no flag) with gpu:2 within 60 s
wait_idle() {
	i=0
	while :; do
		ok=1
		for n in "$@"; do
			line=$(sinfo -h -N -n "$n" -o '%N %t %G' 2>/dev/null | head -n 1) || line=
			[ "$line" = "$n idle gpu:2" ] || ok=0
		done
		[ "$ok" = 0 ] || return 0
		i=$((i + 1))
		[ "$i" -lt 120 ] || fail "nodes not idle with gpu:2: $(sinfo -h -N -o '%N %t %G' 2>&1)"
		sleep 0.5
	done
}

pid_of() { head -n 1 "$T/nodes/$1/run/$2.pid"; }

# ---- up
t0=$(date +%s)
up_all 1
ok 0 "up (3 nodes in parallel): $(($(date +%s) - t0)) s"
wait_idle node1 node2
[ "$(grep -v '^#' "$T/nodes/node1/etc/slurm/gres.conf")" = \
	"NodeName=node1 Name=gpu File=$T/nodes/node1/dev/nvidia[0-1]" ] || fail "gres.conf of node1"
(
	# shellcheck source=/dev/null
	. "$T/nodes/node2/etc/pbx/env.sh"
	[ "$SLURM_CONF" = "$T/nodes/node2/etc/slurm/slurm.conf" ] && [ "$PBX_NODE" = node2 ] &&
		[ "$PBX_SHARED" = "$T/shared" ] && [ "$PBX_CLUSTER" = bt ] &&
		[ "$PBX_ROOT" = "$T/nodes/node2" ]
) || fail "env.sh of node2"
# installed as pbx rendered it; the task user's line after it only where
# tasks run as that user (not here when $T, 0700, keeps it out)
if grep -q "tasks on this node body run as root" "$T/out/node2.up1.err"; then
	cmp -s "$T/stage/env-node2.sh" "$T/nodes/node2/etc/pbx/env.sh"
else
	cat "$T/stage/env-node2.sh" "$T/stage/task-user.env.sh" | cmp -s - "$T/nodes/node2/etc/pbx/env.sh"
fi || fail "env.sh of node2 is not the staged one: $(cat "$T/nodes/node2/etc/pbx/env.sh")"
[ -d "$T/shared" ] || fail "shared dir"

# ---- an array job that needs one GPU per task: 4 tasks on 2 nodes x 2
# GPUs, held at a barrier until all 4 run at once, so the two tasks on a
# node hold its two GPUs together; SLURM must give them different indices
# (CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS), as on a real GPU node.
{ [ "$(readlink "$T/nodes/node1/dev/nvidia1")" = /dev/null ] && [ -c "$T/nodes/node1/dev/nvidia1" ]; } ||
	fail "node1's GRES file nvidia1 is not a character device: $(ls -l "$T/nodes/node1/dev" 2>&1)"
# shellcheck disable=SC2016 # expanded by the job's shell
job=$(sbatch --parsable -a 1-4 --gres=gpu:1 -D "$T/shared" -o "$T/shared/out-%a.txt" \
	--wrap 'touch "started-$SLURM_ARRAY_TASK_ID"; n=0
		while [ "$(ls started-* | wc -l)" -lt 4 ] && [ "$n" -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
		echo "task $SLURM_ARRAY_TASK_ID on $SLURMD_NODENAME" \
			"cuda=${CUDA_VISIBLE_DEVICES:-none} job_gpus=${SLURM_JOB_GPUS:-none} together=$(ls started-* | wc -l)"') ||
	fail "sbatch"
i=0
while [ -n "$(squeue -h -j "$job" -o %i 2>/dev/null)" ]; do
	i=$((i + 1))
	[ "$i" -lt 120 ] || fail "array job $job did not finish: $(squeue 2>&1)"
	sleep 0.5
done
for a in 1 2 3 4; do
	grep -Eq "^task $a on node[12] cuda=[01] job_gpus=[01] together=4$" "$T/shared/out-$a.txt" 2>/dev/null ||
		fail "array task $a: $(cat "$T/shared/out-$a.txt" 2>&1) (want cuda=0|1 job_gpus=0|1 together=4)"
done
for n in node1 node2; do
	got=$(cat "$T"/shared/out-*.txt | sed -n "s/^task [0-9] on $n cuda=\([01]\) job_gpus=\1 .*/\1/p" |
		sort | tr '\n' ' ')
	[ "$got" = "0 1 " ] || fail "the two tasks on $n did not get GPUs 0 and 1 (got '$got'): $(cat "$T"/shared/out-*.txt)"
done
ok 0 "array job $job with --gres=gpu:1: 4 tasks at once, GPUs 0 and 1 on each node"

# ---- kill one slurmd; up again repairs only that
ctld=$(pid_of head slurmctld)
d1=$(pid_of node1 slurmd-node1)
d2=$(pid_of node2 slurmd-node2)
m1=$(pid_of node1 munge/munged)
kill -KILL "$d2"
while kill -0 "$d2" 2>/dev/null; do sleep 0.1; done
env_for node2 sh "$BOOT" status >"$T/out/st0" 2>/dev/null || fail "status"
grep -qx 'slurmd stopped' "$T/out/st0" || fail "status after kill: $(cat "$T/out/st0")"
# ---- PBX_CTLD_LOCK: while the lock is held (pbx holds it while the head
# bootstraps), a compute node's up waits before starting its slurmd
mkfifo "$T/hold"
# shellcheck disable=SC2016 # $1 is the inner shell's
flock -x "$T/ctld.lock" sh -c 'read -r x <"$1"' sh "$T/hold" &
i=0
while flock -n -s "$T/ctld.lock" true; do
	i=$((i + 1))
	[ "$i" -lt 1200 ] || fail "the test could not take its lock"
	sleep 0.05
done
env_for node2 env PBX_CTLD_LOCK="$T/ctld.lock" sh "$BOOT" up >"$T/out/node2.lock.out" \
	2>"$T/out/node2.lock.err" &
up=$!
i=0
until grep -q '^PBX-STAGE slurmd' "$T/out/node2.lock.out" 2>/dev/null; do
	i=$((i + 1))
	[ "$i" -lt 1200 ] || fail "up with PBX_CTLD_LOCK never reached its slurmd stage in 60 s"
	sleep 0.05
done
sleep 1
kill -0 "$up" 2>/dev/null || fail "up finished while PBX_CTLD_LOCK was held"
if [ -r "$T/nodes/node2/run/slurmd-node2.pid" ] && kill -0 "$(pid_of node2 slurmd-node2)" 2>/dev/null; then
	fail "slurmd started while PBX_CTLD_LOCK was held"
fi
echo go >"$T/hold"
wait "$up" || fail "up with PBX_CTLD_LOCK failed: $(cat "$T/out/node2.lock.out")"
kill -0 "$(pid_of node2 slurmd-node2)" || fail "no slurmd after PBX_CTLD_LOCK was let go"
ok 0 "PBX_CTLD_LOCK held node2's slurmd back until it was let go"

t0=$(date +%s)
up_all 2
ok 0 "up again (repair): $(($(date +%s) - t0)) s"
wait_idle node1 node2
[ "$(pid_of head slurmctld)" = "$ctld" ] || fail "slurmctld was restarted"
[ "$(pid_of node1 slurmd-node1)" = "$d1" ] || fail "node1's slurmd was restarted"
[ "$(pid_of node1 munge/munged)" = "$m1" ] || fail "node1's munged was restarted"
new=$(pid_of node2 slurmd-node2)
if [ "$new" = "$d2" ] || ! kill -0 "$new"; then fail "node2's slurmd not restarted"; fi

# ---- a drained node whose slurmd restarts is resumed by up
scontrol update nodename=node1 state=drain reason=pbx-test || fail "drain node1"
kill -KILL "$d1"
while kill -0 "$d1" 2>/dev/null; do sleep 0.1; done
env_for node1 sh "$BOOT" up >"$T/out/node1.up3.out" 2>"$T/out/node1.up3.err" ||
	fail "up #3 on node1: $(cat "$T/out/node1.up3.out")"
grep -q 'resuming' "$T/out/node1.up3.err" || fail "node1 not resumed: $(cat "$T/out/node1.up3.err")"
wait_idle node1 node2
[ "$(pid_of head slurmctld)" = "$ctld" ] || fail "slurmctld was restarted"

# ---- status
for n in $NODES; do
	env_for "$n" sh "$BOOT" status >"$T/out/st-$n" 2>/dev/null || fail "status on $n"
	d=$([ "$n" = head ] && echo slurmctld || echo slurmd)
	[ "$(cat "$T/out/st-$n")" = "munged running
$d running" ] || fail "status on $n: $(cat "$T/out/st-$n")"
done

# ---- down
pids=$(cat "$T"/nodes/*/run/*.pid "$T"/nodes/*/run/munge/munged.pid)
for n in $NODES; do env_for "$n" sh "$BOOT" down >/dev/null 2>"$T/out/$n.down.err" & done
wait

# ---- PBX_CTLD_LOCK saying the head's bootstrap failed: a compute node's up
# does not wait for slurmctld (down now); its slurmd starts and keeps trying
echo failed >"$T/ctld.lock"
env_for node1 env PBX_CTLD_LOCK="$T/ctld.lock" PBX_CTLD_WAIT=600 PBX_RESUME_WAIT=1 sh "$BOOT" up \
	>"$T/out/node1.failed.out" 2>"$T/out/node1.failed.err" ||
	fail "up after a failed head: $(cat "$T/out/node1.failed.out")"
grep -q "the head's bootstrap failed: not waiting for slurmctld" "$T/out/node1.failed.err" ||
	fail "up after a failed head did not skip the wait: $(cat "$T/out/node1.failed.err")"
! grep -q 'slurmctld does not answer' "$T/out/node1.failed.err" ||
	fail "up after a failed head waited for slurmctld"
pids="$pids $(cat "$T/nodes/node1/run/slurmd-node1.pid" "$T/nodes/node1/run/munge/munged.pid")"
# ---- GPU files left as plain files by an older bootstrap (no GPU indices)
# become links to /dev/null, and the slurmd that loaded them restarts
old_slurmd=$(pid_of node1 slurmd-node1)
rm -f "$T/nodes/node1/dev/nvidia0" "$T/nodes/node1/dev/nvidia1"
: >"$T/nodes/node1/dev/nvidia0"
: >"$T/nodes/node1/dev/nvidia1"
env_for node1 env PBX_CTLD_LOCK="$T/ctld.lock" PBX_STOP_WAIT=1 PBX_RESUME_WAIT=1 sh "$BOOT" up \
	>"$T/out/node1.olddev.out" 2>"$T/out/node1.olddev.err" ||
	fail "up over plain GPU files: $(cat "$T/out/node1.olddev.out")"
{ [ -c "$T/nodes/node1/dev/nvidia0" ] && [ -c "$T/nodes/node1/dev/nvidia1" ]; } ||
	fail "plain GPU files were not replaced: $(ls -l "$T/nodes/node1/dev")"
[ "$(pid_of node1 slurmd-node1)" != "$old_slurmd" ] ||
	fail "slurmd was not restarted after its GPU files changed"
pids="$pids $(cat "$T/nodes/node1/run/slurmd-node1.pid")"

# ---- the head's key (PBX_HEAD_PBX, docs/head-identity.md): a compute node
# authorizes only a key published by its own user (root) in a directory of
# that user's, never one a task put in the world-writable SHARED; it keeps
# the login user's other keys, adds the head's once, drops it when the head
# no longer runs pbx, and never writes a home outside its body.
home1=$T/nodes/node1/home/u
ak=$home1/.ssh/authorized_keys
key_up() { env_for node1 env PBX_STOP_WAIT=1 PBX_RESUME_WAIT=1 PBX_NFS_WAIT=2 "$@" sh "$BOOT" up \
	>"$T/out/node1.key.out" 2>"$T/out/node1.key.err"; }
ssh-keygen -q -t ed25519 -N '' -C pbx-head:bt -f "$T/headkey"
mkdir -p "$T/shared/.pbx" "$home1/.ssh"
cp "$T/headkey.pub" "$T/shared/.pbx/head_key.pub"
echo "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyOfTheUserXXXXXXXXXXXXXXXXXXXXXXXX user@laptop" >"$ak"
chown -R nobody "$T/shared/.pbx"
! key_up PBX_HEAD_PBX=1 PBX_LOGIN_HOME="$home1" || fail "up authorized a key a task published"
grep -q "the head published no key" "$T/out/node1.key.out" || fail "no reason: $(cat "$T/out/node1.key.out")"
! grep -q pbx-head "$ak" || fail "a task's key was authorized"
chown -R root "$T/shared/.pbx"
key_up PBX_HEAD_PBX=1 PBX_LOGIN_HOME="$home1" || fail "up with the head's key: $(cat "$T/out/node1.key.out")"
key_up PBX_HEAD_PBX=1 PBX_LOGIN_HOME="$home1" || fail "up again: $(cat "$T/out/node1.key.out")"
[ "$(grep -c " pbx-head:bt\$" "$ak")" = 1 ] || fail "the head's key is not there once: $(cat "$ak")"
grep -qF "$(cut -d' ' -f2 "$T/headkey.pub")" "$ak" || fail "another key than the head's"
grep -q "user@laptop" "$ak" || fail "the user's other key was dropped"
[ "$(stat -c %a "$ak")" = 600 ] || fail "authorized_keys is $(stat -c %a "$ak")"
key_up PBX_LOGIN_HOME="$home1" || fail "up without PBX_HEAD_PBX: $(cat "$T/out/node1.key.out")"
! grep -q pbx-head "$ak" || fail "the head's key stayed after the head stopped running pbx"
grep -q "user@laptop" "$ak" || fail "dropping the head's key dropped the user's"
! key_up PBX_HEAD_PBX=1 PBX_LOGIN_HOME="$T/elsewhere" || fail "up wrote a home outside the body"
[ ! -e "$T/elsewhere" ] || fail "up made a home outside the body"
grep -q "outside this node body" "$T/out/node1.key.out" || fail "no reason: $(cat "$T/out/node1.key.out")"
# ---- the user's key (PBX_USER_KEY, docs/power-saving.md "On EC2"): the
# head's pbx passes it to the nodes it makes; authorized once, tagged
# pbx-user:CLUSTER, replaced when it changes, the other lines kept; a line
# that is not "TYPE BASE64" is refused and writes nothing; without it the
# line stays (the user's own pbx passes none)
ukey="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUserKeyOfTheLaptopYYYYYYYYYYYYYYYYYYYYYYYY"
key_up PBX_USER_KEY="$ukey" PBX_LOGIN_HOME="$home1" || fail "up with the user's key: $(cat "$T/out/node1.key.out")"
key_up PBX_USER_KEY="$ukey" PBX_LOGIN_HOME="$home1" || fail "up again: $(cat "$T/out/node1.key.out")"
[ "$(grep -c "^$ukey pbx-user:bt\$" "$ak")" = 1 ] || fail "the user's key is not there once, tagged: $(cat "$ak")"
grep -q "user@laptop" "$ak" || fail "the user's other key was dropped"
ukey2="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINewKeyOfTheLaptopZZZZZZZZZZZZZZZZZZZZZZZZZ"
key_up PBX_USER_KEY="$ukey2" PBX_LOGIN_HOME="$home1" || fail "up with a new key: $(cat "$T/out/node1.key.out")"
[ "$(grep -c " pbx-user:bt\$" "$ak")" = 1 ] && grep -q "^$ukey2 pbx-user:bt\$" "$ak" ||
	fail "a new user key did not replace the old: $(cat "$ak")"
for bad in "ssh-ed25519 AAAA; touch $T/pwned" "ssh-ed25519 AAAA comment" "ssh-ed25519" 'x$(id) AAAA'; do
	! key_up PBX_USER_KEY="$bad" PBX_LOGIN_HOME="$home1" || fail "up took PBX_USER_KEY '$bad'"
	grep -q "PBX_USER_KEY is not a public key" "$T/out/node1.key.out" || fail "no reason: $(cat "$T/out/node1.key.out")"
done
[ ! -e "$T/pwned" ] || fail "a key line was run"
key_up PBX_LOGIN_HOME="$home1" || fail "up without PBX_USER_KEY: $(cat "$T/out/node1.key.out")"
grep -q "^$ukey2 pbx-user:bt\$" "$ak" || fail "up without PBX_USER_KEY dropped the user's key"
rm -rf "$T/shared/.pbx"
# (slurmd, unable to tell a slurmctld it is leaving, ignores TERM: KILL after 1 s)
env_for node1 env PBX_STOP_WAIT=1 sh "$BOOT" down >/dev/null 2>"$T/out/node1.down2.err"
for p in $pids; do ! kill -0 "$p" 2>/dev/null || fail "pid $p still alive after down"; done
for n in $NODES; do
	env_for "$n" sh "$BOOT" status >"$T/out/st-$n" 2>/dev/null
	! grep -q running "$T/out/st-$n" || fail "status after down on $n: $(cat "$T/out/st-$n")"
done
left=$(pgrep -f "$T" || true)
[ -z "$left" ] || fail "processes left: $(ps -o pid,args -p "$(echo "$left" | tr '\n' ,)")"
if ss -ltnH | awk '{print $4}' | grep -Eq ':18(5[01][0-9])$'; then
	fail "still listening: $(ss -ltn | grep ':185[01]')"
fi
[ -r "$T/nodes/node1/etc/slurm/slurm.conf" ] || fail "down removed files"
test_done
