#!/bin/sh
# The bootstrap's cgroup check: slurmd 22.05 exits where /sys/fs/cgroup
# holds no cgroup filesystem it accepts (a chroot with a plain bind of /sys,
# some containers), and pbx used to say only "slurmd did not start" after
# waiting 15 s.  The compute node's `up` must say what is missing in one
# PBX-ERROR line, before it starts any daemon.
#   1. cgroup_problem on its own, against mount tables written here
#      (PBX_TEST_PROC stands in for /proc/self): the layouts slurmd accepts
#      pass, the others get their one-line reason.
#   2. `up` of a compute node whose mount table has no /sys/fs/cgroup fails
#      at once with that line, and nothing is started.
#   3. Where `unshare -m` works: the same `up` in a private mount namespace
#      whose /sys/fs/cgroup is really unmounted (the host's stays), with no
#      test hook.
# Addresses 127.0.72.1-2, ports 21720-21729 (reserved for this test; no
# daemon should ever bind them).
set -eu

SRC=${1:?usage: cgroup.sh SOURCE_DIR}
BOOT=$SRC/templates/bootstrap.sh
INSTALL=$SRC/templates/bootstrap/15-install.sh # the stage that holds the check
TEMPLATE=$SRC/templates/slurm.conf.in

# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"

T=$(mktemp -d /tmp/pbx-bt-cgroup.XXXXXX)
cleanup() {
	rc=$?
	set +e
	for p in $(pgrep -f "$T"); do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$T"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 1. the check on its own
awk '/^cgroup_problem\(\) \{/, /^\}/' "$INSTALL" >"$T/fn.sh"
grep -q '^cgroup_problem() {' "$T/fn.sh" || fail "bootstrap/15-install.sh has no cgroup_problem function"

# why TABLE CGROUP: CGROUP_WHY for mount table TABLE (lines "MP TYPE") and
# /proc/self/cgroup contents CGROUP.
why() {
	rm -rf "$T/proc" && mkdir "$T/proc"
	printf '%s\n' "$1" | awk 'NF { print "none", $1, $2, "rw", 0, 0 }' >"$T/proc/mounts"
	printf '%s\n' "$2" >"$T/proc/cgroup"
	# shellcheck disable=SC1091
	(. "$T/fn.sh" && export PBX_TEST_PROC="$T/proc" && cgroup_problem && printf '%s' "$CGROUP_WHY")
}
base='/ ext4
/proc proc
/sys sysfs'
v1='/sys/fs/cgroup tmpfs
/sys/fs/cgroup/cpu cgroup
/sys/fs/cgroup/systemd cgroup
/sys/fs/cgroup/unified cgroup2'

[ -z "$(why "$base
/sys/fs/cgroup cgroup2" '0::/init.scope')" ] || fail "cgroup v2 (Debian 12) refused: $(why "$base
/sys/fs/cgroup cgroup2" '0::/')"
[ -z "$(why "$base
$v1" '9:name=systemd:/
1:cpu:/
0::/')" ] || fail "cgroup v1 with systemd (this host's layout) refused"
w=$(why "$base" '0::/')
case $w in
"slurmd needs a cgroup filesystem at /sys/fs/cgroup and none is mounted ("*"mount --rbind /sys/fs/cgroup CHROOT/sys/fs/cgroup"*"mount -t cgroup2 none /sys/fs/cgroup)") ;;
*) fail "no /sys/fs/cgroup: '$w'" ;;
esac
w=$(why "$base
/sys/fs/cgroup tmpfs
/sys/fs/cgroup/unified cgroup2" '0::/')
case $w in *'/sys/fs/cgroup/systemd, which is not mounted'*) ;; *) fail "tmpfs without systemd: '$w'" ;; esac
w=$(why "$base
/sys/fs/cgroup cgroup2" '9:name=systemd:/
0::/')
case $w in *'cgroup v1 hierarchies (name=systemd)'*) ;; *) fail "hybrid: '$w'" ;; esac
w=$(why "$base
/sys/fs/cgroup cgroup2
/sys/fs/cgroup tmpfs" '0::/')
case $w in *'/sys/fs/cgroup/systemd, which is not mounted'*) ;; *) fail "the last mount on /sys/fs/cgroup counts: '$w'" ;; esac
w=$(why "$base
/sys/fs/cgroup ext4" '0::/')
case $w in *'at /sys/fs/cgroup, which is ext4') ;; *) fail "ext4 at /sys/fs/cgroup: '$w'" ;; esac
[ "$(printf '%s' "$w" | wc -l)" = 0 ] || fail "the reason is more than one line"
ok 0 "cgroup_problem: 2 accepted layouts pass, 5 others get their reason"

# ---- 2. up of a compute node without /sys/fs/cgroup
mkdir -p "$T/stage"
sed -e "s|@CLUSTER@|cg|g" -e "s|@CTLD_HOST@|$(hostname -s)|g" \
	-e "s|@CTLD_ADDR@|127.0.72.1|g" -e "s|@CTLD_PORT@|21720|g" \
	-e "s|@SLURM_USER@|root|g" -e "s|@SRUN_PORTS@|21722-21729|g" \
	-e "s|@PARTITION_NODES@|node1|g" \
	-e "s|@EXTRA@|DebugFlags=NO_CONF_HASH|g" -e "s|@MAX_ARRAY_SIZE@|1001|g" -e "s|@MAX_JOB_COUNT@|10000|g" \
	-e "s|@NODES@|NodeName=node1 NodeHostname=localhost NodeAddr=127.0.72.2 Port=21721 CPUs=1 Gres=gpu:2 State=UNKNOWN|" \
	"$TEMPLATE" >"$T/stage/slurm.conf"
head -c 1024 /dev/urandom >"$T/stage/munge.key"
mkdir -p "$T/proc"
printf 'none / ext4 rw 0 0\nproc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n' >"$T/proc/mounts"
printf '0::/\n' >"$T/proc/cgroup"

# up_node1 NAME [ENV...]: `up` of compute node node1 in $T/NAME; output in
# $T/NAME.out/.err, exit status in $up_rc, seconds in $up_s.
up_node1() {
	n=$1
	shift
	t0=$(date +%s)
	up_rc=0
	env PBX_MODE=direct PBX_ROOT="$T/$n" PBX_ROLE=compute PBX_NODE=node1 PBX_CLUSTER=cg \
		PBX_STAGE="$T/stage" PBX_GPUS=2 PBX_HEAD_ADDR=127.0.72.1 PBX_SHARED="$T/shared" \
		PBX_SLURM_USER=root PBX_CTLD_WAIT=1 PBX_RESUME_WAIT=1 "$@" \
		sh "$BOOT" up >"$T/$n.out" 2>"$T/$n.err" || up_rc=$?
	up_s=$(($(date +%s) - t0))
}
want="PBX-STAGE install
PBX-ERROR slurmd needs a cgroup filesystem at /sys/fs/cgroup and none is mounted"

up_node1 hook PBX_TEST_PROC="$T/proc"
[ "$up_rc" -ne 0 ] || fail "up without /sys/fs/cgroup succeeded: $(cat "$T/hook.out")"
case $(cat "$T/hook.out") in
"$want ("*")") ;;
*) fail "up without /sys/fs/cgroup said: $(cat "$T/hook.out")" ;;
esac
[ "$up_s" -le 3 ] || fail "up without /sys/fs/cgroup took $up_s s to fail"
[ -z "$(pgrep -f "$T/hook/")" ] || fail "up without /sys/fs/cgroup started: $(pgrep -af "$T/hook/")"
[ ! -e "$T/hook/run/munge/munged.pid" ] || fail "up without /sys/fs/cgroup started munged"
ok 0 "up without /sys/fs/cgroup: one line after $up_s s, nothing started"

# ---- 3. the same for real, in a mount namespace of its own
if ! unshare -m true 2>/dev/null; then
	skip "unshare -m is not permitted here: the real-namespace case is not run"
	test_done
	exit 0
fi
# no-cgroup.sh CMD...: CMD with /sys/fs/cgroup and everything under it
# unmounted (run in a namespace of its own: the host's mounts stay)
up_node1 ns unshare -m sh "$SRC/tests/common/no-cgroup.sh"
[ "$up_rc" -ne 97 ] || fail "could not unmount /sys/fs/cgroup in a private mount namespace"
[ "$up_rc" -ne 0 ] || fail "up in a namespace without /sys/fs/cgroup succeeded: $(cat "$T/ns.out")"
case $(cat "$T/ns.out") in
"$want ("*")") ;;
*) fail "up in a namespace without /sys/fs/cgroup said: $(cat "$T/ns.out")" ;;
esac
[ -z "$(pgrep -f "$T/ns/")" ] || fail "up in a namespace without /sys/fs/cgroup started: $(pgrep -af "$T/ns/")"
awk '$2 == "/sys/fs/cgroup" { f = 1 } END { exit !f }' /proc/self/mounts ||
	fail "the host's /sys/fs/cgroup is gone"
ok 0 "up in a mount namespace without /sys/fs/cgroup: one line after $up_s s, nothing started"
test_done
