# shellcheck shell=sh
# templates/bootstrap/30-config.sh - stage config: slurm.conf (with @ROOT@
# made ROOT), the gres.conf pbx rendered for this node, and slurmd's defaults
# (systemd).
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---- config
stage config
begin_new "$CONF"
render_conf "$STAGE_DIR/slurm.conf" "$NEW"
install_new "$CONF" 0644
conf_changed=$CHANGED

# gres.conf as pbx rendered it for this node (PBX_STAGE/gres-NODE.conf):
# File= names the GPUs the cluster template promises, /dev/nvidiaN on a VM
# (which must have them) or stand-in device files on a node body.  slurmd
# binds and exports GPU indices (CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS) only
# for files that are character devices: each stand-in is a link to
# /dev/null (no mknod, so no privilege needed), and the index is the number
# its name ends in, as for /dev/nvidiaN.
if [ "$MODE" = systemd ]; then
	if [ "$GPUS" -gt 0 ]; then
		command -v nvidia-smi >/dev/null 2>&1 ||
			die "the cluster template promises $GPUS GPU(s) but this node has no nvidia-smi (GPU driver missing: use an image with NVIDIA drivers)"
		smi=$(nvidia-smi -L) || die "nvidia-smi -L failed: GPU driver not working"
		found=$(printf '%s\n' "$smi" | grep -c '^GPU ') || found=0
		[ "$found" -ge "$GPUS" ] ||
			die "the cluster template promises $GPUS GPU(s) but nvidia-smi -L lists $found"
	fi
else
	devs_changed=0
	i=0
	while [ "$i" -lt "$GPUS" ]; do
		if [ ! -L "$ROOT/dev/nvidia$i" ]; then
			# (a plain file left by an older bootstrap gave no
			# indices; a slurmd that loaded it restarts below)
			[ ! -e "$ROOT/dev/nvidia$i" ] || rm -f "$ROOT/dev/nvidia$i"
			ln -s /dev/null "$ROOT/dev/nvidia$i"
			devs_changed=1
		fi
		i=$((i + 1))
	done
fi
[ -r "$STAGE_DIR/gres-$NODE.conf" ] || die "no gres-$NODE.conf in PBX_STAGE ($STAGE_DIR)"
install_text "$STAGE_DIR/gres-$NODE.conf" "$GRES_CONF"
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
