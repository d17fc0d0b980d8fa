# shellcheck shell=sh
# templates/bootstrap/10-inputs.sh - up's own inputs (PBX_STAGE, PBX_GPUS,
# PBX_SPOT, PBX_SHARED, ...), checked before anything is touched, and the lock
# that keeps two bootstraps of one node apart.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

STAGE_DIR=${PBX_STAGE:-}
[ -n "$STAGE_DIR" ] || die "PBX_STAGE is not set"
[ -r "$STAGE_DIR/slurm.conf" ] || die "no slurm.conf in PBX_STAGE ($STAGE_DIR)"
[ -r "$STAGE_DIR/munge.key" ] || die "no munge.key in PBX_STAGE ($STAGE_DIR)"
GPUS=${PBX_GPUS:-0}
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
