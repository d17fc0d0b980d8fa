# shellcheck shell=sh
# templates/bootstrap/40-task-user.sh - the task user and the node's
# environment file (etc/pbx/env.sh, which pbx renders).
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---- the task user (docs/SECURITY.md, "Who is who on a node"): pbx
# submits every task as TASK_USER (sbatch --uid), never as root, so a task
# cannot reach what root has on a node: the head's cloud identity, its
# control state, munge's key.  The same uid on every node (the shared
# directory is NFS).  On a VM it is made here; on a node body it is this
# host's user (slurmd sets the job's uid on this host), and tasks run as
# it where it can reach the body's files: a node body whose directories
# lie under a private one (a PBX_HOME in /root) runs its tasks as root,
# and says so.
TASK_USER=pbx-task # PBX_TASK_USER in src/cluster/bootstrap_render.h
TASK_UID=2850
task_user_make() {
	if getent passwd "$TASK_USER" >/dev/null 2>&1; then
		return 0
	fi
	taken=$(getent passwd "$TASK_UID" 2>/dev/null | cut -d: -f1)
	# (TASK_USER itself: another node body's bootstrap on this host made
	# it since the look above)
	[ "$taken" != "$TASK_USER" ] || return 0
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

# env.sh as pbx rendered it for this node (PBX_STAGE/env-NODE.sh:
# src/cluster/bootstrap_render.c, every value quoted there), and where
# tasks run as the task user the cluster's task-user.env.sh after it
# (PBX_TASK_USER: pbx submits tasks as that user, src/jobs/arrays.c; none:
# as root)
for staged_env in "env-$NODE.sh" ${TASK_USER_ON:+task-user.env.sh}; do
	[ -r "$STAGE_DIR/$staged_env" ] || die "no $staged_env in PBX_STAGE ($STAGE_DIR)"
done
install_text "$STAGE_DIR/env-$NODE.sh" "$ENV_SH" ${TASK_USER_ON:+"$STAGE_DIR/task-user.env.sh"}
