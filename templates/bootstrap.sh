#!/bin/sh
# pbx node bootstrap: brings one node of a pbx SLURM cluster up, down, or
# reports its daemons.  pbx uploads this file with its inputs to a staging
# directory and runs it as root on every node at once:
#
#     sh STAGE/bootstrap.sh up|down|status|install
#
# `install` (systemd mode, for `pbx image build`) installs what both roles
# need (SLURM's head and compute packages, munge, the NFS server and
# client) and pbx-train's runtime, then removes what must not be shared by
# the machines an image starts (munge's key, apt's lists) and stops: no
# configuration, no daemon started.  A later `up` on a machine made from
# that image finds the binaries and skips apt-get.  It needs only PBX_MODE,
# PBX_ROLE and PBX_NODE.  In direct mode it installs nothing and says what
# is missing.
#
# Environment (see templates/README.md):
#   PBX_MODE        direct (node body: daemons started here, under PBX_ROOT)
#                   | systemd (a VM: packages, systemd units, NFS)
#   PBX_ROOT        root prefix of every file this script writes ("" = "/")
#   PBX_ROLE        head | compute
#   PBX_NODE        SLURM node name of this node
#   PBX_CLUSTER     cluster name
#   PBX_STAGE       directory holding slurm.conf (with @ROOT@) and munge.key
#   PBX_GPUS        GPUs the cluster template promises on this node (0)
#   PBX_GPU_TYPE    their SLURM GRES type, e.g. t4 ("" = untyped; it must
#                   match the node's Gres=gpu:TYPE:N in slurm.conf)
#   PBX_HEAD_ADDR   address of the head node (systemd compute: NFS server)
#   PBX_SHARED      shared directory (direct: any path; systemd: /shared)
#   PBX_SLURM_USER  SlurmUser (root in direct mode, slurm in systemd mode)
#   PBX_CTLD_LOCK   optional: a file pbx holds locked while the head bootstraps;
#                   compute nodes wait on it before asking for slurmctld
#   PBX_SPOT        optional, compute nodes of a spot group: gce | aws, the
#                   cloud whose preemption notice pbx-preempt watches
#                   (templates/preempt.sh, docs/spot.md); also needs curl
#   PBX_TRAIN_BIN   optional (direct): pbx-train on this host, linked as
#                   ROOT/usr/local/bin/pbx-train, which env.sh puts on PATH.
#                   (systemd: PBX_STAGE/pbx-train, with pbx-train.target
#                   "ID VERSION_ID MACHINE" of the host that built it, goes
#                   to /usr/local/bin with its runtime packages when this
#                   node matches; otherwise it is left out, with a message.)
#   PBX_AUTOSTOP_ACTION optional, head: delete (autostop_action: delete,
#                   docs/autostop.md), with PBX_CLUSTER_ID, PBX_CLOUD,
#                   PBX_HEAD_INSTANCE (the head's own instance, deleted
#                   last) and PBX_SELF_BIN (direct: pbx on this host; systemd:
#                   PBX_STAGE/pbx with pbx.target, installed with its runtime
#                   when this head matches); PBX_STAGE/head-config.yaml is
#                   pbx's configuration on the head
#   PBX_HEAD_PBX    optional: 1 when pbx runs on the head (pbx-head; so far
#                   with autostop_action: delete): the head makes a key of
#                   its own and publishes its public half in PBX_SHARED/.pbx,
#                   and every node authorizes it for the login user
#   PBX_USER_KEY    optional: the user's public key ("TYPE BASE64"), which
#                   the head's pbx passes to the nodes it bootstraps (power
#                   saving); authorized for the login user, tagged
#                   "pbx-user:CLUSTER"
#   PBX_LOGIN_USER, PBX_LOGIN_HOME  the login user pbx came as and its HOME
#                   (sudo resets HOME; default: this user's); on a node body
#                   that HOME must be under PBX_ROOT
# Optional: PBX_NFS_CLIENTS (head, systemd: hosts to export to; default the
# NodeAddr of every node in slurm.conf), PBX_NFS_WAIT (s, 300),
# PBX_RESUME_WAIT (s, 30), PBX_STOP_WAIT (s, 5).  For tests only:
# PBX_TEST_PROC, a directory standing in for /proc/self (its `mounts` and
# `cgroup` files) in the cgroup check.
#
# stdout carries only lines for pbx: "PBX-STAGE <stage>" as each stage of
# `up` begins, "PBX-ERROR <message>" on failure (exit status non-zero), and
# the "DAEMON running|stopped" lines of `status`.  Everything else goes to
# stderr.  `up` is idempotent: it repairs what is down and restarts a daemon
# only when that daemon's configuration changed.
set -eu
# Files this script writes are 0644 and directories 0755 unless it says
# otherwise (pbx runs it under umask 077, for the stage directory).
umask 022

exec 3>&1 1>&2
STAGE_NAME=start
FAILED=

say() { printf '%s\n' "$*" >&3; }
log() { printf 'pbx-bootstrap[%s]: %s\n' "${PBX_NODE:-?}" "$*" >&2; }
die() {
	FAILED=1
	say "PBX-ERROR $*"
	log "error: $*"
	exit 1
}
stage() {
	STAGE_NAME=$1
	say "PBX-STAGE $1"
	log "stage $1"
}
on_exit() {
	rc=$?
	if [ "$rc" -ne 0 ] && [ -z "$FAILED" ]; then
		say "PBX-ERROR stage $STAGE_NAME failed (exit status $rc); see the node's stderr"
	fi
}
trap on_exit EXIT

# nap CC: wait CC hundredths of a second (two digits, one `sleep`).  The
# polling loops count hundredths in `waited`.
nap() { sleep "0.$1" 2>/dev/null || sleep 1; }

# ping_ctld CC: true once `scontrol ping` says slurmctld is up, asking
# every CC hundredths of a second for up to PBX_CTLD_WAIT seconds (60).
ping_ctld() {
	waited=0
	while :; do
		out=$(SLURM_CONF=$CONF scontrol ping 2>/dev/null) || out=
		case $out in *'is UP'*) return 0 ;; esac
		[ "$waited" -lt $((${PBX_CTLD_WAIT:-60} * 100)) ] || return 1
		nap "$1"
		waited=$((waited + ${1#0}))
	done
}

# Waits until slurmctld answers, so a slurmd started while the head is
# still bootstrapping registers at once instead of after its own retry
# delay.  With PBX_CTLD_LOCK (node bodies on pbx's host) it first blocks on
# that lock, which pbx holds until the head's bootstrap is over and then
# fills with "ok" or "failed"; after "failed" it does not wait for a
# slurmctld that is not coming.  Then (or else) it pings every 0.1 s.
# Never fails: slurmd retries.
wait_for_ctld() {
	if [ -n "${PBX_CTLD_LOCK:-}" ] && [ -e "$PBX_CTLD_LOCK" ] &&
		command -v flock >/dev/null 2>&1; then
		exec 8<"$PBX_CTLD_LOCK"
		flock -s -w "${PBX_CTLD_WAIT:-60}" 8 || true
		head_went=
		read -r head_went <&8 || true
		exec 8<&-
		if [ "$head_went" = failed ]; then
			log "the head's bootstrap failed: not waiting for slurmctld"
			CTLD_GONE=1
			return 0
		fi
	fi
	if ping_ctld 10; then
		ctld_readdress
	else
		log "slurmctld does not answer yet; slurmd will keep trying to register"
	fi
}

# remade: whether this node is one that SLURM's power saving makes anew
# (pbx_power_remade in src/cluster/slurm_sleep_plan.c): a node that sleeps
# (State=CLOUD in slurm.conf), or a Spot node on a cluster with power
# saving (slurm.conf names a ResumeProgram), made anew after a preemption
# (docs/spot.md).  RA_LINE is this node's own line of slurm.conf, its name
# compared whole (a '.' in it is no pattern).
remade() {
	RA_LINE=$(awk -v n="NodeName=$NODE" '$1 == n' "$CONF" 2>/dev/null)
	case $RA_LINE in
	*" State=CLOUD") return 0 ;;
	'') return 1 ;;
	esac
	[ -n "${PBX_SPOT:-}" ] && grep -q '^ResumeProgram=' "$CONF"
}

# A node that power saving makes (remade) is a new machine at each wake,
# often at another address under the same NodeAddr (its instance's DNS
# name).  slurmctld resolves a node's NodeAddr once and keeps the
# address (SLURM 22.05: read_config.c, slurm_conf_get_addr), so it would
# send the woken node's pings and jobs to its previous instance's address
# (vm.gce-power: the node "not responding", its job requeued).  Setting the
# same NodeAddr again makes slurmctld resolve it afresh (slurm_reset_alias);
# asked before slurmd starts, so slurmctld talks to this instance from its
# first registration.  Root on a node is a SLURM administrator (munge).
ctld_readdress() {
	remade || return 0
	ra_addr='' ra_host=''
	for f in $RA_LINE; do
		case $f in
		NodeAddr=*) ra_addr=${f#NodeAddr=} ;;
		NodeHostname=*) ra_host=${f#NodeHostname=} ;;
		esac
	done
	[ -n "$ra_addr" ] || return 0
	SLURM_CONF=$CONF scontrol update NodeName="$NODE" NodeAddr="$ra_addr" ${ra_host:+NodeHostname="$ra_host"} ||
		log "scontrol update NodeName=$NODE NodeAddr=$ra_addr failed: slurmctld may still use the node's previous address"
}

# ---------------------------------------------------------------- packages

# What systemd mode apt-gets (Debian 12 / Ubuntu 22.04 names), one list a
# line: tests/vm/image.sh bakes these very lists into prebaked images, and
# bootstrap.train_pkgs checks TRAIN_PKGS against what pbx-train links, and
# bootstrap.pbx_pkgs PBX_PKGS against what pbx links.
HEAD_PKGS="slurmctld slurm-client munge nfs-kernel-server"
COMPUTE_PKGS="slurmd slurm-client munge nfs-common"
TRAIN_PKGS="libopenblas0 libgomp1 libyaml-0-2 libjansson4 libssl3 libprotobuf-c1 zlib1g openmpi-bin"
# tasks' environments (templates/pbx-env.sh: a venv of python3, or a
# container image that ch-run runs), on compute nodes
ENV_PKGS="python3 python3-venv charliecloud-runtime"
# registry images (container: docker://REF), pulled once per cluster on the
# head (templates/pbx-env.sh pull): skopeo fetches, umoci unpacks
HEAD_ENV_PKGS="skopeo umoci"
# pbx itself, on a head that deletes its own cluster (autostop_action: delete)
PBX_PKGS="libcurl4 libjansson4 libssh2-1 libyaml-0-2 libsqlite3-0 libssl3 libxml2 zlib1g"

# ---------------------------------------------------------------- inputs

ACTION=${1:-}
case $ACTION in
up | down | status | install) ;;
*) die "usage: bootstrap.sh up|down|status|install (got '$ACTION')" ;;
esac

MODE=${PBX_MODE:-}
case $MODE in
direct | systemd) ;;
*) die "PBX_MODE must be 'direct' or 'systemd' (got '$MODE')" ;;
esac

ROLE=${PBX_ROLE:-}
case $ROLE in
head | compute) ;;
*) die "PBX_ROLE must be 'head' or 'compute' (got '$ROLE')" ;;
esac

NODE=${PBX_NODE:-}
[ -n "$NODE" ] || die "PBX_NODE is not set"
case $NODE in
*[!A-Za-z0-9_.-]*) die "PBX_NODE '$NODE' is not a valid SLURM node name" ;;
esac
# a path element (the head's pbx keeps the cluster under its name) and a
# word of a sudo rule
case ${PBX_CLUSTER:-} in
.* | *[!A-Za-z0-9_.-]*) die "PBX_CLUSTER '${PBX_CLUSTER:-}' is not a valid cluster name" ;;
esac

ROOT=${PBX_ROOT:-}
while :; do
	case $ROOT in
	*/) ROOT=${ROOT%/} ;;
	*) break ;;
	esac
done
case $ROOT in
'' | /*) ;;
*) die "PBX_ROOT must be an absolute path (got '$ROOT')" ;;
esac
if [ "$MODE" = direct ] && [ -z "$ROOT" ]; then
	die "direct mode needs PBX_ROOT, a private directory for this node"
fi

# Root over SSH normally has the sbin directories on PATH; make sure.
for d in /usr/local/sbin /usr/sbin /sbin; do
	case ":$PATH:" in
	*":$d:"*) ;;
	*) PATH=$PATH:$d ;;
	esac
done
export PATH

CONF_DIR=$ROOT/etc/slurm
CONF=$CONF_DIR/slurm.conf
GRES_CONF=$CONF_DIR/gres.conf
MUNGE_KEY=$ROOT/etc/munge/munge.key
MUNGE_RUN=$ROOT/run/munge
MUNGE_SOCK=$MUNGE_RUN/munge.socket.2
MUNGE_PID=$MUNGE_RUN/munged.pid
MUNGE_LOG=$ROOT/var/log/munge/munged.log
MUNGE_SEED=$ROOT/var/lib/munge/munged.seed
ENV_SH=$ROOT/etc/pbx/env.sh
START_LOG=$ROOT/var/log/pbx-bootstrap.out

if [ "$ROLE" = head ]; then
	SLURM_DAEMON=slurmctld
else
	SLURM_DAEMON=slurmd
fi

# ---------------------------------------------------------------- helpers

# The helpers below set variables instead of printing (no command
# substitution, no sed/dirname): a bootstrap runs on every node at once,
# and on a node body every fork is CPU the other nodes wait for.

# parent_dir PATH: DIR = PATH without its last component.
parent_dir() {
	DIR=${1%/*}
	[ -n "$DIR" ] || DIR=/
}

# ensure_parent PATH: the directory PATH goes into exists.
ensure_parent() {
	parent_dir "$1"
	[ -d "$DIR" ] || mkdir -p "$DIR"
}

# replace_all S FROM TO: REPL = S with every FROM replaced by TO.
replace_all() {
	rest=$1
	REPL=
	while :; do
		case $rest in
		*"$2"*)
			REPL=$REPL${rest%%"$2"*}$3
			rest=${rest#*"$2"}
			;;
		*) break ;;
		esac
	done
	REPL=$REPL$rest
}

# expand_pct S: EXP = S with every %n replaced by the node name.
expand_pct() {
	replace_all "$1" %n "$NODE"
	EXP=$REPL
}

# conf_load [FILE]: the slurm.conf values this script uses, read in one
# pass (the first KEY=value of each key, @ROOT@ in a value made ROOT) into
# CONF_* variables.  FILE defaults to the installed slurm.conf.  Keys are
# matched as templates/slurm.conf.in spells them.
conf_load() {
	CONF_STATE='' CONF_SPOOL='' CONF_CTLD_PID='' CONF_SLURMD_PID='' CONF_CTLD_LOG=''
	CONF_SLURMD_LOG='' CONF_CTLD_HOST='' CONF_CTLD_PORT=''
	f=${1:-$CONF}
	[ -r "$f" ] || return 0
	set -f
	while IFS= read -r line || [ -n "$line" ]; do
		# shellcheck disable=SC2086 # the line's words
		for w in ${line%%#*}; do
			case $w in
			StateSaveLocation=*) var=CONF_STATE ;;
			SlurmdSpoolDir=*) var=CONF_SPOOL ;;
			SlurmctldPidFile=*) var=CONF_CTLD_PID ;;
			SlurmdPidFile=*) var=CONF_SLURMD_PID ;;
			SlurmctldLogFile=*) var=CONF_CTLD_LOG ;;
			SlurmdLogFile=*) var=CONF_SLURMD_LOG ;;
			SlurmctldHost=*) var=CONF_CTLD_HOST ;;
			SlurmctldPort=*) var=CONF_CTLD_PORT ;;
			*) continue ;;
			esac
			eval "[ -z \"\$$var\" ]" || continue
			replace_all "${w#*=}" @ROOT@ "$ROOT"
			eval "$var=\$REPL"
		done
	done <"$f"
	set +f
}

# render_conf SRC DEST: DEST = SRC with @ROOT@ made ROOT; a placeholder left
# outside a comment is an error naming its line.
render_conf() {
	n=0
	bad=
	while IFS= read -r line || [ -n "$line" ]; do
		n=$((n + 1))
		replace_all "$line" @ROOT@ "$ROOT"
		case ${REPL%%#*} in
		*@[A-Z_]*@*)
			bad="line $n still has a placeholder (pbx renders all but @ROOT@): $REPL"
			break
			;;
		esac
		printf '%s\n' "$REPL"
	done <"$1" >"$2"
	if [ -n "$bad" ]; then
		rm -f "$2"
		die "slurm.conf $bad"
	fi
}

# pidfile_of NAME: PF = the daemon's pid file (after conf_load).
pidfile_of() {
	case $1 in
	slurmctld) p=${CONF_CTLD_PID:-$ROOT/run/slurmctld.pid} ;;
	slurmd) p=${CONF_SLURMD_PID:-$ROOT/run/slurmd-%n.pid} ;;
	munged) p=$MUNGE_PID ;;
	pbx-autostop) p=$ROOT/run/pbx-autostop.pid ;;
	pbx-preempt) p=$ROOT/run/pbx-preempt.pid ;;
	esac
	expand_pct "$p"
	PF=$EXP
}

# logfile_of NAME: LF = the daemon's log file, or empty (after conf_load).
logfile_of() {
	case $1 in
	slurmctld) p=$CONF_CTLD_LOG ;;
	slurmd) p=$CONF_SLURMD_LOG ;;
	munged) p=$MUNGE_LOG ;;
	esac
	expand_pct "$p"
	LF=$EXP
}

# pid_alive PIDFILE NAME: true (and PID set) when the pid file names a live
# process called NAME (guards against reused pids; no fork).
pid_alive() {
	PID=
	[ -r "$1" ] || return 1
	p=
	read -r p <"$1" || [ -n "$p" ] || return 1
	case $p in '' | *[!0-9]*) return 1 ;; esac
	kill -0 "$p" 2>/dev/null || return 1
	if [ -r "/proc/$p/comm" ]; then
		comm=
		read -r comm <"/proc/$p/comm" || true
		[ "$comm" = "$2" ] || return 1
	fi
	PID=$p
}

unit_of() {
	case $1 in
	munged) echo munge ;;
	*) echo "$1" ;;
	esac
}

daemon_running() {
	if [ "$MODE" = systemd ]; then
		systemctl is-active --quiet "$(unit_of "$1")"
	else
		pidfile_of "$1"
		pid_alive "$PF" "$1"
	fi
}

# stop_pid NAME: TERM the daemon named by its pid file, KILL it if needed.
stop_pid() {
	pidfile_of "$1"
	pf=$PF
	pid_alive "$pf" "$1" || return 0
	log "stopping $1 (pid $PID)"
	kill -TERM "$PID" 2>/dev/null || true
	waited=0
	limit=$((${PBX_STOP_WAIT:-5} * 100))
	while kill -0 "$PID" 2>/dev/null && [ "$waited" -lt "$limit" ]; do
		nap 05
		waited=$((waited + 5))
	done
	if kill -0 "$PID" 2>/dev/null; then
		log "$1 (pid $PID) ignored TERM; sending KILL"
		kill -KILL "$PID" 2>/dev/null || true
		waited=0
		while kill -0 "$PID" 2>/dev/null && [ "$waited" -lt 500 ]; do
			nap 05
			waited=$((waited + 5))
		done
	fi
	if kill -0 "$PID" 2>/dev/null; then
		die "could not stop $1 (pid $PID)"
	fi
	rm -f "$pf"
}

# watcher_unit NAME: ROOT/etc/systemd/system/NAME.service from stdin, for
# one of pbx's watchers (pbx-preempt, pbx-autostop); CHANGED says whether
# it changed, and then systemd reloads its units.
watcher_unit() {
	unit=$ROOT/etc/systemd/system/$1.service
	ensure_parent "$unit"
	begin_new "$unit"
	cat >"$NEW"
	install_new "$unit" 0644
	[ "$CHANGED" = 0 ] || systemctl daemon-reload
}

# watcher_run NAME CHANGED OFF COMMAND...: a watcher of pbx's running, or
# not when OFF is 1.  Under systemd its unit (watcher_unit) is enabled and
# started, or restarted when CHANGED is 1; with OFF it is disabled and
# stopped.  On a node body COMMAND is a daemon of the body (pid file by
# pidfile_of, log ROOT/var/log/NAME.log), stopped and started again when
# CHANGED is 1.
watcher_run() {
	wname=$1 wchanged=$2 woff=$3
	shift 3
	if [ "$MODE" = systemd ]; then
		if [ "$woff" = 1 ]; then
			systemctl disable --now "$wname" >/dev/null 2>&1 || :
		elif ! systemctl is-active --quiet "$wname" || [ "$wchanged" = 1 ]; then
			systemctl enable "$wname" >/dev/null 2>&1 || die "systemctl enable $wname failed"
			systemctl restart "$wname" || die "systemctl restart $wname failed (journalctl -u $wname)"
		fi
		return 0
	fi
	pidfile_of "$wname"
	if pid_alive "$PF" "$wname" && { [ "$wchanged" = 1 ] || [ "$woff" = 1 ]; }; then
		stop_pid "$wname"
	fi
	if [ "$woff" = 0 ] && ! pid_alive "$PF" "$wname"; then
		ensure_parent "$PF"
		wlog=$ROOT/var/log/$wname.log
		ensure_parent "$wlog"
		setsid "$@" </dev/null >>"$wlog" 2>&1 3>&- 8>&- 9>&- &
		echo $! >"$PF"
		log "$wname running (pid $!)"
	fi
}

# start_direct NAME CMD...: start a self-daemonizing program with no tie to
# this shell's descriptors (over SSH, an inherited stdout would keep the
# session open), then wait for its pid file (looking every 10 ms for the
# first 0.1 s: a daemon writes it a few ms after it forks).
start_direct() {
	name=$1
	shift
	pidfile_of "$name"
	pf=$PF
	[ ! -e "$pf" ] || rm -f "$pf"
	ensure_parent "$START_LOG"
	log "starting $name: $*"
	rc=0
	"$@" </dev/null >"$START_LOG" 2>&1 3>&- 8>&- 9>&- || rc=$?
	waited=0
	while [ "$waited" -lt 1500 ]; do
		if pid_alive "$pf" "$name"; then
			log "$name running (pid $PID)"
			return 0
		fi
		if [ "$waited" -lt 10 ]; then
			nap 01
			waited=$((waited + 1))
		else
			nap 05
			waited=$((waited + 5))
		fi
	done
	cat "$START_LOG" >&2 || true
	logfile_of "$name"
	lf=$LF
	if [ -n "$lf" ] && [ -r "$lf" ]; then
		log "last lines of $lf:"
		tail -n 15 "$lf" >&2 || true
	fi
	die "$name did not start (exit status $rc; no live pid in $pf); see ${lf:-$START_LOG}"
}

# New content for a file: begin_new DEST sets NEW, the path to write it to
# (DEST itself when DEST does not exist yet, so a first bootstrap forks no
# chmod/mv; else DEST.pbx-in); install_new DEST MODE then puts it in place.

begin_new() {
	NEW_MODE=0644
	if [ -e "$1" ]; then NEW=$1.pbx-in; else NEW=$1; fi
}

# install_new DEST MODE: NEW replaces DEST atomically when it differs, else
# is removed; CHANGED=1 when DEST changed.  NEW_MODE: the mode a new file
# was created with (begin_new: 0644, from umask 022).
install_new() {
	CHANGED=1
	if [ "$NEW" = "$1" ]; then
		[ "$2" = "$NEW_MODE" ] || chmod "$2" "$1"
		return 0
	fi
	if cmp -s "$NEW" "$1"; then
		rm -f "$NEW"
		chmod "$2" "$1"
		CHANGED=0
		return 0
	fi
	chmod "$2" "$NEW"
	mv -f "$NEW" "$1"
}

# install_file SRC DEST MODE: install_new of a copy of SRC (a new file has
# MODE from the start: cp applies the umask to SRC's mode).
install_file() {
	ensure_parent "$2"
	begin_new "$2"
	(umask "$(printf '%o' $((0777 & ~$3)))" && cp "$1" "$NEW")
	NEW_MODE=$3
	install_new "$2" "$3"
}

# sq S: SQ = S quoted for sh.
sq() {
	rest=$1
	SQ=
	while :; do
		case $rest in
		*\'*)
			SQ="$SQ${rest%%\'*}'\\''"
			rest=${rest#*\'}
			;;
		*) break ;;
		esac
	done
	SQ="'$SQ$rest'"
}

is_uint() {
	case $1 in
	'' | *[!0-9]*) return 1 ;;
	esac
}

NL='
'

# read_small FILE: the first 4 KiB of FILE when it is a regular file,
# else nothing.  For files in places others can write (SHARED): opened
# with O_NOFOLLOW|O_NONBLOCK (dd's nofollow,nonblock), so a link planted
# there is not followed and a FIFO gives nothing instead of blocking.
read_small() {
	[ -f "$1" ] && [ ! -L "$1" ] || return 0
	dd if="$1" iflag=nofollow,nonblock bs=4096 count=1 2>/dev/null || :
}

# Directories: want_dir DIR [MODE] adds DIR to a list, make_dirs creates
# the list with one mkdir per mode (and gives a DIR that already exists its
# MODE again, when one was named).
MK_0755='' MK_0700='' FIX_0755='' FIX_0700=''
want_dir() {
	[ -n "$1" ] || return 0
	sq "$1"
	if [ -d "$1" ]; then
		case ${2:-} in
		0755) FIX_0755="$FIX_0755 $SQ" ;;
		0700) FIX_0700="$FIX_0700 $SQ" ;;
		esac
	elif [ "${2:-}" = 0700 ]; then
		MK_0700="$MK_0700 $SQ"
	else
		MK_0755="$MK_0755 $SQ"
	fi
}
make_dirs() {
	[ -z "$MK_0755" ] || eval "mkdir -p -m 0755 $MK_0755"
	[ -z "$MK_0700" ] || eval "mkdir -p -m 0700 $MK_0700"
	[ -z "$FIX_0755" ] || eval "chmod 0755 $FIX_0755"
	[ -z "$FIX_0700" ] || eval "chmod 0700 $FIX_0700"
	MK_0755='' MK_0700='' FIX_0755='' FIX_0700=''
}

# cgroup_problem: CGROUP_WHY = why slurmd cannot start on this machine for
# want of cgroups, in one line, or "" when nothing is known to be missing.
# slurmd 22.05 sets up its cgroup plugin whatever slurm.conf says, and
# exits (after pbx has waited for its pid file) unless /sys/fs/cgroup is
# cgroup v2 with this process in no v1 hierarchy ("Hybrid mode is not
# supported"), or a tmpfs of v1 hierarchies with /sys/fs/cgroup/systemd
# ("No filesystem mounted on /sys/fs/cgroup" where a chroot or container
# has none).  Reads the mount table, no fork.
cgroup_problem() {
	CGROUP_WHY=
	proc=${PBX_TEST_PROC:-/proc/self}
	[ -r "$proc/mounts" ] || return 0 # cannot tell: slurmd will say
	top='' sysd=''
	while read -r _ mp type _; do
		case $mp in
		/sys/fs/cgroup) top=$type ;; # the last mount there wins
		/sys/fs/cgroup/systemd) sysd=$type ;;
		esac
	done <"$proc/mounts"
	case $top in
	'')
		CGROUP_WHY="slurmd needs a cgroup filesystem at /sys/fs/cgroup and none is mounted (in a chroot: mount --rbind /sys/fs/cgroup CHROOT/sys/fs/cgroup from outside it; elsewhere: mount -t cgroup2 none /sys/fs/cgroup)"
		;;
	cgroup2)
		v1=
		if [ -r "$proc/cgroup" ]; then
			while IFS= read -r line; do
				case $line in 0::*) ;; *) v1=${line#*:} ;; esac
			done <"$proc/cgroup"
		fi
		[ -z "$v1" ] ||
			CGROUP_WHY="slurmd 22.05 refuses cgroup v2 at /sys/fs/cgroup while this process is also in cgroup v1 hierarchies (${v1%%:*}); in a chroot, mount the host's: mount --rbind /sys/fs/cgroup CHROOT/sys/fs/cgroup from outside it"
		;;
	tmpfs)
		[ "$sysd" = cgroup ] ||
			CGROUP_WHY="slurmd needs cgroup v2 at /sys/fs/cgroup, or cgroup v1 with its name=systemd hierarchy at /sys/fs/cgroup/systemd, which is not mounted (in a chroot: mount --rbind /sys/fs/cgroup CHROOT/sys/fs/cgroup from outside it)"
		;;
	*)
		CGROUP_WHY="slurmd needs cgroup v2 (or a tmpfs of cgroup v1 hierarchies) at /sys/fs/cgroup, which is $top"
		;;
	esac
}

# ---------------------------------------------------------------- status / down

do_status() {
	conf_load
	for d in munged "$SLURM_DAEMON"; do
		if daemon_running "$d"; then
			say "$d running"
		else
			say "$d stopped"
		fi
	done
	exit 0
}

do_down() {
	conf_load
	if [ "$MODE" = systemd ]; then
		for w in pbx-autostop pbx-preempt; do
			! systemctl is-active --quiet "$w" || systemctl stop "$w" || log "systemctl stop $w failed"
		done
		systemctl stop "$SLURM_DAEMON" || log "systemctl stop $SLURM_DAEMON failed"
		systemctl stop munge || log "systemctl stop munge failed"
	else
		# Both SLURM daemons: a prefix should never have both, but if it
		# does, leave nothing behind.
		stop_pid pbx-autostop
		stop_pid pbx-preempt
		stop_pid slurmd
		stop_pid slurmctld
		stop_pid munged
	fi
	log "down"
	exit 0
}

# ---------------------------------------------------------------- install

# The packages of both roles, pbx-train's runtime, Python environments' and
# pbx's: HEAD_PKGS, COMPUTE_PKGS, TRAIN_PKGS, ENV_PKGS, HEAD_ENV_PKGS and
# PBX_PKGS above (tests/vm/image.sh's baked image has the same).

do_install() {
	stage install
	if [ "$MODE" = direct ]; then
		missing=
		for b in munged munge unmunge sinfo scontrol slurmctld slurmd; do
			command -v "$b" >/dev/null 2>&1 || missing="$missing $b"
		done
		[ -z "$missing" ] || die "direct mode installs nothing, and this machine lacks:$missing"
		log "direct mode: everything is there; nothing installed"
		stage 'done'
		exit 0
	fi
	want=
	for p in $HEAD_PKGS $COMPUTE_PKGS $TRAIN_PKGS $ENV_PKGS $HEAD_ENV_PKGS $PBX_PKGS; do
		case " $want " in *" $p "*) continue ;; esac
		dpkg -s "$p" >/dev/null 2>&1 || want="$want $p"
	done
	if [ -n "$want" ]; then
		log "installing:$want"
		n=0
		until DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 update -q </dev/null; do
			n=$((n + 1))
			[ "$n" -lt 5 ] || die "apt-get update failed"
			sleep "${PBX_APT_RETRY_SLEEP:-10}"
		done
		# shellcheck disable=SC2086 # word splitting of the package list
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -q \
			--no-install-recommends $want </dev/null || die "apt-get install$want failed"
	else
		log "everything is installed already"
	fi
	stage clean
	# every cluster's nodes get pbx's key; a machine started from the image
	# must not run munge with a key it shares with every other such machine
	systemctl stop munge 2>/dev/null || :
	# neither SLURM daemon starts from the image by itself: `up` enables
	# its role's one (and so need not disable the other at every start)
	systemctl disable --now slurmctld slurmd >/dev/null 2>&1 || :
	rm -f "$ROOT/etc/munge/munge.key"
	# apt-get clean takes apt's cache lock, which DPkg::Lock::Timeout does
	# not wait for: another apt on the machine (unattended-upgrades, or
	# two image builds on one test host) makes it fail at once, status 100
	n=0
	until apt-get clean; do
		n=$((n + 1))
		[ "$n" -lt 60 ] || die "apt-get clean failed (apt's cache locked for 2 minutes)"
		sleep 2
	done
	rm -rf "$ROOT"/var/lib/apt/lists/*
	sync
	stage 'done'
	exit 0
}

[ "$ACTION" = status ] && do_status
[ "$ACTION" = down ] && do_down
[ "$ACTION" = install ] && do_install

# ---------------------------------------------------------------- up

STAGE_DIR=${PBX_STAGE:-}
[ -n "$STAGE_DIR" ] || die "PBX_STAGE is not set"
[ -r "$STAGE_DIR/slurm.conf" ] || die "no slurm.conf in PBX_STAGE ($STAGE_DIR)"
[ -r "$STAGE_DIR/munge.key" ] || die "no munge.key in PBX_STAGE ($STAGE_DIR)"
GPUS=${PBX_GPUS:-0}
GPU_TYPE=${PBX_GPU_TYPE:-}
case $GPU_TYPE in *[!a-z0-9_.-]*) die "PBX_GPU_TYPE may hold only a-z 0-9 _ . - (got '$GPU_TYPE')" ;; esac
is_uint "$GPUS" || die "PBX_GPUS must be a number (got '$GPUS')"
SPOT=${PBX_SPOT:-}
case $SPOT in '' | gce | aws) ;; *) die "PBX_SPOT must be gce or aws (got '$SPOT')" ;; esac
[ "$ROLE" = compute ] || SPOT=
[ -z "${PBX_PREEMPT_POLL:-}" ] || is_uint "$PBX_PREEMPT_POLL" ||
	die "PBX_PREEMPT_POLL must be a number of seconds (got '$PBX_PREEMPT_POLL')"
SHARED=${PBX_SHARED:-}
case $SHARED in
/*) ;;
*) die "PBX_SHARED must be an absolute path (got '$SHARED')" ;;
esac
# SHARED as this script reaches it: on a node body a host path already; on
# a VM under ROOT (empty there, a test's directory in tests/bootstrap)
if [ "$MODE" = systemd ]; then SHARED_HERE=$ROOT$SHARED; else SHARED_HERE=$SHARED; fi
if [ "$MODE" = systemd ]; then
	SLURM_USER=${PBX_SLURM_USER:-slurm}
else
	SLURM_USER=${PBX_SLURM_USER:-root}
fi

[ -d "$ROOT/run" ] || mkdir -p "$ROOT/run"
if command -v flock >/dev/null 2>&1; then
	exec 9>"$ROOT/run/pbx-bootstrap.lock"
	flock -w 900 9 || die "another bootstrap of this node holds $ROOT/run/pbx-bootstrap.lock"
fi

# ---- install
stage install
if [ "$MODE" = systemd ]; then
	OS_ID=unknown
	OS_VER=
	if [ -r "$ROOT/etc/os-release" ]; then
		# shellcheck source=/dev/null
		OS_ID=$(. "$ROOT/etc/os-release" && echo "${ID:-unknown}")
		# shellcheck source=/dev/null
		OS_VER=$(. "$ROOT/etc/os-release" && echo "${VERSION_ID:-}")
	fi
	case $OS_ID:$OS_VER in
	debian:12 | ubuntu:22.04) log "os: $OS_ID $OS_VER" ;;
	debian:* | ubuntu:*) log "os: $OS_ID $OS_VER (untested; treated like Debian 12)" ;;
	*) die "unsupported OS '$OS_ID $OS_VER' (need Debian 12 or Ubuntu 22.04)" ;;
	esac
	# Debian 12 and Ubuntu 22.04 agree on everything used here: /etc/slurm,
	# units slurmctld/slurmd/munge/nfs-server, binaries in /usr/sbin.
	have() {
		for d in usr/sbin sbin usr/bin; do
			[ ! -x "$ROOT/$d/$1" ] || return 0
		done
		return 1
	}
	missing=
	for b in munged munge sinfo scontrol; do
		have "$b" || missing="$missing $b"
	done
	if [ "$ROLE" = head ]; then
		have slurmctld || missing="$missing slurmctld"
		have exportfs || missing="$missing exportfs"
		PKGS=$HEAD_PKGS
	else
		have slurmd || missing="$missing slurmd"
		have mount.nfs || missing="$missing mount.nfs"
		PKGS=$COMPUTE_PKGS
		# pbx-preempt asks the metadata server with curl
		[ -z "$SPOT" ] || have curl || { missing="$missing curl"; PKGS="$PKGS curl"; }
	fi
	if [ -n "$missing" ]; then
		log "missing:$missing; installing $PKGS"
		apt_get() {
			n=0
			until DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 "$@" </dev/null; do
				n=$((n + 1))
				[ "$n" -lt 5 ] || return 1
				log "apt-get $1 failed (try $n); retrying"
				sleep "${PBX_APT_RETRY_SLEEP:-10}"
			done
		}
		apt_get update -q || die "apt-get update failed"
		# shellcheck disable=SC2086 # word splitting of the package list
		apt_get install -y -q $PKGS || die "apt-get install $PKGS failed"
		for b in $missing; do
			have "$b" || die "$b still missing after installing $PKGS"
		done
	fi
	# A prebaked image has both roles' daemons, enabled by their packages:
	# the other role's would start at every boot (a compute node running a
	# second slurmctld), so it is disabled.
	other=slurmd
	[ "$ROLE" = head ] || other=slurmctld
	if have "$other" && { systemctl is-enabled --quiet "$other" 2>/dev/null ||
		systemctl is-active --quiet "$other"; }; then
		log "disabling $other (a $ROLE node runs $SLURM_DAEMON only)"
		systemctl disable --now "$other" >/dev/null 2>&1 || log "warning: could not disable $other"
	fi
else
	need="munged munge unmunge sinfo scontrol $SLURM_DAEMON${SPOT:+ curl scancel squeue}"
	missing=
	for b in $need; do
		command -v "$b" >/dev/null 2>&1 || missing="$missing $b"
	done
	[ -z "$missing" ] || die "direct mode installs nothing, and this machine lacks:$missing (apt-get install slurm-wlm munge)"
fi
# Said before anything starts, rather than "slurmd did not start" later.
if [ "$ROLE" = compute ]; then
	cgroup_problem
	[ -z "$CGROUP_WHY" ] || die "$CGROUP_WHY"
fi

# ---- directories: every one this node needs, made at once
# (slurm.conf's paths are read from the stage, with @ROOT@ made ROOT).
conf_load "$STAGE_DIR/slurm.conf"
state_dir=$CONF_STATE
expand_pct "$CONF_SPOOL"
spool_dir=$EXP
first_start=1
[ -z "$spool_dir" ] || [ ! -d "$spool_dir" ] || first_start=0
want_dir "$ROOT/etc/munge" 0700
want_dir "$CONF_DIR"
want_dir "${ENV_SH%/*}"
for d in slurmctld slurmd; do
	pidfile_of "$d"
	logfile_of "$d"
	for f in "$PF" "$LF"; do
		[ -z "$f" ] || want_dir "${f%/*}"
	done
done
if [ "$ROLE" = head ]; then
	want_dir "$state_dir" 0700
else
	want_dir "$spool_dir" 0755
fi
if [ "$MODE" = direct ]; then
	# In systemd mode the munge package owns its run, log and seed directories.
	want_dir "$MUNGE_RUN" 0755
	want_dir "${MUNGE_LOG%/*}"
	want_dir "${MUNGE_SEED%/*}"
	want_dir "${START_LOG%/*}"
	want_dir "$SHARED"
	[ "$GPUS" -eq 0 ] || want_dir "$ROOT/dev"
	[ -z "${PBX_TRAIN_BIN:-}" ] || want_dir "$ROOT/usr/local/bin"
fi
make_dirs

# ---- munge
stage munge
if [ "$MODE" = systemd ]; then
	key_bytes=$(wc -c <"$STAGE_DIR/munge.key")
	[ "$((key_bytes))" -ge 32 ] || die "munge.key in PBX_STAGE has $key_bytes bytes (need at least 32)"
fi
install_file "$STAGE_DIR/munge.key" "$MUNGE_KEY" 0400
key_changed=$CHANGED
munge_ok() { munge -S "$MUNGE_SOCK" -n </dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null 2>&1; }
if [ "$MODE" = systemd ]; then
	chown munge:munge "$ROOT/etc/munge" "$MUNGE_KEY"
	if [ "$key_changed" = 1 ] || ! systemctl is-active --quiet munge; then
		# (enable runs update-rc.d: seconds on a small VM; skipped when done)
		systemctl is-enabled --quiet munge 2>/dev/null || systemctl enable munge
		systemctl restart munge || die "systemctl restart munge failed (journalctl -u munge)"
	fi
else
	if pid_alive "$MUNGE_PID" munged; then
		if [ "$key_changed" = 1 ] || ! munge_ok; then
			stop_pid munged
		fi
	fi
	if ! pid_alive "$MUNGE_PID" munged; then
		# munged checks the key's length itself (at least 32 bytes).
		# --force: a node prefix under a private directory (/root/.pbx,
		# mktemp -d) fails munged's "ancestors must be world-executable"
		# check of the socket; the prefix is this node's own, so demote it
		# to a warning.  munged still refuses a socket held by a live daemon.
		start_direct munged "$(command -v munged)" --force --socket="$MUNGE_SOCK" \
			--key-file="$MUNGE_KEY" --pid-file="$MUNGE_PID" \
			--log-file="$MUNGE_LOG" --seed-file="$MUNGE_SEED"
	fi
fi
tries=0
until munge_ok; do
	tries=$((tries + 1))
	[ "$tries" -lt 200 ] || die "munge does not work on $MUNGE_SOCK (munge -n | unmunge fails; see $MUNGE_LOG)"
	nap 05
done

# ---- config
stage config
begin_new "$CONF"
render_conf "$STAGE_DIR/slurm.conf" "$NEW"
install_new "$CONF" 0644
conf_changed=$CHANGED

# gres.conf: the GPUs this node really has (systemd) or stand-in device
# files (direct).  slurmd registers one GPU per File= (Count= alone gives
# 0), and binds and exports GPU indices (CUDA_VISIBLE_DEVICES,
# SLURM_JOB_GPUS) only for files that are character devices: each stand-in
# is a link to /dev/null (no mknod, so no privilege needed), and the index
# is the number its name ends in, as for /dev/nvidiaN.
if [ "$MODE" = systemd ]; then
	if [ "$GPUS" -gt 0 ]; then
		command -v nvidia-smi >/dev/null 2>&1 ||
			die "the cluster template promises $GPUS GPU(s) but this node has no nvidia-smi (GPU driver missing: use an image with NVIDIA drivers)"
		smi=$(nvidia-smi -L) || die "nvidia-smi -L failed: GPU driver not working"
		found=$(printf '%s\n' "$smi" | grep -c '^GPU ') || found=0
		[ "$found" -ge "$GPUS" ] ||
			die "the cluster template promises $GPUS GPU(s) but nvidia-smi -L lists $found"
		DEV_BASE=/dev/nvidia
	else
		found=0
	fi
else
	found=$GPUS
	DEV_BASE=$ROOT/dev/nvidia
	devs_changed=0
	if [ "$GPUS" -gt 0 ]; then
		i=0
		while [ "$i" -lt "$GPUS" ]; do
			if [ ! -L "$DEV_BASE$i" ]; then
				# (a plain file left by an older bootstrap gave no
				# indices; a slurmd that loaded it restarts below)
				[ ! -e "$DEV_BASE$i" ] || rm -f "$DEV_BASE$i"
				ln -s /dev/null "$DEV_BASE$i"
				devs_changed=1
			fi
			i=$((i + 1))
		done
	fi
fi
begin_new "$GRES_CONF"
{
	echo "# gres.conf for $NODE, written by the pbx bootstrap"
	gres_type=${GPU_TYPE:+ Type=$GPU_TYPE}
	if [ "$found" -eq 1 ]; then
		echo "NodeName=$NODE Name=gpu$gres_type File=${DEV_BASE}0"
	elif [ "$found" -gt 1 ]; then
		echo "NodeName=$NODE Name=gpu$gres_type File=${DEV_BASE}[0-$((found - 1))]"
	fi
} >"$NEW"
install_new "$GRES_CONF" 0644
gres_changed=$CHANGED
[ "${devs_changed:-0}" = 0 ] || gres_changed=1

if [ "$MODE" = systemd ] && [ "$SLURM_USER" != root ] && [ "$ROLE" = head ]; then
	[ -z "$state_dir" ] || chown -R "$SLURM_USER:" "$state_dir"
	logfile_of slurmctld
	parent_dir "$LF"
	[ -z "$LF" ] || chown "$SLURM_USER:" "$DIR"
fi

defaults_changed=0
if [ "$MODE" = systemd ] && [ "$ROLE" = compute ]; then
	dflt=$ROOT/etc/default/slurmd
	ensure_parent "$dflt"
	begin_new "$dflt"
	{
		[ ! -r "$dflt" ] || grep -v '^[[:space:]]*SLURMD_OPTIONS=' "$dflt" || true
		echo "SLURMD_OPTIONS=\"-N $NODE\""
	} >"$NEW"
	install_new "$dflt" 0644
	defaults_changed=$CHANGED
fi

# staged_for_here NAME: whether PBX_STAGE/NAME (a binary pbx built) was
# built for this node: NAME.target ("ID VERSION_ID MACHINE", written
# without a newline) against this node's; sets built and here.
staged_for_here() {
	built=
	read -r built <"$STAGE_DIR/$1.target" || :   # no newline: read sets it, then fails
	here="$OS_ID $OS_VER $(uname -m)"
	[ "$built" = "$here" ]
}

# ensure_pkgs WHAT LIST: apt-get installs LIST (WHAT names it in the log)
# unless dpkg has every package of it.
ensure_pkgs() {
	# shellcheck disable=SC2086 # word splitting of the package list
	dpkg -s $2 >/dev/null 2>&1 && return 0
	log "installing $1: $2"
	# shellcheck disable=SC2086 # word splitting of the package list
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -q \
		$2 </dev/null || die "apt-get install $2 failed"
}

# ---- python3 with venv and ch-run, for the tasks' environments; on the
# head skopeo and umoci, which pull registry images
if [ "$MODE" = systemd ] && [ "$ROLE" != head ]; then
	ensure_pkgs "task environments" "$ENV_PKGS"
elif [ "$MODE" = systemd ]; then
	ensure_pkgs "registry images" "$HEAD_ENV_PKGS"
fi

# ---- pbx-train, for `train:` tasks
TRAIN_PATH=
if [ "$MODE" = direct ]; then
	if [ -n "${PBX_TRAIN_BIN:-}" ]; then
		[ -x "$PBX_TRAIN_BIN" ] || die "PBX_TRAIN_BIN ($PBX_TRAIN_BIN) is not an executable file"
		# a copy in the body, not a link to the build: the task user must
		# run it, and the build may lie in a private directory (/root);
		# its CUDA backend where pbx-train looks (../lib/pbx)
		[ ! -L "$ROOT/usr/local/bin/pbx-train" ] || rm -f "$ROOT/usr/local/bin/pbx-train"
		install_file "$PBX_TRAIN_BIN" "$ROOT/usr/local/bin/pbx-train" 0755
		if [ -f "${PBX_TRAIN_BIN%/*}/pbx-train-cuda.so" ]; then
			install_file "${PBX_TRAIN_BIN%/*}/pbx-train-cuda.so" "$ROOT/usr/local/lib/pbx/pbx-train-cuda.so" 0644
		fi
		TRAIN_PATH=$ROOT/usr/local/bin
	fi
elif [ -f "$STAGE_DIR/pbx-train" ] && ! staged_for_here pbx-train; then
	log "pbx-train not installed: built on '$built', this node is '$here' (build it here: cmake -S SRC -B build && cmake --build build --target pbx-train)"
elif [ -f "$STAGE_DIR/pbx-train" ]; then
	# Its runtime libraries (Debian 12 / Ubuntu 22.04 names) and mpirun.
	ensure_pkgs "pbx-train's runtime" "$TRAIN_PKGS"
	install_file "$STAGE_DIR/pbx-train" "$ROOT/usr/local/bin/pbx-train" 0755
	# its CUDA backend, a module found at ../lib/pbx beside the binary; it
	# loads where the image has the CUDA runtime, cuBLAS, cuDNN and NCCL
	if [ -f "$STAGE_DIR/pbx-train-cuda.so" ]; then
		install_file "$STAGE_DIR/pbx-train-cuda.so" "$ROOT/usr/local/lib/pbx/pbx-train-cuda.so" 0644
	fi
	train_version=$("$ROOT/usr/local/bin/pbx-train" --version) ||
		die "pbx-train does not run on this node (ldd $ROOT/usr/local/bin/pbx-train)"
	case $train_version in
	*"cannot load the CUDA backend"*)
		[ "$GPUS" -eq 0 ] ||
			log "pbx-train's CUDA backend does not load on this GPU node (device: cuda will fail; device: auto trains on the CPU): $train_version" ;;
	esac
fi

# ---- the task user (docs/SECURITY.md, "Who is who on a node"): pbx
# submits every task as TASK_USER (sbatch --uid), never as root, so a task
# cannot reach what root has on a node: the head's cloud identity, its
# control state, munge's key.  The same uid on every node (the shared
# directory is NFS).  On a VM it is made here; on a node body it is this
# host's user (slurmd sets the job's uid on this host), and tasks run as
# it where it can reach the body's files: a node body whose directories
# lie under a private one (a PBX_HOME in /root) runs its tasks as root,
# and says so.
TASK_USER=pbx-task
TASK_UID=2850
task_user_make() {
	if getent passwd "$TASK_USER" >/dev/null 2>&1; then
		return 0
	fi
	taken=$(getent passwd "$TASK_UID" 2>/dev/null | cut -d: -f1)
	[ -z "$taken" ] || die "uid $TASK_UID, which pbx's task user $TASK_USER has on every node, is $taken's here"
	tries=0
	# node bodies' bootstraps run at once on one host: one useradd wins
	until useradd --uid "$TASK_UID" --user-group --home-dir "/home/$TASK_USER" --create-home \
		--shell /bin/sh --comment "pbx tasks" "$TASK_USER" >/dev/null 2>&1 ||
		getent passwd "$TASK_USER" >/dev/null 2>&1; do
		tries=$((tries + 1))
		[ "$tries" -lt 20 ] || die "useradd could not make the task user $TASK_USER"
		sleep 0.5
	done
	log "made the task user $TASK_USER (uid $TASK_UID)"
}
# Whether TASK_USER reaches what a task needs here: the shared directory,
# slurm.conf and munge's socket (srun and mpirun inside a job).
task_user_reaches() {
	# shellcheck disable=SC2016 # the arguments of that sh
	runuser -u "$TASK_USER" -- sh -c 'cd "$1" && [ -r "$2" ] && [ -w "$3" ]' _ \
		"$SHARED_HERE" "$CONF" "$MUNGE_SOCK" 2>/dev/null
}
# passable DIR...: each DIR and every directory above it up to ROOT get
# o+x (others may pass, not list; each file keeps its own mode), in one
# chmod (on node bodies every fork counts)
passable() {
	n=$#
	for d in "$@"; do # the list as it was: what is added goes after it
		while [ -d "$d" ]; do
			set -- "$@" "$d"
			case $d in "$ROOT"/*) d=${d%/*} ;; *) break ;; esac
		done
	done
	shift "$n"
	[ "$#" = 0 ] || chmod o+x "$@"
}
# a node body's local disk for its tasks (Python environments, pbx-env.sh)
if [ "$MODE" = direct ] && [ ! -d "$ROOT/var/tmp" ]; then
	mkdir -p "$ROOT/var/tmp" || die "cannot make $ROOT/var/tmp"
	chmod 1777 "$ROOT/var/tmp" || die "cannot open $ROOT/var/tmp to every user"
fi
TASK_USER_ON=
if [ "$(id -u)" = 0 ]; then # else (a user's own node bodies) tasks run as that user
	task_user_make
	# a node body's own directories on the way to what a task needs: the
	# configuration, munge's socket, slurmd's spool (the batch script),
	# pbx-train, the shared directory and the local disk
	[ "$MODE" = systemd ] ||
		passable "$CONF_DIR" "$MUNGE_RUN" ${spool_dir:+"$spool_dir"} "$ROOT/usr/local/bin" "$SHARED" "$ROOT/var/tmp" ||
		die "cannot make the node body's directories passable for $TASK_USER"
	if [ "$MODE" = systemd ] || task_user_reaches; then
		TASK_USER_ON=$TASK_USER
	else
		log "tasks on this node body run as root: $TASK_USER cannot reach $SHARED_HERE, $CONF or $MUNGE_SOCK (a directory above them is private to root; docs/SECURITY.md)"
	fi
fi

begin_new "$ENV_SH"
{
	echo "# pbx node environment: sourced by pbx before every remote command"
	if [ -n "$TRAIN_PATH" ]; then
		sq "$TRAIN_PATH"
		echo "export PATH=$SQ:\"\$PATH\""
	fi
	if [ "$MODE" = direct ]; then
		# Node bodies share one host: Open MPI's shared-memory transport
		# crashes between them; its TCP transport over loopback works.
		echo "export OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo"
		# their local disk is this host's: tasks unpack Python
		# environments (pbx-env.sh) under the body's var/tmp, which
		# goes with the cluster, not under the host's /var/tmp
		sq "$ROOT/var/tmp"
		echo "export PBX_ENV_DIR=$SQ"
	fi
	sq "$CONF"
	echo "export SLURM_CONF=$SQ"
	sq "$SHARED"
	echo "export PBX_SHARED=$SQ"
	sq "$ROOT"
	echo "export PBX_ROOT=$SQ"
	sq "$NODE"
	echo "export PBX_NODE=$SQ"
	sq "${PBX_CLUSTER:-}"
	echo "export PBX_CLUSTER=$SQ"
	# pbx submits tasks as this user (src/jobs/arrays.c); none: as root
	[ -z "$TASK_USER_ON" ] || echo "export PBX_TASK_USER=$TASK_USER_ON"
} >"$NEW"
install_new "$ENV_SH" 0644

# The names of the nodes that power saving makes, on a cloud whose DNS
# does not know them (EC2): the head's pbx stages "ADDRESS NAME" of the
# awake ones as it wakes nodes, the user's start those of the Spot nodes
# that always run, which it makes (src/cluster/slurm_sleep_steps.c), and every node
# keeps them in a block of its /etc/hosts, which slurm.conf's NodeAddr
# names.  A staged name's line replaces that name's; the others stay (a
# node asleep is asked nothing, and its next wake stages it anew), so
# neither pbx drops a name the other staged.  On a node body /etc/hosts may
# be a bind mount of ROOT/etc/hosts: written in place there.  Before the
# shared directory's export, which names the nodes.
HOSTS_BEGIN="# pbx: nodes of cluster ${PBX_CLUSTER:-} that sleep (begin)"
HOSTS_END="# pbx: nodes of cluster ${PBX_CLUSTER:-} that sleep (end)"
power_hosts() {
	staged=$STAGE_DIR/hosts hosts=$ROOT/etc/hosts
	[ -r "$staged" ] || return 0
	while read -r addr name rest; do
		case $addr in '' | *[!0-9a-f.:]*) die "staged hosts: bad address '$addr'" ;; esac
		case $name in '' | -* | *[!a-z0-9-]*) die "staged hosts: bad name '$name'" ;; esac
		[ -z "$rest" ] || die "staged hosts: more than an address and a name: '$rest'"
	done <"$staged"
	ensure_parent "$hosts"
	[ -e "$hosts" ] || : >"$hosts" || die "cannot write $hosts"
	awk -v b="$HOSTS_BEGIN" -v e="$HOSTS_END" '
		FILENAME == ARGV[1] { staged[$2] = 1; add[++n] = $0; next }
		$0 == b { inside = 1; next }
		$0 == e { inside = 0; next }
		inside { if (!($2 in staged)) kept[++k] = $0; next }
		{ print }
		END {
			print b
			for (i = 1; i <= k; i++) print kept[i]
			for (i = 1; i <= n; i++) print add[i]
			print e
		}' "$staged" "$hosts" >"$hosts.pbx-in" || die "cannot write $hosts.pbx-in"
	if cmp -s "$hosts.pbx-in" "$hosts"; then
		rm -f "$hosts.pbx-in"
	elif [ "$MODE" = systemd ]; then
		{ chmod 0644 "$hosts.pbx-in" && mv -f "$hosts.pbx-in" "$hosts"; } || die "cannot replace $hosts"
	else
		cat "$hosts.pbx-in" >"$hosts" || die "cannot write $hosts"
		rm -f "$hosts.pbx-in"
	fi
}
power_hosts

# ---- shared
stage shared
if [ "$MODE" = direct ]; then
	: # made with the other directories
elif [ "$ROLE" = head ]; then
	# root's: tasks (the task user) write only their runs' directories,
	# which pbx gives them (src/jobs/arrays.c); 1777 before tasks ran as
	# the task user
	mkdir -p "$ROOT$SHARED"
	chmod 0755 "$ROOT$SHARED"
	clients=${PBX_NFS_CLIENTS:-}
	if [ -z "$clients" ]; then
		# NodeAddr (else NodeHostname, else NodeName) of every node.
		clients=$(awk '
			{ sub(/#.*/, "") }
			tolower($1) ~ /^nodename=/ {
				name = ""; host = ""; addr = ""
				for (i = 1; i <= NF; i++) {
					n = index($i, "="); k = tolower(substr($i, 1, n - 1)); v = substr($i, n + 1)
					if (k == "nodename") name = v
					else if (k == "nodehostname") host = v
					else if (k == "nodeaddr") addr = v
				}
				if (tolower(name) == "default") next
				a = addr != "" ? addr : (host != "" ? host : name)
				gsub(/,/, " ", a); print a
			}' "$CONF" | tr '\n' ' ')
	fi
	case $clients in
	*'['*) die "cannot export $SHARED to node ranges ($clients): set PBX_NFS_CLIENTS" ;;
	esac
	if [ -z "$(echo "$clients" | tr -d ' ')" ]; then
		log "no compute nodes in slurm.conf: $SHARED is not exported"
	else
		# root_squash: a compute node's root is the anonymous uid 65534
		# on the shared disk (it writes only its autostop answer, in a
		# directory of that uid: templates/autostop.sh); a task is its own
		# uid, and neither is the head's root (docs/SECURITY.md)
		line=$SHARED
		for c in $clients; do
			line="$line $c(rw,sync,no_subtree_check,root_squash,anonuid=65534,anongid=65534)"
		done
		exports=$ROOT/etc/exports
		ensure_parent "$exports"
		begin_new "$exports"
		{
			[ ! -r "$exports" ] || awk -v p="$SHARED" '$1 != p' "$exports"
			echo "$line"
		} >"$NEW"
		install_new "$exports" 0644
		# Exported again on every run, changed or not: exportfs resolves
		# each client's name when it runs and leaves out a name that does
		# not resolve yet, as a node that sleeps has none until the head's
		# pbx makes it (power saving; its resume runs this bootstrap on the
		# head once the new instances exist).
		if ! systemctl is-active --quiet nfs-server; then
			systemctl enable --now nfs-server || die "could not start nfs-server (journalctl -u nfs-server)"
		fi
		exportfs -ra || die "exportfs -ra failed"
	fi
else
	head_addr=${PBX_HEAD_ADDR:-}
	[ -n "$head_addr" ] || die "PBX_HEAD_ADDR is not set (needed to mount $SHARED)"
	mp=$ROOT$SHARED
	mkdir -p "$mp"
	fstab=$ROOT/etc/fstab
	ensure_parent "$fstab"
	begin_new "$fstab"
	{
		[ ! -r "$fstab" ] || awk -v p="$SHARED" '$2 != p' "$fstab"
		echo "$head_addr:$SHARED $SHARED nfs4 defaults,_netdev,nofail 0 0"
	} >"$NEW"
	install_new "$fstab" 0644
	if awk -v p="$mp" '$2 == p { found = 1 } END { exit !found }' /proc/mounts 2>/dev/null; then
		log "$mp already mounted"
	else
		# The head bootstraps at the same time: wait for its export.
		deadline=$(($(date +%s) + ${PBX_NFS_WAIT:-300}))
		# NFSv4 only: `-t nfs` falls back to v3 when it asks while the
		# head's nfs-server is still starting (vm.gce-booted once mounted
		# v3), with other locking and daemons; a v4 refusal is retried
		until mount -t nfs4 "$head_addr:$SHARED" "$mp"; do
			[ "$(date +%s)" -lt "$deadline" ] || die "could not mount $head_addr:$SHARED on $mp"
			log "mount $head_addr:$SHARED failed; retrying"
			sleep 5
		done
	fi
	# ---- the experiments' Debian packages (environment.apt, src/jobs/apt.c):
	# parrun installs them on the nodes that are up and lists them in
	# SHARED/.pbx-apt (root's, on the head's disk), so that a node made
	# later (power saving, resize) has them too.  Trusted only when the
	# file and the directory holding it are root's and no one else may
	# write them; names checked again; a failure is logged, not fatal
	# (the tasks say what is missing)
	apt_list=$mp/.pbx-apt
	if [ -f "$apt_list" ] && [ ! -L "$apt_list" ] &&
		[ "$(stat -c '%u %A' "$apt_list")" = "0 -rw-r--r--" ] &&
		[ "$(stat -c %u "$mp")" = 0 ] && [ -z "$(find "$mp" -maxdepth 0 -perm /022)" ]; then
		apt_want=$(grep -E '^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$' "$apt_list" | tr '\n' ' ')
		apt_names=$(printf '%s' "$apt_want" | sed 's/=[^ ]*//g')
		# shellcheck disable=SC2086 # word splitting of the package list
		if [ -n "$apt_want" ] && ! dpkg -s $apt_names >/dev/null 2>&1; then
			log "installing the experiments' apt: packages: $apt_want"
			# shellcheck disable=SC2086 # word splitting of the package list
			DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -q \
				--no-install-recommends $apt_want </dev/null ||
				log "apt-get install $apt_want failed: tasks that need them fail on this node"
		fi
	fi
fi

# ---- the head's pbx (src/cluster/headdelete.c, docs/head-identity.md):
# with PBX_HEAD_PBX=1 pbx runs on the head as the head's own cloud identity
# (autostop_action: delete), through ROOT/usr/local/sbin/pbx-head.  It
# reaches the nodes with a key of the head's own, never the user's: the
# head makes it once (it stays on the head's disk, its private half never
# leaves it) and publishes the public half in SHARED/.pbx; every node, the
# head too, authorizes it for the login user, tagged "pbx-head:CLUSTER"
# (a node of a cluster without PBX_HEAD_PBX drops the line).
HEAD_HOME=$ROOT/var/lib/pbx/home
HEAD_KEY=$HEAD_HOME/.ssh/id_ed25519
HEAD_KEY_PUB=$SHARED_HERE/.pbx/head_key.pub
HEAD_KEY_TAG=pbx-head:$PBX_CLUSTER

# The head's key pair, made once; its public half published in SHARED.
head_key_make() {
	mkdir -p "$HEAD_HOME/.ssh"
	chmod 700 "$HEAD_HOME" "$HEAD_HOME/.ssh"
	if [ ! -s "$HEAD_KEY" ] || [ ! -s "$HEAD_KEY.pub" ]; then
		rm -f "$HEAD_KEY" "$HEAD_KEY.pub"
		ssh-keygen -q -t ed25519 -N '' -C "$HEAD_KEY_TAG" -f "$HEAD_KEY" </dev/null >/dev/null ||
			die "ssh-keygen could not make the head's key ($HEAD_KEY)"
		log "made the head's key ($HEAD_KEY)"
	fi
	# SHARED is writable by all: the key's directory must be this
	# script's own, never a link or another user's
	pubdir=${HEAD_KEY_PUB%/*}
	if [ -L "$pubdir" ] || { [ -e "$pubdir" ] && [ "$(stat -c %u "$pubdir")" != "$(id -u)" ]; }; then
		log "removing $pubdir: not this script's own directory"
		rm -rf "$pubdir"
	fi
	mkdir -p "$pubdir"
	chmod 755 "$pubdir"
	install_file "$HEAD_KEY.pub" "$HEAD_KEY_PUB" 0644
}

# The login user's authorized_keys, in its HOME (PBX_LOGIN_USER and
# PBX_LOGIN_HOME: pbx passes them through sudo, which resets HOME; a root
# login's own).  On a node body that HOME is under ROOT (sshd reads
# HOME/.ssh/authorized_keys there too): never a file of the host.  Sets
# AK_FILE and AK_USER; returns 1 with why in AK_WHY when there is none.
login_keys_file() {
	AK_USER=${PBX_LOGIN_USER:-$(id -un)}
	home=${PBX_LOGIN_HOME:-${HOME:-}}
	AK_FILE=
	case $home in
	/*) ;;
	*) AK_WHY="no home directory for the login user $AK_USER (PBX_LOGIN_HOME)"; return 1 ;;
	esac
	case $home/ in
	*/../* | */./*) AK_WHY="the login user's home ($home) is not a plain path"; return 1 ;;
	esac
	if [ "$MODE" = direct ]; then
		case $home/ in
		"$ROOT"/*) ;;
		*) AK_WHY="the login user's home ($home) is outside this node body ($ROOT)"; return 1 ;;
		esac
	fi
	AK_FILE=$home/.ssh/authorized_keys
}

# Whether the head's key is published: the file and its directory are
# this script's user's (root's on a VM: what the head's bootstrap wrote
# through NFS), not a link; anything a task could have put in SHARED is not.
head_key_published() {
	pubdir=${HEAD_KEY_PUB%/*}
	me=$(id -u)
	[ -r "$HEAD_KEY_PUB" ] && [ ! -L "$pubdir" ] && [ ! -L "$HEAD_KEY_PUB" ] &&
		[ "$(stat -c %u "$pubdir")" = "$me" ] && [ "$(stat -c %u "$HEAD_KEY_PUB")" = "$me" ]
}

# Authorizes the head's key for the login user (PBX_HEAD_PBX=1), or drops
# it (otherwise); the file's other lines are kept as they are.  The head
# reads its key from its own disk, never back from SHARED, where a task
# could have put its own (docs/SECURITY.md, "The head's control state");
# a compute node reads what the head published.  Either way the one line
# is read without following a link or blocking on a FIFO (read_small).
head_key_authorize() {
	want=
	if [ "${PBX_HEAD_PBX:-0}" = 1 ] && [ "$ROLE" = head ]; then
		src=$HEAD_KEY.pub
		want=$(read_small "$src")
	elif [ "${PBX_HEAD_PBX:-0}" = 1 ]; then
		src=$HEAD_KEY_PUB
		# a compute node's bootstrap runs beside the head's: wait for it
		waited=0
		while ! head_key_published && [ "$waited" -lt "${PBX_NFS_WAIT:-300}" ]; do
			sleep 1
			waited=$((waited + 1))
		done
		head_key_published || die "the head published no key ($HEAD_KEY_PUB, by root, in a directory of root's) in ${waited} s"
		want=$(read_small "$src")
	fi
	if [ "${PBX_HEAD_PBX:-0}" = 1 ]; then
		want=${want%%"$NL"*}
		case $want in
		"ssh-ed25519 "*" $HEAD_KEY_TAG") ;;
		*) die "$src is not this cluster's head key" ;;
		esac
		[ "$(printf %s "$want" | tr -cd 'A-Za-z0-9+/= :.@_-')" = "$want" ] ||
			die "$src holds characters no key has"
	fi
	if ! login_keys_file; then
		[ -z "$want" ] || die "$AK_WHY"
		return 0    # nothing to add, and no file of the user's to look at
	fi
	[ -n "$want" ] || grep -q " $HEAD_KEY_TAG\$" "$AK_FILE" 2>/dev/null || return 0
	dir=${AK_FILE%/*}
	mkdir -p "$dir"
	chmod 700 "$dir"
	begin_new "$AK_FILE"
	{
		[ ! -r "$AK_FILE" ] || awk -v tag="$HEAD_KEY_TAG" '$NF != tag' "$AK_FILE"
		[ -z "$want" ] || printf '%s\n' "$want"
	} >"$NEW"
	install_new "$AK_FILE" 0600
	# sshd reads it as the user
	[ "$AK_USER" = "$(id -un)" ] || chown "$AK_USER:" "$dir" "$AK_FILE" ||
		die "chown $AK_USER $AK_FILE failed"
	[ "$CHANGED" = 0 ] || log "the head's key ${want:+is}${want:-is no longer} authorized for $AK_USER"
}

# ---- the user's key (docs/power-saving.md, "On EC2"): the head's pbx,
# which makes nodes for SLURM's power saving, passes the user's public key
# from the cluster's record (PBX_USER_KEY, "TYPE BASE64"), and each node it
# bootstraps authorizes it for the login user, tagged "pbx-user:CLUSTER"
# (a key the record changed replaces the line), so the user's pbx reaches
# a node the head woke whatever key the cloud gave it (EC2: the head's key
# pair only).  The file's other lines are kept.  Without PBX_USER_KEY (the
# user's own pbx, which logs in with that key) the file is left alone.
USER_KEY_TAG=pbx-user:$PBX_CLUSTER
user_key_authorize() {
	key=${PBX_USER_KEY:-}
	[ -n "$key" ] || return 0
	kt=${key%% *}
	kb=${key#* }
	case $kt in '' | *[!a-z0-9.@-]*) die "PBX_USER_KEY is not a public key (its type)" ;; esac
	case $kb in '' | *[!A-Za-z0-9+/=]*) die "PBX_USER_KEY is not a public key (TYPE BASE64)" ;; esac
	[ "$kt $kb" = "$key" ] || die "PBX_USER_KEY is not a public key (TYPE BASE64)"
	login_keys_file || die "$AK_WHY"
	dir=${AK_FILE%/*}
	mkdir -p "$dir"
	chmod 700 "$dir"
	begin_new "$AK_FILE"
	{
		[ ! -r "$AK_FILE" ] || awk -v tag="$USER_KEY_TAG" '$NF != tag' "$AK_FILE"
		printf '%s %s %s\n' "$kt" "$kb" "$USER_KEY_TAG"
	} >"$NEW"
	install_new "$AK_FILE" 0600
	[ "$AK_USER" = "$(id -un)" ] || chown "$AK_USER:" "$dir" "$AK_FILE" ||
		die "chown $AK_USER $AK_FILE failed"
	[ "$CHANGED" = 0 ] || log "the user's key is authorized for $AK_USER"
}

# pbx and its configuration (no credential: pbx finds the head's own
# identity) on the head, and ROOT/usr/local/sbin/pbx-head, which runs it
# with them.  HEAD_PBX is pbx-head; empty when there is none (autostop
# then stops the cluster instead of deleting it).
head_pbx_install() {
	HEAD_PBX=
	[ "$ROLE" = head ] && [ "${PBX_HEAD_PBX:-0}" = 1 ] || return 0
	[ -r "$STAGE_DIR/head-config.yaml" ] || die "no head-config.yaml in PBX_STAGE ($STAGE_DIR)"
	ensure_parent "$ROOT/etc/pbx/head-config.yaml"
	install_file "$STAGE_DIR/head-config.yaml" "$ROOT/etc/pbx/head-config.yaml" 0600
	if [ "$MODE" = direct ]; then
		[ -x "${PBX_SELF_BIN:-}" ] || die "PBX_SELF_BIN (${PBX_SELF_BIN:-}) is not an executable file"
		bin=$PBX_SELF_BIN
	else
		[ -f "$STAGE_DIR/pbx" ] || die "no pbx in PBX_STAGE ($STAGE_DIR)"
		if ! staged_for_here pbx; then
			log "pbx not installed: built on '$built', this head is '$here': autostop stops the cluster instead of deleting it"
			return 0
		fi
		ensure_pkgs "pbx's runtime" "$PBX_PKGS"
		install_file "$STAGE_DIR/pbx" "$ROOT/usr/local/lib/pbx/pbx" 0755
		bin=$ROOT/usr/local/lib/pbx/pbx
		"$bin" version >/dev/null || die "pbx does not run on this head (ldd $bin)"
	fi
	HEAD_PBX=$ROOT/usr/local/sbin/pbx-head
	ensure_parent "$HEAD_PBX"
	begin_new "$HEAD_PBX"
	{
		echo "#!/bin/sh"
		echo "# pbx-head - pbx on the head of cluster $PBX_CLUSTER, as the head's own cloud"
		echo "# identity and with the head's own key: written by pbx's bootstrap"
		echo "# (templates/bootstrap.sh; docs/head-identity.md).  Run it as root.  It runs"
		echo "# the head's own commands itself (PBX_THIS_NODE), the other nodes' over SSH."
		printf 'exec env -u GOOGLE_APPLICATION_CREDENTIALS -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \\\n'
		printf '\t-u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_EC2_METADATA_DISABLED -u GCE_METADATA_HOST \\\n'
		printf '\t-u AWS_EC2_METADATA_SERVICE_ENDPOINT -u SSH_AUTH_SOCK'
		for kv in "HOME=$HEAD_HOME" "PBX_HOME=$HEAD_HOME" "CLOUDSDK_CONFIG=$HEAD_HOME/gcloud" \
			"PBX_CONFIG=$ROOT/etc/pbx/head-config.yaml" "PBX_THIS_NODE=$NODE" \
			${ROOT:+"PBX_BODY_ROOT=$ROOT"} ${ROOT:+"PBX_BODY_SHARED=$SHARED"} \
			$(body_port_env) $(identity_env) $(head_train_env); do
			sq "${kv#*=}"
			printf ' %s=%s' "${kv%%=*}" "$SQ"
		done
		sq "$bin"
		printf ' %s "$@"\n' "$SQ"
	} >"$NEW"
	install_new "$HEAD_PBX" 0755
	head_pbx_munge_key
}

# The cluster's munge key where the head's pbx keeps it (its home's
# clusters/CLUSTER/munge.key, as the user's pbx does): a start the head
# runs (power saving) stages the same key, not a new one.
head_pbx_munge_key() {
	dir=$HEAD_HOME/clusters/$PBX_CLUSTER
	mkdir -p "$dir"
	chmod 700 "$HEAD_HOME/clusters" "$dir"
	install_file "$STAGE_DIR/munge.key" "$dir/munge.key" 0400
}

# A node body's SLURM ports as this bootstrap has them, for the head's pbx,
# whose cluster directory is not the user's (src/cluster/discover.c; with
# PBX_BODY_SHARED, the shared directory); nothing on a VM.
body_port_env() {
	[ "$MODE" = direct ] || return 0
	case $CONF_CTLD_PORT in
	'' | *[!0-9]*) ;;
	*) echo "PBX_BODY_PORT_BASE=$CONF_CTLD_PORT" ;;
	esac
}

# pbx-train as installed above, for the nodes the head's pbx makes (power
# saving): pbx finds it beside itself only in a build tree (PBX_TRAIN_BIN,
# src/util/proc.c); its CUDA module is found from there (../lib/pbx).
head_train_env() {
	[ "$MODE" = systemd ] && [ -x "$ROOT/usr/local/bin/pbx-train" ] || return 0
	echo "PBX_TRAIN_BIN=$ROOT/usr/local/bin/pbx-train"
}

# The metadata server (Compute Engine) or IMDS (EC2) of a node body: its
# own address, which ROOT/etc/hosts names as a VM's does; a VM finds them
# by name.  Prints the environment pbx needs for it (nothing on a VM).
identity_env() {
	[ "$MODE" = direct ] || return 0
	case ${PBX_CLOUD:-} in
	gce) a=$(awk '$2 == "metadata.google.internal" { print $1; exit }' "$ROOT/etc/hosts" 2>/dev/null)
		[ -z "$a" ] || echo "GCE_METADATA_HOST=$a" ;;
	aws) a=$(awk '$2 == "instance-data" { print $1; exit }' "$ROOT/etc/hosts" 2>/dev/null)
		[ -z "$a" ] || echo "AWS_EC2_METADATA_SERVICE_ENDPOINT=http://$a" ;;
	esac
}

if [ "$ROLE" = head ]; then
	[ "${PBX_HEAD_PBX:-0}" = 0 ] || head_key_make
	head_key_authorize
fi
head_pbx_install

# ---- power saving (docs/power-saving.md): SLURM's ResumeProgram,
# SuspendProgram and PrologSlurmctld (pbx-resume, pbx-suspend, pbx-ready),
# which pbx stages when a node group has min:, go where
# SlurmUser can run them (the stage is root's alone).  On a cloud they run
# the head's pbx (pbx-head) as root: on a VM, where SlurmUser is slurm, a
# sudo rule allows it that one command for this cluster, and the programs'
# log is its own.
POWER_SUDOERS=$ROOT/etc/sudoers.d/pbx-power
power_install() {
	[ "$ROLE" = head ] || return 0
	for p in pbx-resume pbx-suspend pbx-ready; do
		if [ -r "$STAGE_DIR/$p" ]; then
			install_file "$STAGE_DIR/$p" "$ROOT/usr/local/lib/pbx/$p" 0755
		else
			rm -f "$ROOT/usr/local/lib/pbx/$p"
		fi
	done
	if [ "$SLURM_USER" = root ] || [ -z "$HEAD_PBX" ] || [ ! -r "$STAGE_DIR/pbx-resume" ]; then
		rm -f "$POWER_SUDOERS"
		return 0
	fi
	log=$ROOT/var/log/pbx-power.log
	[ -e "$log" ] || : >"$log"
	{ chown "$SLURM_USER:" "$log" && chmod 640 "$log"; } || die "chown $SLURM_USER $log failed"
	command -v visudo >/dev/null || ensure_pkgs "power saving's sudo rule" sudo
	ensure_parent "$POWER_SUDOERS"
	begin_new "$POWER_SUDOERS"
	{
		echo "# SLURM's power saving for cluster $PBX_CLUSTER: written by pbx's bootstrap"
		printf '%s ALL=(root) NOPASSWD: %s -q cluster power %s resume *, %s -q cluster power %s suspend *\n' \
			"$SLURM_USER" "$HEAD_PBX" "$PBX_CLUSTER" "$HEAD_PBX" "$PBX_CLUSTER"
	} >"$NEW"
	visudo -cqf "$NEW" || die "visudo refused the power-saving rule ($NEW)"
	install_new "$POWER_SUDOERS" 0440
}
power_install

# the user's key before slurmd: once slurmd runs SLURM starts jobs here and
# the user may reach this node (`exec -n`), so it must let the user in by
# then (a node the head woke on EC2 holds the head's key pair alone)
user_key_authorize

# ---- preemption (templates/preempt.sh, docs/spot.md): on the compute
# nodes of a spot group, a watcher of the cloud's preemption notice that
# drains the node and sends its jobs SIGTERM.  Elsewhere none runs.  It
# runs before slurmd starts: once slurmd registers, a job may start here
# (a woken node's at once), and a notice before the watcher ran lost that
# job's work (vm.gce-spot: the job ran 2 minutes before the bootstrap got
# here, and the preemption came in between).
if [ -n "$SPOT" ]; then
	stage preempt
	[ -r "$STAGE_DIR/preempt.sh" ] || die "no preempt.sh in PBX_STAGE ($STAGE_DIR)"
	pwatcher=$ROOT/usr/local/sbin/pbx-preempt
	ensure_parent "$pwatcher"
	install_file "$STAGE_DIR/preempt.sh" "$pwatcher" 0755
	pchanged=$CHANGED
	pconf=$ROOT/etc/pbx/preempt.conf
	ensure_parent "$pconf"
	begin_new "$pconf"
	{
		echo "# pbx-preempt's settings, written by pbx's bootstrap"
		for kv in "PBX_MODE=$MODE" "PBX_NODE=$NODE" "PBX_ROOT=$ROOT" "SLURM_CONF=$CONF" \
			"PBX_SPOT=$SPOT" ${PBX_PREEMPT_POLL:+"PBX_PREEMPT_POLL=$PBX_PREEMPT_POLL"}; do
			sq "${kv#*=}"
			echo "${kv%%=*}=$SQ"
		done
	} >"$NEW"
	install_new "$pconf" 0644
	[ "$CHANGED" = 0 ] || pchanged=1
	# a new boot: the notice of an earlier life is over
	rm -f "$ROOT/var/lib/pbx/preempted"
	rm -rf "$ROOT/run/pbx-preempt/acted"
	if [ "$MODE" = systemd ]; then
		watcher_unit pbx-preempt <<UNIT
[Unit]
Description=pbx preempt: a spot preemption notice drains this node and sends its jobs SIGTERM
# stopped before these at a shutdown: its ExecStop (a preemption's) needs them
After=network-online.target remote-fs.target $SLURM_DAEMON.service
Wants=network-online.target

[Service]
ExecStart=$pwatcher watch
ExecStop=$pwatcher stop
TimeoutStopSec=60
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
UNIT
		[ "$CHANGED" = 0 ] || pchanged=1
	fi
	watcher_run pbx-preempt "$pchanged" 0 "$pwatcher" watch
fi

# ---- slurmctld / slurmd
stage "$SLURM_DAEMON"
if [ "$ROLE" = head ]; then
	changed=$conf_changed
	ctld_host=${CONF_CTLD_HOST%%(*}
	short=
	read -r short </proc/sys/kernel/hostname 2>/dev/null || short=$(hostname)
	short=${short%%.*}
	if [ "$ctld_host" != "$short" ]; then
		log "warning: SlurmctldHost is '$ctld_host' but this host is '$short'; slurmctld will refuse to start"
	fi
else
	changed=0
	[ "$conf_changed$gres_changed$defaults_changed" = 000 ] || changed=1
fi
started=0
if [ "$MODE" = systemd ]; then
	if ! systemctl is-active --quiet "$SLURM_DAEMON"; then
		# As in direct mode: slurmd registers at once when slurmctld answers.
		[ "$ROLE" = head ] || wait_for_ctld
		systemctl enable --now "$SLURM_DAEMON" || die "systemctl enable --now $SLURM_DAEMON failed (journalctl -u $SLURM_DAEMON)"
		started=1
	elif [ "$changed" = 1 ]; then
		log "configuration changed: restarting $SLURM_DAEMON"
		systemctl restart "$SLURM_DAEMON" || die "systemctl restart $SLURM_DAEMON failed (journalctl -u $SLURM_DAEMON)"
		started=1
	fi
	if [ "$started" = 1 ]; then
		# Type=simple units report success at once; catch a quick death.
		sleep 1
		if ! systemctl is-active --quiet "$SLURM_DAEMON"; then
			logfile_of "$SLURM_DAEMON"
			die "$SLURM_DAEMON exited right after starting; see journalctl -u $SLURM_DAEMON and $LF"
		fi
	fi
else
	bin=$(command -v "$SLURM_DAEMON")
	pidfile_of "$SLURM_DAEMON"
	if pid_alive "$PF" "$SLURM_DAEMON"; then
		if [ "$changed" = 1 ]; then
			log "configuration changed: restarting $SLURM_DAEMON"
			stop_pid "$SLURM_DAEMON"
		else
			log "$SLURM_DAEMON already running (pid $PID)"
		fi
	fi
	if ! pid_alive "$PF" "$SLURM_DAEMON"; then
		if [ "$ROLE" = head ]; then
			start_direct slurmctld "$bin" -f "$CONF"
		else
			wait_for_ctld
			# A node that power saving makes (remade) that SLURM woke
			# must report a boot after the wake-up, as a machine made
			# then would (slurmctld ignores its registration until
			# then: "Still waiting for boot"); a node body shares this
			# host's boot, so its slurmd reports its own start as the
			# boot (-b)
			if [ "$MODE" = direct ] && remade; then
				start_direct slurmd "$bin" -b -N "$NODE" -f "$CONF"
			else
				start_direct slurmd "$bin" -N "$NODE" -f "$CONF"
			fi
		fi
		started=1
	fi
	if [ "$ROLE" = head ]; then
		# Done means slurmctld answers (asking every 10 ms: only the
		# head asks; the compute nodes wait for this).
		logfile_of slurmctld
		ping_ctld 01 || die "slurmctld does not answer scontrol ping; see ${LF:-its log}"
	fi
fi

# A restarted slurmd may find its node DOWN or DRAINED in slurmctld; resume
# it.  While slurmctld is not up yet (the head bootstraps at the same time)
# this waits a little and then leaves it to ReturnToService.
# A slurmd's first start needs none of this: its node is new to slurmctld
# (and pbx resumes a node that still comes up down); nor does a node whose
# head failed (there is no slurmctld to ask).
if [ "$ROLE" = compute ] && [ "$started" = 1 ] && [ "$first_start" = 0 ] &&
	[ -z "${CTLD_GONE:-}" ]; then
	waited=0
	resumed=0
	while :; do
		st=$(SLURM_CONF=$CONF sinfo -h -n "$NODE" -o %t 2>/dev/null) || st=
		case $st in
		*'*') ;; # not responding (yet): wait for the registration
		idle* | alloc* | mix* | comp* | resv* | plnd* | maint*) break ;;
		down* | drain* | drng* | inval* | fail*)
			if [ "$resumed" = 0 ]; then
				log "node $NODE is $st in slurmctld: resuming"
				SLURM_CONF=$CONF scontrol update nodename="$NODE" state=resume ||
					log "scontrol update nodename=$NODE state=resume failed"
				resumed=1
			fi
			;;
		esac
		if [ "$waited" -ge $((${PBX_RESUME_WAIT:-30} * 100)) ]; then
			log "node $NODE is '${st:-unknown}' in sinfo (slurmctld not reachable yet?)"
			break
		fi
		nap 25   # every node polls at once
		waited=$((waited + 25))
	done
fi

# ---- autostop (templates/autostop.sh, docs/autostop.md): a watcher on
# every node; the head's decides when the cluster has been idle for
# PBX_AUTOSTOP seconds, or its budget is spent (PBX_BUDGET_UNTIL, unix s:
# docs/cost.md), and powers it off, the others obey.  Neither: none runs
# on the head.
if [ -n "${PBX_AUTOSTOP:-}" ]; then
	stage autostop
	is_uint "$PBX_AUTOSTOP" || die "PBX_AUTOSTOP must be a number of seconds (got '$PBX_AUTOSTOP')"
	is_uint "${PBX_BUDGET_UNTIL:-0}" || die "PBX_BUDGET_UNTIL must be a time in unix seconds (got '$PBX_BUDGET_UNTIL')"
	# the head's watcher: off when it has nothing to decide
	head_off=0
	[ "$ROLE" = head ] && [ "$PBX_AUTOSTOP" = 0 ] && [ "${PBX_BUDGET_UNTIL:-0}" = 0 ] && head_off=1
	[ -r "$STAGE_DIR/autostop.sh" ] || die "no autostop.sh in PBX_STAGE ($STAGE_DIR)"
	watcher=$ROOT/usr/local/sbin/pbx-autostop
	ensure_parent "$watcher"
	install_file "$STAGE_DIR/autostop.sh" "$watcher" 0755
	watcher_changed=$CHANGED
	aconf=$ROOT/etc/pbx/autostop.conf
	begin_new "$aconf"
	{
		echo "# pbx-autostop's settings, written by pbx's bootstrap"
		for kv in "PBX_MODE=$MODE" "PBX_ROLE=$ROLE" "PBX_NODE=$NODE" "PBX_ROOT=$ROOT" \
			"PBX_SHARED=$SHARED" "SLURM_CONF=$CONF" "PBX_AUTOSTOP_S=$PBX_AUTOSTOP" \
			"PBX_BUDGET_UNTIL=${PBX_BUDGET_UNTIL:-0}" \
			${PBX_AUTOSTOP_TICK:+"PBX_AUTOSTOP_TICK=$PBX_AUTOSTOP_TICK"} \
			${PBX_AUTOSTOP_BOOT_GRACE:+"PBX_AUTOSTOP_BOOT_GRACE=$PBX_AUTOSTOP_BOOT_GRACE"} \
			${HEAD_PBX:+"PBX_AUTOSTOP_ACTION=${PBX_AUTOSTOP_ACTION:-stop}"} ${HEAD_PBX:+"PBX_BIN=$HEAD_PBX"} \
			${HEAD_PBX:+"PBX_CLUSTER=$PBX_CLUSTER"} ${HEAD_PBX:+"PBX_CLUSTER_ID=$PBX_CLUSTER_ID"} \
			${HEAD_PBX:+"PBX_CLOUD=$PBX_CLOUD"} ${HEAD_PBX:+"PBX_HEAD_INSTANCE=$PBX_HEAD_INSTANCE"}; do
			sq "${kv#*=}"
			echo "${kv%%=*}=$SQ"
		done
	} >"$NEW"
	install_new "$aconf" 0644
	[ "$CHANGED" = 0 ] || watcher_changed=1
	# a new start: no stop request of an earlier life stands
	[ "$ROLE" = compute ] || rm -rf "$SHARED_HERE/.pbx-autostop"
	if [ "$MODE" = systemd ]; then
		watcher_unit pbx-autostop <<UNIT
[Unit]
Description=pbx autostop: powers this cluster off when it is idle
After=network-online.target remote-fs.target $SLURM_DAEMON.service

[Service]
ExecStart=$watcher watch
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
UNIT
		[ "$CHANGED" = 0 ] || watcher_changed=1
	fi
	watcher_run pbx-autostop "$watcher_changed" "$head_off" "$watcher" watch
fi

# a compute node authorizes the head's key once the head has published it
# (its bootstrap runs beside this one; slurmd has waited for it above)
[ "$ROLE" = head ] || head_key_authorize

stage 'done'
