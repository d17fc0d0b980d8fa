# tests/cli/cloud/data-head.sh - a head with its own identity stages its
# cloud's buckets itself (docs/data.md, "Credentials";
# docs/head-identity.md), one body for both clouds (CLOUD=gce: t0303, on
# the Compute Engine emulator's node bodies, a head with a service
# account, gs://; CLOUD=aws: t0304, on the EC2 harness's node bodies, a
# head with instance profile pbx-head, s3:// on moto through the harness's
# proxy, which counts S3 requests by who signed them, the user's keys
# having no S3 rights).  parrun of an experiment with `data: SCHEME://data/fm/`
# -> the head's pbx (pbx-head) lists and downloads the objects with its
# own credentials (its metadata server's token; the role's from its
# IMDSv2) into its own cache, the user's pbx downloads nothing (no cache
# of its own) -> a task reads every object -> a second package moves
# nothing -> one changed object moves alone, as the head reports it ->
# on a terminal the head's progress is shown as it stages (its JSON
# progress lines, PBX_DATA_PROGRESS) -> a large object is linked from the
# head's cache, not streamed -> pbx-head refuses a source that is not a
# bucket URL -> cluster gc removes a dataset no package names with the
# head's cache of it -> the cluster stops.
# Addresses: subnets $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24; SLURM ports
# from BODY_PORT_BASE.  (The booted-VM twin on gce:
# tests/vm/gce-data-env.sh.)
# shellcheck shell=sh

# ---- the cloud's setup: the cluster dh, bucket data, and
#   put NAME TEXT   object NAME of bucket data holds TEXT
#   gets            the objects read from the bucket so far
#   head_creds      how many times the head's metadata server gave it credentials
#   head_read B     it did since the count was B (one step)
#   only_head_read  no one but the head read the bucket (one step)
case $CLOUD in
gce)
	SCHEME=gs
	stop_at_exit dh
	cloud_emulator --bucket data
	cloud_account "storage_endpoint: \"http://127.0.0.1:$PORT/\""
	cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(cloud_template dh "$PBX_HOME/id" \
		"head: { service_account: pbx-e2e@pbx-test.iam.gserviceaccount.com }" \
		"node_groups:" "  - { name: node, count: 1, machine_type: e2-standard-4 }")"
	put() { printf %s "$2" >"$TEST_TMP/obj" && gcs_put data "$1" "$TEST_TMP/obj"; }
	put_file() { gcs_put data "$1" "$2"; }
	tokens() { emu_get calls | json_get 'd["metadata_tokens"].get("pbx-e2e@pbx-test.iam.gserviceaccount.com", 0)'; }
	gets() { emu_get storage | json_get 'd["calls"].get("objects.get", 0)'; }
	head_creds() { tokens; }
	head_read() { [ "$(tokens)" -gt "$1" ]; }
	only_head_read() { :; } # the emulator does not tell who read: gce-data-env.sh does, on VMs
	head_identity="a service account"
	;;
aws)
	SCHEME=s3
	# shellcheck disable=SC2034 # aws_lib.sh's inputs
	H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE H_CLUSTERS="dh"
	. "$(dirname "$0")/aws_lib.sh"
	h_start
	h_template dh "$(json_get 'd["ami"]' <"$TEST_TMP/env.json")"
	sed -i '/^  dh:$/,/^clouds:/s/    head: { machine_type: m5.large }/    head: { machine_type: m5.large, instance_profile: pbx-head }/' "$PBX_HOME/config.yaml"
	sed -i "s|^  aws: { region: us-east-1, endpoint: \"$URL\", |&s3_endpoint: \"${URL%/}\", |" "$PBX_HOME/config.yaml"
	grep -q "s3_endpoint: \"${URL%/}\"" "$PBX_HOME/config.yaml" || fail "config.yaml has no s3_endpoint"
	BODIES=$TEST_TMP/h/bodies
	# s3_admin CODE: runs the Python CODE with `s3`, a boto3 S3 client of
	# the harness's admin on moto itself (not through the proxy: not counted)
	s3_admin() {
		python3 -c "import boto3, json, sys
e = json.load(open('$TEST_TMP/env.json'))
s3 = boto3.client('s3', region_name='us-east-1', endpoint_url=e['moto_url'],
                  aws_access_key_id=e['admin']['access_key'], aws_secret_access_key=e['admin']['secret_key'])
$1"
	}
	put() { s3_admin "s3.put_object(Bucket='data', Key='$1', Body=b'$2')"; }
	put_file() { s3_admin "s3.upload_file('$2', 'data', '$1')"; }
	# s3_calls: the S3 requests through the proxy, "PRINCIPAL OPERATION=N", sorted
	s3_calls() {
		python3 -c 'import json, sys, urllib.request
d = json.load(urllib.request.urlopen(sys.argv[1] + "_harness/calls"))["s3"]
print(" ".join(sorted("%s=%d" % (k.replace(" ", ":"), v) for k, v in d.items())))' "$URL"
	}
	gets() { calls s3 "role:pbx-role GetObject"; }
	head_creds() { calls role_credentials pbx-role; }
	# the role's credentials are cached on the head: given out at least once
	head_read() { [ "$(head_creds)" -ge 1 ]; }
	only_head_read() {
		is "$(s3_calls | tr ' ' '\n' | grep -vc '^role:pbx-role:')" 0 "no S3 request was signed by anyone but the head's role: $(s3_calls)"
	}
	head_identity="an instance profile"
	s3_admin "s3.create_bucket(Bucket='data')"
	;;
esac
put fm/a.txt alpha
put fm/sub/b.txt beta
put fm/sub/c.txt gamma

mkdir -p "$TEST_TMP/e1"
printf '%s\n' "name: dh" "command: cat data/d/a.txt data/d/sub/b.txt data/d/sub/c.txt > out.txt" \
	"outputs: [out.txt]" "data:" "  - { from: \"$SCHEME://data/fm/\", to: data/d }" >"$TEST_TMP/e1/experiment.yaml"

run_pbx -q cluster start dh
ok $rc "the cluster starts: $errout"
head_pbx=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -n 1)
head_root=${head_pbx%/usr/local/sbin/pbx-head}
[ -n "$head_pbx" ] && [ -x "$head_pbx" ]
ok $? "a head with $head_identity runs pbx (pbx-head)"
if [ "$CLOUD" = aws ]; then
	grep -q "AWS_EC2_METADATA_SERVICE_ENDPOINT=" "$head_pbx"
	ok $? "pbx-head asks the body's own IMDS"
fi

before=$(head_creds)
run_pbx parrun "$TEST_TMP/e1/experiment.yaml" dh
ok $rc "parrun: $errout"
case $errout in *"data $SCHEME://data/fm/: 3 objects"*", 3 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "the 3 objects were staged: $errout"
is "$(gets)" 3 "3 downloads"
if [ "$CLOUD" = aws ]; then
	is "$(s3_calls)" "role:pbx-role:GetObject=3 role:pbx-role:ListObjectsV2=1" \
		"one listing and 3 downloads, every one signed with the head's role credentials"
fi
head_read "$before"
ok $? "with the credentials the head's metadata server gave out ($before before, $(head_creds) after)"
ID=$(ls "$head_root/var/lib/pbx/home/data" 2>/dev/null | head -n 1)
is "$(find "$head_root/var/lib/pbx/home/data/$ID/files" -type f 2>/dev/null | wc -l)" 3 \
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
case $errout in *"data $SCHEME://data/fm/: 3 objects, 0 moved (staged before)"*) r=0 ;; *) r=1 ;; esac
ok $r "a second package moves nothing: $errout"
is "$(gets)" 3 "and downloads nothing"
put fm/sub/b.txt BETA
sed -i 's/^name: dh-two$/name: dh-three/' "$TEST_TMP/e2/experiment.yaml"
run_pbx parrun "$TEST_TMP/e2/experiment.yaml" dh
case $errout in *"data $SCHEME://data/fm/: 3 objects"*", 1 moved"*", 1 downloaded"*) r=0 ;; *) r=1 ;; esac
ok $r "one changed object moves alone, as the head reports it: $errout"
is "$(gets)" 4 "one more download, by the head"
only_head_read
pkg3=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg3" 120
run_pbx -q harvest "$pkg3"
is "$(cat "$PBX_HOME/results/$pkg3"/*/out.txt 2>/dev/null)" "alphaBETAgamma" "its task read the new version"

# on a terminal the head's progress shows as it stages (PBX_DATA_PROGRESS:
# its progress lines read as they come), the report after it
put fm/sub/c.txt GAMMA
sed -i 's/^name: dh-three$/name: dh-four/' "$TEST_TMP/e2/experiment.yaml"
script -qec "'$PBX' parrun '$TEST_TMP/e2/experiment.yaml' dh" /dev/null </dev/null >"$TEST_TMP/tty.out" 2>&1
ok $? "parrun on a terminal: $(tr '\r' '\n' <"$TEST_TMP/tty.out" | grep -v '^\s*$' | tail -2)"
tr '\r' '\n' <"$TEST_TMP/tty.out" | grep -q "^data $SCHEME://data/fm/: 1/1 objects, 0.0 MB"
ok $? "the head's progress is shown on the user's terminal: $(tr '\r' '\n' <"$TEST_TMP/tty.out" | grep -m1 objects)"
tr '\r' '\n' <"$TEST_TMP/tty.out" | grep -q "data $SCHEME://data/fm/: 3 objects.*, 1 moved"
ok $? "and then its report"

# a large object (over 8 MiB: downloaded into the head's cache as it
# comes) and a small one are not sent through the head's own stream: its
# script links them from the cache (hard links when the cache and the
# shared disk are one file system, else copies)
head -c $((9 * 1048576 + 77)) /dev/urandom >"$TEST_TMP/big"
put_file big/big.bin "$TEST_TMP/big"
put big/small.txt small
mkdir -p "$TEST_TMP/e3"
printf '%s\n' "name: dh-big" "command: wc -c < data/b/big.bin > out.txt" \
	"outputs: [out.txt]" "data:" "  - { from: \"$SCHEME://data/big/\", to: data/b }" >"$TEST_TMP/e3/experiment.yaml"
run_pbx parrun "$TEST_TMP/e3/experiment.yaml" dh
case $errout in *"data $SCHEME://data/big/: 2 objects"*", 2 moved"*", 2 downloaded"*) r=0 ;; *) r=1 ;; esac
ok $r "a large object and a small one staged by the head: $errout"
BIGID=$(printf '%s' "$SCHEME://data/big/" | sha256sum | cut -c1-16)
shared=$(sed -n "s/.*PBX_BODY_SHARED='\([^']*\)'.*/\1/p" "$head_pbx")
staged=$shared/pbx/data/$BIGID/big.bin cached=$head_root/var/lib/pbx/home/data/$BIGID/files/big.bin
cmp -s "$TEST_TMP/big" "$staged" && cmp -s "$TEST_TMP/big" "$cached"
ok $? "its bytes on the cluster and in the head's cache are the bucket's"
if [ "$(stat -c %d "$staged")" = "$(stat -c %d "$cached")" ]; then
	is "$(stat -c %i "$staged")" "$(stat -c %i "$cached")" "one file system: the cluster's copy is the cache's file, linked"
	is "$(stat -c %i "${staged%/*}/small.txt")" "$(stat -c %i "${cached%/*}/small.txt")" "and so is a small object's"
else
	is "$(stat -c %h "$staged")" 1 "two file systems: the cluster's copy is a copy of the cache's file"
fi
is "$(stat -c %a "$staged")" 444 "read-only on the cluster"
[ -z "$(find "$shared/pbx/data" -maxdepth 1 -name '.in-*')" ]
ok $? "no unpack directory is left"
pkgb=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkgb" 120
run_pbx -q harvest "$pkgb"
is "$(cat "$PBX_HOME/results/$pkgb"/*/out.txt 2>/dev/null | tr -d ' ')" $((9 * 1048576 + 77)) "a task read it whole"

run_pbx_head() { out=$("$head_pbx" "$@" 2>"$TEST_TMP/head.err"); rc=$?; errout=$(cat "$TEST_TMP/head.err"); }
PBX_DATA_PROGRESS=1 run_pbx_head -q cluster data dh "$SCHEME://data/fm/"
case $out in *'{"progress":'*'"done":'*) r=1 ;; *) r=0 ;; esac
[ "$rc" = 0 ] && [ "$r" = 0 ] && [ "$(echo "$out" | json_get 'd["changed"]')" = 0 ]
ok $? "with nothing new the head prints no progress, its report says 0 changed: $out"
put fm/sub/d.txt delta
PBX_DATA_PROGRESS=1 run_pbx_head -q cluster data dh "$SCHEME://data/fm/"
is "$(echo "$out" | head -n 1)" '{"progress":{"key":"'"$SCHEME"'://data/fm/","done":1,"total":1,"bytes":5}}' \
	"with PBX_DATA_PROGRESS, pbx-head prints its progress as JSON lines before its report"
run_pbx_head -q cluster data dh "$SCHEME://data/fm/"
is "$(echo "$out" | grep -c progress)" 0 "without it, none"
# a large object's bytes are shown as they arrive, not only once whole:
# the first line comes with its first bytes (done 0), the last says all
head -c $((9 * 1048576 + 5)) /dev/urandom >"$TEST_TMP/big2"
put_file big/big2.bin "$TEST_TMP/big2"
PBX_DATA_PROGRESS=1 run_pbx_head -q cluster data dh "$SCHEME://data/big/"
first=$(echo "$out" | grep -m1 '"progress"') last=$(echo "$out" | grep '"progress"' | tail -n 1)
got=$(echo "$first" | json_get 'd["progress"]["bytes"]')
[ "$rc" = 0 ] && [ "$(echo "$first" | json_get 'd["progress"]["done"]')" = 0 ] &&
	[ "$got" -gt 0 ] && [ "$got" -lt $((9 * 1048576 + 5)) ]
ok $? "a large object's progress moves while it downloads: $first"
is "$last" '{"progress":{"key":"'"$SCHEME"'://data/big/","done":1,"total":1,"bytes":'$((9 * 1048576 + 5))'}}' \
	"and its last line counts it whole, once"

run_pbx_head -q cluster data dh /etc
is "$rc" 2 "pbx-head refuses a source that is not a bucket URL: $errout"

# cluster gc: the large objects' dataset, named by no package left, goes
# with the head's own download cache of it (its files are the dataset's:
# the disk is freed only when both go); the dataset packages name stays,
# and its cache
run_pbx -q forget "$pkgb"
ok $rc "the large objects' package forgotten: $errout"
touch -d '2 hours ago' "$shared/pbx/$pkgb" "$shared/pbx/data/$BIGID"
hc=$head_root/var/lib/pbx/home/data
run_pbx cluster gc --json dh
ok $rc "gc: $errout"
is "$(echo "$out" | json_get '" ".join(g["id"] for g in d["gone"] if g["kind"] == "data")')" "$BIGID" \
	"it removes the dataset no package names"
is "$(echo "$out" | json_get 'int([g["bytes"] for g in d["gone"] if g["kind"] == "data"][0] >= 2 * 9 * 1048576)')" 1 \
	"and counts its two large objects"
[ ! -e "$shared/pbx/data/$BIGID" ] && [ ! -e "$hc/$BIGID" ] && [ ! -e "$hc/$BIGID.lock" ]
ok $? "the dataset, the head's cache of it and its lock are gone"
[ -d "$shared/pbx/data/$ID" ] && [ -d "$hc/$ID/files" ]
ok $? "the dataset packages name stays, and the head's cache of it"
run_pbx_head cache ls --json
is "$(echo "$out" | json_get '" ".join(c["source"] for c in d["caches"])')" "$SCHEME://data/fm/" \
	"pbx-head's cache ls: the source left"

run_pbx -q cluster stop --discard-results dh
ok $rc "the cluster stops: $errout"
if [ "$CLOUD" = aws ]; then
	is "$(holds)" "0 0 0" "no instance, security group or key pair is left"
fi
done_testing
