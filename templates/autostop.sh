#!/bin/sh
# autostop.sh - pbx-autostop, the watcher that stops an idle cluster from
# inside, so it works with the user's laptop off (docs/autostop.md).
# templates/bootstrap.sh installs it on every node as
# ROOT/usr/local/sbin/pbx-autostop with its settings in
# ROOT/etc/pbx/autostop.conf, and runs `pbx-autostop watch` under systemd
# (pbx-autostop.service) or, on a node body, as a daemon of the body.
#
# The head decides.  The cluster is idle when SLURM has no job that is not
# finished (squeue lists none) and no SSH session is open on the head (a
# session to a compute node goes through the head too: pbx's ProxyJump).
# Once it has been idle for PBX_AUTOSTOP_S seconds in a row, the head:
#   1. writes why and when to ROOT/var/lib/pbx/autostop.last (its own disk,
#      which a stop keeps; `pbx cluster show` reads it back), and after
#      step 3 which nodes answered (answered=, unanswered=);
#   2. asks every compute node to power off: SHARED/.pbx-autostop/request
#      (the shared directory: NFS from the head) holds the request's id;
#   3. waits (at most PBX_AUTOSTOP_DRAIN_S) for each compute node to answer
#      in SHARED/.pbx-autostop/off/NODE (off/: the answering root's alone,
#      see ANSWER_UID);
#   4. powers itself off.
# A compute node obeys a request made after its watcher started (a node
# that boots again later does not obey the old one): it answers, then
# powers off.  Powering off is the guest's own shutdown: `systemctl
# poweroff` on a VM (Compute Engine then says TERMINATED, EC2 `stopped`;
# the disks stay, no cloud credential is needed), and on a node body the
# end of every process of the body (its sshd included), which is what an
# emulator or the local provider sees as the machine going off.
#
#   pbx-autostop watch      the loop (every PBX_AUTOSTOP_TICK s, default 10)
#   pbx-autostop status     one line: idle for how long, or busy with what
#   pbx-autostop grace      the time (unix s) until which a machine that
#                           has just come up counts as busy
# Settings (autostop.conf, shell assignments written by the bootstrap):
# PBX_MODE, PBX_ROLE, PBX_NODE, PBX_ROOT, PBX_SHARED, SLURM_CONF,
# PBX_AUTOSTOP_S (0: the watcher only obeys requests, never decides),
# PBX_BUDGET_UNTIL (unix s; 0 = none): when the cluster's budget is spent,
# the head stops it then, idle or not (docs/cost.md).  With
# autostop_action: delete, the head's also PBX_AUTOSTOP_ACTION=delete,
# PBX_BIN (pbx-head: pbx with the head's own identity, home and key),
# PBX_CLUSTER, PBX_CLUSTER_ID, PBX_CLOUD and PBX_HEAD_INSTANCE: once every
# task's results are harvested, the head deletes the cluster instead of
# stopping it.  A cloud cluster that saves power has PBX_BIN and PBX_CLUSTER
# too: its stop removes the nodes power saving made first.
set -u

CONF_FILE=${PBX_AUTOSTOP_CONF:-$(dirname "$0")/../../../etc/pbx/autostop.conf}
# shellcheck disable=SC1090 # written by the bootstrap
. "$CONF_FILE" || { echo "pbx-autostop: cannot read $CONF_FILE" >&2; exit 2; }
ROOT=${PBX_ROOT:-}
TICK=${PBX_AUTOSTOP_TICK:-10}
DRAIN=${PBX_AUTOSTOP_DRAIN_S:-120}
REQ_DIR=$PBX_SHARED/.pbx-autostop   # a host path on node bodies, /shared on VMs
STATE_DIR=$ROOT/var/lib/pbx          # the head's own disk, root's alone
HARVESTED_DIR=$STATE_DIR/harvested   # what `pbx harvest` proved home, by package
# The compute nodes' answers: off/ belongs to the uid a compute node's root
# has on the shared disk.  On VMs /shared is NFS exported with root_squash
# (src/cluster/bootstrap_render.c): a node's root writes there as the anonymous
# uid, 65534, which no task can take; on node bodies (no NFS) it is this
# watcher's own uid.  A task can write neither in off/ nor beside it.
ANSWER_DIR=$REQ_DIR/off
if [ "$PBX_MODE" = systemd ]; then ANSWER_UID=${PBX_ANSWER_UID:-65534}; else ANSWER_UID=$(id -u); fi
export SLURM_CONF PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

log() { printf '%s pbx-autostop[%s]: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$PBX_NODE" "$*"; }

# Anything under PBX_SHARED may have been put there by a task: this
# watcher (root) reads a file there only with read_small and writes one
# only through mktemp and mv in a directory of its own (own_dir), so a
# link is never followed and a FIFO never blocks it (docs/SECURITY.md,
# "The head's control state").

# read_small FILE: the first 4 KiB of FILE when it is a regular file,
# else nothing; opened with O_NOFOLLOW|O_NONBLOCK (dd's flags).
read_small() {
	[ -f "$1" ] && [ ! -L "$1" ] || return 0
	dd if="$1" iflag=nofollow,nonblock bs=4096 count=1 2>/dev/null || :
}

# owned_by_me PATH: PATH is a directory or regular file (not a link) of
# this script's user.
owned_by_me() {
	[ ! -L "$1" ] && { [ -d "$1" ] || [ -f "$1" ]; } && [ "$(stat -c %u "$1" 2>/dev/null)" = "$(id -u)" ]
}

# own_dir DIR: DIR is a directory of this script's user, mode 0755; what
# else stood at DIR (a link, a FIFO, someone else's directory) is removed.
own_dir() {
	if [ -e "$1" ] || [ -L "$1" ]; then
		if ! owned_by_me "$1" || [ ! -d "$1" ]; then
			log "removing $1: not this watcher's own directory"
			rm -rf "$1"
		fi
	fi
	mkdir -p "$1" && chmod 0755 "$1" && owned_by_me "$1"
}

# put_file DIR NAME TEXT: DIR/NAME holds TEXT (a line), replaced whole,
# written to a new file of mktemp's (never an existing name) in DIR,
# readable by all (a compute node's root reads the request as the NFS
# export's anonymous uid).
put_file() {
	t=$(mktemp "$1/.new.XXXXXX") || return 1
	{ printf '%s\n' "$3" >"$t" && chmod 0644 "$t" && mv -f "$t" "$1/$2"; } || { rm -f "$t"; return 1; }
}

# answer_dir: a new, empty ANSWER_DIR, mode 0700, of ANSWER_UID (the head
# makes it in its own REQ_DIR before each request).
answer_dir() {
	rm -rf "$ANSWER_DIR" && mkdir -m 0700 "$ANSWER_DIR" && chown "$ANSWER_UID" "$ANSWER_DIR"
}

# The open SSH sessions of this machine (of this body: the descendants of
# its sshd), one per line.  sshd names a session's process "sshd: USER@TTY"
# (notty without a terminal).
ssh_sessions() {
	if [ "$PBX_MODE" = systemd ]; then
		ps -eo args= | grep -E '^sshd: [^ ]+@' || :
		return
	fi
	top=
	read -r top <"$ROOT/run/sshd.pid" 2>/dev/null || :
	[ -n "$top" ] || return 0
	ps -eo pid=,ppid=,args= | awk -v top="$top" '
		{ parent[$1] = $2; line[$1] = $0 }
		END {
			for (p in parent) {
				if (line[p] !~ /^ *[0-9]+ +[0-9]+ +sshd: [^ ]+@/) continue
				for (q = parent[p]; q != "" && q != 0 && q != 1; q = parent[q])
					if (q == top) { print line[p]; break }
			}
		}'
}

# What keeps the cluster busy, or nothing when it is idle.  A squeue that
# fails (slurmctld restarting) counts as busy: never stop on a doubt.
busy_with() {
	jobs=$(squeue -h -o %i 2>/dev/null) || { echo "squeue fails"; return; }
	n=$(printf '%s' "$jobs" | grep -c . || :)
	[ "$n" = 0 ] || { echo "$n job(s) in SLURM"; return; }
	n=$(ssh_sessions | grep -c . || :)
	[ "$n" = 0 ] || echo "$n SSH session(s)"
}

# The compute nodes slurm.conf names (NodeName=..., one per line).
compute_nodes() {
	awk '{ sub(/#.*/, "") } tolower($1) ~ /^nodename=/ {
		n = substr($1, index($1, "=") + 1); if (tolower(n) != "default") print n }' "$SLURM_CONF"
}

# The nodes slurm.conf has State=CLOUD (power saving's), one per line.
cloud_nodes() {
	awk '{ sub(/#.*/, "") } tolower($1) ~ /^nodename=/ && tolower($0) ~ / state=cloud( |$)/ {
		print substr($1, index($1, "=") + 1) }' "$SLURM_CONF"
}

# The nodes of LIST (one per line) SLURM has awake (not powered down,
# "~"), comma-separated.
slurm_awake() {
	sinfo -h -N -o '%N %t' 2>/dev/null | awk -v s="$(echo "$1" | tr '\n' ' ')" '
		BEGIN { n = split(s, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1 }
		($1 in want) && $2 !~ /~$/ && !seen[$1]++ { printf "%s%s", sep, $1; sep = "," }'
}

# Power saving on a cloud (the head's pbx makes those nodes; PBX_BIN is
# pbx-head): they go first, through SLURM, which runs its SuspendProgram
# (the head's pbx deletes them, as after SuspendTime) and records them
# powered down, so the next start finds them asleep where SLURM, the
# cloud and the head's store agree; none is left stopped with its disk.
# At most DRAIN s.  Sets WAIT_NODES to the compute nodes the stop then
# waits for (the others).
suspend_cloud_nodes() {
	WAIT_NODES=$(compute_nodes)
	[ -n "${PBX_BIN:-}" ] || return 0
	sleepers=$(cloud_nodes)
	[ -n "$sleepers" ] || return 0
	WAIT_NODES=$(compute_nodes | grep -vxF "$sleepers" || :)
	awake=$(slurm_awake "$sleepers")
	[ -n "$awake" ] || return 0
	log "powering down the nodes power saving made: $awake"
	scontrol update nodename="$awake" state=power_down_force ||
		{ log "scontrol could not power them down"; return 0; }
	until=$(($(date +%s) + DRAIN))
	while [ -n "$(slurm_awake "$sleepers")" ] && [ "$(date +%s)" -lt "$until" ]; do
		sleep 1
	done
	left=$(slurm_awake "$sleepers")
	[ -z "$left" ] || log "not powered down within $DRAIN s: $left (stopping anyway)"
}

# Power saving on a cloud: a node SLURM has asleep or down may still have
# an instance (a resume killed part-way made it, and SLURM, which has it
# down~, never suspends it), which a stop of the awake nodes alone would
# leave running.  The head's pbx removes every sleeping node's instance it
# finds, whatever SLURM and its store say, before the head goes off.
remove_sleepers() {
	[ -n "${PBX_BIN:-}" ] || return 0
	sleepers=$(cloud_nodes | tr '\n' ' ')
	[ -n "$sleepers" ] || return 0
	mkdir -p "$STATE_DIR"
	# shellcheck disable=SC2086 # node names of pbx's own slurm.conf, split
	if ! "$PBX_BIN" -q cluster power "$PBX_CLUSTER" suspend $sleepers >"$STATE_DIR/sleepers.log" 2>&1; then
		log "removing the sleeping nodes' instances failed: $(grep -v '^ *$' "$STATE_DIR/sleepers.log" | tail -1 | tr -cd '[:print:]' | cut -c1-300)"
	fi
}

# The pids of this body's processes but this one.
body_pids() {
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" != "$$" ] || continue
		if tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -qF "$ROOT/" ||
			tr '\0' '\n' <"$d/environ" 2>/dev/null | grep -qxF "PBX_BODY_ROOT=$ROOT"; then
			echo "$p"
		fi
	done
}

power_off() {
	log "powering off"
	sync
	if [ "$PBX_MODE" = systemd ]; then
		systemctl poweroff
		exit 0
	fi
	# A node body: every process of the body (its root on the command line,
	# or PBX_BODY_ROOT, which its sshd gives every session, in the
	# environment), as the local provider finds them; this one last.
	for sig in TERM KILL; do
		for p in $(body_pids); do
			kill -s "$sig" "$p" 2>/dev/null || :
		done
		[ "$sig" = KILL ] || sleep 2
	done
	exit 0
}

# What of the tasks' results is not home yet, one line, or nothing: the
# tasks whose status line is not in their package's mark, which `pbx
# harvest` writes after bringing everything home (src/jobs/harvest.c) into
# HARVESTED_DIR, on this head's own disk: a task cannot forge it.  A status
# file that is not a plain file, or a package name that is not pbx's,
# counts as not harvested (never delete on a doubt).
not_harvested() {
	n=0
	first=
	for st in "$PBX_SHARED"/pbx/*/tasks/*/status; do
		[ -e "$st" ] || [ -L "$st" ] || continue
		run=${st%/tasks/*}
		pkg=${run##*/}
		line=$(read_small "$st")
		mark=$HARVESTED_DIR/$pkg
		case $pkg in *[!A-Za-z0-9._-]* | .*) mark= ;; esac
		if [ -z "$line" ] || [ -z "$mark" ] || ! owned_by_me "$mark" ||
			! grep -qxF -e "$line" "$mark" 2>/dev/null; then
			n=$((n + 1))
			task=${st%/status}
			# names written on the shared disk by anyone: one line of safe
			# characters, for the record and the log
			[ -n "$first" ] || first="package $(printf %s "${run##*/}" | tr -cd '[:alnum:]._-') task $(printf %s "${task##*/}" | tr -cd '[:alnum:]._-')"
		fi
	done
	[ "$n" = 0 ] || echo "the results of $n task(s) are not harvested (first: $first): 'pbx harvest' brings them home"
}

# autostop_action: delete.  pbx deletes the cluster as the head's own
# identity (docs/head-identity.md), this head's instance last: on success
# this machine ends with it.  Returns when the delete failed, with why in
# DELETE_WHY.
head_delete() {
	log "$1: deleting the cluster"
	# PBX_BIN is pbx-head: pbx with the head's home, configuration and
	# identity (templates/bootstrap/60-head-pbx.sh)
	if "$PBX_BIN" -q cluster stop --id "$PBX_CLUSTER_ID" --self "$PBX_HEAD_INSTANCE" \
		"$PBX_CLUSTER" >"$STATE_DIR/delete.log" 2>&1; then
		log "the cluster is deleted"
		power_off
	fi
	DELETE_WHY=$(grep -v '^ *$' "$STATE_DIR/delete.log" | tail -1 | tr -cd '[:print:]' | cut -c1-300)
	log "deleting failed: $DELETE_WHY"
}

# The head's stop (REASON: why, one line): with autostop_action: delete
# and every result home, the cluster is deleted; otherwise (or when that
# fails): record, ask the compute nodes, wait for them, go off.
head_stop() {
	if [ "${PBX_AUTOSTOP_ACTION:-stop}" = delete ]; then
		left=$(not_harvested)
		if [ -z "$left" ]; then
			head_delete "$1"
			left="deleting failed: $DELETE_WHY"
		fi
		set -- "$1; stopped, not deleted: $left"
	fi
	mkdir -p "$STATE_DIR"
	suspend_cloud_nodes
	remove_sleepers
	id=$(date +%s)
	mkdir -p "$STATE_DIR"
	printf 'stopped_at=%s\nreason=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" \
		>"$STATE_DIR/autostop.last.new"
	mv "$STATE_DIR/autostop.last.new" "$STATE_DIR/autostop.last"
	if own_dir "$REQ_DIR" && answer_dir; then
		put_file "$REQ_DIR" request "$id" || log "cannot write the request in $REQ_DIR"
	else
		log "cannot make $REQ_DIR: the compute nodes are not asked"
	fi
	log "$1: stopping the cluster (request $id)"
	until=$(($(date +%s) + DRAIN))
	while [ "$(date +%s)" -lt "$until" ]; do
		left=
		for n in $WAIT_NODES; do
			[ "$(read_small "$ANSWER_DIR/$n")" = "$id" ] || left="$left $n"
		done
		[ -n "$left" ] || break
		sleep 1
	done
	[ -z "${left:-}" ] || log "not answered within $DRAIN s:$left (powering off anyway)"
	# which nodes answered, and which did not, beside why (kept on this
	# disk: `pbx cluster exec NAME -- cat /var/lib/pbx/autostop.last`)
	answered=
	for n in $WAIT_NODES; do
		case " ${left:-} " in *" $n "*) ;; *) answered="$answered $n" ;; esac
	done
	{ cat "$STATE_DIR/autostop.last" && printf 'answered=%s\nunanswered=%s\n' "${answered# }" "${left# }"; } \
		>"$STATE_DIR/autostop.last.new" && mv "$STATE_DIR/autostop.last.new" "$STATE_DIR/autostop.last"
	sleep 3   # the last answers' shutdowns under way
	power_off
}

# A compute node: obeys a request newer than this watcher, made by root
# (the head's watcher: the file and its directory are root's; a task's
# own are not obeyed once tasks do not run as root, docs/SECURITY.md).
compute_check() {
	owned_by_me "$REQ_DIR" && owned_by_me "$REQ_DIR/request" || return 0
	id=$(read_small "$REQ_DIR/request")
	case $id in '' | *[!0-9]*) return 0 ;; esac
	[ "$id" -ge "$STARTED" ] || return 0
	log "the head asks to power off (request $id)"
	put_file "$ANSWER_DIR" "$PBX_NODE" "$id" || log "cannot answer in $ANSWER_DIR"
	power_off
}

# A VM that has just booted (a start by pbx, or from the cloud's console)
# is not idle: pbx needs the time to reach it and repair it, and a
# cluster powered on again must not power off before.  The idle count
# starts PBX_AUTOSTOP_BOOT_GRACE s (default 600: twice the default
# boot_timeout) after the machine came up at the earliest: after the
# first watcher since boot started (systemd starts it with sshd), whose
# time UP_MARK keeps (/run: a tmpfs, empty at every boot), so a watcher
# the bootstrap restarts gets no new grace.  Not from the kernel's start
# (/proc/uptime): a machine that took longer to come up than the grace
# (a slow boot; `vm.gce-booted`'s VMs came up in 550 s under load) then
# powered off again before pbx could reach it.
# A node body's watcher is started by the bootstrap itself: no grace.
UP_MARK=${PBX_AUTOSTOP_UP_MARK:-/run/pbx-autostop.up}
booted_until() {
	if [ "$PBX_MODE" = systemd ]; then
		up=$(cat "$UP_MARK" 2>/dev/null) || up=
		case $up in
		'' | *[!0-9]*)
			up=$(date +%s)
			echo "$up" 2>/dev/null >"$UP_MARK" || log "cannot write $UP_MARK: the grace counts from now" >&2
			;;
		esac
		echo $((up + ${PBX_AUTOSTOP_BOOT_GRACE:-600}))
	else
		echo 0
	fi
}

watch() {
	STARTED=$(date +%s)
	BOOTED_UNTIL=$(booted_until)
	idle_since=
	log "watching (role $PBX_ROLE, autostop after ${PBX_AUTOSTOP_S} s idle; 0: off; budget until ${PBX_BUDGET_UNTIL:-0}; 0: none)"
	while :; do
		if [ "$PBX_ROLE" = compute ]; then
			compute_check
		elif [ "${PBX_BUDGET_UNTIL:-0}" -gt 0 ] && [ "$(date +%s)" -ge "$PBX_BUDGET_UNTIL" ]; then
			head_stop "budget spent (budget: of the template, docs/cost.md): pbx set $(date -u -d "@$PBX_BUDGET_UNTIL" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo "$PBX_BUDGET_UNTIL") as the time to power off, with every node running"
		elif [ "$PBX_AUTOSTOP_S" -gt 0 ]; then
			why=$(busy_with)
			now=$(date +%s)
			[ "$now" -ge "$BOOTED_UNTIL" ] || why="just booted"
			if [ -n "$why" ]; then
				idle_since=
			elif [ -z "$idle_since" ]; then
				idle_since=$now
			elif [ $((now - idle_since)) -ge "$PBX_AUTOSTOP_S" ]; then
				head_stop "idle for $PBX_AUTOSTOP_S s (autostop): no SLURM job, no SSH session"
			fi
		fi
		sleep "$TICK"
	done
}

case ${1:-} in
watch) watch ;;
grace) booted_until ;;
status)
	why=$(busy_with)
	echo "${why:-idle}"
	;;
*) echo "usage: pbx-autostop watch|status|grace" >&2; exit 2 ;;
esac
