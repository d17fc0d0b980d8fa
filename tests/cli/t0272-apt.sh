#!/bin/sh
# t0272-apt.sh - environment.apt (docs/environments.md): Debian
# packages every node needs, installed by `pbx parrun` as root on the
# compute nodes that are up.  The package is the test's own (a .deb made
# here, in a file: apt source of its own: no network), pbx-t0272-hello 1.0:
# the tasks find its file and record its version in environment.txt; a
# second parrun installs nothing again; a version that does not exist
# fails the parrun with apt-get's reason and records nothing; hostile names
# and apt: with container: are refused with file, line and key; a node that
# lost the package fails its task with the reason instead of running it.
# The local cluster's node bodies share this machine, so the package is
# installed here and removed at exit.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP needs root, apt-get and dpkg-deb (Debian)"
	rm -rf "$TEST_TMP"
	exit 77
fi
PKGNAME=pbx-t0272-hello
LIST=/etc/apt/sources.list.d/pbx-t0272.list
REPO=$TEST_TMP/repo
apt_cleanup() {
	dpkg --purge "$PKGNAME" >/dev/null 2>&1
	rm -f "$LIST" /var/lib/apt/lists/*pbx-t0272*
}
apt_cleanup
trap 'apt_cleanup; rm -rf "$TEST_TMP"' EXIT

# the package and a file: source that holds it (its Packages index written
# here: the fields apt needs)
mkdir -p "$TEST_TMP/deb/DEBIAN" "$TEST_TMP/deb/usr/share/pbx-t0272" "$REPO"
printf 'hello 1.0\n' >"$TEST_TMP/deb/usr/share/pbx-t0272/hello.txt"
cat >"$TEST_TMP/deb/DEBIAN/control" <<EOF
Package: $PKGNAME
Version: 1.0
Architecture: all
Maintainer: pbx tests <tests@pbx.invalid>
Description: a file for t0272
EOF
dpkg-deb --root-owner-group --build "$TEST_TMP/deb" "$REPO/$PKGNAME.deb" >/dev/null
ok $? "a .deb of the test's own"
chmod 755 "$TEST_TMP" "$REPO"   # apt's download sandbox user reads the file: source
{
	cat "$TEST_TMP/deb/DEBIAN/control"
	echo "Filename: ./$PKGNAME.deb"
	echo "Size: $(stat -c %s "$REPO/$PKGNAME.deb")"
	echo "SHA256: $(sha256sum <"$REPO/$PKGNAME.deb" | cut -d' ' -f1)"
	echo
} >"$REPO/Packages"
echo "deb [trusted=yes] file:$REPO ./" >"$LIST"
apt-get -q -o Dir::Etc::sourcelist="$LIST" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 update >"$TEST_TMP/update.log" 2>&1
ok $? "apt knows the test's source: $(tail -n 2 "$TEST_TMP/update.log")"

local_cluster ap slot "{ name: node, count: 2 }"
trap 'apt_cleanup; cleanup_cluster' EXIT   # after local_cluster's own
run_pbx -q cluster start ap
ok $rc "the cluster starts: $errout"

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<EOF
name: apt-hello
command: cat /usr/share/pbx-t0272/hello.txt > out.txt
sweep: { grid: { i: [1, 2] } }
outputs: [out.txt]
environment:
  apt: [$PKGNAME]
EOF
run_pbx parrun --dry-run "$TEST_TMP/exp/experiment.yaml" ap
case $out in *"environment: apt $PKGNAME (installed on every node that is up, before the tasks)"*) r=0 ;; *) r=1 ;; esac
ok $r "the dry run says what apt: does: $out"
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" ap
ok $rc "parrun installs the package and submits: $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
is "$(dpkg-query -W -f='${Status} ${Version}' "$PKGNAME" 2>/dev/null)" "install ok installed 1.0" \
	"the package is installed"
wait_final "$PKG" 120
ok $? "the tasks end"
is "$(task_states "$PKG")" "COMPLETED COMPLETED" "both complete"
run_pbx -q harvest "$PKG"
R=$PBX_HOME/results/$PKG
is "$(cat "$R/0/out.txt" "$R/1/out.txt")" "hello 1.0
hello 1.0" "each task read the package's file"
is "$(cat "$R/0/environment.txt")" "apt $PKGNAME=1.0" "environment.txt records the version that ran"

# the list a node made later installs from (its bootstrap): root's, 0644
SHARED=$PBX_HOME/clusters/ap/shared
is "$(stat -c '%u %a' "$SHARED/.pbx-apt" 2>&1) $(cat "$SHARED/.pbx-apt" 2>&1)" "0 644 $PKGNAME" \
	"the head lists the packages for nodes made later (root's, 0644)"

# a second parrun installs nothing (dpkg says it is there)
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" ap
is "$rc $(echo "$out" | json_get 'd["submitted"]')" "0 0" "a second parrun: nothing to install or submit"

# a version that does not exist: apt-get's reason, nothing recorded
sed "s/apt: \[$PKGNAME\]/apt: [$PKGNAME=2.0]/; s/name: apt-hello/name: apt-v2/" \
	"$TEST_TMP/exp/experiment.yaml" >"$TEST_TMP/exp/v2.yaml"
run_pbx parrun "$TEST_TMP/exp/v2.yaml" ap
is "$rc" 1 "a version apt does not have fails the parrun"
case $errout in *"apt: on node node"*"2.0"*"not found"*) r=0 ;; *) r=1 ;; esac
ok $r "with apt-get's reason and the node: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM packages WHERE name = 'apt-v2'")" 0 "and records nothing"

is "$(cat "$SHARED/.pbx-apt")" "$PKGNAME" "a failed parrun leaves the list as it was"
sed "s/apt: \[$PKGNAME\]/apt: [$PKGNAME=1.0]/; s/name: apt-hello/name: apt-v1/" \
	"$TEST_TMP/exp/experiment.yaml" >"$TEST_TMP/exp/v1.yaml"
run_pbx parrun "$TEST_TMP/exp/v1.yaml" ap
ok $rc "a parrun that wants version 1.0, installed: $errout"
is "$(cat "$SHARED/.pbx-apt")" "$PKGNAME=1.0" "its entry replaces the package's in the list"
wait_final apt-v1 120
ok $? "its tasks end"

# hostile names and apt: with container: never reach a shell
for bad in '"x; touch /tmp/pbx-t0272-pwned"' '"$(id)"' '"-oAPT::x"' 'Hello' '"a"'; do
	printf 'name: bad\ncommand: "true"\nenvironment:\n  apt: [%s]\n' "$bad" >"$TEST_TMP/exp/bad.yaml"
	run_pbx parrun "$TEST_TMP/exp/bad.yaml" ap
	case $rc:$errout in *"2:"*"bad.yaml:4"*"environment.apt"*"want a Debian package name"*) r=0 ;; *) r=1 ;; esac
	ok $r "apt: [$bad] is refused with file, line and key: $errout"
done
[ ! -e /tmp/pbx-t0272-pwned ]
ok $? "nothing ran"
printf 'name: bad\ncommand: "true"\nenvironment:\n  container: image.tar\n  apt: [%s]\n' "$PKGNAME" >"$TEST_TMP/exp/bad.yaml"
run_pbx parrun "$TEST_TMP/exp/bad.yaml" ap
case $rc:$errout in 2:*"apt: and container: together"*) r=0 ;; *) r=1 ;; esac
ok $r "apt: with container: is refused: $errout"

# a node that lost the package: its task fails with the reason, and runs nothing
dpkg --purge "$PKGNAME" >/dev/null 2>&1
run_pbx -q harvest
run_pbx rerun "$PKG:0"
ok $rc "rerun of task 0 with the package gone: $errout"
wait_final "$PKG" 120
is "$(task_states "$PKG")" "COMPLETED FAILED" "the task fails"
run_pbx log "$PKG:0"
case $out$errout in *"Debian package $PKGNAME (apt:) is not installed on node"*) r=0 ;; *) r=1 ;; esac
ok $r "saying which package is missing where: $out $errout"
done_testing
