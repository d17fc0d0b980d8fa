#!/bin/sh
# data.sh - benchmark: staging a dataset of many small objects and one big
# one with `pbx parrun` (an experiment whose data: names the prefix;
# docs/data.md) against `rclone copy` of the same prefix (Debian 12 has
# rclone 1.60; its defaults: 4 transfers, 8 checkers, objects above 250 MiB
# in 4 ranged streams) into a local directory, from two stores on
# loopback: S3 (moto behind tests/emulators/s3/faultproxy.py, no fault
# armed) and Cloud Storage (the GCE emulator's, tests/emulators/gce;
# rclone's gcs backend pointed at it with --gcs-endpoint and the
# emulator's static token).  Paired rounds per store, the order
# alternating: each round pbx stages from scratch (the cluster's copy and
# pbx's local cache removed) and rclone copies into a fresh directory;
# then each is run again with nothing changed.  pbx's time is the
# parrun's less that of a parrun of the same experiment without data:
# (submission and push, measured once).
# Goals: at least rclone's speed on the first staging, and a no-op in one
# listing round.
#
# Usage: bench/data.sh [PBX] [SMALL_OBJECTS] [BIG_MB] [ROUNDS]
#   (SMALL_OBJECTS 0: the large object alone)
# Environment: BENCH_STORES="s3 gs" (the default: both, in that order);
# BENCH_NORANGE=1 adds to each round a first staging by pbx with ranged
# reads off (PBX_OBJSTORE_RANGE_MIN above the large object: one GET, as
# pbx read it before), paired with the others; BENCH_BASE=PBX2 adds a
# first staging by another pbx build (a baseline: an earlier commit).
# Each first staging's peak memory (maximum resident set, /usr/bin/time)
# is printed beside its time: pbx's staging runs in the parrun's process.
# BENCH_HEAD=1: Cloud Storage only, staged by the head of a cluster on the
# Compute Engine emulator's node bodies whose head has a service account
# (docs/data.md, "Credentials": the head's pbx downloads and unpacks on
# the head, no SSH hop for the bytes); "first staging" then removes the
# head's cache and the cluster's copy, and the peak memory is the user's
# pbx's, not the head's; a BENCH_BASE's staging runs the baseline on the
# head too (pbx-head pointed at it for that staging).
# BENCH_STREAM=1: staged on a `cloud: ssh` cluster (docs/ssh-clusters.md)
# whose login node is the local cluster's head, logged in as root: the
# head is not this machine's to pbx, so every object goes through the
# stream (one tar over SSH), as to a university cluster or a cloud head
# without an identity of its own; BENCH_RATE=BYTES (Cloud Storage only)
# paces each download connection of the emulator to that many bytes a
# second, as a real store's connection is limited by the network;
# BENCH_LATENCY=SECONDS (Cloud Storage only) makes each call of the
# emulator wait that long before its answer, as a real store's round trip
# does.
# Addresses and ports: the local cluster's from a test slot
# (tests/cli/lib.sh, sourced: SLOT_NET's LOOP_NET, SSH_PORT,
# SLURM_PORT_BASE), the emulators on 127.0.0.1 ports the kernel picks.
set -eu
PBX=${1:-build/src/cli/pbx}
NSMALL=${2:-10000}
BIGMB=${3:-1000}
ROUNDS=${4:-3}
STORES=${BENCH_STORES:-s3 gs}
[ -z "${BENCH_HEAD:-}" ] || STORES=gs
[ -z "${BENCH_RATE:-}" ] || STORES=gs
[ -z "${BENCH_LATENCY:-}" ] || STORES=gs
CL=bd
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v rclone >/dev/null 2>&1 || { echo "data.sh: rclone is not installed (apt-get install rclone)" >&2; exit 2; }
# the slot: addresses and ports of the local cluster (and TEST_TMP, where
# the GCE emulator keeps its objects)
export PBX_SOURCE_DIR="$SRC"
# shellcheck source=tests/cli/lib.sh
. "$SRC/tests/cli/lib.sh"
set -eu
WORK=$(mktemp -d /var/tmp/pbd.XXXXXX) # short: slurmd's sockets under a node body's root must fit 108 bytes
chmod 711 "$WORK"
export PBX_HOME=$WORK/home
export AWS_ACCESS_KEY_ID=AKIDBENCHDATA AWS_SECRET_ACCESS_KEY=bench-data-secret
mkdir -p "$PBX_HOME" "$WORK/bare"
chmod 711 "$PBX_HOME"
S3_PID=
TOKEN=bench-data-token
trap '"$PBX" -q cluster stop --discard-results bd >/dev/null 2>&1 || true; [ -z "$S3_PID" ] || kill "$S3_PID" 2>/dev/null; gce_emulator_stop; rm -rf "$WORK" "$TEST_TMP"' EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM

# ---- the stores --------------------------------------------------------
S3=-
if [ -z "${BENCH_HEAD:-}" ]; then
	python3 "$SRC/tests/emulators/s3/faultproxy.py" --port 0 --port-file "$WORK/s3.port" --moto \
		--bucket bench >"$WORK/s3.out" 2>&1 &
	S3_PID=$!
	wait_started "$WORK/s3.port" "$S3_PID" "$WORK/s3.out" "the S3 emulator"
	S3=http://127.0.0.1:$(cat "$WORK/s3.port")
	gce_storage_emulator --bucket bench --static-token "$TOKEN"
else
	CLOUD=gce
	cloud_emulator --bucket bench --static-token "$TOKEN"
fi
GS=http://127.0.0.1:$PORT
[ -z "${BENCH_RATE:-}" ] || emu_post faults "{\"storage_rate\": $BENCH_RATE}" >/dev/null
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"

# the dataset, the same in both stores: NSMALL objects of 1 KiB under
# ds/small/, one of BIGMB MiB at ds/big.bin
t0=$(date +%s)
python3 - "$S3" "$GS" "$TOKEN" "$NSMALL" "$BIGMB" "$STORES" <<'PY'
import http.client, os, sys, urllib.parse
from concurrent.futures import ThreadPoolExecutor
import boto3
from boto3.s3.transfer import TransferConfig
s3url, gsurl, token, n, big, stores = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6].split()
small = [("ds/small/%02d/f%05d.txt" % (i % 100, i), os.urandom(1024)) for i in range(n)]
path = "/var/tmp/pbx-bench-data-big.bin"
with open(path, "wb") as f:
    for _ in range(big):
        f.write(os.urandom(1 << 20))
if "s3" in stores:
    s3 = boto3.client("s3", endpoint_url=s3url, region_name="us-east-1")
    def put(kv):
        s3.put_object(Bucket="bench", Key=kv[0], Body=kv[1], ContentType="application/octet-stream")
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(put, small))
    s3.upload_file(path, "bench", "ds/big.bin", Config=TransferConfig(multipart_chunksize=64 << 20))
if "gs" in stores:
    host, port = urllib.parse.urlsplit(gsurl).netloc.split(":")
    def gput(name, body):  # a connection each: the emulator may close an idle one
        c = http.client.HTTPConnection(host, int(port), timeout=600)
        c.request("POST", "/upload/storage/v1/b/bench/o?uploadType=media&name=" + urllib.parse.quote(name, safe=""),
                  body, {"Authorization": "Bearer " + token, "Content-Type": "application/octet-stream"})
        r = c.getresponse()
        r.read()
        c.close()
        if r.status != 200:
            sys.exit("gs put %s: %d" % (name, r.status))
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda kv: gput(*kv), small))
    with open(path, "rb") as f:
        gput("ds/big.bin", f)
os.unlink(path)
PY
echo "dataset: $NSMALL objects of 1 KiB + one of $BIGMB MiB under ds/ in: $STORES (made in $(($(date +%s) - t0)) s)"
[ -z "${BENCH_LATENCY:-}" ] || emu_post faults "{\"storage_latency\": $BENCH_LATENCY}" >/dev/null

if [ -z "${BENCH_HEAD:-}" ]; then
	cat >"$PBX_HOME/config.yaml" <<EOF
clusters:
  bd:
    cloud: local
    node_groups:
      - { name: node, count: 1, gpus: 0 }
clouds:
  local: { address_base: $LOOP_NET, ssh_port: $SSH_PORT, slurm_port_base: $SLURM_PORT_BASE }
  aws: { region: us-east-1, s3_endpoint: "$S3" }
  gce: { project: pbx-test, credentials: $TEST_TMP/sa.json, storage_endpoint: "$GS/" }
EOF
	chmod 600 "$PBX_HOME/config.yaml"
else
	cloud_account "storage_endpoint: \"$GS/\""
	cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(cloud_template bd "$PBX_HOME/id" \
		"head: { service_account: pbx-e2e@pbx-test.iam.gserviceaccount.com }" \
		"node_groups:" "  - { name: node, count: 1, machine_type: e2-standard-4 }")"
fi
printf 'name: data-bare\ncommand: "true"\n' >"$WORK/bare/experiment.yaml"
for st in $STORES; do
	mkdir -p "$WORK/exp-$st"
	printf 'name: data-bench-%s\ncommand: "true"\ndata:\n  - { from: %s://bench/ds/, to: data/ds }\n' \
		"$st" "$st" >"$WORK/exp-$st/experiment.yaml"
done
# rclone 1.60's S3 client refuses AWS_CA_BUNDLE with its own transport
# (LoadCustomCABundleError); the endpoints are plain http on loopback
unset AWS_CA_BUNDLE
export RCLONE_CONFIG_S3_TYPE=s3 RCLONE_CONFIG_S3_PROVIDER=Other RCLONE_CONFIG_S3_ENDPOINT=$S3 \
	RCLONE_CONFIG_S3_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_S3_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
	RCLONE_CONFIG_S3_REGION=us-east-1
export RCLONE_CONFIG_GS_TYPE="google cloud storage" RCLONE_CONFIG_GS_ENDPOINT="$GS/storage/v1/" \
	RCLONE_CONFIG_GS_TOKEN="{\"access_token\":\"$TOKEN\",\"token_type\":\"Bearer\",\"expiry\":\"2099-01-01T00:00:00Z\"}" \
	RCLONE_CONFIG_GS_BUCKET_POLICY_ONLY=true
now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{printf "%.2f", $2 - $1}'; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
timed() { t0=$(now); "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }; secs "$t0" "$(now)"; }
# peaked WHO CMD...: timed, and the command's peak resident set (MiB)
# appended to $WORK/peak-WHO
peaked() {
	who=$1
	shift
	timed /usr/bin/time -f %M -o "$WORK/tm" "$@"
	awk '{printf "%.0f\n", $1 / 1024}' "$WORK/tm" >>"$WORK/peak-$who"
}

"$PBX" -q cluster start bd
STAGED=$PBX_HOME/clusters/bd/shared/pbx/data CACHE=$PBX_HOME/data
if [ -n "${BENCH_STREAM:-}" ]; then # a cloud ssh cluster whose login node is bd's head
	. "$SRC/tests/cli/lib-uni.sh"
	hroot=$(uni_head_root bd)
	haddr=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT n.address || ' ' || n.ssh_port FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.name = 'bd' AND c.state != 'deleted' AND n.name = 'head'")
	mkdir -p "$WORK/bs"
	python3 - "$PBX_HOME/config.yaml" "$haddr" "$PBX_HOME/clusters/bd/id_ed25519" "$hroot" "$WORK/bs" <<'PY'
import sys
path, addr, key, root, wd = sys.argv[1:]
host, port = addr.split()
bs = "  bs:\n    cloud: ssh\n    host: %s\n    port: %s\n    login_user: root\n    ssh_key: %s\n    work_dir: %s\n    setup: . %s/etc/pbx/env.sh\n" % (host, port, key, wd, root)
text = open(path).read().replace("clusters:\n", "clusters:\n" + bs, 1)
open(path, "w").write(text)
PY
	CL=bs STAGED=$WORK/bs/pbx/data
	echo "staged through the stream: a cloud ssh cluster whose login node is bd's head ($haddr), its copy $STAGED"
fi
bare=$(timed "$PBX" -q parrun "$WORK/bare/experiment.yaml" "$CL")
if [ -n "${BENCH_HEAD:-}" ]; then # the head's cache and the bodies' shared disk
	head_pbx=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -n 1)
	[ -n "$head_pbx" ] || { echo "data.sh: the head runs no pbx (no pbx-head)" >&2; exit 1; }
	CACHE=${head_pbx%/usr/local/sbin/pbx-head}/var/lib/pbx/home/data
	STAGED=$(sed -n "s/.*PBX_BODY_SHARED='\([^']*\)'.*/\1/p" "$head_pbx")/pbx/data
	echo "staged by the head: its cache $CACHE, the cluster's copy $STAGED"
fi
pbx_first() { # pbx_first STORE [PBX [WHO]]: a staging from scratch (the cluster's copy and the local cache gone)
	rm -rf "$STAGED" "$CACHE"
	sync
	head_runs "${2:-$PBX}"
	peaked "${3:-pbx-$1}" "${2:-$PBX}" -q parrun "$WORK/exp-$1/experiment.yaml" "$CL"
	head_runs "$PBX"
}
# head_runs PBX: with BENCH_HEAD, the head's pbx-head runs that binary (its
# staging is the head's: a baseline is measured there)
head_runs() {
	[ -n "${BENCH_HEAD:-}" ] || return 0
	hr_bin=$(readlink -f "$1")
	sed -i "s|'[^']*/pbx' \"\$@\"\$|'$hr_bin' \"\$@\"|" "$head_pbx"
	grep -qF "'$hr_bin' \"\$@\"" "$head_pbx" || { echo "data.sh: cannot point pbx-head at $hr_bin" >&2; exit 1; }
}
pbx_single() { # pbx_single STORE: the same with ranged reads off (run in a subshell)
	export PBX_OBJSTORE_RANGE_MIN=$((BIGMB * 1048576 + 1))
	pbx_first "$1" "$PBX" "single-$1"
}
rclone_first() {
	rm -rf "$WORK/rc"
	sync
	peaked "rclone-$1" rclone copy --config /dev/null "$1:bench/ds" "$WORK/rc"
}
peak() { [ -s "$WORK/peak-$1" ] && median <"$WORK/peak-$1" || echo -; }
col() { awk -v c="$1" '{print $c}' "$WORK/rounds"; }
net() { awk -v c="$1" -v b="$bare" '{print $c - b}' "$WORK/rounds"; }
ratio() { awk -v a="$1" -v b="$2" -v z="$bare" '{print $a / ($b - z)}' "$WORK/rounds" | median; }
speedup() { awk -v z="$bare" '{print ($5 - z) / ($1 - z)}' "$WORK/rounds" | median; }
load() { cut -d' ' -f1 /proc/loadavg; }
bench_store() { # bench_store STORE: ROUNDS paired rounds, then the medians
	: >"$WORK/rounds"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		l0=$(load)
		if [ $((r % 2)) = 1 ]; then p=$(pbx_first "$1"); c=$(rclone_first "$1"); else c=$(rclone_first "$1"); p=$(pbx_first "$1"); fi
		p2=$(timed "$PBX" -q parrun "$WORK/exp-$1/experiment.yaml" "$CL")
		c2=$(timed rclone copy --config /dev/null "$1:bench/ds" "$WORK/rc")
		s=- b=-
		[ -z "${BENCH_NORANGE:-}" ] || s=$(pbx_single "$1")
		[ -z "${BENCH_BASE:-}" ] || b=$(pbx_first "$1" "$BENCH_BASE" "base-$1")
		echo "$p $c $p2 $c2 $s $b" >>"$WORK/rounds"
		printf '%s round %d (load %s-%s): first: pbx parrun %s s, rclone copy %s s; nothing new: pbx parrun %s s, rclone %s s%s%s\n' \
			"$1" "$r" "$l0" "$(load)" "$p" "$c" "$p2" "$c2" "${BENCH_NORANGE:+; pbx without ranges $s s}" \
			"${BENCH_BASE:+; the baseline pbx $b s}"
		r=$((r + 1))
	done
	n=$(find "$STAGED" -type f ! -name '.pbx-data*' ! -name '.*.lock' | wc -l) # not a source's lock
	m=$(find "$WORK/rc" -type f | wc -l)
	echo "$1 staged: $n files on the cluster, $m copied by rclone; a parrun without data: $bare s"
	[ -z "${BENCH_HEAD:-}" ] || [ ! -e "$PBX_HOME/data" ] ||
		{ echo "data.sh: the user's pbx downloaded (it has a cache): the head did not stage" >&2; exit 1; }
	echo "$1 first staging: pbx $(net 1 | median) s (parrun $(col 1 | median) s less $bare s), rclone $(col 2 | median) s; median paired ratio rclone/pbx $(ratio 2 1)x (goal >= 1)"
	echo "$1 nothing new:   pbx $(net 3 | median) s (parrun $(col 3 | median) s), rclone $(col 4 | median) s"
	echo "$1 peak memory of a first staging (median MiB): pbx $(peak "pbx-$1"), rclone $(peak "rclone-$1")${BENCH_BASE:+, the baseline pbx $(peak "base-$1")}"
	[ -z "${BENCH_NORANGE:-}" ] ||
		echo "$1 without ranges: pbx $(net 5 | median) s; median paired ratio rclone/pbx $(ratio 2 5)x; ranged reads' median paired speed-up $(speedup)x"
	[ -z "${BENCH_BASE:-}" ] ||
		echo "$1 the baseline: pbx $(net 6 | median) s; median paired speed-up over it $(awk -v z="$bare" '{print ($6 - z) / ($1 - z)}' "$WORK/rounds" | median)x"
}
for st in $STORES; do
	bench_store "$st"
done
if [ -n "${BENCH_HEAD:-}" ]; then # where a head's first staging spends its time
	rm -rf "$STAGED" "$CACHE"
	sync
	PBX_STATS=1 /usr/bin/time -f 'cpu %U %S' -o "$WORK/cpu-head" "$head_pbx" -q cluster data bd gs://bench/ds/ 2>&1 >/dev/null |
		sed 's/^/the head, PBX_STATS: /'
	rm -rf "$WORK/rc"
	/usr/bin/time -f 'cpu %U %S' -o "$WORK/cpu-rclone" rclone copy --config /dev/null gs:bench/ds "$WORK/rc"
	cpu() { awk '/^cpu/ {printf "%.2f s (user %.2f, system %.2f)", $2 + $3, $2, $3}' "$1"; }
	echo "CPU time of one first staging: the head's pbx $(cpu "$WORK/cpu-head"), rclone $(cpu "$WORK/cpu-rclone")"
fi
