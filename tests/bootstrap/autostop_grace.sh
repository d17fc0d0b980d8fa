#!/bin/sh
# autostop_grace.sh - the boot grace of templates/autostop.sh
# (pbx-autostop; docs/autostop.md): on a VM (systemd mode) a machine that
# has just come up counts as busy until PBX_AUTOSTOP_BOOT_GRACE s after
# its first watcher since boot started, kept in a mark file (/run on a
# VM, PBX_AUTOSTOP_UP_MARK here), not after the kernel's start: a
# watcher the bootstrap restarts gets no new grace, an old or garbled
# mark is taken for what it is or replaced, a node body (direct mode) has
# none, and a mark that cannot be written still gives a grace from now.
# Runs only `pbx-autostop grace`, which powers nothing off.
set -u
SRC=${1:?usage: autostop_grace.sh SOURCE_DIR}
T=$(mktemp -d /tmp/pbx-grace.XXXXXX)
trap 'rm -rf "$T"' EXIT
# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"
is() { [ "$1" = "$2" ]; r=$?; [ $r = 0 ] || printf '#   got:  %s\n#   want: %s\n' "$1" "$2"; ok $r "$3"; }

conf() {
	cat >"$T/autostop.conf" <<CONF
PBX_MODE=$1
PBX_ROLE=head
PBX_NODE=head
PBX_ROOT=
PBX_SHARED=$T/shared
SLURM_CONF=$T/slurm.conf
PBX_AUTOSTOP_S=60
CONF
}
grace() { PBX_AUTOSTOP_CONF=$T/autostop.conf PBX_AUTOSTOP_UP_MARK=${MARK:-$T/up} PBX_AUTOSTOP_BOOT_GRACE=600 sh "$SRC/templates/autostop.sh" grace 2>"$T/err"; }

conf systemd
before=$(date +%s)
g1=$(grace)
after=$(date +%s)
[ "$g1" -ge $((before + 600)) ] && [ "$g1" -le $((after + 600)) ]
ok $? "the first watcher since boot: busy until 600 s from now ($g1, now $before)"
is "$(cat "$T/up")" "$((g1 - 600))" "  and the mark holds when it started"
sleep 1.1
is "$(grace)" "$g1" "a watcher restarted later (the bootstrap's) gets no new grace"
echo 1000 >"$T/up"
is "$(grace)" 1600 "an old mark (the machine came up long ago): its grace is over"
echo '12a; rm -rf /' >"$T/up"
g2=$(grace)
case $g2 in *[!0-9]*) r=1 ;; *) [ "$g2" -ge $((before + 600)) ]; r=$? ;; esac
ok $r "a garbled mark is replaced: the grace counts from now ($g2)"
is "$(cat "$T/up")" "$((g2 - 600))" "  and the mark is written again"
MARK=$T/no/such/dir/up
g3=$(grace)
case $g3 in *[!0-9]*) r=1 ;; *) [ "$g3" -ge $((before + 600)) ]; r=$? ;; esac
ok $r "a mark that cannot be written: a grace from now all the same, and nothing else on stdout ($g3)"
grep -q "cannot write $T/no/such/dir/up" "$T/err"
ok $? "  with the reason on stderr"
MARK=
conf direct
is "$(grace)" 0 "a node body (direct mode): no grace"

test_done
