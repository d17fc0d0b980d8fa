#!/bin/sh
# ready.sh - templates/power-ready.sh (pbx-ready, SLURM's PrologSlurmctld
# on a power-saving cluster; docs/power-saving.md) against stubs of
# scontrol and sinfo: a job on nodes that always run ends at once without
# asking SLURM; one on a node powering up (#) waits until it responds; a
# node down ends the wait at once, as does the timeout; five jobs waiting
# together ask sinfo about once a second in all, not five times; an
# unwritable state directory ends it at once; every end is exit 0.
set -u
SRC=${1:?usage: ready.sh SOURCE_DIR}
T=$(mktemp -d /tmp/pbx-ready.XXXXXX)
trap 'rm -rf "$T"' EXIT
# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"

mkdir -p "$T/bin" "$T/state"
cat >"$T/bin/scontrol" <<'STUB'
#!/bin/sh
# scontrol show hostnames LIST (plain comma lists only)
[ "$1 $2" = "show hostnames" ] && printf '%s\n' "$3" | tr ',' '\n'
STUB
cat >"$T/bin/sinfo" <<STUB
#!/bin/sh
echo call >>"$T/sinfo.calls"
cat "$T/sinfo.out"
STUB
chmod +x "$T/bin/scontrol" "$T/bin/sinfo"
# ready TIMEOUT STATE_DIR: the script with its settings filled in
ready() {
	sed -e "s#@SLURM_CONF@#'$T/slurm.conf'#" -e "s#@STATE_DIR@#'$2'#" \
		-e "s#@SLEEPERS@#'node2,node3'#" -e "s#@TIMEOUT@#$1#" \
		"$SRC/templates/power-ready.sh" >"$T/ready.$1"
	echo "$T/ready.$1"
}
R=$(ready 60 "$T/state")
run() { SLURM_JOB_NODELIST=$1 PATH="$T/bin:$PATH" sh "$R"; }
calls() { cl=$(grep -c . "$T/sinfo.calls" 2>/dev/null); echo "${cl:-0}"; }
# a new case: no state file of an earlier one
fresh() { rm -f "$T/state/pbx-ready.state"; : >"$T/sinfo.calls"; }

printf 'node1 alloc\nnode2 alloc#\nnode3 idle~\n' >"$T/sinfo.out"
run node1
ok $? "a job on a node that always runs: exit 0"
ok "$(calls)" "without asking SLURM"
# shellcheck disable=SC2016 # never to be expanded
run 'node1;touch$IFS'"$T"'/PWNED,$(touch '"$T"'/PWNED)'
rc=$?
[ "$rc" = 0 ] && [ ! -e "$T/PWNED" ]
ok $? "names that are no node that may sleep: exit 0, nothing run"

t0=$(date +%s)
(sleep 3 && printf 'node1 alloc\nnode2 alloc\nnode3 idle~\n' >"$T/sinfo.out.new" &&
	mv "$T/sinfo.out.new" "$T/sinfo.out") &
run node2
rc=$?
wait
dt=$(($(date +%s) - t0))
ok $rc "a job on node2 powering up: exit 0"
[ "$dt" -ge 2 ] && [ "$dt" -le 8 ]
ok $? "once node2 responds ($dt s; it did after 3 s)"

printf 'node1 alloc\nnode2 down~\n' >"$T/sinfo.out"
fresh
t0=$(date +%s)
run node2
rc=$?
ok $rc "node2 down: exit 0"
[ $(($(date +%s) - t0)) -le 2 ]
ok $? "at once ($(calls) sinfo)"

printf 'node2 mix#\nnode3 alloc#\n' >"$T/sinfo.out"
fresh
R=$(ready 2 "$T/state")
t0=$(date +%s)
run node2,node3
rc=$?
dt=$(($(date +%s) - t0))
[ "$rc" = 0 ] && [ "$dt" -ge 1 ] && [ "$dt" -le 5 ]
ok $? "still powering up at the timeout (2 s): exit 0 after $dt s"

R=$(ready 60 "$T/state")
fresh
(sleep 4 && printf 'node2 mix\nnode3 alloc\n' >"$T/sinfo.out.new" && mv "$T/sinfo.out.new" "$T/sinfo.out") &
t0=$(date +%s)
for _ in 1 2 3 4 5; do run node2,node3 & done
wait
dt=$(($(date +%s) - t0))
c=$(calls)
[ "$c" -ge 1 ] && [ "$c" -le $((dt + 2)) ]
ok $? "five jobs waiting $dt s together asked sinfo $c times (one a second in all, not 5 a second)"

chmod 0500 "$T/state" 2>/dev/null
R=$(ready 60 "$T/nowhere")
printf 'node2 alloc#\n' >"$T/sinfo.out"
t0=$(date +%s)
run node2
rc=$?
[ "$rc" = 0 ] && [ $(($(date +%s) - t0)) -le 2 ]
ok $? "no state directory: exit 0 at once"

test_done
