# lib.sh - what the object-store integration scripts share (sourced after
# TOOL and SRC are set): PY, the test venv's Python when there is one; W, a
# fresh work directory removed on exit with every process in PIDS; TAP's
# the harness (tests/cli/harness.sh: ok, skip, test_done); free_port(s) and wait_port on 127.0.0.1.
PY=python3
[ -x "$SRC/build/venv/bin/python3" ] && PY="$SRC/build/venv/bin/python3"
W=$(mktemp -d /tmp/pbx-objstore.XXXXXX)
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null; wait $p 2>/dev/null; done; rm -rf "$W"' EXIT
# shellcheck source=tests/cli/harness.sh
. "$SRC/tests/cli/harness.sh"
# free_port: a port of 127.0.0.1 nobody listens on now; free_ports N: N
# such ports, all different
free_port() { free_ports 1; }
free_ports() {
	$PY -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}
wait_port() { # wait_port PORT: up to 60 s
	i=0
	while [ $i -lt 600 ]; do
		$PY -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1)' "$1" 2>/dev/null && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
