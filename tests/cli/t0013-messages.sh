#!/bin/sh
# t0013-messages.sh - the first hour's messages, with
# no cluster: the cause, then what to write instead.  A resource under
# another scheduler's name (memory, walltime, queue) names sbatch's; a time
# SLURM would refuse is refused here with the file, line and key (and on
# the command line); a command whose ': ' breaks YAML suggests quotes or a
# block scalar; a cluster name with a typo names the close one, a template
# not started says how to start it.
. "$(dirname "$0")/lib.sh"
trap 'rm -rf "$TEST_TMP"' EXIT

exp=$TEST_TMP/e.yaml
res() { printf 'name: m\ncommand: echo\nresources: { %s }\n' "$1" >"$exp"; run_pbx parrun -n "$exp" local; }
for pair in memory:mem walltime:time queue:partition ncpus:cpus-per-task; do
	res "${pair%%:*}: 1"
	is "$rc:$errout" "2:pbx: error: $exp:3: resources.${pair%%:*}: not an sbatch option pbx passes on (did you mean '${pair#*:}'?)" \
		"resources.${pair%%:*} names ${pair#*:}"
done
for t in 90 45:30 01:30:00 2-00 2-00:30 2-00:30:15 UNLIMITED infinite; do
	res "time: \"$t\""
	is "$rc" 0 "time: $t is a SLURM time: $errout"
done
for t in "1 hour" 1h 1:2:3:4 10- -5 2-1-1 ":30"; do
	res "time: \"$t\""
	is "$rc:$errout" "2:pbx: error: $exp:3: resources.time: '$t' is not a SLURM time: want MINUTES, HH:MM:SS, DAYS-HH[:MM[:SS]] or UNLIMITED (e.g. 90, 01:30:00, 2-00)" \
		"time: $t is refused with the file, line and key"
done
res "mem: 1G"
run_pbx parrun -n "$exp" local --time=1h
is "$rc:$errout" "2:pbx: error: --time: '1h' is not a SLURM time: want MINUTES, HH:MM:SS, DAYS-HH[:MM[:SS]] or UNLIMITED (e.g. 90, 01:30:00, 2-00)" \
	"--time=1h on the command line too"

printf 'name: m\ncommand: python3 fit.py --opt a: b\n' >"$exp"
run_pbx parrun -n "$exp" local
is "$rc:$errout" "2:pbx: error: $exp:2: YAML syntax error at column 32: mapping values are not allowed in this context; a value with ': ' in it needs quotes, or a block scalar: 'command: |' and the value on the next lines, indented" \
	"a command with ': ' suggests quotes or a block scalar"
printf 'name: m\ncommand: |\n  python3 fit.py --opt a: b\n' >"$exp"
run_pbx parrun -n -j "$exp" local
is "$rc:$(printf '%s\n' "$out" | json_get 'd["commands"][0].strip()')" "0:python3 fit.py --opt a: b" "and the block scalar works"

cat >"$PBX_HOME/config.yaml" <<'EOF'
clusters:
  mycluster: { cloud: local, node_groups: [ { name: node, count: 1 } ] }
EOF
chmod 600 "$PBX_HOME/config.yaml"
run_pbx cluster show mycluter
is "$rc:$errout" "3:pbx: error: no cluster named 'mycluter' (did you mean 'mycluster'?)" "a typo in a cluster name names the close one"
run_pbx cluster exec mycluster -- true
is "$rc:$errout" "3:pbx: error: no cluster named 'mycluster' running: start it with 'pbx cluster start mycluster'" \
	"a template not started says how to start it"
run_pbx cluster exec zzzz -- true
is "$rc:$errout" "3:pbx: error: no cluster named 'zzzz' (pbx cluster list)" "a name nothing is close to: where to look"
# `pbx state -w 5 PKG`, as people type it: the 5 is the watch's seconds
run_pbx state -w 5 nosuch
case $rc:$errout in 3:*"nosuch"*) r=0 ;; *) r=1 ;; esac
ok $r "state -w 5 PKG takes 5 as the seconds and looks for PKG: $rc $errout"
run_pbx state -w abc nosuch
case $rc:$errout in "2:pbx: error: -w/--watch: 'abc' is not a number of seconds"*) r=0 ;; *) r=1 ;; esac
ok $r "a watch interval that is not a number is a usage error: $errout"
run_pbx state --watch=0 nosuch
is "$rc" 2 "and so is one under 0.1 s"
done_testing
