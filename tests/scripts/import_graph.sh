#!/bin/sh
# scripts.import_graph: scripts/import-graph.py finds a cycle of 3 files
# (a made-up folder: a.c calls b.c calls c.c calls a.c) and fails on it,
# lets two files that call each other be, and finds no cycle longer than
# 2 files in src/cluster, and no call up its layers (src/cluster/layers.txt;
# issue 40); a call up a layer fails, as does a file no layer lists.
# Usage: import_graph.sh SOURCE_DIR
src=${1:?source dir}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
check() { # DESCRIPTION EXPECTED-RC COMMAND...
	what=$1 want=$2
	shift 2
	n=$((n + 1))
	"$@" >"$tmp/out" 2>&1
	got=$?
	if [ "$got" = "$want" ]; then
		echo "ok $n - $what"
	else
		echo "not ok $n - $what (exit $got, expected $want)"
		sed 's/^/# /' "$tmp/out"
		fail=1
	fi
}
mkdir "$tmp/three" "$tmp/two"
printf 'int pbx_a(void)\n{\n\treturn pbx_b();\n}\n' >"$tmp/three/a.c"
printf 'int pbx_b(void)\n{\n\treturn pbx_c();\n}\n' >"$tmp/three/b.c"
printf '/* pbx_b() in a comment is no call */\nint pbx_c(void)\n{\n\treturn pbx_a();\n}\n' \
	>"$tmp/three/c.c"
check "a cycle of 3 files fails" 1 python3 "$src/scripts/import-graph.py" "$tmp/three"
grep -q 'cycle of 3 files: a.c b.c c.c' "$tmp/out" || { echo "not ok - the cycle named"; fail=1; }
printf 'int pbx_a(void)\n{\n\treturn pbx_b();\n}\n' >"$tmp/two/a.c"
printf 'static int pbx_c(void)\n{\n\treturn 0;\n}\nint pbx_b(void)\n{\n\treturn pbx_a();\n}\n' \
	>"$tmp/two/b.c"
check "two files calling each other pass" 0 python3 "$src/scripts/import-graph.py" "$tmp/two"
mkdir "$tmp/up"
printf 'int pbx_a(void)\n{\n\treturn pbx_b();\n}\n' >"$tmp/up/a.c"
printf 'int pbx_b(void)\n{\n\treturn 0;\n}\n' >"$tmp/up/b.c"
printf '# bottom first\nlow: a.c\nhigh: b.c\n' >"$tmp/up/layers.txt"
check "a call up a layer fails" 1 python3 "$src/scripts/import-graph.py" "$tmp/up"
grep -q 'a.c (low) calls up into b.c (high): pbx_b' "$tmp/out" || { echo "not ok - the call named"; fail=1; }
printf 'low: b.c\nhigh: a.c\n' >"$tmp/up/layers.txt"
check "a call down passes" 0 python3 "$src/scripts/import-graph.py" "$tmp/up"
printf 'low: b.c\n' >"$tmp/up/layers.txt"
check "a file no layer lists fails" 1 python3 "$src/scripts/import-graph.py" "$tmp/up"
check "src/cluster has no cycle longer than 2 files" 0 \
	python3 "$src/scripts/import-graph.py" --verbose "$src/src/cluster"
echo "1..$n"
exit $fail
