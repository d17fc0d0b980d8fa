#!/bin/sh
# Systemd mode of templates/bootstrap.sh with fake system commands: stub
# apt-get, systemctl, nvidia-smi, exportfs, mount, munge/unmunge, chown,
# sinfo, scontrol log their argv; PBX_ROOT is a temp dir, so nothing real is
# touched.  Checks the commands run, the files written, idempotency, config
# change -> restart, status/down, and the clear errors.
set -eu

SRC=${1:?usage: systemd.sh SOURCE_DIR RENDER}
RENDER=${2:?usage: systemd.sh SOURCE_DIR RENDER} # tests/cluster/test_bootstrap_render
BOOT=$SRC/templates/bootstrap.sh
TEMPLATE=$SRC/templates/slurm.conf.in

# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"

T=$(mktemp -d /tmp/pbx-bt-systemd.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
LOG=$T/calls.log
: >"$LOG"

# ---- stubs
mkdir -p "$T/bin" "$T/gpu"
stub() {
	{
		echo '#!/bin/sh'
		echo "echo \"\${PBX_NODE:-?}: $1 \$*\" >>'$LOG'"
		cat
	} >"$T/bin/$1"
	chmod +x "$T/bin/$1"
}
stub apt-get <<'EOS'
# what apt would read of a cluster's proxy (PBX_TEST_LOG: where to say it)
apt_proxy=$PBX_ROOT/etc/apt/apt.conf.d/80pbx-proxy
[ -z "${PBX_TEST_LOG:-}" ] || [ ! -r "$apt_proxy" ] ||
	echo "${PBX_NODE:-?}: apt-get sees $(grep -m1 '^Acquire::http::Proxy ' "$apt_proxy")" >>"$PBX_TEST_LOG"
mk() { mkdir -p "$PBX_ROOT/$(dirname "$1")"; printf '#!/bin/sh\n' >"$PBX_ROOT/$1"; chmod +x "$PBX_ROOT/$1"; }
case " $* " in *" install "*)
	for p in "$@"; do
		case $p in
		slurmctld) mk usr/sbin/slurmctld ;;
		slurmd) mk usr/sbin/slurmd ;;
		munge) mk usr/sbin/munged && mk usr/bin/munge ;;
		slurm-client) mk usr/bin/sinfo && mk usr/bin/scontrol ;;
		nfs-kernel-server) mk usr/sbin/exportfs ;;
		nfs-common) mk sbin/mount.nfs ;;
		curl) mk usr/bin/curl ;;
		esac
	done ;;
esac
exit 0
EOS
stub systemctl <<'EOS'
d=$PBX_ROOT/.fake-units
mkdir -p "$d"
case $1 in
is-active) [ -e "$d/$3" ] ;;
is-enabled) [ -e "$d/$3.enabled" ] ;;
disable) rm -f "$d/$3" "$d/$3.enabled" ;;
start | restart) touch "$d/$2" ;;
enable)
	[ "$2" != --now ] || touch "$d/$3"
	# what the login user's authorized_keys holds when slurmd starts
	if [ "$2 $3" = "--now slurmd" ] && [ -n "${PBX_USER_KEY:-}" ]; then
		grep -c " pbx-user:" "$PBX_LOGIN_HOME/.ssh/authorized_keys" >"$d/user-key-at-slurmd" 2>&1 || :
	fi ;;
stop) rm -f "$d/$2" ;;
esac
EOS
stub exportfs <<'EOS'
EOS
stub mount <<'EOS'
EOS
stub chown <<'EOS'
EOS
# the node's users: PBX_ROOT/.fake-passwd (name:x:uid:...)
stub getent <<'EOS'
[ "$1" = passwd ] || exit 2
f=$PBX_ROOT/.fake-passwd
[ -r "$f" ] || exit 2
awk -F: -v k="$2" '$1 == k || $3 == k { print; found = 1 } END { exit !found }' "$f"
EOS
stub useradd <<'EOS'
for last; do :; done
uid=; prev=
for a; do [ "$prev" != --uid ] || uid=$a; prev=$a; done
echo "$last:x:$uid:$uid::/home/$last:/bin/sh" >>"$PBX_ROOT/.fake-passwd"
EOS
stub scontrol <<'EOS'
[ "$1" != ping ] || echo "Slurmctld(primary) at head is UP"
EOS
stub sinfo <<'EOS'
echo idle
EOS
stub munge <<'EOS'
echo MUNGE:fake
EOS
stub unmunge <<'EOS'
[ "$(cat)" = MUNGE:fake ]
EOS
cat >"$T/gpu/nvidia-smi" <<'EOS'
#!/bin/sh
[ "$1" = -L ] || exit 2
echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)"
echo "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-y)"
EOS
chmod +x "$T/gpu/nvidia-smi"
BASEPATH=$T/bin:$PATH

# ---- inputs rendered as pbx would for a cloud cluster
mkdir -p "$T/stage"
{
	echo "NodeName=node1 NodeAddr=127.0.4.2 CPUs=8 Gres=gpu:2 State=UNKNOWN"
	echo "NodeName=node2 NodeAddr=127.0.4.3 CPUs=8 Gres=gpu:2 State=UNKNOWN"
	echo "NodeName=node3 NodeHostname=c1-x-node3 NodeAddr=c1-x-node3 CPUs=2 State=CLOUD"
} >"$T/nodes.txt"
sed -e "s|@CLUSTER@|c1|g" -e "s|@CTLD_HOST@|$(hostname -s)|g" \
	-e "s|@CTLD_ADDR@|127.0.4.1|g" -e "s|@CTLD_PORT@|6817|g" \
	-e "s|@SLURM_USER@|slurm|g" -e "s|@SRUN_PORTS@|60001-63000|g" \
	-e "s|@PARTITION_NODES@|node1,node2|g" -e "s|@EXTRA@||g" -e "s|@MAX_ARRAY_SIZE@|1001|g" -e "s|@MAX_JOB_COUNT@|10000|g" -e "s|@AUTH_OPTIONS@||g" \
	-e "/@NODES@/{r $T/nodes.txt" -e "d}" "$TEMPLATE" >"$T/stage/slurm.conf"
head -c 1024 /dev/urandom >"$T/stage/munge.key"
# what pbx renders beside it (src/cluster/bootstrap_render.c): each node's
# gres.conf, the head's export line to the nodes' NodeAddr
for ng in head:0 node1:2 node2:2 node3:0 spot1:0; do
	"$RENDER" gres "${ng%:*}" "${ng#*:}" "" /dev/nvidia >"$T/stage/gres-${ng%:*}.conf"
done
"$RENDER" exports /shared 127.0.4.2 127.0.4.3 c1-x-node3 >"$T/stage/exports"
# and each node's units of pbx's watchers, under its root
for nd in head:slurmctld node1:slurmd node2:slurmd node3:slurmd spot1:slurmd; do
	for w in pbx-preempt pbx-autostop; do
		"$RENDER" unit "$w" "$T/${nd%:*}" "${nd#*:}" >"$T/stage/$w-${nd%:*}.service"
	done
done
# each node's env.sh, and the task user's line that follows it where
# tasks run as that user
for n in head node1 node2 node3 spot1; do
	"$RENDER" env "$n" c1 "$T/$n" /shared systemd >"$T/stage/env-$n.sh"
done
"$RENDER" task-user >"$T/stage/task-user.env.sh"

mkroot() {
	mkdir -p "$T/$1/etc"
	printf 'ID=%s\nVERSION_ID="%s"\n' "$2" "$3" >"$T/$1/etc/os-release"
}
mkroot head debian 12
mkroot node1 ubuntu 22.04

# boot NODE ROLE GPUS ACTION [PATH]: run the script; stdout in $T/NODE.out
boot() {
	env PATH="${5:-$T/gpu:$BASEPATH}" PBX_MODE=systemd PBX_ROOT="$T/$1" \
		PBX_ROLE="$2" PBX_NODE="$1" PBX_CLUSTER=c1 PBX_STAGE="$T/stage" \
		PBX_GPUS="$3" PBX_HEAD_ADDR=127.0.4.1 PBX_SHARED=/shared \
		PBX_SLURM_USER=slurm PBX_RESUME_WAIT=5 ${BOOT_ENV:-} sh "$BOOT" "$4" >"$T/$1.out" 2>"$T/$1.err"
}
has() { grep -qxF "$1" "$LOG" || fail "no call '$1' in: $(cat "$LOG")"; }
hasnt() { ! grep -qE "$1" "$LOG" || fail "unexpected call /$1/ in: $(cat "$LOG")"; }
stages() {
	got=$(sed -n 's/^PBX-STAGE //p' "$T/$1.out" | tr '\n' ' ')
	[ "$got" = "$2 " ] || fail "$1 stages '$got' (want '$2'); stderr: $(cat "$T/$1.err")"
}

# ---- head, first run: installs, munge, exports, slurmctld
boot head head 0 up || fail "head up: $(cat "$T/head.out" "$T/head.err")"
stages head "install munge config shared slurmctld done"
R=$T/head
# the task user (docs/SECURITY.md): made once with its fixed uid, named
# in env.sh, from which pbx submits every task as it
has "head: useradd --uid 2850 --user-group --home-dir /home/pbx-task --create-home --shell /bin/sh --comment pbx tasks pbx-task"
grep -qx "export PBX_TASK_USER=pbx-task" "$R/etc/pbx/env.sh" || fail "env.sh names no task user: $(cat "$R/etc/pbx/env.sh")"
has "head: apt-get -o DPkg::Lock::Timeout=120 update -q"
has "head: apt-get -o DPkg::Lock::Timeout=120 install -y -q slurmctld slurm-client munge nfs-kernel-server"
has "head: chown munge:munge $R/etc/munge $R/etc/munge/munge.key"
has "head: systemctl enable munge"
has "head: systemctl restart munge"
has "head: systemctl enable --now nfs-server"
has "head: exportfs -ra"
has "head: systemctl enable --now slurmctld"
has "head: chown -R slurm: $R/var/spool/slurmctld"
hasnt "^head: (nvidia-smi|mount|systemctl enable --now slurmd)"
[ "$(stat -c %a "$R/etc/munge/munge.key")" = 400 ] || fail "key mode"
cmp -s "$R/etc/munge/munge.key" "$T/stage/munge.key" || fail "key content"
grep -qx "AuthInfo=socket=$R/run/munge/munge.socket.2" "$R/etc/slurm/slurm.conf" || fail "AuthInfo in conf"
! grep -q '@ROOT@' "$R/etc/slurm/slurm.conf" || fail "@ROOT@ left in conf"
o='(rw,sync,no_subtree_check,root_squash,anonuid=65534,anongid=65534)'
[ "$(cat "$R/etc/exports")" = "/shared 127.0.4.2$o 127.0.4.3$o c1-x-node3$o" ] || fail "exports: $(cat "$R/etc/exports")"
[ -d "$R/shared" ] || fail "head /shared"
[ "$(grep -v '^#' "$R/etc/slurm/gres.conf" || true)" = "" ] || fail "head gres.conf"
grep -qx "export SLURM_CONF='$R/etc/slurm/slurm.conf'" "$R/etc/pbx/env.sh" || fail "head env.sh"

# ---- compute, first run (the experiments' apt: list on the shared disk,
# root's and 0644 as parrun leaves it: installed, a bad line left out)
mkdir -p "$T/node1/shared"
printf 'libfoo1\nbad;name\nbar=1.2\n' >"$T/node1/shared/.pbx-apt"
chmod 644 "$T/node1/shared/.pbx-apt"
boot node1 compute 2 up || fail "node1 up: $(cat "$T/node1.out" "$T/node1.err")"
if [ "$(id -u)" = 0 ]; then
	has "node1: apt-get -o DPkg::Lock::Timeout=120 install -y -q --no-install-recommends libfoo1 bar=1.2"
fi
rm -f "$T/node1/shared/.pbx-apt" # (dpkg here does not know the stub's packages)
stages node1 "install munge config shared slurmd done"
R=$T/node1
has "node1: apt-get -o DPkg::Lock::Timeout=120 install -y -q slurmd slurm-client munge nfs-common"
has "node1: systemctl enable --now slurmd"
# slurmd starts once slurmctld answers (scontrol ping first).
[ "$(grep -n -E '^node1: (scontrol ping|systemctl enable --now slurmd)' "$LOG" | head -1 | cut -d' ' -f2-)" = "scontrol ping" ] ||
	fail "node1 started slurmd before asking for slurmctld: $(grep '^node1: ' "$LOG")"
has "node1: mount -t nfs4 127.0.4.1:/shared $R/shared"
hasnt "^node1: scontrol update NodeName"
# a node that sleeps (State=CLOUD) is a new machine at each wake: before its
# slurmd starts, slurmctld is told to resolve its NodeAddr afresh
mkroot node3 debian 12
# the head woke it (PBX_USER_KEY): the user's key is authorized before
# slurmd starts, so a node SLURM runs jobs on lets the user in (vm.ec2-power:
# `exec -n` was refused while the tasks had already run)
(
	export PBX_USER_KEY="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUserKeyOfTheLaptopZZZZZZZZZZZZZZZZZZZZZZZZ"
	export PBX_LOGIN_HOME="$T/node3/home/admin" PBX_LOGIN_USER=admin
	# a Spot node: its preemption watcher
	export PBX_SPOT=gce
	cp "$SRC/templates/preempt.sh" "$T/stage/preempt.sh"
	boot node3 compute 0 up
) || fail "node3 up: $(cat "$T/node3.err")"
[ "$(cat "$T/node3/.fake-units/user-key-at-slurmd" 2>&1)" = 1 ] ||
	fail "node3: the user's key was not authorized when slurmd started: $(cat "$T/node3/.fake-units/user-key-at-slurmd" 2>&1)"
[ "$(grep -E '^node3: (scontrol update|systemctl enable --now slurmd)' "$LOG" | cut -d' ' -f2-)" = "scontrol update NodeName=node3 NodeAddr=c1-x-node3 NodeHostname=c1-x-node3
systemctl enable --now slurmd" ] || fail "node3 (State=CLOUD) not readdressed before slurmd: $(grep '^node3: ' "$LOG")"
# its preemption watcher runs before slurmd starts: a job may start at once
# (vm.gce-spot: a notice in between lost the job's work)
[ "$(grep -E '^node3: systemctl (restart pbx-preempt|enable --now slurmd)' "$LOG" | cut -d' ' -f2-)" = "systemctl restart pbx-preempt
systemctl enable --now slurmd" ] || fail "node3 (Spot): pbx-preempt not started before slurmd: $(grep '^node3: ' "$LOG")"
grep -qx "ExecStop=$T/node3/usr/local/sbin/pbx-preempt stop" "$T/node3/etc/systemd/system/pbx-preempt.service" ||
	fail "node3: pbx-preempt.service has no ExecStop (the shutdown's preemption): $(find "$T/node3" -name pbx-preempt.service -exec cat {} + 2>&1)"
hasnt "^node1: (exportfs|systemctl enable --now (slurmctld|nfs-server))"
[ "$(grep -v '^#' "$R/etc/slurm/gres.conf")" = "NodeName=node1 Name=gpu File=/dev/nvidia[0-1]" ] ||
	fail "gres.conf: $(cat "$R/etc/slurm/gres.conf")"
grep -qx '127.0.4.1:/shared /shared nfs4 defaults,_netdev,nofail 0 0' "$R/etc/fstab" || fail "fstab"
grep -qx 'SLURMD_OPTIONS="-N node1"' "$R/etc/default/slurmd" || fail "/etc/default/slurmd"
(
	# shellcheck source=/dev/null
	. "$R/etc/pbx/env.sh"
	[ "$SLURM_CONF" = "$R/etc/slurm/slurm.conf" ] && [ "$PBX_SHARED" = /shared ] &&
		[ "$PBX_ROOT" = "$R" ] && [ "$PBX_NODE" = node1 ] && [ "$PBX_CLUSTER" = c1 ]
) || fail "env.sh: $(cat "$R/etc/pbx/env.sh")"

# ---- a Spot node that always runs, on a cluster with power saving: made
# anew after a preemption (docs/spot.md), so slurmctld is told to resolve
# its NodeAddr afresh before slurmd starts, as for a State=CLOUD node; the
# same node on a cluster without power saving is not (node1 above)
mkdir -p "$T/stage2"
cp "$T/stage/munge.key" "$T/stage/gres-spot1.conf" "$T/stage/pbx-preempt-spot1.service" \
	"$T/stage/env-spot1.sh" "$T/stage/task-user.env.sh" "$SRC/templates/preempt.sh" "$T/stage2/"
sed -e '/^NodeName=node3 /a NodeName=spot1 NodeHostname=c1-spot1 NodeAddr=c1-spot1 CPUs=2 State=UNKNOWN' \
	-e '$a ResumeProgram=/usr/local/lib/pbx/pbx-resume' "$T/stage/slurm.conf" >"$T/stage2/slurm.conf"
mkroot spot1 debian 12
BOOT_ENV="PBX_STAGE=$T/stage2 PBX_SPOT=gce" boot spot1 compute 0 up || fail "spot1 up: $(cat "$T/spot1.err")"
[ "$(grep -E '^spot1: (scontrol update|systemctl enable --now slurmd)' "$LOG" | cut -d' ' -f2-)" = "scontrol update NodeName=spot1 NodeAddr=c1-spot1 NodeHostname=c1-spot1
systemctl enable --now slurmd" ] || fail "spot1 (Spot, power saving) not readdressed before slurmd: $(grep '^spot1: ' "$LOG")"

# ---- staged hosts (EC2's names of the nodes power saving makes), the
# block pbx renders: each staged name's line replaces that name's in the
# block, the other lines stay, and the lines outside the block are left as
# they were
printf '127.0.0.1 localhost\n127.0.4.201 elsewhere\n' >"$T/node1/etc/hosts"
"$RENDER" hosts c1 127.0.4.5 c1-node3 127.0.4.6 c1-node4 >"$T/stage/hosts"
boot node1 compute 2 up || fail "node1 up with staged hosts: $(cat "$T/node1.err")"
"$RENDER" hosts c1 127.0.4.9 c1-node4 127.0.4.8 c1-spot1 >"$T/stage/hosts"
boot node1 compute 2 up || fail "node1 up with staged hosts again: $(cat "$T/node1.err")"
want='127.0.0.1 localhost
127.0.4.201 elsewhere
# pbx: nodes of cluster c1 that sleep (begin)
127.0.4.5 c1-node3
127.0.4.9 c1-node4
127.0.4.8 c1-spot1
# pbx: nodes of cluster c1 that sleep (end)'
[ "$(cat "$T/node1/etc/hosts")" = "$want" ] || fail "staged hosts merged: $(cat "$T/node1/etc/hosts")"
# pbx renders no line of three words (its checks: cluster.bootstrap_render)
! "$RENDER" hosts c1 127.0.4.9 'c1-node4 extra' >/dev/null 2>&1 || fail "pbx rendered a hosts line of three words"
# a stage that is not a block (no markers) is refused, /etc/hosts unchanged
printf '127.0.4.9 c1-node4\n' >"$T/stage/hosts"
! boot node1 compute 2 up || fail "staged hosts without pbx's markers were taken"
grep -q "^PBX-ERROR staged hosts .* is not a block of pbx's markers" "$T/node1.out" || fail "refused hosts: $(cat "$T/node1.out")"
[ "$(cat "$T/node1/etc/hosts")" = "$want" ] || fail "a refused staged hosts changed /etc/hosts"
[ ! -e "$T/node1/etc/hosts.pbx-in" ] || fail "a refused staged hosts left hosts.pbx-in"
rm -f "$T/stage/hosts"

# ---- second runs: nothing installed, nothing restarted, files unchanged
cp "$R/etc/fstab" "$T/fstab.1"
: >"$LOG"
boot head head 0 up || fail "head up #2: $(cat "$T/head.out")"
boot node1 compute 2 up || fail "node1 up #2: $(cat "$T/node1.out")"
hasnt "apt-get|systemctl (enable|restart|start)|useradd"
# the export again: a node's name resolves once its instance exists (power
# saving makes nodes after the head's first run)
has "head: exportfs -ra"
cmp -s "$R/etc/fstab" "$T/fstab.1" || fail "fstab changed on rerun"
[ "$(grep -c /shared "$T/head/etc/exports")" = 1 ] || fail "exports line duplicated"

# ---- a cluster behind a proxy (the template's proxy:): on a fresh node
# apt's file is in place before apt runs; it stays on a rerun and goes once
# the template drops the proxy (env.sh's variables: bootstrap_render's
# golden files, tests/cluster/golden/env-proxy.sh)
"$RENDER" apt-proxy http://10.0.0.2:3128 mirror.example.org .example.edu >"$T/stage/apt-proxy.conf"
mkroot phead debian 12
proxied_up() {
	env PATH="$T/gpu:$BASEPATH" PBX_MODE=systemd PBX_ROOT="$T/phead" PBX_ROLE=head \
		PBX_NODE=head PBX_CLUSTER=c1 PBX_STAGE="$T/stage" PBX_GPUS=0 \
		PBX_HEAD_ADDR=127.0.4.1 PBX_SHARED=/shared PBX_SLURM_USER=slurm \
		PBX_TEST_LOG="$LOG" sh "$BOOT" up >"$T/phead.out" 2>"$T/phead.err"
}
: >"$LOG"
proxied_up || fail "a head behind a proxy: $(cat "$T/phead.err")"
has 'head: apt-get sees Acquire::http::Proxy "http://10.0.0.2:3128/";'
[ "$(grep -c '^head: apt-get sees ' "$LOG")" = "$(grep -c '^head: apt-get -o' "$LOG")" ] ||
	fail "an apt-get ran before apt's proxy file was in place: $(grep 'apt-get' "$LOG")"
pconf=$T/phead/etc/apt/apt.conf.d/80pbx-proxy
cmp -s "$T/stage/apt-proxy.conf" "$pconf" || fail "apt's proxy file: $(cat "$pconf")"
grep -qx 'Acquire::http::Proxy::mirror.example.org "DIRECT";' "$pconf" || fail "no_proxy's host not DIRECT: $(cat "$pconf")"
! grep -q 'example.edu' "$pconf" || fail "a no_proxy domain in apt's file (apt cannot say one): $(cat "$pconf")"
proxied_up || fail "a head behind a proxy, again: $(cat "$T/phead.err")"
[ -r "$pconf" ] || fail "apt's proxy file went on a rerun"
rm -f "$T/stage/apt-proxy.conf"
proxied_up || fail "the head, its proxy dropped: $(cat "$T/phead.err")"
[ ! -e "$pconf" ] || fail "apt's proxy file stayed once the template dropped the proxy"

# ---- a changed slurm.conf restarts slurmd (and only then)
echo "# changed" >>"$T/stage/slurm.conf"
: >"$LOG"
boot node1 compute 2 up || fail "node1 up #3"
has "node1: systemctl restart slurmd"
hasnt "systemctl restart munge"

# ---- a prebaked image has both roles' daemons enabled: a compute node
# disables slurmctld, the head slurmd; a node without the other's binary
# (what the head and node1 were above) is left alone
mkdir -p "$T/node1/usr/sbin" "$T/head/usr/sbin"
printf '#!/bin/sh\n' >"$T/node1/usr/sbin/slurmctld"
printf '#!/bin/sh\n' >"$T/head/usr/sbin/slurmd"
chmod +x "$T/node1/usr/sbin/slurmctld" "$T/head/usr/sbin/slurmd"
touch "$T/node1/.fake-units/slurmctld.enabled" "$T/head/.fake-units/slurmd.enabled"
: >"$LOG"
boot node1 compute 2 up || fail "node1 up with slurmctld enabled: $(cat "$T/node1.err")"
boot head head 0 up || fail "head up with slurmd enabled: $(cat "$T/head.err")"
has "node1: systemctl disable --now slurmctld"
has "head: systemctl disable --now slurmd"
: >"$LOG"
boot node1 compute 2 up || fail "node1 up again"
hasnt "systemctl disable"

# ---- status and down
boot node1 compute 2 status || fail "status"
[ "$(cat "$T/node1.out")" = "munged running
slurmd running" ] || fail "status: $(cat "$T/node1.out")"
: >"$LOG"
boot node1 compute 2 down || fail "down"
has "node1: systemctl stop slurmd"
has "node1: systemctl stop munge"
boot node1 compute 2 status || fail "status after down"
[ "$(cat "$T/node1.out")" = "munged stopped
slurmd stopped" ] || fail "status after down: $(cat "$T/node1.out")"

# ---- pbx-train from the stage: installed where the node matches its build
stub dpkg <<'EOS'
exit 1
EOS
printf '#!/bin/sh\n[ "$1" = --version ] && echo "pbx-train fake"\n' >"$T/stage/pbx-train"
chmod 755 "$T/stage/pbx-train"
printf %s "debian 12 $(uname -m)" >"$T/stage/pbx-train.target"
: >"$LOG"
boot head head 0 up || fail "head up with pbx-train: $(cat "$T/head.err")"
[ -x "$T/head/usr/local/bin/pbx-train" ] && cmp -s "$T/stage/pbx-train" "$T/head/usr/local/bin/pbx-train" ||
	fail "pbx-train not installed on the matching head"
has "head: apt-get -o DPkg::Lock::Timeout=120 install -y -q libopenblas0 libgomp1 libyaml-0-2 libjansson4 libssl3 libprotobuf-c1 zlib1g openmpi-bin"
# the head's pbx (PBX_HEAD_PBX: power saving, autostop_action: delete)
# stages the installed pbx-train to the nodes it makes: pbx-head names it
printf '{}\n' >"$T/stage/head-config.yaml"
printf '#!/bin/sh\n' >"$T/stage/pbx"
chmod 755 "$T/stage/pbx"
printf %s "debian 12 $(uname -m)" >"$T/stage/pbx.target"
# A task that keeps replacing the published key (SHARED is the tasks'
# disk too) never gets its key authorized on the head: the head reads its
# own key from its own disk.  The login home under the test's root.
ssh-keygen -q -t ed25519 -N '' -C pbx-head:c1 -f "$T/evilkey"
host_shared=absent
[ ! -e /shared ] || host_shared=present
( while [ ! -e "$T/evil.stop" ]; do
	mkdir -p "$T/head/shared/.pbx" 2>/dev/null
	cp "$T/evilkey.pub" "$T/head/shared/.pbx/head_key.pub" 2>/dev/null
done ) &
EVIL=$!
BOOT_ENV="PBX_HEAD_PBX=1 PBX_LOGIN_HOME=$T/head/home/admin" boot head head 0 up ||
	{ touch "$T/evil.stop"; wait "$EVIL"; fail "head up with pbx on it: $(cat "$T/head.err")"; }
touch "$T/evil.stop"
wait "$EVIL"
hak=$T/head/home/admin/.ssh/authorized_keys
[ "$(grep -c " pbx-head:c1\$" "$hak" 2>/dev/null)" = 1 ] && grep -qF "$(cut -d' ' -f2 "$T/head/var/lib/pbx/home/.ssh/id_ed25519.pub")" "$hak" ||
	fail "the head did not authorize its own key (once): $(cat "$hak" 2>&1)"
! grep -qF "$(cut -d' ' -f2 "$T/evilkey.pub")" "$hak" || fail "the head authorized a key a task put in SHARED"
[ "$host_shared" = present ] || [ ! -e /shared ] || fail "the head wrote this machine's /shared, not its root's"
grep -qF "PBX_TRAIN_BIN='$T/head/usr/local/bin/pbx-train'" "$T/head/usr/local/sbin/pbx-head" ||
	fail "pbx-head does not name the installed pbx-train: $(cat "$T/head/usr/local/sbin/pbx-head")"
rm -f "$T/stage/head-config.yaml" "$T/stage/pbx" "$T/stage/pbx.target"
boot node1 compute 2 up || fail "node1 up with pbx-train: $(cat "$T/node1.err")"
[ ! -e "$T/node1/usr/local/bin/pbx-train" ] || fail "pbx-train built on debian 12 installed on ubuntu 22.04"
grep -q "pbx-train not installed: built on 'debian 12 $(uname -m)', this node is 'ubuntu 22.04 $(uname -m)'" "$T/node1.err" ||
	fail "no message for the mismatched pbx-train: $(cat "$T/node1.err")"
# with its CUDA module: installed beside it (../lib/pbx); on a GPU node
# where the module does not load, a message says what device: cuda will do
printf 'module' >"$T/stage/pbx-train-cuda.so"
printf '#!/bin/sh\n[ "$1" = --version ] && echo "pbx-train fake (cpu; the CUDA backend was built but cannot load the CUDA backend: libcudnn.so.9: cannot open shared object file)"\n' >"$T/stage/pbx-train"
printf %s "ubuntu 22.04 $(uname -m)" >"$T/stage/pbx-train.target"
boot node1 compute 2 up || fail "node1 up with pbx-train and its module: $(cat "$T/node1.err")"
cmp -s "$T/stage/pbx-train-cuda.so" "$T/node1/usr/local/lib/pbx/pbx-train-cuda.so" ||
	fail "the CUDA module not installed in usr/local/lib/pbx"
grep -q "pbx-train's CUDA backend does not load on this GPU node (device: cuda will fail; device: auto trains on the CPU): .*libcudnn.so.9" "$T/node1.err" ||
	fail "no message for a CUDA module that does not load on a GPU node: $(cat "$T/node1.err")"
rm -f "$T/stage/pbx-train" "$T/stage/pbx-train.target" "$T/stage/pbx-train-cuda.so"

# ---- clear errors
mkroot node2 debian 12
# the task user's uid taken by another user: refused, saying whose it is
echo "someone:x:2850:2850::/home/someone:/bin/sh" >"$T/node2/.fake-passwd"
if boot node2 compute 2 up; then fail "uid 2850 taken: succeeded"; fi
grep -q "^PBX-ERROR .*uid 2850, which pbx's task user pbx-task has on every node, is someone's here" "$T/node2.out" ||
	fail "no message for a taken uid: $(cat "$T/node2.out")"
rm -f "$T/node2/.fake-passwd"
if boot node2 compute 4 up; then fail "4 GPUs promised, 2 present: succeeded"; fi
grep -q '^PBX-ERROR .*promises 4 GPU(s) but nvidia-smi -L lists 2' "$T/node2.out" ||
	fail "GPU count error: $(cat "$T/node2.out")"
if ! PATH=$BASEPATH command -v nvidia-smi >/dev/null 2>&1; then
	if boot node2 compute 2 up "$BASEPATH"; then fail "no nvidia-smi: succeeded"; fi
	grep -q '^PBX-ERROR .*no nvidia-smi' "$T/node2.out" || fail "no nvidia-smi error: $(cat "$T/node2.out")"
fi
sed 's/^SlurmctldPort=.*/SlurmctldPort=@CTLD_PORT@/' "$T/stage/slurm.conf" >"$T/bad.conf"
mv "$T/bad.conf" "$T/stage/slurm.conf"
if boot node2 compute 2 up; then fail "unrendered placeholder: succeeded"; fi
line=$(grep -n '^SlurmctldPort=' "$T/stage/slurm.conf" | cut -d: -f1)
grep -qxF "PBX-ERROR slurm.conf line $line still has a placeholder (pbx renders all but @ROOT@): SlurmctldPort=@CTLD_PORT@" "$T/node2.out" ||
	fail "placeholder error: $(cat "$T/node2.out")"
[ ! -e "$T/node2/etc/slurm/slurm.conf.pbx-in" ] || fail "placeholder error left slurm.conf.pbx-in"
! grep -qs '@CTLD_PORT@' "$T/node2/etc/slurm/slurm.conf" || fail "placeholder error installed a half-rendered slurm.conf"
if env PBX_MODE=direct PBX_ROLE=head PBX_NODE=x sh "$BOOT" up >"$T/x.out" 2>/dev/null; then
	fail "direct without PBX_ROOT: succeeded"
fi
grep -q '^PBX-ERROR direct mode needs PBX_ROOT' "$T/x.out" || fail "PBX_ROOT error: $(cat "$T/x.out")"

# ---- install (pbx image build): both roles' packages and pbx-train's
# runtime in one apt-get, munge's key and apt's lists removed, no
# configuration written; a second run installs nothing
mkroot img debian 12
mkdir -p "$T/dpkg" "$T/img/etc/munge" "$T/img/var/lib/apt/lists"
cat >"$T/dpkg/dpkg" <<EOS
#!/bin/sh
[ "\$1" = -s ] && [ -e "$T/img/.fake-pkgs/\$2" ]
EOS
chmod +x "$T/dpkg/dpkg"
mkdir -p "$T/img/.fake-pkgs"
touch "$T/img/.fake-pkgs/libssl3" "$T/img/etc/munge/munge.key" "$T/img/var/lib/apt/lists/x"
: >"$LOG"
env PATH="$T/dpkg:$BASEPATH" PBX_MODE=systemd PBX_ROOT="$T/img" PBX_ROLE=head PBX_NODE=img \
	sh "$BOOT" install >"$T/img.out" 2>"$T/img.err" || fail "install: $(cat "$T/img.out" "$T/img.err")"
stages img "install clean done"
has "img: apt-get -o DPkg::Lock::Timeout=120 install -y -q --no-install-recommends slurmctld slurm-client munge nfs-kernel-server slurmd nfs-common libopenblas0 libgomp1 libyaml-0-2 libjansson4 libprotobuf-c1 zlib1g openmpi-bin python3 python3-venv charliecloud-runtime zstd skopeo umoci libcurl4 libssh2-1 libsqlite3-0 libxml2"
has "img: apt-get clean"
[ ! -e "$T/img/etc/munge/munge.key" ] || fail "install left munge.key"
[ ! -e "$T/img/var/lib/apt/lists/x" ] || fail "install left apt lists"
[ ! -e "$T/img/etc/slurm/slurm.conf" ] || fail "install wrote slurm.conf"
hasnt "systemctl (enable|start|restart)"
for p in slurmctld slurmd slurm-client munge nfs-kernel-server nfs-common libopenblas0 libgomp1 libyaml-0-2 libjansson4 libprotobuf-c1 zlib1g openmpi-bin python3 python3-venv charliecloud-runtime zstd skopeo umoci libcurl4 libssh2-1 libsqlite3-0 libxml2; do
	touch "$T/img/.fake-pkgs/$p"
done
: >"$LOG"
env PATH="$T/dpkg:$BASEPATH" PBX_MODE=systemd PBX_ROOT="$T/img" PBX_ROLE=head PBX_NODE=img \
	sh "$BOOT" install >"$T/img.out" 2>"$T/img.err" || fail "install again: $(cat "$T/img.err")"
hasnt "apt-get .*install"
grep -q "everything is installed already" "$T/img.err" || fail "second install: $(cat "$T/img.err")"
# an image built for a template behind a proxy: the builder's apt goes
# through it, and the image keeps no proxy of its own
rm -f "$T/img/.fake-pkgs/zstd"
mkdir -p "$T/istage"
"$RENDER" apt-proxy http://10.0.0.2:3128 >"$T/istage/apt-proxy.conf"
: >"$LOG"
env PATH="$T/dpkg:$BASEPATH" PBX_MODE=systemd PBX_ROOT="$T/img" PBX_ROLE=head PBX_NODE=img \
	PBX_STAGE="$T/istage" PBX_TEST_LOG="$LOG" sh "$BOOT" install >"$T/img.out" 2>"$T/img.err" ||
	fail "install behind a proxy: $(cat "$T/img.err")"
has "img: apt-get -o DPkg::Lock::Timeout=120 install -y -q --no-install-recommends zstd"
[ "$(grep -c '^img: apt-get sees Acquire::http::Proxy "http://10.0.0.2:3128/";' "$LOG")" = "$(grep -c '^img: apt-get [^s]' "$LOG")" ] ||
	fail "an apt-get of the builder did not see the proxy: $(grep apt-get "$LOG")"
[ ! -e "$T/img/etc/apt/apt.conf.d/80pbx-proxy" ] || fail "the image keeps the template's proxy"
ok 0 "systemd mode: every role's stages, units and calls as expected"
test_done
