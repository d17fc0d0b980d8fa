#!/bin/sh
# t0306-ssh-data.sh - data: staged on a SLURM cluster pbx did not build
# (cloud ssh, as an ordinary user: the university's cluster, docs/data.md
# and docs/ssh-clusters.md), whose head cannot take the objects from this
# machine's cache: they go through the stream (one tar over SSH).  The
# Compute Engine emulator's Cloud Storage holds two small objects and one
# of 9 MiB (over 8 MiB: downloaded into the download cache's file, then
# sent from it).  parrun on a terminal -> the progress line shows the
# large object's bytes as they download, then its push ("sending N MB to
# the cluster") -> the data is the user's, read-only, and tasks on two
# nodes read it whole -> the cache's files are its own (nothing shared)
# -> a second package moves and downloads nothing -> with the cache
# removed (`pbx cache rm --all`) a new object alone is downloaded and
# sent.  Addresses and ports: the test's slot (lib.sh); the login node's
# are LOGIN_ADDR and LOGIN_PORT.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-uni.sh"

UNI_UID=2877 UNI=pbx-uni7
LOGIN_ADDR=$SLOT_NET.0.100 LOGIN_PORT=$(slot_port 0)
export LOGIN_ADDR LOGIN_PORT
UNI_HOME=/home/$UNI
local_cluster campus slot "{ name: node, count: 2 }"
run_pbx -q cluster start campus
ok $rc "the university's cluster runs (a local cluster of root's): $errout"
HEADROOT=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT n.root FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.name = 'campus' AND c.state != 'deleted' AND n.name = 'head'")
uni_user "$UNI" "$UNI_UID" "$UNI_HOME" t0306
uni_login "$UNI"
ok $? "the login node's sshd runs"
trap 'kill "$LOGIN_SSHD" 2>/dev/null; rm -rf "$UNI_HOME/pbx"; cleanup_cluster' EXIT
python3 - "$PBX_HOME/config.yaml" "$PBX_HOME/uni_id" "$HEADROOT" "$UNI" <<'PY'
import os, sys
path, key, root, user = sys.argv[1:]
uni = """  uni:
    cloud: ssh
    host: %s
    port: %s
    login_user: %s
    ssh_key: %s
    setup: . %s/etc/pbx/env.sh
""" % (os.environ["LOGIN_ADDR"], os.environ["LOGIN_PORT"], user, key, root)
text = open(path).read().replace("clusters:\n", "clusters:\n" + uni, 1)
open(path, "w").write(text)
PY
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
data_reset_calls
script -qec "'$PBX' parrun '$TEST_TMP/e1/experiment.yaml' uni" /dev/null </dev/null >"$TEST_TMP/tty" 2>&1
rc=$?
tr '\r' '\n' <"$TEST_TMP/tty" | sed 's/\x1b\[K//g' | grep -v '^\s*$' >"$TEST_TMP/lines"
ok $rc "parrun stages through the stream and submits: $(grep -v objects, "$TEST_TMP/lines")"
grep -q "^data gs://data/ds/: 3 objects (9.4 MB), 3 moved (9.4 MB), 0 removed, 3 downloaded" "$TEST_TMP/lines"
ok $? "3 objects moved, 3 downloaded: $(grep '^data .*moved' "$TEST_TMP/lines")"
is "$(data_gets)" 4 "objects.get: the 2 small objects, the large one's metadata and its bytes"
sent=$(grep -m1 'sending [0-9.]* MB to the cluster' "$TEST_TMP/lines")
case $sent in "data gs://data/ds/: "[0-2]"/3 objects, 9.4 MB"*", sending "*" MB to the cluster") r=0 ;; *) r=1 ;; esac
ok $r "once the large object came, its push shows on the progress line: $sent"
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
done_testing
