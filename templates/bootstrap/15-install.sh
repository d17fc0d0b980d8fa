# shellcheck shell=sh
# templates/bootstrap/15-install.sh - stage install: what this node's role
# needs (systemd: apt-get; direct: only a check) and, on a compute node, the
# cgroup check.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# cgroup_problem: CGROUP_WHY = why slurmd cannot start on this machine for
# want of cgroups, in one line, or "" when nothing is known to be missing.
# slurmd 22.05 sets up its cgroup plugin whatever slurm.conf says, and
# exits (after pbx has waited for its pid file) unless /sys/fs/cgroup is
# cgroup v2 with this process in no v1 hierarchy ("Hybrid mode is not
# supported"), or a tmpfs of v1 hierarchies with /sys/fs/cgroup/systemd
# ("No filesystem mounted on /sys/fs/cgroup" where a chroot or container
# has none).  Reads the mount table, no fork.
cgroup_problem() {
	CGROUP_WHY=
	proc=${PBX_TEST_PROC:-/proc/self}
	[ -r "$proc/mounts" ] || return 0 # cannot tell: slurmd will say
	top='' sysd=''
	while read -r _ mp type _; do
		case $mp in
		/sys/fs/cgroup) top=$type ;; # the last mount there wins
		/sys/fs/cgroup/systemd) sysd=$type ;;
		esac
	done <"$proc/mounts"
	case $top in
	'')
		CGROUP_WHY="slurmd needs a cgroup filesystem at /sys/fs/cgroup and none is mounted (in a chroot: mount --rbind /sys/fs/cgroup CHROOT/sys/fs/cgroup from outside it; elsewhere: mount -t cgroup2 none /sys/fs/cgroup)"
		;;
	cgroup2)
		v1=
		if [ -r "$proc/cgroup" ]; then
			while IFS= read -r line; do
				case $line in 0::*) ;; *) v1=${line#*:} ;; esac
			done <"$proc/cgroup"
		fi
		[ -z "$v1" ] ||
			CGROUP_WHY="slurmd 22.05 refuses cgroup v2 at /sys/fs/cgroup while this process is also in cgroup v1 hierarchies (${v1%%:*}); in a chroot, mount the host's: mount --rbind /sys/fs/cgroup CHROOT/sys/fs/cgroup from outside it"
		;;
	tmpfs)
		[ "$sysd" = cgroup ] ||
			CGROUP_WHY="slurmd needs cgroup v2 at /sys/fs/cgroup, or cgroup v1 with its name=systemd hierarchy at /sys/fs/cgroup/systemd, which is not mounted (in a chroot: mount --rbind /sys/fs/cgroup CHROOT/sys/fs/cgroup from outside it)"
		;;
	*)
		CGROUP_WHY="slurmd needs cgroup v2 (or a tmpfs of cgroup v1 hierarchies) at /sys/fs/cgroup, which is $top"
		;;
	esac
}

# ---- install
stage install
if [ "$MODE" = systemd ]; then
	OS_ID=unknown
	OS_VER=
	if [ -r "$ROOT/etc/os-release" ]; then
		# shellcheck source=/dev/null
		OS_ID=$(. "$ROOT/etc/os-release" && echo "${ID:-unknown}")
		# shellcheck source=/dev/null
		OS_VER=$(. "$ROOT/etc/os-release" && echo "${VERSION_ID:-}")
	fi
	case $OS_ID:$OS_VER in
	debian:12 | ubuntu:22.04) log "os: $OS_ID $OS_VER" ;;
	debian:* | ubuntu:*) log "os: $OS_ID $OS_VER (untested; treated like Debian 12)" ;;
	*) die "unsupported OS '$OS_ID $OS_VER' (need Debian 12 or Ubuntu 22.04)" ;;
	esac
	# a cluster behind a proxy (the template's proxy:): apt goes out through
	# it, now and in every later apt run on the node (50-shared.sh's
	# packages, actions.sh); none: an old cluster's file goes
	APT_PROXY_CONF=$ROOT/etc/apt/apt.conf.d/80pbx-proxy
	if [ -r "$STAGE_DIR/apt-proxy.conf" ]; then
		install_text "$STAGE_DIR/apt-proxy.conf" "$APT_PROXY_CONF"
	elif [ -e "$APT_PROXY_CONF" ]; then
		rm -f "$APT_PROXY_CONF"
	fi
	# Debian 12 and Ubuntu 22.04 agree on everything used here: /etc/slurm,
	# units slurmctld/slurmd/munge/nfs-server, binaries in /usr/sbin.
	have() {
		for d in usr/sbin sbin usr/bin; do
			[ ! -x "$ROOT/$d/$1" ] || return 0
		done
		return 1
	}
	missing=
	for b in munged munge sinfo scontrol; do
		have "$b" || missing="$missing $b"
	done
	if [ "$ROLE" = head ]; then
		have slurmctld || missing="$missing slurmctld"
		have exportfs || missing="$missing exportfs"
		PKGS=$HEAD_PKGS
	else
		have slurmd || missing="$missing slurmd"
		have mount.nfs || missing="$missing mount.nfs"
		PKGS=$COMPUTE_PKGS
		# pbx-preempt asks the metadata server with curl
		[ -z "$SPOT" ] || have curl || { missing="$missing curl"; PKGS="$PKGS curl"; }
	fi
	if [ -n "$missing" ]; then
		log "missing:$missing; installing $PKGS"
		apt_get() {
			n=0
			until DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 "$@" </dev/null; do
				n=$((n + 1))
				[ "$n" -lt 5 ] || return 1
				log "apt-get $1 failed (try $n); retrying"
				sleep "${PBX_APT_RETRY_SLEEP:-10}"
			done
		}
		apt_get update -q || die "apt-get update failed"
		# shellcheck disable=SC2086 # word splitting of the package list
		apt_get install -y -q $PKGS || die "apt-get install $PKGS failed"
		for b in $missing; do
			have "$b" || die "$b still missing after installing $PKGS"
		done
	fi
	# A prebaked image has both roles' daemons, enabled by their packages:
	# the other role's would start at every boot (a compute node running a
	# second slurmctld), so it is disabled.
	other=slurmd
	[ "$ROLE" = head ] || other=slurmctld
	if have "$other" && { systemctl is-enabled --quiet "$other" 2>/dev/null ||
		systemctl is-active --quiet "$other"; }; then
		log "disabling $other (a $ROLE node runs $SLURM_DAEMON only)"
		systemctl disable --now "$other" >/dev/null 2>&1 || log "warning: could not disable $other"
	fi
else
	need="munged munge unmunge sinfo scontrol $SLURM_DAEMON${SPOT:+ curl scancel squeue}"
	missing=
	for b in $need; do
		command -v "$b" >/dev/null 2>&1 || missing="$missing $b"
	done
	[ -z "$missing" ] || die "direct mode installs nothing, and this machine lacks:$missing (apt-get install slurm-wlm munge)"
fi
# Said before anything starts, rather than "slurmd did not start" later.
if [ "$ROLE" = compute ]; then
	cgroup_problem
	[ -z "$CGROUP_WHY" ] || die "$CGROUP_WHY"
fi
