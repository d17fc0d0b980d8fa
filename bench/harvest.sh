#!/bin/sh
# harvest.sh - benchmark, one run over the same sshd: the first `pbx
# harvest` of a task holding 10,000 small files and one 200 MB file against
# `scp -r` and `rsync -a` of the same tree, then a second harvest (nothing
# new).  Goal: at least as fast as rsync, several times faster than scp.
# Usage: bench/harvest.sh [PBX] [SMALL_FILES] [BIG_MB]
set -eu
PBX=${1:-build/src/cli/pbx}
NSMALL=${2:-10000}
BIGMB=${3:-200}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
WORK=$(mktemp -d /tmp/pbx-bench-hv.XXXXXX)
export PBX_HOME=$WORK/home
mkdir -p "$PBX_HOME" "$WORK/exp"
trap '"$PBX" -q cluster stop hb >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM   # dash runs no EXIT trap on a signal by itself
cat >"$PBX_HOME/config.yaml" <<EOF
clusters:
  hb:
    cloud: local
    node_groups:
      - { name: node, count: 1, gpus: 0 }
clouds:
  local: { address_base: 127.0.17.0, ssh_port: 22170, slurm_port_base: 20700 }
EOF
chmod 600 "$PBX_HOME/config.yaml"
cat >"$WORK/exp/experiment.yaml" <<EOF
name: harvest-bench
command: >
  mkdir -p many && i=0 && while [ \$i -lt $NSMALL ]; do echo "file \$i" > many/f\$i; i=\$((i + 1)); done &&
  head -c $((BIGMB * 1000000)) /dev/urandom > big.bin
outputs: ["many/*", "big.bin"]
EOF
now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{printf "%.2f", $2 - $1}'; }

"$PBX" -q cluster start hb
pkg=$("$PBX" parrun --json "$WORK/exp/experiment.yaml" hb | python3 -c 'import json,sys; print(json.load(sys.stdin)["package"])')
i=0
until "$PBX" state --json "$pkg" | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["tasks"][0]["state"] == "COMPLETED" else 1)'; do
	sleep 1; i=$((i + 1)); [ $i -lt 300 ] || { echo "the task did not complete" >&2; exit 1; }
done
ADDR=127.0.17.1
KEY=$PBX_HOME/clusters/hb/id_ed25519
REMOTE=$PBX_HOME/clusters/hb/shared/pbx/$pkg/tasks/0
SSHO="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -i $KEY"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tree: $NSMALL small files + one $BIGMB MB file, over one sshd on $ADDR"

# Three rounds, the order rotated, so no tool always meets a cold cache or
# the write-back of the one before; pbx's results are removed between rounds
# (a full harvest), and every run starts after a `sync` (this machine's
# disk stalls for seconds when the write-back of 200 MB is still pending).
hv() { rm -rf "$PBX_HOME/results"; sqlite3 "$PBX_HOME/pbx.db" "DELETE FROM harvested"; sync; t0=$(now); "$PBX" -q harvest "$pkg" >/dev/null; t1=$(now); secs "$t0" "$t1"; }
rs() { rm -rf "$WORK/rsync"; sync; t0=$(now); rsync -a -e "ssh -p 22170 $SSHO" "root@$ADDR:$REMOTE/" "$WORK/rsync/"; t1=$(now); secs "$t0" "$t1"; }
sc() { rm -rf "$WORK/scp"; sync; t0=$(now); scp -q -r -P 22170 $SSHO "root@$ADDR:$REMOTE" "$WORK/scp"; t1=$(now); secs "$t0" "$t1"; }
pbx_a=$(hv); rs_a=$(rs); sc_a=$(sc)
rs_b=$(rs); sc_b=$(sc); pbx_b=$(hv)
sc_c=$(sc); pbx_c=$(hv); rs_c=$(rs)
sync
t0=$(now); "$PBX" -q harvest "$pkg" >/dev/null; t1=$(now); pbx2=$(secs "$t0" "$t1")
t0=$(now); rsync -a -e "ssh -p 22170 $SSHO" "root@$ADDR:$REMOTE/" "$WORK/rsync/"; t1=$(now); rsync2=$(secs "$t0" "$t1")
median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
pbx1=$(median "$pbx_a" "$pbx_b" "$pbx_c"); rsync=$(median "$rs_a" "$rs_b" "$rs_c"); scp=$(median "$sc_a" "$sc_b" "$sc_c")
echo "medians of 3 rounds:"
echo "pbx harvest (first):   ${pbx1} s   (rounds: $pbx_a, $pbx_b, $pbx_c)"
echo "scp -r:                ${scp} s   (rounds: $sc_a, $sc_b, $sc_c; pbx is $(echo "$scp $pbx1" | awk '{printf "%.1f", $1 / $2}')x faster)"
echo "rsync -a:              ${rsync} s   (rounds: $rs_a, $rs_b, $rs_c; pbx is $(echo "$rsync $pbx1" | awk '{printf "%.2f", $1 / $2}')x as fast)"
echo "pbx harvest (again):   ${pbx2} s   (rsync -a again: ${rsync2} s)"
