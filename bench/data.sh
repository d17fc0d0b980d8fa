#!/bin/sh
# data.sh - benchmark: staging a dataset of many small objects and one big
# one from S3 (moto on loopback, behind tests/emulators/s3/faultproxy.py,
# no fault armed) with `pbx parrun` (an experiment whose data: names the
# prefix; docs/data.md) against `rclone copy` of the same prefix (Debian 12
# has rclone 1.60; its defaults: 4 transfers, 8 checkers) into a local
# directory.  Paired rounds, the order alternating: each round pbx stages
# from scratch (the cluster's copy and pbx's local cache removed) and
# rclone copies into a fresh directory; then each is run again with
# nothing changed.  pbx's time is the parrun's less that of a parrun of
# the same experiment without data: (submission and push, measured once).
# Goals (issue 38): at least rclone's speed on the first staging, and a
# no-op in one listing round.
# Usage: bench/data.sh [PBX] [SMALL_OBJECTS] [BIG_MB] [ROUNDS]
set -eu
PBX=${1:-build/src/cli/pbx}
NSMALL=${2:-10000}
BIGMB=${3:-1000}
ROUNDS=${4:-3}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v rclone >/dev/null 2>&1 || { echo "data.sh: rclone is not installed (apt-get install rclone)" >&2; exit 2; }
WORK=$(mktemp -d /var/tmp/pbx-bench-data.XXXXXX)
chmod 711 "$WORK"
export PBX_HOME=$WORK/home AWS_EC2_METADATA_DISABLED=true
export AWS_ACCESS_KEY_ID=AKIDBENCHDATA AWS_SECRET_ACCESS_KEY=bench-data-secret
mkdir -p "$PBX_HOME" "$WORK/exp" "$WORK/bare"
chmod 711 "$PBX_HOME"
S3_PID=
trap '"$PBX" -q cluster stop --discard-results bd >/dev/null 2>&1 || true; [ -z "$S3_PID" ] || kill "$S3_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM

python3 "$SRC/tests/emulators/s3/faultproxy.py" --port 0 --port-file "$WORK/s3.port" --moto \
	--bucket bench >"$WORK/s3.out" 2>&1 &
S3_PID=$!
i=0
until [ -s "$WORK/s3.port" ]; do
	sleep 0.2; i=$((i + 1)); [ $i -lt 300 ] || { cat "$WORK/s3.out" >&2; exit 1; }
done
S3=http://127.0.0.1:$(cat "$WORK/s3.port")
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s)
python3 - "$S3" "$NSMALL" "$BIGMB" <<'PY'
import os, sys
from concurrent.futures import ThreadPoolExecutor
import boto3
from boto3.s3.transfer import TransferConfig
s3url, n, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s3 = boto3.client("s3", endpoint_url=s3url, region_name="us-east-1")
def put(i):
    s3.put_object(Bucket="bench", Key="ds/small/%02d/f%05d.txt" % (i % 100, i), Body=os.urandom(1024),
                  ContentType="application/octet-stream")
with ThreadPoolExecutor(16) as ex:
    list(ex.map(put, range(n)))
path = "/var/tmp/pbx-bench-data-big.bin"
with open(path, "wb") as f:
    for _ in range(big):
        f.write(os.urandom(1 << 20))
s3.upload_file(path, "bench", "ds/big.bin", Config=TransferConfig(multipart_chunksize=64 << 20))
os.unlink(path)
PY
echo "dataset: $NSMALL objects of 1 KiB + one of $BIGMB MiB under s3://bench/ds/ (made in $(($(date +%s) - t0)) s)"

cat >"$PBX_HOME/config.yaml" <<EOF
clusters:
  bd:
    cloud: local
    node_groups:
      - { name: node, count: 1, gpus: 0 }
clouds:
  local: { address_base: 127.0.168.0, ssh_port: 22398, slurm_port_base: 30500 }
  aws: { region: us-east-1, s3_endpoint: "$S3" }
EOF
chmod 600 "$PBX_HOME/config.yaml"
printf 'name: data-bench\ncommand: "true"\ndata:\n  - { from: s3://bench/ds/, to: data/ds }\n' >"$WORK/exp/experiment.yaml"
printf 'name: data-bare\ncommand: "true"\n' >"$WORK/bare/experiment.yaml"
# rclone 1.60's S3 client refuses AWS_CA_BUNDLE with its own transport
# (LoadCustomCABundleError); the endpoint is plain http on loopback
unset AWS_CA_BUNDLE
export RCLONE_CONFIG_B_TYPE=s3 RCLONE_CONFIG_B_PROVIDER=Other RCLONE_CONFIG_B_ENDPOINT=$S3 \
	RCLONE_CONFIG_B_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_B_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
	RCLONE_CONFIG_B_REGION=us-east-1
now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{printf "%.2f", $2 - $1}'; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
timed() { t0=$(now); "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }; secs "$t0" "$(now)"; }

"$PBX" -q cluster start bd
bare=$(timed "$PBX" -q parrun "$WORK/bare/experiment.yaml" bd)
STAGED=$PBX_HOME/clusters/bd/shared/pbx/data
pbx_first() { # a staging from scratch: the cluster's copy and the local cache gone
	rm -rf "$STAGED" "$PBX_HOME/data"
	sync
	timed "$PBX" -q parrun "$WORK/exp/experiment.yaml" bd
}
rclone_first() {
	rm -rf "$WORK/rc"
	sync
	timed rclone copy --config /dev/null b:bench/ds "$WORK/rc"
}
: >"$WORK/rounds"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	if [ $((r % 2)) = 1 ]; then p=$(pbx_first); c=$(rclone_first); else c=$(rclone_first); p=$(pbx_first); fi
	p2=$(timed "$PBX" -q parrun "$WORK/exp/experiment.yaml" bd)
	c2=$(timed rclone copy --config /dev/null b:bench/ds "$WORK/rc")
	echo "$p $c $p2 $c2" >>"$WORK/rounds"
	printf 'round %d: first: pbx parrun %s s, rclone copy %s s; nothing new: pbx parrun %s s, rclone %s s\n' "$r" "$p" "$c" "$p2" "$c2"
	r=$((r + 1))
done
n=$(find "$STAGED" -type f ! -name '.pbx-data*' | wc -l)
m=$(find "$WORK/rc" -type f | wc -l)
echo "staged: $n files on the cluster, $m copied by rclone; a parrun without data: $bare s"
col() { awk -v c="$1" '{print $c}' "$WORK/rounds"; }
net() { awk -v c="$1" -v b="$bare" '{print $c - b}' "$WORK/rounds"; }
ratio() { awk -v a="$1" -v b="$2" -v z="$bare" '{print $a / ($b - z)}' "$WORK/rounds" | median; }
echo "first staging: pbx $(net 1 | median) s (parrun $(col 1 | median) s less $bare s), rclone $(col 2 | median) s; median paired ratio rclone/pbx $(ratio 2 1)x (goal >= 1)"
echo "nothing new:   pbx $(net 3 | median) s (parrun $(col 3 | median) s), rclone $(col 4 | median) s"
