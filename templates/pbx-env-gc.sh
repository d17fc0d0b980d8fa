#!/bin/sh
# pbx-env-gc.sh - `pbx cluster gc` (docs/environments.md, "Removing old
# environments"): the environments (templates/pbx-env.sh) that no package
# on the cluster refers to, removed from the shared disk and from a node's
# local disk.  POSIX sh.  pbx sends it with its input on the command line,
# as the user tasks run as (the files are theirs; never as root, so that
# nothing a task wrote can turn a removal elsewhere).
#
#   pbx-env-gc.sh shared DRY KEY...   on the head: SHARED/pbx/envs
#   pbx-env-gc.sh local DRY KEY...    on a node: PBX_ENV_DIR/pbx-env-UID
#
# KEY... are the environments to keep: those a run's env/status names
# READY, which pbx reads first on the head as root (the task user may
# not list SHARED/pbx: src/jobs/envgc.c).
#
# DRY is 1 to say what would go and remove nothing, 0 to remove.
# Environment in: PBX_SHARED (shared), PBX_ENV_DIR (local; default
# /var/tmp, as pbx-env.sh).
# Output, one line each: `keep KEY` (shared: each KEY that is one),
# `gone KIND KEY BYTES [WHERE]` (KIND env: an
# archive and its checksum; local: an unpacked copy, WHERE the host and
# the directory's device:inode, the same for nodes sharing it), `busy KEY` (its lock
# is held: a build or an unpack is under way; left).
set -u

die() {
	printf 'pbx-env-gc: %s\n' "$1" >&2
	exit 1
}

# is_key S: S is an environment key (sha256 hex)
is_key() {
	case $1 in *[!0-9a-f]* | '') return 1 ;; esac
	[ ${#1} -eq 64 ]
}

# bytes PATH...: their size on disk, in bytes
bytes() {
	du -sb "$@" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'
}

# gone_if_free DIR KEY KIND PATH...: removes PATH... unless KEY's lock in
# DIR is held (a build or unpack under way), saying which (and WHERE, when
# set: which disk)
gone_if_free() {
	gd=$1 gk=$2 gkind=$3
	shift 3
	size=$(bytes "$@")
	if [ "$DRY" = 1 ]; then
		[ -e "$gd/.$gk.lock" ] && ! flock -n "$gd/.$gk.lock" true && { echo "busy $gk"; return; }
		echo "gone $gkind $gk $size${WHERE:+ $WHERE}"
		return
	fi
	if [ -e "$gd/.$gk.lock" ] && [ ! -L "$gd/.$gk.lock" ]; then
		flock -n "$gd/.$gk.lock" rm -rf "$@" || { echo "busy $gk"; return; }
		rm -f "$gd/.$gk.lock"
	else
		rm -rf "$@"
	fi
	echo "gone $gkind $gk $size${WHERE:+ $WHERE}"
}

shared() {
	envs=$PBX_SHARED/pbx/envs
	for k in "$@"; do ! is_key "$k" || echo "keep $k"; done
	[ -d "$envs" ] && [ ! -L "$envs" ] || exit 0
	for a in "$envs"/*.tar.zst "$envs"/*.tar.gz; do
		[ -f "$a" ] || continue
		k=${a##*/}
		k=${k%.tar.*}
		is_key "$k" || continue
		case " $* " in *" $k "*) continue ;; esac
		# the checksum first: a gc killed between the two leaves an
		# archive without one, which a build makes again and the next gc
		# takes; the other way round a lone checksum would stay forever
		gone_if_free "$envs" "$k" env "$envs/$k.sha256" "$a"
	done
	# what a build cut short left (a part archive a day old)
	[ "$DRY" = 1 ] || find "$envs" -maxdepth 1 -name '.*.??????' -type f -mmin +1440 -delete 2>/dev/null
	return 0
}

local_copies() {
	dir=${PBX_ENV_DIR:-/var/tmp}/pbx-env-$(id -u)
	[ -d "$dir" ] && [ ! -L "$dir" ] || exit 0
	# nodes that share a disk (node bodies on one machine) share this
	# directory: one pass at a time, and each copy said with its disk
	WHERE=$(hostname):$(stat -c %d:%i "$dir") || die "cannot read $dir"
	exec 7>"$dir/.gc.lock" || die "cannot open $dir/.gc.lock"
	flock 7 || die "cannot lock $dir/.gc.lock"
	for d in "$dir"/*; do
		if [ ! -d "$d" ] || [ -L "$d" ]; then continue; fi
		k=${d##*/}
		is_key "$k" || continue
		case " $* " in *" $k "*) continue ;; esac
		gone_if_free "$dir" "$k" local "$d"
	done
}

case ${1:-} in
shared)
	[ -n "${PBX_SHARED:-}" ] || die "PBX_SHARED is not set"
	DRY=${2:-1}
	shift 2
	shared "$@"
	;;
local)
	DRY=${2:-1}
	shift 2
	local_copies "$@"
	;;
*) die "usage: pbx-env-gc.sh shared|local DRY KEY..." ;;
esac
