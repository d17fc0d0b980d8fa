# shellcheck shell=sh
# templates/bootstrap/lib.sh - the bootstrap's shared helpers: files written
# only when they change, directories made at once, daemons started and stopped
# by pid file or unit, slurm.conf read without forks.  Defines functions (and
# the few variables they keep).
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# nap CC: wait CC hundredths of a second (two digits, one `sleep`).  The
# polling loops count hundredths in `waited`.
nap() { sleep "0.$1" 2>/dev/null || sleep 1; }

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
# process called NAME, of this node (guards against reused pids).
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
	# node bodies share one host and its pids: a pid the old daemon had may
	# be another body's daemon of the same name now; this body's names its
	# root in its command line (-f ROOT/etc/slurm/..., --socket=ROOT/...,
	# ROOT/usr/local/sbin/pbx-autostop)
	if [ -n "$ROOT" ] && [ -r "/proc/$p/cmdline" ]; then
		tr '\000' ' ' <"/proc/$p/cmdline" | grep -qF "$ROOT/" || return 1
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

# watcher_unit NAME: ROOT/etc/systemd/system/NAME.service for one of pbx's
# watchers (pbx-preempt, pbx-autostop), as pbx rendered it for this node
# (PBX_STAGE/NAME-NODE.service); CHANGED says whether it changed, and then
# systemd reloads its units.
watcher_unit() {
	[ -r "$STAGE_DIR/$1-$NODE.service" ] || die "no $1-$NODE.service in PBX_STAGE ($STAGE_DIR)"
	install_text "$STAGE_DIR/$1-$NODE.service" "$ROOT/etc/systemd/system/$1.service"
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
	last_words "$lf"
	die "$name did not start (exit status $rc; no live pid in $pf${LAST_WORDS:+: $LAST_WORDS}); see ${lf:-$START_LOG}"
}

# last_words LOG: its last 15 lines on stderr, and LAST_WORDS its last
# "error:" or "fatal:" line (a daemon's reason to die, for the one-line
# message pbx shows), or empty
last_words() {
	LAST_WORDS=
	[ -n "$1" ] && [ -r "$1" ] || return 0
	log "last lines of $1:"
	tail -n 15 "$1" >&2 || true
	LAST_WORDS=$(tail -n 50 "$1" | grep -E 'fatal:|error:' | tail -n 1 | cut -c 1-300)
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

# install_text SRC DEST [MORE]: install_new of a copy of the text file SRC
# and after it, when named, of MORE (mode 0644), copied by the shell (no
# fork: files pbx rendered into the stage).
install_text() {
	ensure_parent "$2"
	begin_new "$2"
	{
		copy_text "$1"
		[ -z "${3:-}" ] || copy_text "$3"
	} >"$NEW"
	install_new "$2" 0644
}
copy_text() {
	while IFS= read -r tl || [ -n "$tl" ]; do
		printf '%s\n' "$tl"
	done <"$1"
}

# watcher_install NAME SCRIPT: PBX_STAGE/SCRIPT installed as pbx's watcher
# ROOT/usr/local/sbin/NAME (WPATH = its path); CHANGED as install_new.
watcher_install() {
	[ -r "$STAGE_DIR/$2" ] || die "no $2 in PBX_STAGE ($STAGE_DIR)"
	WPATH=$ROOT/usr/local/sbin/$1
	ensure_parent "$WPATH"
	install_file "$STAGE_DIR/$2" "$WPATH" 0755
}

# settings_file FILE WATCHER KEY=VALUE...: FILE holds the settings of
# pbx's watcher WATCHER, each VALUE quoted for sh; CHANGED as install_new.
settings_file() {
	sf=$1 sw=$2
	shift 2
	ensure_parent "$sf"
	begin_new "$sf"
	{
		echo "# $sw's settings, written by pbx's bootstrap"
		for kv; do
			sq "${kv#*=}"
			echo "${kv%%=*}=$SQ"
		done
	} >"$NEW"
	install_new "$sf" 0644
}

# table_line FILE FIELD KEY LINE: FILE (a table such as /etc/exports or
# /etc/fstab) with its lines whose field FIELD is KEY replaced by LINE, at
# its end; CHANGED as install_new.
table_line() {
	ensure_parent "$1"
	begin_new "$1"
	{
		[ ! -r "$1" ] || awk -v f="$2" -v k="$3" '$f != k' "$1"
		echo "$4"
	} >"$NEW"
	install_new "$1" 0644
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
