#!/bin/sh
# `cmake --install` into a DESTDIR: pbx and pbx-train in bin, every man
# page of man/ in its section (man1, man5) byte for byte, nothing outside
# the prefix; the installed pbx runs, and man (man-db, which
# scripts/install-deps.sh installs) finds the pages in both sections.
set -u
BUILD=${1:?usage: install.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: install.sh BUILD_DIR SOURCE_DIR}
# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"
W=$(mktemp -d /tmp/pbx-install-test.XXXXXX)
trap 'rm -rf "$W"' EXIT
T=$W/root
P=$T/usr/local

DESTDIR=$T cmake --install "$BUILD" --prefix /usr/local >"$W/install.out" 2>&1 ||
	bail_out "cmake --install failed: $(tail -n 5 "$W/install.out")"
test_expect_success 'pbx and pbx-train are installed in bin and run' '
for b in pbx pbx-train; do
	[ -x "$P/bin/$b" ] || fail "no $b in bin: $(ls "$P/bin" 2>&1)"
done
"$P/bin/pbx" --version >"$W/version" 2>&1 || fail "the installed pbx does not run: $(cat "$W/version")"
"$P/bin/pbx" help parrun >/dev/null 2>&1 || fail "the installed pbx has no help for parrun"
"$P/bin/pbx-train" --help >/dev/null 2>&1 || fail "the installed pbx-train does not run"
'
test_expect_success 'every man page of man/ in its section, nothing outside the prefix' '
n=0
for page in "$SRC"/man/*.[0-9]; do
	name=${page##*/}
	sec=${name##*.}
	cmp -s "$page" "$P/share/man/man$sec/$name" || fail "man page $name is not installed in man$sec"
	n=$((n + 1))
done
[ -e "$P/share/man/man5/pbx-experiment.5" ] || fail "no section 5 page installed"
outside=$(find "$T" ! -type d | grep -v "^$P/" || true)
[ -z "$outside" ] || fail "files installed outside the prefix: $outside"
'
echo "# $n man pages in man1 and man5, pbx and pbx-train in bin"
test_lazy_prereq MAN 'command -v man' 'man is not installed here (scripts/install-deps.sh installs man-db)'
test_expect_success MAN 'man finds and renders pages of both sections' '
	for p in "1 pbx-parrun" "5 pbx-experiment" "1 pbx-train"; do
		# shellcheck disable=SC2086 # section and name
		MANPAGER=cat MANWIDTH=80 man -M "$P/share/man" $p >"$W/man.out" 2>"$W/man.err" ||
			fail "man -M ... $p: $(cat "$W/man.err")"
		grep -q "${p#* }" "$W/man.out" || fail "man $p shows: $(head -n 5 "$W/man.out")"
	done
'
test_done
