#!/bin/sh
# pbx node bootstrap, the driver: brings one node of a pbx SLURM cluster up,
# down, reports its daemons, or installs what an image needs.  pbx uploads
# it with its parts (templates/bootstrap/: lib.sh, actions.sh and one file
# per stage of `up`, NN-name.sh, run in the order listed below) and the
# data it rendered for the cluster, and runs it as root on every node:
#
#     sh STAGE/bootstrap.sh up|down|status|install
#
# The contract (every PBX_* input, what the stage holds, the files written,
# stdout and exit status) is written once, in templates/README.md.
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

# The parts: beside this script, in bootstrap/ (the stage pbx uploads, or
# templates/ in a source tree).
case $0 in
*/*) PARTS=${0%/*}/bootstrap ;;
*) PARTS=bootstrap ;;
esac
[ -r "$PARTS/lib.sh" ] || die "no $PARTS/lib.sh beside bootstrap.sh (pbx ships the whole stage)"
# shellcheck source=templates/bootstrap/lib.sh
. "$PARTS/lib.sh"
# shellcheck source=templates/bootstrap/actions.sh
. "$PARTS/actions.sh"

# ---------------------------------------------------------------- packages

# What systemd mode apt-gets (Debian 12 / Ubuntu 22.04 names), one list a
# line: tests/vm/image.sh bakes these very lists into prebaked images, and
# bootstrap.train_pkgs checks TRAIN_PKGS against what pbx-train links, and
# bootstrap.pbx_pkgs PBX_PKGS against what pbx links.
HEAD_PKGS="slurmctld slurm-client munge nfs-kernel-server"
COMPUTE_PKGS="slurmd slurm-client munge nfs-common"
TRAIN_PKGS="libopenblas0 libgomp1 libyaml-0-2 libjansson4 libssl3 libprotobuf-c1 zlib1g openmpi-bin"
# tasks' environments (templates/pbx-env.sh: a venv of python3, or a
# container image that ch-run runs; zstd unpacks their archives), on
# compute nodes
ENV_PKGS="python3 python3-venv charliecloud-runtime zstd"
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

[ "$ACTION" = status ] && do_status
[ "$ACTION" = down ] && do_down
[ "$ACTION" = install ] && do_install

# ---------------------------------------------------------------- up
# Each stage of up is a file of its own, run in this order in this shell
# (so each sees what the ones before it set: README.md lists it).
for part in 10-inputs 15-install 20-dirs 25-munge 30-config 35-software 40-task-user \
	45-hosts 50-shared 55-head-key 60-head-pbx 65-power 70-user-key 75-preempt 80-slurm \
	85-autostop; do
	[ -r "$PARTS/$part.sh" ] || die "no $PARTS/$part.sh beside bootstrap.sh (pbx ships the whole stage)"
	# shellcheck source=/dev/null # each part is checked on its own (tests/bootstrap/lint.sh)
	. "$PARTS/$part.sh"
done

# a compute node authorizes the head's key once the head has published it
# (its bootstrap runs beside this one; slurmd has waited for it above)
[ "$ROLE" = head ] || head_key_authorize

stage 'done'
