#!/bin/sh
# t0306-ssh-data.sh - data: staged on a SLURM cluster pbx did not build
# (cloud ssh, as an ordinary user: the university's cluster, docs/data.md
# and docs/ssh-clusters.md), whose head cannot take the objects from this
# machine's cache: they go through the stream (one tar over SSH).  The
# Compute Engine emulator's Cloud Storage holds two small objects and one
# of 9 MiB (over 8 MiB: downloaded into the download cache's file and
# sent from it as it comes).  parrun on a terminal, downloads paced
# (storage_rate) -> the progress line shows the large object's push
# ("sending N MB to the cluster") while its bytes still download -> the
# data is the user's, read-only, and tasks on two nodes read it whole ->
# the cache's files are its own (nothing shared) -> a second package
# moves and downloads nothing -> with the cache removed (`pbx cache rm
# --all`) a new object alone is downloaded and sent -> a staging cut
# after placing a file, the object then deleted: the next staging
# removes it -> a large object sent as it comes: a corrupt read, a range
# cut and read again, the object rewritten after bytes went: nothing
# wrong is staged, nor a reply corrupted then cut whose bad byte went
# before the good one came.  Addresses and ports: the test's slot (lib.sh); the
# login node's are LOGIN_ADDR and LOGIN_PORT.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-uni.sh"

UNI_UID=2877 UNI=pbx-uni7
UNI_HOME=/home/$UNI
uni_campus campus
uni_user "$UNI" "$UNI_UID" "$UNI_HOME" t0306
uni_login "$UNI"
ok $? "the login node's sshd runs"
trap 'kill "$LOGIN_SSHD" 2>/dev/null; rm -rf "$UNI_HOME/pbx"; cleanup_cluster' EXIT
uni_cluster uni "$UNI"
data_storage t0306-token

head -c $((9 * 1048576 + 11)) /dev/urandom >"$TEST_TMP/big"
printf 'alpha\n' >"$TEST_TMP/a"
printf 'beta\n' >"$TEST_TMP/b"
gcs_put data ds/big.bin "$TEST_TMP/big" && gcs_put data ds/a.txt "$TEST_TMP/a" &&
	gcs_put data ds/sub/b.txt "$TEST_TMP/b"
ok $? "3 objects in gs://data/ds/"
mkdir -p "$TEST_TMP/e1"
cat >"$TEST_TMP/e1/experiment.yaml" <<'EXP'
name: uni-data
command: |
  cd data/d && find . -type f ! -name .pbx-data-manifest | LC_ALL=C sort | xargs sha256sum >"$PBX_TASK_DIR/sums.txt"
  cd "$PBX_TASK_DIR" && { if touch data/d/new 2>/dev/null; then echo writable; else echo read-only; fi; } >w.txt
sweep: { grid: { i: [0, 1] } }
resources: { exclusive: true }
outputs: [sums.txt, w.txt]
data:
  - { from: gs://data/ds/, to: data/d }
EXP
ID=$(data_id gs://data/ds/)
D=$UNI_HOME/pbx/pbx/data/$ID

# ---- the first staging, on a terminal -------------------------------------
# downloads paced at 6 MiB/s, as a real store's connection is limited by
# the network: the large object takes 1.5 s to come, its push overlaps it
emu_post faults '{"storage_rate": 6291456}' >/dev/null
data_reset_calls
script -qec "'$PBX' parrun '$TEST_TMP/e1/experiment.yaml' uni" /dev/null </dev/null >"$TEST_TMP/tty" 2>&1
rc=$?
tr '\r' '\n' <"$TEST_TMP/tty" | sed 's/\x1b\[K//g' | grep -v '^\s*$' >"$TEST_TMP/lines"
ok $rc "parrun stages through the stream and submits: $(grep -v objects, "$TEST_TMP/lines")"
grep -q "^data gs://data/ds/: 3 objects (9.4 MB), 3 moved (9.4 MB), 0 removed, 3 downloaded" "$TEST_TMP/lines"
ok $? "3 objects moved, 3 downloaded: $(grep '^data .*moved' "$TEST_TMP/lines")"
is "$(data_gets)" 4 "objects.get: the 2 small objects, the large one's metadata and its bytes"
emu_post faults '{"storage_rate": 0}' >/dev/null
sent=$(grep -m1 'sending [0-9.]* MB to the cluster' "$TEST_TMP/lines")
case $sent in "data gs://data/ds/: "[0-2]"/3 objects, "*", sending "*" MB to the cluster") r=0 ;; *) r=1 ;; esac
ok $r "the large object's push shows on the progress line: $sent"
got=$(printf '%s\n' "$sent" | sed -n 's/.* objects, \([0-9.]*\) MB,.* sending.*/\1/p')
awk -v g="$got" 'BEGIN { exit !(g != "" && g + 0 < 9.4) }'
ok $? "and it starts while the object still downloads (sent as it comes): $got MB of 9.4 MB had come"
grep 'sending [0-9.]* MB' "$TEST_TMP/lines" | sed -n 's/.* objects, \([0-9.]*\) MB,.* sending \([0-9.]*\) MB.*/\1 \2/p' >"$TEST_TMP/pairs"
awk '$1 + 0 < 9.4 && $2 + 0 > 0 { n++ } END { exit !n }' "$TEST_TMP/pairs"
ok $? "bytes went to the cluster before the download ended: $(tr '\n' ';' <"$TEST_TMP/pairs")"
grep -q "^data gs://data/ds/: 3/3 objects, 9.4 MB" "$TEST_TMP/lines"
ok $? "and the line ends at 3/3 objects: $(grep '3/3 objects' "$TEST_TMP/lines")"
pkg=$(sed -n 's/^package \([0-9a-f]*\) .*/\1/p' "$TEST_TMP/lines")
is "$(stat -c '%U %a' "$D/big.bin" "$D/sub")" "$UNI 444
$UNI 555" "the data is the user's, read-only"
cmp -s "$TEST_TMP/big" "$D/big.bin"
ok $? "the large object on the cluster is the bucket's"
C=$PBX_HOME/data/$ID/files/big.bin
cmp -s "$TEST_TMP/big" "$C" && [ "$(stat -c %h "$C")" = 1 ]
ok $? "the download cache keeps its own copy (not linked: the cluster is not this machine's)"
is "$("$PBX" cache ls --json | json_get '[c["shared_bytes"] for c in d["caches"] if c["id"] == "'"$ID"'"][0]')" 0 \
	"cache ls: nothing shared with a cluster"
wait_final "$pkg" 120
is "$(task_states "$pkg")" "COMPLETED COMPLETED" "both tasks completed"
is "$(task_nodes "$pkg")" "node1 node2" "on two nodes"
run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
want=$(cd "$TEST_TMP" && for f in a big b; do sha256sum <"$f" | cut -d' ' -f1; done | sort | tr '\n' ' ')
for t in 0 1; do
	is "$(cut -d' ' -f1 "$PBX_HOME/results/$pkg/$t/sums.txt" | sort | tr '\n' ' ')" "$want" "task $t read every object whole"
done
is "$(cat "$PBX_HOME/results/$pkg"/*/w.txt | sort -u)" read-only "tasks cannot write the data"

# ---- a second package: nothing moves; then without the cache -------------
sed -i 's/^name: uni-data$/name: uni-data-two/' "$TEST_TMP/e1/experiment.yaml"
data_reset_calls
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
case $errout in *"data gs://data/ds/: 3 objects, 0 moved (staged before)"*) r=0 ;; *) r=1 ;; esac
ok $r "a second package moves nothing: $errout"
is "$(data_gets)" 0 "and downloads nothing"
run_pbx cache rm --all
ok $rc "cache rm --all: $errout"
printf 'gamma\n' >"$TEST_TMP/c"
gcs_put data ds/c.txt "$TEST_TMP/c"
sed -i 's/^name: uni-data-two$/name: uni-data-three/' "$TEST_TMP/e1/experiment.yaml"
data_reset_calls
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
case $errout in *"data gs://data/ds/: 4 objects"*", 1 moved"*", 1 downloaded"*) r=0 ;; *) r=1 ;; esac
ok $r "without the cache a new object alone is downloaded and sent: $errout"
is "$(data_gets)" 1 "one download"
is "$(cat "$D/c.txt")" gamma "the cluster has it"

# ---- a staging cut after it put files in place, before its manifest ------
# (here: a file of root's in the dataset that the user's chmod cannot
# change) -> the new object is in place, named in .ID.placing -> deleted
# from the bucket before the next staging, which removes it from the
# cluster (no manifest named it: it was left there before)
printf 'delta\n' >"$TEST_TMP/x"
gcs_put data ds/x.txt "$TEST_TMP/x"
install -m 0644 /dev/null "$D/zz-root"
sed -i 's/^name: uni-data-three$/name: uni-data-cut/' "$TEST_TMP/e1/experiment.yaml"
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
[ "$rc" != 0 ] && [ -f "$D/x.txt" ]
ok $? "the staging fails after placing the new object: rc $rc, $errout"
grep -qx x.txt "$UNI_HOME/pbx/pbx/data/.$ID.placing"
ok $? "which the cluster's list of placed names holds"
grep -q '"x.txt"' "$D/.pbx-data-manifest"
is $? 1 "and no manifest names"
rm -f "$D/zz-root"
gcs_rm data ds/x.txt
sed -i 's/^name: uni-data-cut$/name: uni-data-three/' "$TEST_TMP/e1/experiment.yaml"
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
case $errout in *"data gs://data/ds/: 4 objects"*", 0 moved"*", 1 removed"*) r=0 ;; *) r=1 ;; esac
ok $r "the next staging removes it: $errout"
[ ! -e "$D/x.txt" ] && [ ! -e "$UNI_HOME/pbx/pbx/data/.$ID.placing" ]
ok $? "from the cluster, and the list goes"

# ---- a large object sent as it comes: what goes wrong must stage nothing ---
# (its bytes are on their way before its CRC32C can be checked)
# a corrupt download: refused, naming the object; the cluster unchanged
head -c $((9 * 1048576 + 5)) /dev/urandom >"$TEST_TMP/big2"
gcs_put data ds/big2.bin "$TEST_TMP/big2"
sed -i 's/^name: uni-data-three$/name: uni-data-four/' "$TEST_TMP/e1/experiment.yaml"
emu_post faults '{"storage_corrupt": 1}' >/dev/null
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
is "$rc" 4 "a corrupt large object fails the parrun: $errout"
case $errout in *"gs://data/ds/big2.bin"*"checksum"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the object and its checksum: $errout"
[ ! -e "$D/big2.bin" ] && [ "$(cat "$D/c.txt")" = gamma ]
ok $? "nothing of it staged, the dataset as it was"
is "$(find "$UNI_HOME/pbx/pbx/data" -maxdepth 1 -name '.in-*' | wc -l)" 0 "no unpacked directory left"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM packages WHERE name = 'uni-data-four'")" 0 "nothing submitted"
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
ok $rc "again: $errout"
cmp -s "$TEST_TMP/big2" "$D/big2.bin"
ok $? "the large object staged whole"

# in ranges of 1 MiB, 4 at once, the first cut half-way: read again, the
# bytes already sent are the same version's, the object staged whole
export PBX_OBJSTORE_RANGE_MIN=1048576 PBX_OBJSTORE_RANGE_PART=1048576
head -c $((5 * 1048576 + 7)) /dev/urandom >"$TEST_TMP/big3"
gcs_put data ds/big3.bin "$TEST_TMP/big3"
sed -i 's/^name: uni-data-four$/name: uni-data-five/' "$TEST_TMP/e1/experiment.yaml"
emu_post faults '{"storage_cut": 1}' >/dev/null
data_reset_calls
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
ok $rc "a range cut half-way is read again: $errout"
is "$(emu_get storage | json_get 'd["calls"].get("fault.cut", 0)')" 1 "(the cut happened)"
cmp -s "$TEST_TMP/big3" "$D/big3.bin"
ok $? "the object staged whole"

# rewritten while it downloads, after bytes went: the read starts again on
# the new version, the stream cannot take back what it sent, so the staging
# fails and changes nothing; run again, the new version (kept by the read)
# is staged without a download
head -c $((8 * 1048576 + 4096)) /dev/urandom >"$TEST_TMP/big4"
head -c $((8 * 1048576 + 4096)) /dev/urandom >"$TEST_TMP/big4b"
gcs_put data ds/big4.bin "$TEST_TMP/big4"
sed -i 's/^name: uni-data-five$/name: uni-data-six/' "$TEST_TMP/e1/experiment.yaml"
emu_post faults '{"storage_rate": 524288}' >/dev/null
script -qec "'$PBX' parrun '$TEST_TMP/e1/experiment.yaml' uni" /dev/null </dev/null >"$TEST_TMP/tty6" 2>&1 &
pid=$!
n=0
until grep -q 'sending' "$TEST_TMP/tty6" 2>/dev/null || [ $n -ge 300 ]; do sleep 0.05; n=$((n + 1)); done
gcs_put data ds/big4.bin "$TEST_TMP/big4b"
emu_post faults '{"storage_rate": 0}' >/dev/null
wait $pid
rc=$?
out6=$(tr '\r' '\n' <"$TEST_TMP/tty6" | sed 's/\x1b\[K//g' | grep -v ' objects, ')
[ "$rc" != 0 ]
ok $? "rewritten while it was sent: the parrun fails: $out6"
case $out6 in *"big4.bin' changed while it was read and sent"*) r=0 ;; *) r=1 ;; esac
ok $r "saying so: $out6"
[ ! -e "$D/big4.bin" ]
ok $? "nothing of it staged"
data_reset_calls
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
ok $rc "again: $errout"
cmp -s "$TEST_TMP/big4b" "$D/big4.bin"
ok $? "the new version staged"
is "$(data_gets)" 0 "from the download cache: the read that started again kept it"
unset PBX_OBJSTORE_RANGE_MIN PBX_OBJSTORE_RANGE_PART

# a reply corrupted a quarter in, then cut half-way, paced: the sender took
# the bad byte before the read started again and brought the good one; the
# read checks out whole, the bytes sent do not: refused, nothing staged;
# run again, the object (kept by the good read) is staged whole
head -c $((9 * 1048576 + 3)) /dev/urandom >"$TEST_TMP/big5"
gcs_put data ds/big5.bin "$TEST_TMP/big5"
sed -i 's/^name: uni-data-six$/name: uni-data-seven/' "$TEST_TMP/e1/experiment.yaml"
emu_post faults '{"storage_rate": 6291456, "storage_garble_cut": 1}' >/dev/null
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
emu_post faults '{"storage_rate": 0}' >/dev/null
is "$rc" 4 "bytes sent that the object does not have fail the parrun: $errout"
case $errout in *"big5.bin': the bytes sent while it downloaded are not the object's"*) r=0 ;; *) r=1 ;; esac
ok $r "saying so: $errout"
[ ! -e "$D/big5.bin" ]
ok $? "nothing of it staged"
data_reset_calls
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" uni
ok $rc "again: $errout"
cmp -s "$TEST_TMP/big5" "$D/big5.bin"
ok $? "the object staged whole"
is "$(data_gets)" 0 "from the download cache (the good read kept it)"
done_testing
