#!/bin/bash
# sshd.sh - runs one group of the SSH integration tests against real sshd
# instances on loopback, and always kills them afterwards.
#
#   sshd.sh run TEST_BINARY GROUP    set up keys, start sshd(s), run the group
#   sshd.sh start NAME ADDR HOSTKEY [PORT]   (used by run and by the tests)
#   sshd.sh stop NAME
#
# Everything lives in a private temporary directory ($PBX_TEST_DIR).  Ports
# are picked at random and proven free by sshd binding them (a failed bind
# makes sshd exit, and another port is tried), so parallel ctest runs do not
# collide.  Only 127.0.0.0/8 addresses are ever used.
#
# Sessions get an empty home of their own ($PBX_TEST_DIR/home) as HOME, as
# the local provider's node sshds do: bash sources ~/.bashrc for commands
# run by sshd, and the tester's own (here one running `pyenv init`, 0.15 s
# of CPU per exec) would otherwise run in every session of every test.
set -u

sshd_start() {   # NAME ADDR HOSTKEY [PORT]; PBX_TEST_SSHD_FORCE: a ForceCommand
	local name=$1 addr=$2 hostkey=$3 want=${4:-} port try pid
	local force=()
	[ -n "${PBX_TEST_SSHD_FORCE:-}" ] && force=(-o "ForceCommand=$PBX_TEST_SSHD_FORCE")
	mkdir -p /run/sshd 2>/dev/null
	for try in $(seq 1 40); do
		port=${want:-$((10000 + RANDOM % 22000))}
		rm -f "$PBX_TEST_DIR/$name.pid"
		/usr/sbin/sshd -D -E "$PBX_TEST_DIR/$name.log" -f /dev/null -h "$hostkey" \
			-o ListenAddress="$addr:$port" \
			-o AuthorizedKeysFile="$PBX_TEST_DIR/authorized_keys" \
			-o PidFile="$PBX_TEST_DIR/$name.pid" -o StrictModes=no \
			-o PermitRootLogin=prohibit-password -o "Subsystem=sftp internal-sftp" \
			-o MaxStartups=200 -o MaxSessions=20 -o LogLevel=${PBX_TEST_SSHD_LOGLEVEL:-ERROR} \
			-o UseDNS=no -o SetEnv=HOME="$PBX_TEST_DIR/home" "${force[@]}" </dev/null >/dev/null 2>>"$PBX_TEST_DIR/$name.log" &
		pid=$!
		echo "$pid" >"$PBX_TEST_DIR/$name.bgpid"
		while kill -0 "$pid" 2>/dev/null && [ ! -s "$PBX_TEST_DIR/$name.pid" ]; do
			sleep 0.02
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "$port"
			return 0
		fi
		wait "$pid" 2>/dev/null
		[ -n "$want" ] && sleep 0.1   # a fixed port may still be closing
	done
	echo "sshd.sh: cannot start sshd $name on $addr" >&2
	cat "$PBX_TEST_DIR/$name.log" >&2
	return 1
}

sshd_stop() {   # NAME
	local f=$PBX_TEST_DIR/$1.bgpid pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null
	while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
	rm -f "$f" "$PBX_TEST_DIR/$1.pid"
}

cleanup() {
	local f
	for f in "$PBX_TEST_DIR"/*.bgpid; do
		[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	[ -n "${SSH_AGENT_PID:-}" ] && kill "$SSH_AGENT_PID" 2>/dev/null
	rm -rf "$PBX_TEST_DIR"
}

keys() {
	local k
	for k in host1 host2 host3 id wrong hostile; do
		ssh-keygen -q -t ed25519 -N '' -C "pbx-test-$k" -f "$PBX_TEST_DIR/$k" || return 1
	done
	mkdir -p "$PBX_TEST_DIR/nopub"
	cp "$PBX_TEST_DIR/id" "$PBX_TEST_DIR/nopub/id"
	{
		cat "$PBX_TEST_DIR/id.pub"
		printf 'command="cat %s/hostile.tar",no-pty %s\n' "$PBX_TEST_DIR" \
			"$(cat "$PBX_TEST_DIR/hostile.pub")"
	} >"$PBX_TEST_DIR/authorized_keys"
}

run() {   # BINARY GROUP
	local bin=$1 group=$2 tool rc
	for tool in /usr/sbin/sshd ssh ssh-keygen ssh-agent ssh-add tar sha256sum flock; do
		if ! command -v "$tool" >/dev/null; then
			echo "1..0 # SKIP $tool is not installed (apt-get install openssh-server)"
			exit 77
		fi
	done
	PBX_TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/pbx-ssh.XXXXXX") || exit 1
	export PBX_TEST_DIR PBX_TEST_SSHD_SH=$0
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	keys || exit 1
	mkdir -m 700 "$PBX_TEST_DIR/home" || exit 1
	PBX_TEST_PORT1=$(sshd_start sshd1 127.0.0.1 "$PBX_TEST_DIR/host1") || exit 1
	export PBX_TEST_PORT1
	if [ "$group" = jump ]; then
		PBX_TEST_PORT2=$(sshd_start sshd2 127.0.0.2 "$PBX_TEST_DIR/host3") || exit 1
		export PBX_TEST_PORT2
	fi
	if [ "$group" = chatty ]; then
		# A shell that greets on stdout and stderr before every command, as
		# a chatty ~/.bashrc does (the last line without a newline).
		PBX_TEST_PORT2=$(PBX_TEST_SSHD_FORCE="printf 'welcome to the cluster\\n'; \
echo 'stderr greeting' >&2; printf 'no newline here'; eval \"\$SSH_ORIGINAL_COMMAND\"" \
			sshd_start chatty 127.0.0.3 "$PBX_TEST_DIR/host2") || exit 1
		export PBX_TEST_PORT2
	fi
	if [ "$group" = auth ]; then
		eval "$(ssh-agent -s -a "$PBX_TEST_DIR/agent.sock")" >/dev/null || exit 1
		ssh-add -q "$PBX_TEST_DIR/id" 2>/dev/null || exit 1
	fi
	"$bin" "$group"
	rc=$?
	if [ "$rc" != 0 ]; then
		for f in "$PBX_TEST_DIR"/*.log; do
			[ -s "$f" ] && { echo "# --- $f"; sed 's/^/# /' "$f"; }
		done
	fi
	return "$rc"
}

case ${1:-} in
run) shift; run "$@" ;;
start) shift; sshd_start "$@" ;;
stop) shift; sshd_stop "$@" ;;
*) echo "usage: sshd.sh run BINARY GROUP | start NAME ADDR HOSTKEY [PORT] | stop NAME" >&2; exit 2 ;;
esac
