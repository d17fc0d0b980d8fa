#!/bin/sh
# t0303-data-head.sh - a head with its own identity stages the data itself
# (docs/data.md, "Credentials"): on the Compute Engine emulator's node
# bodies, a gce template whose head runs as a service account; parrun of
# an experiment with `data: gs://data/fm/` -> the head's pbx (pbx-head)
# lists and downloads the objects with a token from its metadata server
# into its own cache, the user's pbx downloads nothing (no cache of its
# own) -> a task reads every object -> a second package moves nothing,
# one changed object moves alone, and the head reports it -> pbx-head
# refuses a source that is not a bucket URL.  (The booted-VM twin,
# tests/vm/gce-data-env.sh, checks the emulator saw the head's account
# and not the user's.)  Emulator addresses $SLOT_NET.1.0/24 (private) and
# $SLOT_NET.2.0/24 (public).
. "$(dirname "$0")/lib.sh"

stop_at_exit dh
gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24" --bucket data
mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C t0303 -f "$PBX_HOME/id"
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  dh:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    head: { service_account: pbx-e2e@pbx-test.iam.gserviceaccount.com }
    node_groups:
      - { name: node, count: 1, machine_type: e2-standard-4 }
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/", storage_endpoint: "http://127.0.0.1:$PORT/" }
  local: { slurm_port_base: $BODY_PORT_BASE }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"
BODIES=$TEST_TMP/emu/bodies
# put NAME TEXT: object NAME of bucket data holds TEXT
put() { printf %s "$2" >"$TEST_TMP/obj" && gcs_put data "$1" "$TEST_TMP/obj"; }
tokens() { emu_get calls | json_get 'd["metadata_tokens"].get("pbx-e2e@pbx-test.iam.gserviceaccount.com", 0)'; }
gets() { emu_get storage | json_get 'd["calls"].get("objects.get", 0)'; }
put fm/a.txt alpha
put fm/sub/b.txt beta
put fm/sub/c.txt gamma

mkdir -p "$TEST_TMP/e1"
cat >"$TEST_TMP/e1/experiment.yaml" <<'EXP'
name: dh
command: cat data/d/a.txt data/d/sub/b.txt data/d/sub/c.txt > out.txt
outputs: [out.txt]
data:
  - { from: "gs://data/fm/", to: data/d }
EXP

run_pbx -q cluster start dh
ok $rc "the cluster starts: $errout"
head_root=$(dirname "$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -n 1)")/../../..
[ -x "$head_root/usr/local/sbin/pbx-head" ]
ok $? "a head with a service account runs pbx (pbx-head)"

before=$(tokens)
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" dh
ok $rc "parrun: $errout"
case $errout in *"data gs://data/fm/: 3 objects"*", 3 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "the 3 objects were staged: $errout"
is "$(gets)" 3 "3 downloads"
[ "$(tokens)" -gt "$before" ]
ok $? "by a token from the head's metadata server ($before before, $(tokens) after)"
ID=$(ls "$head_root/var/lib/pbx/home/data" 2>/dev/null | head -n 1)
is "$(find "$head_root/var/lib/pbx/home/data/$ID" -type f ! -name .pbx-data-manifest 2>/dev/null | wc -l)" 3 \
	"the 3 downloads are in the head's cache ($ID)"
[ ! -e "$PBX_HOME/data" ]
ok $? "the user's pbx downloaded nothing (no cache of its own)"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg" 120
run_pbx -q harvest "$pkg"
is "$(cat "$PBX_HOME/results/$pkg"/*/out.txt 2>/dev/null)" "alphabetagamma" "the task read every object"

cp -r "$TEST_TMP/e1" "$TEST_TMP/e2"
sed -i 's/^name: dh$/name: dh-two/' "$TEST_TMP/e2/experiment.yaml"
run_pbx parrun "$TEST_TMP/e2/experiment.yaml" dh
case $errout in *"data gs://data/fm/: 3 objects, 0 moved (staged before)"*) r=0 ;; *) r=1 ;; esac
ok $r "a second package moves nothing: $errout"
is "$(gets)" 3 "and downloads nothing"
put fm/sub/b.txt BETA
sed -i 's/^name: dh-two$/name: dh-three/' "$TEST_TMP/e2/experiment.yaml"
run_pbx parrun "$TEST_TMP/e2/experiment.yaml" dh
case $errout in *"data gs://data/fm/: 3 objects"*", 1 moved"*", 1 downloaded"*) r=0 ;; *) r=1 ;; esac
ok $r "one changed object moves alone, as the head reports it: $errout"
pkg3=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg3" 120
run_pbx -q harvest "$pkg3"
is "$(cat "$PBX_HOME/results/$pkg3"/*/out.txt 2>/dev/null)" "alphaBETAgamma" "its task read the new version"

run_pbx_head() { out=$("$head_root/usr/local/sbin/pbx-head" "$@" 2>"$TEST_TMP/head.err"); rc=$?; errout=$(cat "$TEST_TMP/head.err"); }
run_pbx_head -q cluster data dh /etc
is "$rc" 2 "pbx-head refuses a source that is not a bucket URL: $errout"

done_testing
