#!/bin/sh
# summary.sh - `pbx report --summary` on the results fixture (12 tasks of
# sweep-demo, tests/results/fixture.c) with a summary.json beside each
# task's harvested results: every numeric top-level key becomes a column
# (true/false as 1/0; strings, objects and non-numbers left out), in the
# order first met; --summary=KEYS picks them; grouped, each key's mean; a
# key no task has is a usage error naming it; summary.json files that are
# not JSON objects, or too big, are skipped, never fatal.
# Environment: PBX (the pbx binary), TEST_RESULTS (tests/results' program).
set -u
# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/../cli/harness.sh"
T=$(mktemp -d /tmp/pbx-results-summary-XXXXXX)
trap 'rm -rf "$T"' EXIT
"$TEST_RESULTS" --make-store "$T" >"$T/fixture.log"
ok $? "fixture store built"
chmod 700 "$T"
R=$T/results/0123456789ab
i=0
while [ $i -lt 12 ]; do
	mkdir -p "$R/$i"
	printf '{"test_acc": 0.%d5, "converged": %s, "model": "mlp", "nested": {"x": 1}, "seconds": %d, "\\u001b[2Jevil": 1, "a\\nb": 2}\n' \
		"$i" "$([ $((i % 2)) = 0 ] && echo true || echo false)" $((10 + i)) >"$R/$i/summary.json"
	i=$((i + 1))
done
printf 'not json' >"$R/10/summary.json"
printf '[1, 2]' >"$R/11/summary.json"

out=$(PBX_HOME=$T "$PBX" report --summary -f csv 2>"$T/err")
ok $? "report --summary: $(cat "$T/err")"
ok "$([ "$(printf '%s\n' "$out" | head -n 1 | tr ',' '\n' | grep '^summary\.' | tr '\n' ' ')" = "summary.test_acc summary.converged summary.seconds " ]; echo $?)" \
	"a column per numeric key, in order; the string, the object and keys with control characters left out: $(printf '%s\n' "$out" | head -n 1)"
row0=$(printf '%s\n' "$out" | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } NR == 2 { print $c["summary.test_acc"], $c["summary.converged"], $c["summary.seconds"] }')
ok "$([ "$row0" = "0.05 1 10" ]; echo $?)" "task 0's values (true as 1): $row0"
row10=$(printf '%s\n' "$out" | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } $1 == 10 || $1 == 11 { printf "%s|%s ", $c["summary.test_acc"], $c["summary.seconds"] }')
ok "$([ "$row10" = "| | " ]; echo $?)" "a summary.json that is not an object gives empty cells, not an error: '$row10'"

out=$(PBX_HOME=$T "$PBX" report --summary=seconds -g lr -f csv 2>"$T/err")
ok $? "grouped, one key: $(cat "$T/err")"
means=$(printf '%s\n' "$out" | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { printf "%s=%s ", $c["lr"], $c["summary.seconds.mean"] }')
ok "$([ "$means" = "0.1=11.5 0.03=15.5 0.01=18.5 " ]; echo $?)" "each group's mean of the key (tasks 10 and 11 have none): $means"

PBX_HOME=$T "$PBX" report --summary=nosuch >/dev/null 2>"$T/err"
rc=$?
ok "$([ $rc = 2 ] && grep -q "no shown task's summary.json has a number named 'nosuch'" "$T/err"; echo $?)" \
	"a key no task has: a usage error naming it: $rc $(cat "$T/err")"
PBX_HOME=$T "$PBX" report --summary -f html -o "$T/r.html" 2>"$T/err"
ok $? "the HTML report: $(cat "$T/err")"
ok "$(grep -q '<th colspan="3" class="metric">summary</th>' "$T/r.html"; echo $?)" \
	"its table puts the keys under one summary heading"
test_done
