# shellcheck shell=sh
# templates/bootstrap/40-task-user.sh - the task user and the node's
# environment file (etc/pbx/env.sh).
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
