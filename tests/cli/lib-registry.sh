# shellcheck shell=sh
# lib-registry.sh - what the registry image tests (t0273, t0278:
# environment: container: docker://REF on a local cluster) share: the
# test's own registry (tests/emulators/registry), a small busybox image,
# the head's registries.conf and an experiment that runs in the image.
# Sourced after lib.sh.
#
#   registry_needs           skips the test (exit 77) without ch-run, skopeo
#                            or umoci; checks busybox
#   registry_box             TEST_TMP/box.tar: a small root file system
#                            (busybox's shell and tools, an os-release of
#                            ID=pbxbox, /etc/pbx-image)
#   registry_push NAME TAG LAYER...   stores an image in TEST_TMP/reg,
#                            prints its manifest's digest
#   registry_serve [ARGS...] serves TEST_TMP/reg on 127.0.0.1:REG_PORT
#                            (the slot's spare port 0) with ARGS (--users
#                            ...), one line a request in REGLOG; REG_PID
#                            (after registry_stop: again, as it was)
#   registry_stop            stops it (for the test's EXIT trap)
#   registry_conf CLUSTER    the head's registries.conf (a node body's own
#                            /etc): the loopback registry speaks plain HTTP
#   box_exp NAME REF DIR     DIR/experiment.yaml: 4 tasks (x = 1..4) that
#                            run step.sh in the image REF, print where they
#                            ran and write result.txt

REG=$PBX_SOURCE_DIR/tests/emulators/registry/registry.py
REG_PORT=$(slot_port 0)
REGLOG=$TEST_TMP/registry.log

registry_needs() {
	for p in ch-run skopeo umoci; do
		command -v "$p" >/dev/null 2>&1 || {
			echo "1..0 # SKIP $p missing (scripts/install-deps.sh)"
			rm -rf "$TEST_TMP"
			exit 77
		}
	done
	[ -x /bin/busybox ]
	ok $? "busybox is installed (scripts/install-deps.sh)"
}

registry_box() {
	rb=$TEST_TMP/rootfs
	mkdir -p "$rb/bin" "$rb/etc"
	cp /bin/busybox "$rb/bin/busybox"
	for c in sh cat echo id ls test wc; do ln -s busybox "$rb/bin/$c"; done
	printf 'ID=pbxbox\nNAME="pbx test box"\n' >"$rb/etc/os-release"
	echo "pbx registry image" >"$rb/etc/pbx-image"
	tar -C "$rb" -cf "$TEST_TMP/box.tar" .
}

registry_push() {
	rp_name=$1 rp_tag=$2
	shift 2
	python3 "$REG" push --root "$TEST_TMP/reg" --name "$rp_name" --tag "$rp_tag" "$@"
}

registry_serve() {
	rm -f "$TEST_TMP/reg.port"
	python3 "$REG" serve --root "$TEST_TMP/reg" --port "$REG_PORT" --port-file "$TEST_TMP/reg.port" \
		--log "$REGLOG" "$@" >"$TEST_TMP/reg.out" 2>&1 &
	REG_PID=$!
	wait_started "$TEST_TMP/reg.port" "$REG_PID" "$TEST_TMP/reg.out" "the registry"
}

registry_stop() {
	[ -z "${REG_PID:-}" ] || {
		kill "$REG_PID" 2>/dev/null
		wait "$REG_PID" 2>/dev/null
		REG_PID=
	}
}

registry_conf() {
	mkdir -p "$PBX_HOME/clusters/$1/nodes/head/etc/containers"
	printf '[[registry]]\nlocation = "127.0.0.1:%s"\ninsecure = true\n' "$REG_PORT" \
		>"$PBX_HOME/clusters/$1/nodes/head/etc/containers/registries.conf"
}

box_exp() {
	mkdir -p "$3"
	cat >"$3/step.sh" <<'SH'
. /etc/os-release
echo "x=$1 uid=$(id -u) os=$ID image=$(cat /etc/pbx-image) slurmd=$([ -e /usr/sbin/slurmd ] && echo seen || echo absent)"
echo "$1" >result.txt
SH
	printf 'name: %s\ncommand: sh step.sh {x}\nsweep: { grid: { x: [1, 2, 3, 4] } }\noutputs: [result.txt]\nenvironment:\n  container: %s\n' \
		"$1" "$2" >"$3/experiment.yaml"
}
