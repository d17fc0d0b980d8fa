#!/bin/sh
# check-test-literals.sh [SOURCE_DIR] - fails when a shell test
# (tests/cli/t*.sh, or a body of tests/cli/cloud/ they share) holds a literal loopback address or port of its own
# instead of taking them from its slot (tests/cli/lib.sh, "Addresses and
# ports"): a 127.0.X.Y other than 127.0.0.1, a port of 1024 or more after
# an address (127.0.0.1:PORT, [HOST]:PORT), or in a port setting (port:,
# Port, ssh_port, slurm_port_base, *_PORT=, ListenAddress, a number of
# 1024 or more given to local_cluster, gce_emulator,
# h_start or a test's home()).  127.0.0.1
# with a port the kernel picks (port 0) needs no slot; a port under 1024
# (127.0.0.1:1, a port nothing listens on) is not flagged.
# tests/cli/literals-allowed lists the scripts not converted yet (one name
# a line, cloud/NAME.sh for a shared body; # comments); a listed script that holds none any more fails the
# check too, so the list only shrinks.  ctest: scripts.test_literals.
src=${1:-$(dirname "$0")/..}
allow=$src/tests/cli/literals-allowed
rc=0
found() {
	grep -nE -e '127\.0\.([1-9][0-9]*\.|0\.([2-9]|1[0-9]))' \
		-e '(127\.[0-9.]+|localhost|\]):([1-9][0-9]{4}|[1-9][0-9]{3})\b' \
		-e '([Pp]ort|PORT)[A-Za-z_]*["'\'']?( *[:=] *| +)["'\'']?([1-9][0-9]{4}|[1-9][0-9]{3})\b' \
		-e 'ListenAddress[= ][^ ]*:[0-9]' \
		-e '^[[:space:]]*(local_cluster|gce_emulator|home|h_start) .*[^:][[:space:]]"?([1-9][0-9]{4}|[1-9][0-9]{3})"?([[:space:]]|$)' "$1"
}
for f in "$src"/tests/cli/t*.sh "$src"/tests/cli/cloud/*.sh; do
	[ -f "$f" ] || continue
	n=${f#"$src"/tests/cli/}
	hits=$(found "$f")
	listed=no
	grep -qx "$n" "$allow" 2>/dev/null && listed=yes
	if [ -n "$hits" ] && [ $listed = no ]; then
		echo "$n: literal loopback addresses or ports (take them from the test's slot, tests/cli/lib.sh):"
		echo "$hits" | head -n 5 | sed 's/^/  /'
		rc=1
	elif [ -z "$hits" ] && [ $listed = yes ]; then
		echo "$n: holds no literal address or port any more: remove it from tests/cli/literals-allowed"
		rc=1
	fi
done
[ $rc = 0 ] && echo "no literal loopback address or port outside tests/cli/literals-allowed ($(grep -c "^t" "$allow" 2>/dev/null) scripts left)"
exit $rc
