#!/bin/sh
# clang_format.sh SOURCE_DIR - every C file under src/ and tests/ is as
# clang-format (Debian 12's, version 14) formats it with the repository's
# .clang-format (docs/STYLE.md).  Prints the files that differ and how to fix
# them; exit 1 if any does.
set -u
src=$1
cd "$src" || exit 1
if ! command -v clang-format >/dev/null 2>&1; then
	echo "not ok 1 - clang-format is not installed (sh scripts/install-deps.sh installs it)"
	exit 1
fi
bad=0 n=0
for f in $(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h' 2>/dev/null ||
	find src tests -name '*.[ch]'); do
	[ -f "$f" ] || continue
	n=$((n + 1))
	if ! clang-format --style=file "$f" | cmp -s - "$f"; then
		echo "# $f differs from clang-format's output: clang-format -i $f"
		bad=$((bad + 1))
	fi
done
if [ $bad = 0 ]; then
	echo "ok 1 - $n C files are formatted as .clang-format says"
else
	echo "not ok 1 - $bad of $n C files are not formatted as .clang-format says"
fi
echo "1..1"
[ $bad = 0 ]
