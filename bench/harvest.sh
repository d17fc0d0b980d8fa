#!/bin/sh
# harvest.sh - benchmark: `pbx harvest` against `rsync -a` over the same
# sshd, on a task holding 10,000 small files and one 200 MB file, in paired
# and interleaved rounds so that the disk's moods hit both tools alike: each
# round runs both, in alternating order, and the figure that counts is the
# median over rounds of the ratio rsync time / pbx time.  Rounds run with
# the destination on tmpfs (/dev/shm) and on disk.  Per round: a first
# harvest (nothing home) against a full rsync, then a harvest that moves
# nothing against rsync's no-op.  pbx runs with PBX_STATS=1, and the
# median time of each of its phases is printed.  Every run writes to a
# fresh directory (see set_dest for why).
# Goals: first harvest >= 1.5x rsync's speed on both destinations, the
# no-op harvest faster than rsync's no-op.
# Usage: bench/harvest.sh [PBX] [SMALL_FILES] [BIG_MB] [ROUNDS]
set -eu
PBX=${1:-build/src/cli/pbx}
NSMALL=${2:-10000}
BIGMB=${3:-200}
ROUNDS=${4:-5}
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
WORK=$(mktemp -d /tmp/pbx-bench-hv.XXXXXX)
SHM=$(mktemp -d /dev/shm/pbx-bench-hv.XXXXXX)
export PBX_HOME=$WORK/home
mkdir -p "$PBX_HOME" "$WORK/exp"
trap '"$PBX" -q cluster stop --discard-results hb >/dev/null 2>&1 || true; rm -rf "$WORK" "$SHM"' EXIT
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
secs() { echo "$1 $2" | awk '{printf "%.3f", $2 - $1}'; }
# median: of the numbers on stdin, one a line
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

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
echo "tree: $NSMALL small files + one $BIGMB MB file, over one sshd on $ADDR; $ROUNDS paired rounds per destination"

# Every run writes to a directory of its own under $DEST, and nothing is
# deleted until a destination's rounds are over: ext4's inode allocator
# scans past recently deleted inodes (recently_deleted() in perf's
# profile), so 10,000 files created right after 10,000 were deleted cost
# either tool seconds of system time.  pbx's results directory is a link
# to its run's directory (pbx follows it, as it would a user's).
set_dest() { DEST=$1; mkdir -p "$DEST"; }
# Every run starts after a `sync` (the write-back of 200 MB still pending
# stalls this machine's disk for seconds).  run_pbx KIND RUN: pbx's phase
# times go to $PHASES as lines "KIND RUN PHASE SECONDS".
run_pbx() {
	sync
	t0=$(now)
	PBX_STATS=1 "$PBX" -q harvest "$pkg" >/dev/null 2>"$WORK/stats"
	t1=$(now)
	sed -n "s/^pbx: harvest \([a-z]*\) *\([0-9.]*\) s$/$1 $2 \1 \2/p" "$WORK/stats" >>"$PHASES"
	secs "$t0" "$t1"
}
# run_rsync ROUND
run_rsync() {
	sync
	t0=$(now)
	rsync -a -e "ssh -p 22170 $SSHO" "root@$ADDR:$REMOTE/" "$DEST/rsync-$1/"
	t1=$(now)
	secs "$t0" "$t1"
}
# pbx_first KIND ROUND: a harvest with nothing home (a fresh results
# directory, the harvested rows and metrics deleted).
pbx_first() {
	mkdir -p "$DEST/pbx-$2"
	rm -f "$PBX_HOME/results"
	ln -s "$DEST/pbx-$2" "$PBX_HOME/results"
	sqlite3 "$PBX_HOME/pbx.db" "DELETE FROM harvested; DELETE FROM metrics"
	run_pbx "$1" first
}

# rounds KIND: $ROUNDS paired rounds, pbx first in odd rounds; each line of
# $WORK/KIND.rounds: pbx-first rsync-first pbx-again rsync-again
rounds() {
	: >"$WORK/$1.rounds"
	r=1
	while [ $r -le "$ROUNDS" ]; do
		if [ $((r % 2)) = 1 ]; then
			p1=$(pbx_first "$1" $r); r1=$(run_rsync $r)
			p2=$(run_pbx "$1" again); r2=$(run_rsync $r)
		else
			r1=$(run_rsync $r); p1=$(pbx_first "$1" $r)
			r2=$(run_rsync $r); p2=$(run_pbx "$1" again)
		fi
		echo "$p1 $r1 $p2 $r2" >>"$WORK/$1.rounds"
		printf '%-5s round %d: first: pbx %s s, rsync %s s; again: pbx %s s, rsync %s s\n' \
			"$1" "$r" "$p1" "$r1" "$p2" "$r2"
		r=$((r + 1))
	done
}
# col FILE N: column N of FILE, one a line
col() { awk -v c="$2" '{print $c}' "$1"; }
ratio() { awk -v a="$2" -v b="$3" '{print $a / $b}' "$1" | median; }
summary() {
	f=$WORK/$1.rounds
	echo "$1: first harvest: pbx $(col "$f" 1 | median) s, rsync $(col "$f" 2 | median) s;" \
		"median paired ratio rsync/pbx $(ratio "$f" 2 1)x (goal >= 1.5)"
	echo "$1: nothing new:   pbx $(col "$f" 3 | median) s, rsync $(col "$f" 4 | median) s;" \
		"median paired ratio rsync/pbx $(ratio "$f" 4 3)x (goal > 1)"
	for run in first again; do
		printf '%s: pbx phases, %s (medians):' "$1" "$run"
		for ph in $(awk -v k="$1" -v r="$run" '$1 == k && $2 == r && !seen[$3]++ {print $3}' "$PHASES"); do
			printf ' %s %s' "$ph" "$(awk -v k="$1" -v r="$run" -v p="$ph" '$1 == k && $2 == r && $3 == p {print $4}' "$PHASES" | median)"
		done
		echo
	done
}

PHASES=$WORK/phases
: >"$PHASES"
set_dest "$WORK/warmup"
pbx_first warmup 0 >/dev/null   # the remote tree into the page cache
sed -i '/^warmup /d' "$PHASES"
set_dest "$SHM"
rounds tmpfs
rm -rf "${SHM:?}"/*
set_dest "$WORK/disk"
rounds disk
summary tmpfs
summary disk
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
