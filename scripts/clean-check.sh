#!/bin/sh
# clean-check.sh - the README's two commands, run as a new user would: in a
# clean Debian 12 root (`debootstrap --variant=minbase bookworm`) with only
# this checkout copied in.  Run it as root before a stop and whenever a
# dependency changes (tests/README.md).
#
#   sh scripts/clean-check.sh [OPTIONS] [-- ARGS FOR scripts/test.sh (ctest)]
#
#   --demo        only `sh scripts/install-deps.sh && sh scripts/demo.sh`
#   --tests       only `sh scripts/install-deps.sh && sh scripts/test.sh ARGS`
#                 (default: both, the demo first)
#   --rebuild     debootstrap the base root again (it is made once and kept)
#   --reuse       run in the root the last run left (its packages, venv and
#                 build trees kept: quicker, but not clean)
#   --cmd CMD     run the shell command CMD (from /root/pbx) instead of
#                 the README's, in the same setting (to look into a failure;
#                 with --reuse, in the root the last run left)
#   --net         run the commands in this machine's network namespace
#                 (default: one of their own with only loopback, see below)
#   --dir DIR     where the roots and logs go (PBX_CLEAN_DIR, default
#                 /var/tmp/pbx-clean): DIR/base is the debootstrap root,
#                 DIR/root a fresh copy of it per run, DIR/logs the logs
#
# Each run: a fresh copy of the base; the checkout (HEAD, plus uncommitted
# changes: modified and untracked files, deletions) cloned into /root/pbx;
# /proc, /sys (with /sys/fs/cgroup), /dev (with /dev/pts) mounted and the
# root made a mount point of its own, as on a booted machine; a minimal
# /etc/hosts; this machine's /etc/resolv.conf and local CA certificates (and
# /etc/pip.conf, if any), the network's settings that apt and pip need
# here.  The commands run with `env -i` and Debian's standard PATH, so
# nothing of this machine's environment or /usr/local reaches them.
#
# Apt and pip need the network; the tests must not (they talk to loopback
# only) and use fixed loopback ports, which a suite running at the same
# time on this machine would share.  So install-deps (and, for the tests,
# the test venv, scripts/venv.sh) first runs with the network; then each
# README command runs whole (its install-deps finds everything installed)
# in a network namespace of their own, with lo and an eth0 (192.0.2.1/24)
# that reaches nothing.  --net runs them here instead.
#
# Prints each command's exit status and wall time; exits 1 when one failed.
# Everything it mounts is unmounted on exit, failure or signal included, and
# processes left in the root are ended.
set -eu

dir=${PBX_CLEAN_DIR:-/var/tmp/pbx-clean}
rebuild='' reuse='' net='' do_demo=1 do_tests=1 user_cmd=''
while [ $# -gt 0 ]; do
	case $1 in
	--demo) do_demo=1 do_tests= ;;
	--tests) do_tests=1 do_demo= ;;
	--rebuild) rebuild=1 ;;
	--reuse) reuse=1 ;;
	--net) net=1 ;;
	--cmd) user_cmd=${2:?--cmd needs a command}; do_demo='' do_tests=''; shift ;;
	--dir) dir=${2:?--dir needs a directory}; shift ;;
	--) shift; break ;;
	-h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "clean-check: unknown option '$1' (--help)" >&2; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "clean-check: run it as root (debootstrap, pivot_root, mount)" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
git -C "$src" rev-parse --git-dir >/dev/null 2>&1 ||
	{ echo "clean-check: $src is not a git checkout" >&2; exit 2; }
for c in pivot_root mount umount unshare mountpoint; do
	command -v "$c" >/dev/null 2>&1 || { echo "clean-check: needs $c" >&2; exit 2; }
done
if [ -z "$net" ] && ! command -v ip >/dev/null 2>&1; then
	echo "clean-check: needs ip (iproute2) for the loopback-only network (or use --net)" >&2
	exit 2
fi

base=$dir/base
root=$dir/root
logs=$dir/logs
std_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p "$dir" "$logs"
stamp=$(date -u +%Y%m%dT%H%M%SZ)

say() { printf 'clean-check: %s\n' "$*"; }

# mounts_under DIR: the mount points at or under DIR, deepest first
mounts_under() {
	awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}

# The processes of the clean root (what the commands left running: daemons
# of a failed test): those in a mount namespace in_root made (listed in the
# root's /root/.clean-check-mntns), or chrooted there; TERM, then KILL.
end_root_procs() {
	[ -d "$root" ] || return 0
	rr=$(cd "$root" && pwd -P)
	ns=$(tr '\n' ' ' 2>/dev/null <"$root/root/.clean-check-mntns") || ns=
	for sig in TERM KILL; do
		pids=
		for p in /proc/[0-9]*; do
			pns=$(readlink "$p/ns/mnt" 2>/dev/null) || continue
			case " $ns " in *" $pns "*) pids="$pids ${p#/proc/}"; continue ;; esac
			[ "$(readlink "$p/root" 2>/dev/null)" = "$rr" ] && pids="$pids ${p#/proc/}"
		done
		[ -n "$pids" ] || return 0
		[ "$sig" = TERM ] && say "ending processes left in the root:$pids"
		# shellcheck disable=SC2086 # the pids
		kill -s "$sig" $pids 2>/dev/null || true
		sleep 2
	done
}

unmount_root() {
	end_root_procs
	[ -n "$(mounts_under "$root")" ] || return 0
	umount -R "$root" 2>/dev/null || true
	for m in $(mounts_under "$root"); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	if [ -n "$(mounts_under "$root")" ]; then
		say "could not unmount: $(mounts_under "$root" | tr '\n' ' ')" >&2
		return 1
	fi
}
trap 'unmount_root' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---- the base: debootstrap once -------------------------------------------
# The mirror this machine uses for Debian (deb822 URIs: or a deb line).
mirror() {
	m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^deb / && $0 ~ /bookworm/ && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }
		     /^URIs:/ && $2 !~ /security/ { print $2; exit }')
	echo "${m:-http://deb.debian.org/debian}"
}
if [ -n "$rebuild" ] || [ ! -e "$base/.pbx-clean-base" ]; then
	if ! command -v debootstrap >/dev/null 2>&1; then
		say "installing debootstrap"
		# a fresh machine has no package lists yet
		apt-get -o DPkg::Lock::Timeout=300 install -y -q debootstrap >/dev/null 2>&1 || {
			apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null &&
				apt-get -o DPkg::Lock::Timeout=300 install -y -q debootstrap >/dev/null
		}
	fi
	[ -z "$(mounts_under "$base")" ] || { say "something is mounted under $base" >&2; exit 1; }
	rm -rf --one-file-system "$base"
	say "debootstrap --variant=minbase bookworm $base $(mirror)  (a few minutes; log $logs/$stamp-debootstrap.log)"
	t0=$(date +%s)
	if ! debootstrap --variant=minbase bookworm "$base" "$(mirror)" >"$logs/$stamp-debootstrap.log" 2>&1; then
		tail -n 20 "$logs/$stamp-debootstrap.log" >&2
		say "debootstrap failed" >&2
		exit 1
	fi
	date -u >"$base/.pbx-clean-base"
	say "base root made in $(($(date +%s) - t0)) s"
fi

# ---- the root of this run -------------------------------------------------
unmount_root
if [ -z "$reuse" ] || [ ! -d "$root/root/pbx" ]; then
	rm -rf --one-file-system "$root"
	cp -a "$base" "$root"
fi
rm -f "$root/.pbx-clean-base"
rm -f "$root/root/.clean-check-mntns" # this run's namespaces (end_root_procs)

# The checkout: HEAD, then the uncommitted changes on top (--reuse: the
# last run's clone brought to HEAD, its ignored build trees kept).
head=$(git -C "$src" rev-parse HEAD)
if [ -d "$root/root/pbx/.git" ]; then
	git -C "$root/root/pbx" fetch -q "$src" "$head"
	git -C "$root/root/pbx" checkout -q -f --detach "$head"
	git -C "$root/root/pbx" clean -q -f -d
else
	git clone -q --no-hardlinks "$src" "$root/root/pbx"
	git -C "$root/root/pbx" checkout -q --detach "$head"
fi
(cd "$src" && git ls-files -z -m -o --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
	tar -xf - -C "$root/root/pbx"
(cd "$src" && git ls-files -z -d) | (cd "$root/root/pbx" && xargs -0 -r rm -f --)
say "checkout: $(git -C "$src" rev-parse --short HEAD) + $(cd "$src" && git status --porcelain | wc -l) uncommitted change(s), in $root/root/pbx"

# What a booted machine has and a bare debootstrap root lacks.
host=$(hostname)
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$host" >"$root/etc/hosts"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The network's CA certificates (a proxy that re-signs TLS, as here): apt
# over https and pip need them.  ca-certificates (install-deps) folds
# /usr/local/share/ca-certificates into the bundle it writes.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
	mkdir -p "$root/usr/local/share/ca-certificates" "$root/etc/ssl/certs"
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
	[ ! -f /etc/ssl/certs/ca-certificates.crt ] || cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
fi
[ ! -f /etc/pip.conf ] || cp /etc/pip.conf "$root/etc/pip.conf"

# Mounts: the root a mount point of its own; /proc, /sys, /sys/fs/cgroup,
# /dev, /dev/pts and a /dev/shm of its own.  rslave: unmounting them here
# never reaches this machine's.
mount --bind "$root" "$root"
mount --make-private "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --make-rslave "$root/sys"
if [ -d /sys/fs/cgroup ] && mountpoint -q /sys/fs/cgroup && ! mountpoint -q "$root/sys/fs/cgroup"; then
	mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
	mount --make-rslave "$root/sys/fs/cgroup"
fi
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
mountpoint -q "$root/dev/pts" || mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
mkdir -p "$root/dev/shm"
mount -t tmpfs -o mode=1777 shm "$root/dev/shm"

# in_root NET SCRIPT: runs SCRIPT (sh) in the root from /root/pbx, with a
# clean environment; NET "isolated": in a network namespace with only lo.
# The root becomes the root of a mount namespace of its own (pivot_root),
# not a chroot: as on a booted machine, a process there may make a user
# namespace (ch-run, the tasks' container images), which the kernel
# refuses to a chrooted one.
in_root() {
	ir_net=$1
	printf '#!/bin/sh\ncd /root/pbx || exit 1\n%s\n' "$2" >"$root/root/.clean-check-cmd"
	# shellcheck disable=SC2016 # the arguments of that sh
	set -- unshare -m --propagation private sh -c 'cd "$1" && mkdir -p .clean-check-old &&
		pivot_root . .clean-check-old && cd / && umount -l /.clean-check-old &&
		rmdir /.clean-check-old && readlink /proc/self/ns/mnt >>/root/.clean-check-mntns &&
		shift && exec "$@"' sh "$root" \
		/usr/bin/env -i PATH="$std_path" HOME=/root USER=root LOGNAME=root \
		SHELL=/bin/sh TERM="${TERM:-dumb}" /bin/sh /root/.clean-check-cmd
	if [ "$ir_net" = isolated ] && [ -z "$net" ]; then
		# lo, and an eth0 as a machine has (a veth whose peer is in the
		# namespace too: nothing leaves it), 192.0.2.1/24 (TEST-NET-1):
		# with 127.0.0.1 alone getaddrinfo's AI_ADDRCONFIG finds no IPv4
		# (slurmctld cannot listen) and Open MPI no interface for its
		# out-of-band messages (mpirun fails).
		unshare --net sh -c 'ip link set lo up &&
			ip link add eth0 type veth peer name eth1 && ip link set eth1 up &&
			ip addr add 192.0.2.1/24 dev eth0 && ip link set eth0 up && exec "$@"' sh "$@"
	else
		"$@"
	fi
}
# ... with its output also in LOG and its status in $run_rc, wall time in $run_s
run_logged() {
	run_log=$1
	shift
	t0=$(date +%s)
	rm -f "$run_log.rc"
	# in the background: a signal to this script interrupts the wait (its
	# trap then ends what runs in the root), not only the command's end
	{
		rc=0
		in_root "$@" || rc=$?
		echo "$rc" >"$run_log.rc"
	} 2>&1 | tee "$run_log" &
	wait $!
	run_rc=$(cat "$run_log.rc" 2>/dev/null || echo 1)
	run_s=$(($(date +%s) - t0))
}

# q WORD: WORD quoted for sh
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
test_args=
for a in "$@"; do test_args="$test_args $(q "$a")"; done

summary=
status=0
say "install-deps with the network (log $logs/$stamp-prepare.log)"
prep='sh scripts/install-deps.sh'
[ -z "$do_tests$user_cmd" ] || prep="$prep && . scripts/venv.sh && echo 'test venv ready: build/venv'"
run_logged "$logs/$stamp-prepare.log" net "$prep"
summary="${summary}prepare (install-deps$([ -z "$do_tests$user_cmd" ] || echo ', test venv'), network): exit $run_rc, $run_s s
"
if [ "$run_rc" != 0 ]; then
	status=1
	do_demo='' do_tests=''
fi
if [ -n "$do_demo" ]; then
	cmd='sh scripts/install-deps.sh && sh scripts/demo.sh'
	say "\$ $cmd   (log $logs/$stamp-demo.log)"
	run_logged "$logs/$stamp-demo.log" isolated "$cmd"
	[ "$run_rc" = 0 ] || status=1
	summary="$summary$cmd: exit $run_rc, $run_s s
"
fi
if [ -n "$do_tests" ]; then
	cmd="sh scripts/install-deps.sh && sh scripts/test.sh$test_args"
	say "\$ $cmd   (log $logs/$stamp-tests.log)"
	run_logged "$logs/$stamp-tests.log" isolated "$cmd"
	[ "$run_rc" = 0 ] || status=1
	summary="$summary$cmd: exit $run_rc, $run_s s
"
	# the failing tests, as ctest lists them at the end of each half
	fails=$(sed -n '/^The following tests FAILED:/,/^Errors while running CTest/p' "$logs/$stamp-tests.log" |
		grep -E '^[[:space:]]+[0-9]+ - ' || true)
	[ -z "$fails" ] || summary="${summary}failed tests:
$fails
"
fi
if [ -n "$user_cmd" ] && [ "$status" = 0 ]; then
	say "\$ $user_cmd   (log $logs/$stamp-cmd.log)"
	run_logged "$logs/$stamp-cmd.log" isolated "$user_cmd"
	[ "$run_rc" = 0 ] || status=1
	summary="$summary$user_cmd: exit $run_rc, $run_s s
"
fi
printf '\n== clean-check (%s, %s)\n%s' "$stamp" "$root" "$summary"
[ "$status" = 0 ] && echo "== clean-check: PASS" || echo "== clean-check: FAIL (logs in $logs/$stamp-*.log)"
exit "$status"
