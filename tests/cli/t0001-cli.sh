#!/bin/sh
# t0001-cli.sh - command-line conventions: --help everywhere, help VERB
# equal to VERB --help, man pages generated from the same strings, exit
# codes, JSON output, no colour when not on a terminal.
. "$(dirname "$0")/lib.sh"
trap 'rm -rf "$TEST_TMP"' EXIT

run_pbx --version
is "$rc:$out" "0:pbx 0.1.0" "--version"
run_pbx
is "$rc" "2" "no verb is a usage error"
run_pbx --help
ok $rc "--help exits 0"
verbs=$(echo "$out" | awk '/^verbs:/ {on = 1; next} /^$/ {on = 0} on {print $1}')
[ -n "$verbs" ]
ok $? "--help lists the verbs"

# usage_errors VERB [SUB]: an unknown option and surplus arguments are exit 2
# with the verb's usage line on stderr
usage_errors() {
	run_pbx "$@" --no-such-option
	case $rc:$errout in "2:"*"usage: pbx $*"*) r=0 ;; *) r=1 ;; esac
	ok $r "pbx $* --no-such-option: exit 2 and the usage ($rc: $errout)"
	run_pbx "$@" a1 a2 a3 a4 a5 a6 a7
	case $rc:$errout in "2:"*"usage: pbx $*"*) r=0 ;; *) r=1 ;; esac
	ok $r "pbx $* with 7 arguments: exit 2 and the usage ($rc: $errout)"
}
for v in $verbs; do
	run_pbx "$v" --help
	vhelp=$out
	ok $rc "pbx $v --help exits 0"
	case $vhelp in "usage: pbx $v"*) ok 0 "pbx $v --help starts with its usage" ;;
	*) ok 1 "pbx $v --help starts with its usage" ;; esac
	run_pbx help "$v"
	is "$out" "$vhelp" "pbx help $v equals pbx $v --help"
	subs=$(echo "$vhelp" | awk '/^subcommands:/ {on = 1; next} /^$/ {on = 0} on {print $1}')
	[ -n "$subs" ] || usage_errors "$v"
	for s in $subs; do
		usage_errors "$v" "$s"
		run_pbx "$v" "$s" --help
		case $rc:$out in "0:usage: pbx $v $s"*) ok 0 "pbx $v $s --help" ;;
		*) ok 1 "pbx $v $s --help ($rc)" ;; esac
	done
	if [ "$v" != help ] && [ "$v" != version ]; then
		"$PBX" help --man "$v" >"$TEST_TMP/man"
		cmp -s "$TEST_TMP/man" "$PBX_SOURCE_DIR/man/pbx-$v.1"
		ok $? "man/pbx-$v.1 is what 'pbx help --man $v' prints (run scripts/gen-man.sh)"
	fi
done
"$PBX" help --man >"$TEST_TMP/man"
cmp -s "$TEST_TMP/man" "$PBX_SOURCE_DIR/man/pbx.1"
ok $? "man/pbx.1 is what 'pbx help --man' prints"

mkdir "$TEST_TMP/man5"
(cd "$PBX_SOURCE_DIR" && python3 scripts/md2man.py --all "$TEST_TMP/man5")
cmp -s "$TEST_TMP/man5/pbx-experiment.5" "$PBX_SOURCE_DIR/man/pbx-experiment.5"
ok $? "man/pbx-experiment.5 is generated from src/experiment/FORMAT.md (scripts/gen-man.sh)"
cmp -s "$TEST_TMP/man5/pbx-config.5" "$PBX_SOURCE_DIR/man/pbx-config.5"
ok $? "man/pbx-config.5 is generated from docs/configuration.md and templates/config.yaml (scripts/gen-man.sh)"
grep -q '^clusters:$' "$PBX_SOURCE_DIR/man/pbx-config.5" &&
	grep -q '^\.SH EVERY KEY$' "$PBX_SOURCE_DIR/man/pbx-config.5"
ok $? "pbx-config(5) carries templates/config.yaml whole, as its EVERY KEY section"

run_pbx frobnicate
is "$rc:$errout" "2:pbx: error: unknown command: frobnicate (see 'pbx help')" "unknown verb"
run_pbx c
is "$rc:$errout" "2:pbx: error: ambiguous command: c, could be: cluster, cancel, cache, config" "ambiguous prefix"
run_pbx cl li --json
is "$rc:$out" "0:[]" "unique prefixes work; empty list as JSON"
run_pbx cluster show nosuch
is "$rc:$errout" "3:pbx: error: no cluster named 'nosuch' (pbx cluster list)" "unknown cluster exits 3, with where to look"
run_pbx cluster exec nosuch
is "$rc" "2" "exec without '--' is a usage error"
echo "$errout" | grep -q "usage: pbx cluster exec"
ok $? "usage errors print the usage"
run_pbx cluster frob
is "$rc:$errout" "2:pbx: error: unknown subcommand: frob (see 'pbx help')" "unknown subcommand"
printf '%s%s' "$out" "$errout" | grep -q "$(printf '\033')"
ok $((! $?)) "no escape sequences when not on a terminal"
run_pbx cluster forget-host nosuch
is "$rc:$errout" "3:pbx: error: no host key pinned for 'nosuch'" "forget-host of an unknown host"
# SEE ALSO names the pages a reader goes to next
is "$(sed -n '/^\.SH SEE ALSO/,$p' "$PBX_SOURCE_DIR/man/pbx-parrun.1" | grep -c '^\.BR pbx')" 9 \
	"pbx-parrun(1)'s SEE ALSO: pbx(1), the verbs of the experiment cycle and pbx-experiment(5)"
grep -q '^\.BR pbx\\-experiment (5)$' "$PBX_SOURCE_DIR/man/pbx-parrun.1"
ok $? "it names the experiment format's page"
done_testing
