# shellcheck shell=sh
# templates/bootstrap/65-power.sh - SLURM's power saving programs on the head
# and their sudo rule.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

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
