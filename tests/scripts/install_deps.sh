#!/bin/sh
# scripts/install-deps.sh against stand-ins for apt-get, dpkg-query and
# systemctl (nothing is installed): a user sees a few lines, apt's full
# output goes to a log file whose path is printed, and when apt fails the
# script fails (non-zero) and shows the end of the log.
set -u
SRC=${1:?usage: install_deps.sh SOURCE_DIR}
# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"
T=$(mktemp -d /tmp/pbx-deps-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir "$T/bin"
# dpkg-query: every package is missing, unless $T/installed exists.
cat >"$T/bin/dpkg-query" <<'EOF'
#!/bin/sh
[ -e "$STUB_DIR/installed" ] && echo 'install ok installed' || echo 'unknown ok not-installed'
EOF
# apt-get: prints as much as the real one on a fresh machine (about 1,450
# lines), records its calls, fails when asked to.
cat >"$T/bin/apt-get" <<'EOF'
#!/bin/sh
echo "$*" >>"$STUB_DIR/calls"
echo "Hit:1 http://deb.debian.org/debian bookworm InRelease"
i=0
while [ "$1" = install ] && [ "$i" -lt 725 ]; do
	echo "Unpacking libstub$i (1.0) ..."
	echo "Setting up libstub$i (1.0) ..."
	i=$((i + 1))
done
case " $* " in *" $STUB_FAIL "*)
	echo "E: Unable to locate package no-such-package" >&2
	exit 100 ;;
esac
EOF
printf '#!/bin/sh\nexit 3\n' >"$T/bin/systemctl"
chmod +x "$T/bin/"*

# deps FAIL_ON: runs install-deps.sh with the stand-ins; output in $T/out,
# status in $rc.
deps() {
	rm -f "$T/calls" "$T/deps.log"
	rc=0
	env PATH="$T/bin:$PATH" STUB_DIR="$T" STUB_FAIL="$1" PBX_DEPS_LOG="$T/deps.log" \
		sh "$SRC/scripts/install-deps.sh" >"$T/out" 2>&1 || rc=$?
}

test_expect_success 'a successful install shows a few lines, apt-get'"'"'s output in the log' '
deps none
[ "$rc" = 0 ] || fail "install-deps failed with a working apt-get ($rc): $(tail -n 5 "$T/out")"
lines=$(wc -l <"$T/out")
[ "$lines" -le 6 ] || fail "install-deps printed $lines lines (at most 6 wanted): $(head -n 8 "$T/out")"
grep -q "$T/deps.log" "$T/out" || fail "install-deps does not say where its log is: $(cat "$T/out")"
[ "$(grep -c "^Setting up libstub" "$T/deps.log")" = 725 ] || fail "the log lacks the output of apt-get"
grep -q "^install .*man-db" "$T/calls" || fail "install-deps installs no man reader: $(cat "$T/calls")"
grep -q "^install .*slurm-wlm" "$T/calls" || fail "install-deps does not install slurm-wlm"
echo "# a successful install: $lines lines shown, 1,450 in the log"
'

for step in update install; do
	test_expect_success "apt-get $step failing fails install-deps, which shows why and names its log" '
	deps "$step"
	[ "$rc" != 0 ] || fail "install-deps exits 0 although apt-get $step failed"
	grep -q "E: Unable to locate package no-such-package" "$T/out" ||
		fail "install-deps does not show why apt-get $step failed: $(cat "$T/out")"
	grep -q "$T/deps.log" "$T/out" || fail "a failed install-deps does not name its log"
	lines=$(wc -l <"$T/out")
	[ "$lines" -le 40 ] || fail "a failed apt-get $step: $lines lines shown (at most 40 wanted)"
	echo "# apt-get $step failing: exit status $rc, $lines lines shown"
	'
done

test_expect_success 'with everything installed, apt-get does not run' '
touch "$T/installed"
deps none
[ "$rc" = 0 ] || fail "install-deps failed with everything installed ($rc)"
[ ! -e "$T/calls" ] || fail "install-deps ran apt-get with everything installed"
[ "$(wc -l <"$T/out")" -le 2 ] || fail "nothing to install, yet: $(cat "$T/out")"
'
test_done
