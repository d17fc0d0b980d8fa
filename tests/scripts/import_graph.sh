#!/bin/sh
# scripts.import_graph: scripts/import-graph.py finds a cycle of 3 files
# (a made-up folder: a.c calls b.c calls c.c calls a.c) and fails on it,
# lets two files that call each other be, and finds no cycle longer than
# 2 files in src/cluster, and no call up its layers (src/cluster/layers.txt);
# a call up a layer fails, as does a file no layer lists.
# Usage: import_graph.sh SOURCE_DIR
src=${1:?source dir}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/cli/harness.sh
. "$src/tests/cli/harness.sh"
# graph WANT-RC DIR [OPTION...]: runs import-graph.py on DIR, output in
# $tmp/out; fails (with that output) unless it exits WANT-RC
graph() {
	_want=$1
	shift
	python3 "$src/scripts/import-graph.py" "$@" >"$tmp/out" 2>&1
	is "$?" "$_want" "import-graph.py $*: exit status" || { cat "$tmp/out"; return 1; }
}
mkdir "$tmp/three" "$tmp/two"
printf 'int pbx_a(void)\n{\n\treturn pbx_b();\n}\n' >"$tmp/three/a.c"
printf 'int pbx_b(void)\n{\n\treturn pbx_c();\n}\n' >"$tmp/three/b.c"
printf '/* pbx_b() in a comment is no call */\nint pbx_c(void)\n{\n\treturn pbx_a();\n}\n' \
	>"$tmp/three/c.c"
test_expect_success 'a cycle of 3 files fails, named' '
	graph 1 "$tmp/three" &&
	{ grep -q "cycle of 3 files: a.c b.c c.c" "$tmp/out" || fail "the cycle named"; }
'
printf 'int pbx_a(void)\n{\n\treturn pbx_b();\n}\n' >"$tmp/two/a.c"
printf 'static int pbx_c(void)\n{\n\treturn 0;\n}\nint pbx_b(void)\n{\n\treturn pbx_a();\n}\n' \
	>"$tmp/two/b.c"
test_expect_success 'two files calling each other pass' 'graph 0 "$tmp/two"'
mkdir "$tmp/up"
printf 'int pbx_a(void)\n{\n\treturn pbx_b();\n}\n' >"$tmp/up/a.c"
printf 'int pbx_b(void)\n{\n\treturn 0;\n}\n' >"$tmp/up/b.c"
printf '# bottom first\nlow: a.c\nhigh: b.c\n' >"$tmp/up/layers.txt"
test_expect_success 'a call up a layer fails, named' '
	graph 1 "$tmp/up" &&
	{ grep -q "a.c (low) calls up into b.c (high): pbx_b" "$tmp/out" || fail "the call named"; }
'
printf 'low: b.c\nhigh: a.c\n' >"$tmp/up/layers.txt"
test_expect_success 'a call down passes' 'graph 0 "$tmp/up"'
printf 'low: b.c\n' >"$tmp/up/layers.txt"
test_expect_success 'a file no layer lists fails' 'graph 1 "$tmp/up"'
test_expect_success 'src/cluster has no cycle longer than 2 files' 'graph 0 --verbose "$src/src/cluster"'
test_done
