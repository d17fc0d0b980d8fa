#!/bin/sh
# gce_create.sh - the create phase of `pbx cluster start` for big Compute
# Engine clusters against the emulator (tests/emulators/gce) with node
# bodies off (--no-bodies: instances become RUNNING without an sshd, so no
# bootstrap): wall time from the start until the store has every node
# "running" with its address, the compute API calls the emulator counted,
# and the stop (wall time, calls).  pbx is ended once the create phase is
# over (it would go on to wait for sshd).
# Usage: sh bench/gce_create.sh [NODES...]   (default: 500 2000)
set -eu
cd "$(dirname "$0")/.."
PBX=${PBX:-$PWD/build/src/cli/pbx}
EMU=${PBX_GCE_EMULATOR:-$PWD/tests/emulators/gce/emulator.py}
[ -x "$PBX" ] || { echo "build pbx first ($PBX)" >&2; exit 1; }
[ -f "$EMU" ] || { echo "no emulator at $EMU" >&2; exit 1; }
W=$(mktemp -d /tmp/pbx-bench-gce.XXXXXX)
EMU_PID=
trap '[ -z "$EMU_PID" ] || kill $EMU_PID 2>/dev/null; rm -rf "$W"' EXIT
export PBX_HOME="$W/home"
mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C bench -f "$PBX_HOME/id"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$W/sa.pem" 2>/dev/null
now() { date +%s.%N; }
calls() { python3 -c 'import json,sys,urllib.request; d=json.load(urllib.request.urlopen("http://127.0.0.1:%s/_emulator/calls" % sys.argv[1])); print(d["total"], " ".join("%s=%d" % (k.split()[-1], v) for k, v in sorted(d["calls"].items())))' "$PORT"; }

for nodes in ${@:-500 2000}; do
	rm -rf "$W/emu" "$W/port"
	python3 "$EMU" --port 0 --port-file "$W/port" --state-dir "$W/emu" --project pbx-test \
		--no-bodies --network-block 127.0.80.0/20 --nat-block 127.0.96.0/20 \
		--fault op_delay=0.05 >"$W/emu.out" 2>&1 &
	EMU_PID=$!
	while [ ! -s "$W/port" ]; do sleep 0.1; done
	PORT=$(cat "$W/port")
	python3 - "$W/sa.pem" "$PBX_HOME/sa.json" "$PORT" <<'PY'
import json, sys, urllib.request
pem, out, port = sys.argv[1:]
json.dump({"type": "service_account", "project_id": "pbx-test", "private_key": open(pem).read(),
           "client_email": "bench@pbx-test.iam.gserviceaccount.com",
           "token_uri": "http://127.0.0.1:%s/token" % port}, open(out, "w"))
urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/_emulator/service-accounts" % port,
    data=json.dumps({"key_file": out}).encode(), headers={"Content-Type": "application/json"}))
PY
	chmod 600 "$PBX_HOME/sa.json"
	cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  big:
    cloud: gce
    login_user: root
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    node_groups:
      - { name: node, count: $nodes, machine_type: e2-standard-2 }
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $PBX_HOME/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
CONFIG
	chmod 600 "$PBX_HOME/config.yaml"
	t0=$(now)
	"$PBX" -q cluster start big >/dev/null 2>&1 &
	pid=$!
	want=$((nodes + 1))
	while :; do
		got=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM nodes WHERE state = 'running' AND address != ''" 2>/dev/null || echo 0)
		[ "$got" = "$want" ] && break
		kill -0 $pid 2>/dev/null || { echo "pbx ended before the create phase was over" >&2; exit 1; }
		sleep 0.05
	done
	t1=$(now)
	kill $pid 2>/dev/null || true
	wait $pid 2>/dev/null || true
	echo "create $nodes+1 nodes: $(echo "$t1 - $t0" | bc) s, compute calls: $(calls)"
	python3 -c 'import sys,urllib.request; urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/_emulator/calls/reset" % sys.argv[1], data=b"{}", headers={"Content-Type": "application/json"}))' "$PORT"
	t0=$(now)
	"$PBX" -q cluster stop --discard-results big
	t1=$(now)
	echo "stop   $nodes+1 nodes: $(echo "$t1 - $t0" | bc) s, compute calls: $(calls)"
	kill $EMU_PID 2>/dev/null || true
	wait $EMU_PID 2>/dev/null || true
	EMU_PID=
	rm -f "$PBX_HOME/pbx.db"*
done
