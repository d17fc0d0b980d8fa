# shellcheck shell=sh
# templates/bootstrap/20-dirs.sh - every directory this node needs, made at
# once.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

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
