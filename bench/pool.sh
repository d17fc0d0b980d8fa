#!/bin/sh
# pool.sh - benchmark: `pbx publish` and `pbx pull` of a 1,000-task sweep
# against S3 on loopback (moto behind tests/emulators/s3/faultproxy.py, no
# fault armed), paired with the baseline a user would reach for without
# pbx: `aws s3 sync`'s way, one object per harvested file, 10 requests at a
# time (the AWS CLI's default max_concurrent_requests), done with boto3
# (bench/pool_sync.py) through the same proxy.  Each round publishes under
# a fresh prefix (objects are create-only) and pulls into a fresh home;
# the order of the two tools alternates between rounds.  Then a second
# publish and a second pull of the last round (nothing new) are timed.
# Goals: publish and pull of 1,000 tasks each under 10 s on
# loopback, and no slower than the per-file sync.
# Usage: bench/pool.sh [PBX] [TASKS] [ROUNDS]
set -eu
PBX=${1:-build/src/cli/pbx}
NTASKS=${2:-1000}
ROUNDS=${3:-3}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/pbx-bench-pool.XXXXXX)
chmod 711 "$WORK"
export PBX_HOME=$WORK/home AWS_EC2_METADATA_DISABLED=true
export AWS_ACCESS_KEY_ID=AKIDBENCHPOOL AWS_SECRET_ACCESS_KEY=bench-pool-secret
mkdir -p "$PBX_HOME" "$WORK/exp"
chmod 711 "$PBX_HOME"   # the task user reaches the local cluster's shared directory
S3_PID=
trap '"$PBX" -q cluster stop --discard-results bp >/dev/null 2>&1 || true; [ -z "$S3_PID" ] || kill "$S3_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM   # dash runs no EXIT trap on a signal by itself

python3 "$SRC/tests/emulators/s3/faultproxy.py" --port 0 --port-file "$WORK/s3.port" --moto \
	--bucket bench >"$WORK/s3.out" 2>&1 &
S3_PID=$!
i=0
until [ -s "$WORK/s3.port" ]; do
	sleep 0.2; i=$((i + 1)); [ $i -lt 300 ] || { cat "$WORK/s3.out" >&2; exit 1; }
done
S3=http://127.0.0.1:$(cat "$WORK/s3.port")
cat >"$PBX_HOME/config.yaml" <<EOF
clusters:
  bp:
    cloud: local
    node_groups:
      - { name: node, count: 2, gpus: 0, cpus: 8 }
clouds:
  local: { address_base: 127.0.163.0, ssh_port: 22394, slurm_port_base: 30300 }
  aws: { region: us-east-1, s3_endpoint: "$S3" }
EOF
chmod 600 "$PBX_HOME/config.yaml"
cat >"$WORK/exp/experiment.yaml" <<EOF
name: pool-bench
command: >
  awk -v i={i} 'BEGIN { for (s = 1; s <= 20; s++) printf "{\"step\": %d, \"loss\": %.4f}\n", s, 1 / (s + i) }' > metrics.jsonl &&
  printf '%2048s' '' > out.txt
sweep: { grid: { i: [$(seq -s ', ' 1 "$NTASKS")] } }
outputs: [out.txt]
EOF
now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{printf "%.2f", $2 - $1}'; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
"$PBX" -q cluster start bp
pkg=$("$PBX" parrun --json "$WORK/exp/experiment.yaml" bp | python3 -c 'import json,sys; print(json.load(sys.stdin)["package"])')
i=0
until "$PBX" state --json "$pkg" 2>/dev/null | python3 -c 'import json,sys; c = json.load(sys.stdin)["counts"]; sys.exit(0 if c.get("COMPLETED") == sum(c.values()) else 1)'; do
	sleep 2; i=$((i + 1)); [ $i -lt 600 ] || { echo "the sweep did not complete" >&2; exit 1; }
done
"$PBX" -q harvest "$pkg" >/dev/null
files=$(find "$PBX_HOME/results/$pkg" -type f | wc -l)
echo "sweep: $NTASKS tasks, $files harvested files ($(du -sh "$PBX_HOME/results/$pkg" | cut -f1)); S3 on loopback (moto behind the fault proxy)"

# a pulling home: the same stores, no cluster
puller() {
	mkdir -p "$WORK/$1" && chmod 700 "$WORK/$1"
	sed -n '/^clouds:/,$p' "$PBX_HOME/config.yaml" | sed '/^  local:/d' >"$WORK/$1/config.yaml"
	chmod 600 "$WORK/$1/config.yaml"
}
pbx_round() { # ROUND: publish, then pull into a fresh home; prints the two times
	t0=$(now)
	"$PBX" -q publish --as bench "$pkg" "s3://bench/r$1/" >/dev/null
	t1=$(now)
	puller "pull$1"
	PBX_HOME=$WORK/pull$1 "$PBX" -q pull "s3://bench/r$1/" >/dev/null
	t2=$(now)
	echo "$(secs "$t0" "$t1") $(secs "$t1" "$t2")"
}
sync_round() { # ROUND: the per-file sync up, then down; prints the two times
	python3 "$SRC/bench/pool_sync.py" "$S3" bench "s$1" "$PBX_HOME/results/$pkg" "$WORK/sync$1"
}
: >"$WORK/rounds"
r=1
while [ $r -le "$ROUNDS" ]; do
	if [ $((r % 2)) = 1 ]; then p=$(pbx_round $r); s=$(sync_round $r); else s=$(sync_round $r); p=$(pbx_round $r); fi
	echo "$p $s" >>"$WORK/rounds"
	set -- $p $s
	printf 'round %d: publish %s s, pull %s s; per-file sync up %s s, down %s s\n' "$r" "$1" "$2" "$3" "$4"
	r=$((r + 1))
done
last=$ROUNDS
t0=$(now)
"$PBX" -q publish --as bench "$pkg" "s3://bench/r$last/" >/dev/null
t1=$(now)
PBX_HOME=$WORK/pull$last "$PBX" -q pull "s3://bench/r$last/" >/dev/null
t2=$(now)
col() { awk -v c="$1" '{print $c}' "$WORK/rounds"; }
ratio() { awk -v a="$1" -v b="$2" '{print $a / $b}' "$WORK/rounds" | median; }
echo "publish: pbx $(col 1 | median) s (one object per task), per-file sync $(col 3 | median) s; median paired ratio sync/pbx $(ratio 3 1)x"
echo "pull:    pbx $(col 2 | median) s (checked, into the store), per-file sync $(col 4 | median) s; median paired ratio sync/pbx $(ratio 4 2)x"
echo "again, nothing new: publish $(secs "$t0" "$t1") s, pull $(secs "$t1" "$t2") s"
