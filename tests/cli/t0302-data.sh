#!/bin/sh
# t0302-data.sh - an experiment's data: (docs/data.md): 2,000 objects of
# the GCE emulator's Cloud Storage staged once on a local cluster and read
# by tasks on two nodes; another package with the same source moves
# nothing and downloads nothing; one changed object moves alone, a deleted
# one disappears; a corrupted download fails the parrun naming the object
# with nothing submitted, and a retry succeeds; a staging that fails after
# streaming objects to the head (its stream ends without the manifest)
# changes nothing there, and its retry downloads only what the cache
# lacks; a large object is read in ranges (a 1 MiB threshold here) into
# the download cache's file, which a cluster that lost its copy gets it
# from, and a corrupted range fails the parrun naming it, leaving nothing; hostile object names are
# refused with nothing written outside; a local directory source works
# the same way, its files hashed only when changed since the last
# staging (size, times, inode); the data is never harvested and tasks cannot write it.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster dt slot "{ name: node, count: 2 }"
SHARED=$PBX_HOME/clusters/dt/shared
TOKEN=t0302-token

# ---- the emulator's Cloud Storage and the user's credentials ----------
data_storage "$TOKEN"

# store put NAME=FILE... | del NAME...: objects of bucket data, one connection
store() {
	python3 - "$PORT" "$TOKEN" "$@" <<'PY'
import http.client, sys, urllib.parse
port, token, op, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
c = http.client.HTTPConnection("127.0.0.1", int(port))
h = {"Authorization": "Bearer " + token}
for a in args:
    if op == "put":
        name, path = a.split("=", 1)
        c.request("POST", "/upload/storage/v1/b/data/o?uploadType=media&name=" + urllib.parse.quote(name, safe=""),
                  open(path, "rb").read(), h)
    else:
        c.request("DELETE", "/storage/v1/b/data/o/" + urllib.parse.quote(a, safe=""), headers=h)
    r = c.getresponse(); r.read()
    if r.status >= 300:
        sys.exit("%s %s: %s" % (op, a, r.status))
PY
}

mkdir -p "$TEST_TMP/src"
( cd "$TEST_TMP/src" && i=0 && while [ $i -lt 2000 ]; do printf 'object %d\n' $i >"o$i"; i=$((i + 1)); done )
( cd "$TEST_TMP/src" && for f in o*; do printf 'fm/sub/%s=%s ' "$f" "$TEST_TMP/src/$f"; done ) >"$TEST_TMP/args"
# shellcheck disable=SC2046
store put $(cat "$TEST_TMP/args")
ok $? "2,000 objects in gs://data/fm/"
want=$(cd "$TEST_TMP/src" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | while read -r f; do printf 'sub/%s ' "$f"; sha256sum <"$f"; done | sha256sum | cut -c1-64)

# exp NAME FROM: an experiment of two tasks (one a node) reading data/d
exp() {
	mkdir -p "$TEST_TMP/$1"
	cat >"$TEST_TMP/$1/experiment.yaml" <<EXP
name: $1
command: |
  cd data/d && LC_ALL=C find . -type f ! -name .pbx-data-manifest | sed 's|^\./||' | LC_ALL=C sort | while read -r f; do printf '%s ' "\$f"; sha256sum <"\$f"; done | sha256sum | cut -c1-64 >"\$PBX_TASK_DIR/sum.txt"
  cd "\$PBX_TASK_DIR" && { if touch data/d/new 2>/dev/null || rm -f data/d/sub/o1 2>/dev/null; then echo writable; else echo read-only; fi; } >w.txt
  sleep 2
sweep: { grid: { i: [0, 1] } }
resources: { exclusive: true }
outputs: [sum.txt, w.txt]
data:
  - { from: $2, to: data/d }
EXP
}
exp fm1 gs://data/fm/
exp fm2 gs://data/fm

run_pbx -q cluster start dt
ok $rc "the cluster starts: $errout"
ID=$(data_id gs://data/fm/)
D=$SHARED/pbx/data/$ID

# ---- staged once, read on two nodes -------------------------------------
# (on a terminal: the progress line, rewritten in place, ends once, when
# every listed object came - not when the lanes catch up with the listing)
data_reset_calls
script -qec "'$PBX' parrun '$TEST_TMP/fm1/experiment.yaml' dt" /dev/null </dev/null >"$TEST_TMP/fm1.tty" 2>&1
rc=$?
tr '\r' '\n' <"$TEST_TMP/fm1.tty" | sed 's/\x1b\[K//g' | grep -v '^\s*$' >"$TEST_TMP/fm1.lines"
errout=$(grep -v '^data [^ ]*: [0-9]*/[0-9]* objects' "$TEST_TMP/fm1.lines") out=$errout
ok $rc "parrun stages and submits: $errout"
is "$(grep '^data gs://data/fm/: [0-9]*/[0-9]* objects' "$TEST_TMP/fm1.lines" | awk '{split($3, n, "/"); if (n[1] == n[2]) print $3}')" \
	2000/2000 "the progress line ends once, at 2000/2000 objects"
case $errout in *"data gs://data/fm/: 2000 objects"*", 2000 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "2000 objects moved: $errout"
is "$(data_gets)" 2000 "2000 downloads"
pkg1=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
is "$(find "$D" -type f ! -name .pbx-data-manifest | wc -l)" 2000 "2000 files in \$PBX_SHARED/pbx/data/ID"
is "$(stat -c %a "$D/sub/o7") $(stat -c %a "$D/sub")" "444 555" "files 0444, directories 0555"
# the local cluster's head is this machine: its script takes the objects
# from the download cache (docs/data.md, How staging works, 7.), no byte
# of them through SSH
C=$PBX_HOME/data/$ID/files
if [ "$(stat -c %d "$D/sub/o7")" = "$(stat -c %d "$C/sub/o7")" ]; then
	is "$(stat -c %i "$D/sub/o7")" "$(stat -c %i "$C/sub/o7")" "one file system: the cluster's copy is the download cache's file, linked"
else
	cmp -s "$D/sub/o7" "$C/sub/o7"
	ok $? "two file systems: the cluster's copy is a copy of the download cache's file"
fi
wait_final "$pkg1" 90
is "$(task_states "$pkg1")" "COMPLETED COMPLETED" "both tasks completed"
is "$(task_nodes "$pkg1")" "node1 node2" "on two nodes"
run_pbx -q harvest "$pkg1"
ok $rc "harvest: $errout"
is "$(cat "$PBX_HOME/results/$pkg1"/*/sum.txt | sort -u)" "$want" "each task read every object, bytes as in the bucket"
is "$(cat "$PBX_HOME/results/$pkg1"/*/w.txt | sort -u)" read-only "tasks cannot write into the data"
is "$(find "$PBX_HOME/results/$pkg1" -path '*data*' | wc -l)" 0 "the data is not harvested back"
[ -L "$SHARED/pbx/$pkg1/tasks/0/data/d" ]
ok $? "the task directory holds data/d as a symlink"

# ---- another package, the same source: nothing moves --------------------
data_reset_calls
run_pbx parrun "$TEST_TMP/fm2/experiment.yaml" dt
ok $rc "a second package: $errout"
case $errout in *"data gs://data/fm/: 2000 objects, 0 moved (staged before)"*) r=0 ;; *) r=1 ;; esac
ok $r "0 moved, staged before: $errout"
is "$(data_gets)" 0 "no download"
pkg2=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')

# ---- one changed, one deleted ---------------------------------------------
echo changed >"$TEST_TMP/changed"
store put "fm/sub/o42=$TEST_TMP/changed"
data_reset_calls
run_pbx parrun "$TEST_TMP/fm2/experiment.yaml" dt
case $errout in *"2000 objects"*", 1 moved"*", 0 removed, 1 downloaded"*) r=0 ;; *) r=1 ;; esac
ok $r "one changed object moves alone: $errout"
is "$(data_gets) $(cat "$D/sub/o42")" "1 changed" "one download; the cluster has the new bytes"
is "$(stat -c %a "$D/sub/o42" "$D/sub/o7" | sort -u) $(stat -c %a "$D/sub")" "444 555" \
	"linked into place: files still 0444, directories 0555"
store del fm/sub/o43
run_pbx parrun "$TEST_TMP/fm2/experiment.yaml" dt
case $errout in *"1999 objects"*", 0 moved"*", 1 removed"*) r=0 ;; *) r=1 ;; esac
ok $r "a deleted object: $errout"
[ ! -e "$D/sub/o43" ] && [ -e "$D/sub/o44" ]
ok $? "it disappears from the cluster"

# ---- a corrupted download: nothing submitted, then a retry -----------------
exp fm3 gs://data/fm/
echo again >"$TEST_TMP/again"
store put "fm/sub/o44=$TEST_TMP/again"
emu_post faults '{"storage_corrupt": 1}' >/dev/null
run_pbx parrun "$TEST_TMP/fm3/experiment.yaml" dt
is "$rc" 4 "a corrupted download fails the parrun: $errout"
case $errout in *"fm/sub/o44"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the object: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM packages WHERE name = 'fm3'")" 0 "nothing recorded or submitted"
is "$(cat "$D/sub/o44")" "object 44" "the cluster keeps the old bytes"
run_pbx parrun "$TEST_TMP/fm3/experiment.yaml" dt
ok $rc "the retry succeeds: $errout"
is "$(cat "$D/sub/o44")" again "with the new bytes"
# the same with 20 changed objects: they download in parallel (8 at a time)
for i in $(seq 50 69); do echo "twice $i" >"$TEST_TMP/tw$i"; done
store put $(for i in $(seq 50 69); do printf 'fm/sub/o%d=%s/tw%d ' "$i" "$TEST_TMP" "$i"; done)
exp fm5 gs://data/fm/
emu_post faults '{"storage_corrupt": 1}' >/dev/null
run_pbx parrun "$TEST_TMP/fm5/experiment.yaml" dt
is "$rc" 4 "a corrupted download among parallel ones fails the parrun: $errout"
case $errout in *"fm/sub/o"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the object: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM packages WHERE name = 'fm5'")" 0 "nothing recorded"
# again: the objects the failed staging kept in the cache are named to the
# head first (it links them from there), then a download fails; the stream
# ends without its manifest, so none of them is put in place
emu_post faults '{"storage_corrupt": 1}' >/dev/null
run_pbx parrun "$TEST_TMP/fm5/experiment.yaml" dt
case "$rc $errout" in "4 "*"fm/sub/o"*) r=0 ;; *) r=1 ;; esac
ok $r "it fails again, after naming what the cache had: $errout"
is "$(cat "$D"/sub/o5? "$D"/sub/o6? | grep -c twice)" 0 "a stream cut before its manifest changes nothing on the cluster"
is "$(find "$SHARED/pbx/data" -maxdepth 1 -name '.in-*' | wc -l)" 0 "and leaves no unpacked directory"
data_reset_calls
run_pbx parrun --json "$TEST_TMP/fm5/experiment.yaml" dt
ok $rc "the retry succeeds: $errout"
n=$(data_gets)
[ "$n" -ge 1 ] && [ "$n" -lt 20 ]
ok $? "it resumes: only what the cut staging had not kept is downloaded ($n of 20)"
is "$(cat "$D/sub/o50" "$D/sub/o69")" "twice 50
twice 69" "with every object's new bytes"

# ---- a large object in ranges while the small ones go on ------------------
# objects of 1 MiB or more (PBX_OBJSTORE_RANGE_MIN) come in 4 ranges pinned
# to their generation: the metadata once, then the ranges; one over 8 MiB
# is written to the download cache's file as its ranges come (no buffer of
# its size), and the local cluster's head takes it from there
head -c $((9 * 1048576 + 4099)) /dev/urandom >"$TEST_TMP/big"
store put "bg/big=$TEST_TMP/big" "bg/s1=$TEST_TMP/changed" "bg/s2=$TEST_TMP/again"
exp bg gs://data/bg/
BID=$(data_id gs://data/bg/)
data_reset_calls
export PBX_OBJSTORE_RANGE_MIN=1048576
run_pbx parrun "$TEST_TMP/bg/experiment.yaml" dt
case $errout in *"data gs://data/bg/: 3 objects"*", 3 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "a large object and two small ones staged: $errout"
cmp -s "$TEST_TMP/big" "$SHARED/pbx/data/$BID/big"
ok $? "the large object's bytes are the bucket's"
is "$(data_gets)" 7 "objects.get: 2 small objects, the large one's metadata and 4 ranges"
cmp -s "$TEST_TMP/big" "$PBX_HOME/data/$BID/files/big"
ok $? "the download cache's file of it is whole"
[ "$(stat -c %d "$SHARED/pbx/data/$BID/big")" != "$(stat -c %d "$PBX_HOME/data/$BID/files/big")" ] ||
	is "$(stat -c %i "$SHARED/pbx/data/$BID/big")" "$(stat -c %i "$PBX_HOME/data/$BID/files/big")" "and the cluster's copy is that file, linked"
# a cluster that lost its copy (a new one, say) gets it from that file
rm -rf "${SHARED:?}/pbx/data/$BID"
data_reset_calls
run_pbx parrun "$TEST_TMP/bg/experiment.yaml" dt
case $errout in *"data gs://data/bg/: 3 objects"*", 3 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "a cluster without the data gets the 3 objects again: $errout"
is "$(data_gets)" 0 "from the download cache: nothing downloaded"
cmp -s "$TEST_TMP/big" "$SHARED/pbx/data/$BID/big"
ok $? "the large object's bytes are the bucket's"
store put "bg/big2=$TEST_TMP/big"
emu_post faults '{"storage_corrupt": 1}' >/dev/null
run_pbx parrun "$TEST_TMP/bg/experiment.yaml" dt
unset PBX_OBJSTORE_RANGE_MIN
case "$rc $errout" in "4 "*"gs://data/bg/big2: content does not match"*) r=0 ;; *) r=1 ;; esac
ok $r "a corrupted range fails the parrun naming the object: $errout"
[ ! -e "$SHARED/pbx/data/$BID/big2" ] && cmp -s "$TEST_TMP/big" "$SHARED/pbx/data/$BID/big"
ok $? "the cluster is as it was"
is "$(find "$PBX_HOME/data/$BID" -name 'big2*' | wc -l)" 0 "and the refused object left nothing in the download cache"
# a staging killed while it downloaded leaves its temporary file (an
# object's size, perhaps): the next staging that downloads removes those
# untouched for 10 minutes, never a fresh one (another staging's, in use)
head -c 1000 /dev/zero >"$PBX_HOME/data/$BID/files/big2.tmp.Ab3dE9"
touch -d '20 minutes ago' "$PBX_HOME/data/$BID/files/big2.tmp.Ab3dE9"
head -c 1000 /dev/zero >"$PBX_HOME/data/$BID/files/big.tmp.Zz9Yx1"
run_pbx parrun "$TEST_TMP/bg/experiment.yaml" dt
case $errout in *"data gs://data/bg/: 4 objects"*", 1 moved"*", 1 downloaded"*) r=0 ;; *) r=1 ;; esac
ok $r "the retry downloads the object alone: $errout"
[ ! -e "$PBX_HOME/data/$BID/files/big2.tmp.Ab3dE9" ] && [ -e "$PBX_HOME/data/$BID/files/big.tmp.Zz9Yx1" ]
ok $? "and removes the stale temporary file of a killed staging, not a fresh one"
cmp -s "$TEST_TMP/big" "$SHARED/pbx/data/$BID/big2"
ok $? "the object's bytes are the bucket's"

# ---- hostile names ---------------------------------------------------------
for h in 'h1/../escape' 'h2/a//b' 'h3//abs'; do
	store put "$h=$TEST_TMP/changed" || continue
	p=${h%%/*}
	exp "x$p" "gs://data/$p/"
	run_pbx parrun "$TEST_TMP/x$p/experiment.yaml" dt
	case "$rc $errout" in "2 "*"object '${h#*/}'"*"nothing was staged"*) r=0 ;; *) r=1 ;; esac
	ok $r "'$h' is refused: $errout"
done
is "$(find "$SHARED" "$PBX_HOME/data" -name escape -o -name abs | wc -l)" 0 "nothing written outside"

# ---- a local directory -------------------------------------------------------
exp loc ./local
mkdir -p "$TEST_TMP/loc/local/sub"
i=0; while [ $i -lt 20 ]; do echo "local $i" >"$TEST_TMP/loc/local/sub/f$i"; i=$((i + 1)); done
LID=$(data_id "local:$(cd "$TEST_TMP/loc/local" && pwd -P)")
# files changed within a second of a walk are read again at the next
# (racily clean): let a second pass so that the walk remembers them all
sleep 1.1
export PBX_STATS=1
run_pbx parrun "$TEST_TMP/loc/experiment.yaml" dt
case $errout in *"data local:"*": 20 objects"*", 20 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "a local directory is staged: $(echo "$errout" | grep -v 'PBX_STATS\|pbx: data\|stats:')"
case $errout in *"walked (20 files read, 0 unchanged)"*) r=0 ;; *) r=1 ;; esac
ok $r "its 20 files hashed: $(echo "$errout" | grep walked)"
pkgl=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
[ ! -e "$SHARED/pbx/$pkgl/pkg/code/local" ]
ok $? "and not shipped with the code"
echo "local changed" >"$TEST_TMP/loc/local/sub/f3"
sleep 1.1
run_pbx parrun "$TEST_TMP/loc/experiment.yaml" dt
case $errout in *": 20 objects"*", 1 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "a changed file moves alone: $(echo "$errout" | grep moved)"
case $errout in *"walked (1 files read, 19 unchanged)"*) r=0 ;; *) r=1 ;; esac
ok $r "the 19 others are not read again (their size, times, inode as remembered): $(echo "$errout" | grep walked)"
is "$(cat "$SHARED/pbx/data/$LID/sub/f3")" "local changed" "the cluster has it"
run_pbx parrun "$TEST_TMP/loc/experiment.yaml" dt
case $errout in *": 20 objects, 0 moved (staged before)"*) r=0 ;; *) r=1 ;; esac
ok $r "then nothing moves: $(echo "$errout" | grep moved)"
case $errout in *"walked (0 files read, 20 unchanged)"*) r=0 ;; *) r=1 ;; esac
ok $r "and no file is read: $(echo "$errout" | grep walked)"
# the same size and modification time, other bytes: its change time shows it
touch -r "$TEST_TMP/loc/local/sub/f5" "$TEST_TMP/ref"
printf 'local X\n' >"$TEST_TMP/loc/local/sub/f5"
touch -r "$TEST_TMP/ref" "$TEST_TMP/loc/local/sub/f5"
run_pbx parrun "$TEST_TMP/loc/experiment.yaml" dt
case $errout in *": 20 objects"*", 1 moved"*"walked (1 files read, 19 unchanged)"*|*"walked (1 files read, 19 unchanged)"*": 20 objects"*", 1 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "a file rewritten with its size and mtime kept is read and moves: $(echo "$errout" | grep 'walked\|moved')"
is "$(cat "$SHARED/pbx/data/$LID/sub/f5")" "local X" "the cluster has its new bytes"
unset PBX_STATS
wait_final "$pkgl" 90
is "$(task_states "$pkgl")" "COMPLETED COMPLETED" "its tasks completed"
run_pbx parrun --dry-run "$TEST_TMP/loc/experiment.yaml" dt
case $out in *"data local:"*"-> data/d: 20 objects"*"staged, 0 changed"*) r=0 ;; *) r=1 ;; esac
ok $r "--dry-run says what is staged: $out"

# a large file's progress moves while it is sent (through SSH: no
# download showed its bytes), not only once it is whole
mkdir -p "$TEST_TMP/lbig/one"
head -c $((24 * 1048576)) /dev/urandom >"$TEST_TMP/lbig/one/big.bin"
printf '%s\n' "name: lbig" "command: wc -c < data/d/big.bin > n.txt" "outputs: [n.txt]" \
	"data:" "  - { from: ./one, to: data/d }" >"$TEST_TMP/lbig/experiment.yaml"
script -qec "'$PBX' parrun '$TEST_TMP/lbig/experiment.yaml' dt" /dev/null </dev/null >"$TEST_TMP/lbig.tty" 2>&1
ok $? "a local source of one 24 MiB file staged on a terminal"
tr '\r' '\n' <"$TEST_TMP/lbig.tty" | sed 's/\x1b\[K//g' | grep '^data local:.*: [0-9]*/1 objects' >"$TEST_TMP/lbig.lines"
first=$(head -n 1 "$TEST_TMP/lbig.lines")
case $first in *": 0/1 objects, 0.1 MB") r=0 ;; *) r=1 ;; esac
ok $r "its first progress line comes with its first bytes sent: $first"
case $(tail -n 1 "$TEST_TMP/lbig.lines") in *": 1/1 objects, 25.2 MB"*) r=0 ;; *) r=1 ;; esac
ok $r "its last counts it once: $(tail -n 1 "$TEST_TMP/lbig.lines")"

# ---- cluster gc: a dataset no package names goes ------------------------------
bgpkgs=$(grep -l "^$BID " "$SHARED"/pbx/*/pkg/data.links | sed 's|/pkg/data.links$||; s|.*/||')
for p in $bgpkgs; do
	wait_final "$p" 90
	"$PBX" -q forget --discard-results "$p" >/dev/null 2>&1
done
run_pbx cluster gc --json dt
[ "$rc" = 0 ] && [ "$(echo "$out" | json_get 'd["young"]')" -ge 1 ] && [ -d "$SHARED/pbx/data/$BID" ]
ok $? "the packages naming gs://data/bg/ forgotten: their run directories are left for an hour, and the dataset they name: $(echo $out)"
for p in $bgpkgs; do touch -d '2 hours ago' "$SHARED/pbx/$p"; done
run_pbx cluster gc --json dt
[ "$rc" = 0 ] && [ "$(echo "$out" | json_get 'd["young_data"]')" -ge 1 ] && [ -d "$SHARED/pbx/data/$BID" ] &&
	[ ! -e "$SHARED/pbx/$(echo "$bgpkgs" | head -n 1)" ]
ok $? "an hour later the run directories go; the dataset, named by none now but staged in the last hour, is left: $(echo $out)"
touch -d '2 hours ago' "$SHARED/pbx/data/$BID"
run_pbx cluster gc --dry-run --json dt
is "$(echo "$out" | json_get '" ".join(g["id"] for g in d["gone"] if g["kind"] == "data")')" "$BID" \
	"an hour later a dry run would remove that dataset, and no other"
[ -d "$SHARED/pbx/data/$BID" ]
ok $? "a dry run removes nothing"
run_pbx cluster gc dt
case $out in "removed staged dataset $(echo "$BID" | cut -c1-12) on head "*) r=0 ;; *) r=1 ;; esac
ok $r "gc removes it: $out"
[ ! -e "$SHARED/pbx/data/$BID" ] && [ -d "$SHARED/pbx/data/$ID" ] && [ -d "$SHARED/pbx/data/$LID" ]
ok $? "it is gone; the datasets packages name stay"
data_reset_calls
run_pbx parrun "$TEST_TMP/bg/experiment.yaml" dt
case $errout in *"data gs://data/bg/: 4 objects"*", 4 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "the next parrun that needs it stages it again: $errout"
is "$(data_gets)" 0 "from the download cache: nothing downloaded"

done_testing
