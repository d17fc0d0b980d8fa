#!/bin/sh
# ec2_create.sh - the create phase of `pbx cluster start` for a big EC2
# cluster against moto with signature checking on (tests/emulators/aws/
# ec2_harness.py) and node bodies off (--no-bodies: no sshd, so no
# bootstrap): wall time from the start until the store has every node
# "running" with its address, the EC2 calls the harness's proxy counted by
# action, and the stop (wall time, calls).  pbx is ended once the create
# phase is over (it would go on to wait for sshd).  Subnet 127.0.60.0/22.
# Usage: sh bench/ec2_create.sh [NODES...]   (default: 500; at most 1000)
set -eu
cd "$(dirname "$0")/.."
PBX=${PBX:-$PWD/build/src/cli/pbx}
H=${PBX_EC2_HARNESS:-$PWD/tests/emulators/aws/ec2_harness.py}
[ -x "$PBX" ] || { echo "build pbx first ($PBX)" >&2; exit 1; }
W=$(mktemp -d /tmp/pbx-bench-ec2.XXXXXX)
H_PID=
trap '[ -z "$H_PID" ] || kill $H_PID 2>/dev/null; rm -rf "$W"' EXIT
export PBX_HOME="$W/home" AWS_EC2_METADATA_DISABLED=true
mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C bench -f "$PBX_HOME/id"
now() { date +%s.%N; }
calls() { python3 -c 'import json,sys,urllib.request; d=json.load(urllib.request.urlopen(sys.argv[1] + "_harness/calls"))["calls"]; print(json.dumps(d))' "$URL"; }
delta() { python3 -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); d={k: b[k]-a.get(k,0) for k in b if b[k]-a.get(k,0)}; print(sum(d.values()), " ".join("%s=%d" % kv for kv in sorted(d.items())))' "$1" "$2"; }

for nodes in ${@:-500}; do
	rm -f "$W/env.json"
	python3 "$H" --state-dir "$W/h" --env-file "$W/env.json" --no-bodies \
		--subnet 127.0.60.0/22 >"$W/h.log" 2>&1 &
	H_PID=$!
	while [ ! -s "$W/env.json" ]; do sleep 0.1; done
	e() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$W/env.json"; }
	URL=$(e 'd["url"]')
	export AWS_ACCESS_KEY_ID="$(e 'd["pbx"]["access_key"]')" AWS_SECRET_ACCESS_KEY="$(e 'd["pbx"]["secret_key"]')"
	cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  big:
    cloud: aws
    login_user: admin
    ssh_key: $PBX_HOME/id
    image: $(e 'd["ami"]')
    node_groups:
      - { name: node, count: $nodes, machine_type: c5.large }
clouds:
  aws: { region: us-east-1, endpoint: "$URL", subnet: $(e 'd["subnets"][0]') }
CONFIG
	chmod 600 "$PBX_HOME/config.yaml"
	c0=$(calls)
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
	c1=$(calls)
	echo "create $nodes+1 nodes: $(echo "$t1 - $t0" | bc) s, EC2 calls: $(delta "$c0" "$c1")"
	# each call's time as pbx logged it (request log), in order
	echo "  per call (ms): $(sqlite3 "$PBX_HOME/pbx.db" "SELECT detail FROM events WHERE kind = 'http'" |
		sed -n 's/.*attempt [0-9]*, \([0-9]*\) ms.*/\1/p' | tr '\n' ' ')"
	t0=$(now)
	"$PBX" -q cluster stop --discard-results big
	t1=$(now)
	echo "stop   $nodes+1 nodes: $(echo "$t1 - $t0" | bc) s, EC2 calls: $(delta "$c1" "$(calls)")"
	kill $H_PID 2>/dev/null || true
	wait $H_PID 2>/dev/null || true
	H_PID=
	rm -rf "$PBX_HOME/pbx.db"* "$W/h"
done
