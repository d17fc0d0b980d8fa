#!/bin/sh
# t0304-aws-data-head.sh - the EC2 twin of t0303: a head with its own
# identity stages its s3:// buckets itself (docs/data.md, "Credentials";
# docs/head-identity.md).  On the EC2 harness's node bodies (moto with
# signatures and IAM checked, tests/emulators/aws), an aws template whose
# head has instance profile pbx-head, S3 being moto's through the harness's
# proxy (clouds.aws.s3_endpoint), which counts S3 requests by who signed
# them.  The user pbx signs as may not use S3; the head's role may.
# parrun of an experiment with `data: s3://data/fm/` -> the head's pbx
# (pbx-head) lists and downloads the objects with the role's credentials
# from its IMDS (IMDSv2) into its own cache, the user's pbx downloads
# nothing (no cache of its own, no S3 request signed by the user) -> a task
# reads every object -> a second package moves nothing -> one changed
# object moves alone -> the cluster stops and leaves nothing.
# Addresses: subnets $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24; SLURM ports
# from BODY_PORT_BASE.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE H_CLUSTERS="sd"
. "$(dirname "$0")/aws_lib.sh"

h_start
h_template sd "$(json_get 'd["ami"]' <"$TEST_TMP/env.json")"
sed -i '/^  sd:$/,/^clouds:/s/    head: { machine_type: m5.large }/    head: { machine_type: m5.large, instance_profile: pbx-head }/' "$PBX_HOME/config.yaml"
sed -i "s|^  aws: { region: us-east-1, endpoint: \"$URL\", |&s3_endpoint: \"${URL%/}\", |" "$PBX_HOME/config.yaml"
grep -q "s3_endpoint: \"${URL%/}\"" "$PBX_HOME/config.yaml" || fail "config.yaml has no s3_endpoint"
BODIES=$TEST_TMP/h/bodies

# s3_admin CODE: runs the Python CODE with `s3`, a boto3 S3 client of the
# harness's admin on moto itself (not through the proxy: not counted).
s3_admin() {
	python3 -c "import boto3, json, sys
e = json.load(open('$TEST_TMP/env.json'))
s3 = boto3.client('s3', region_name='us-east-1', endpoint_url=e['moto_url'],
                  aws_access_key_id=e['admin']['access_key'], aws_secret_access_key=e['admin']['secret_key'])
$1"
}
# put NAME TEXT: object NAME of bucket data holds TEXT
put() { s3_admin "s3.put_object(Bucket='data', Key='$1', Body=b'$2')"; }
# s3_calls: the S3 requests through the proxy, "PRINCIPAL OPERATION=N", sorted
s3_calls() {
	python3 -c 'import json, sys, urllib.request
d = json.load(urllib.request.urlopen(sys.argv[1] + "_harness/calls"))["s3"]
print(" ".join(sorted("%s=%d" % (k.replace(" ", ":"), v) for k, v in d.items())))' "$URL"
}
gets() { calls s3 "role:pbx-role GetObject"; }
s3_admin "s3.create_bucket(Bucket='data')"
put fm/a.txt alpha
put fm/sub/b.txt beta
put fm/sub/c.txt gamma

mkdir -p "$TEST_TMP/e1"
cat >"$TEST_TMP/e1/experiment.yaml" <<'EXP'
name: sd
command: cat data/d/a.txt data/d/sub/b.txt data/d/sub/c.txt > out.txt
outputs: [out.txt]
data:
  - { from: "s3://data/fm/", to: data/d }
EXP

run_pbx -q cluster start sd
ok $rc "the cluster starts: $errout"
head_pbx=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -n 1)
head_root=${head_pbx%/usr/local/sbin/pbx-head}
[ -n "$head_pbx" ] && [ -x "$head_pbx" ]
ok $? "a head with an instance profile runs pbx (pbx-head)"
grep -q "AWS_EC2_METADATA_SERVICE_ENDPOINT=" "$head_pbx"
ok $? "pbx-head asks the body's own IMDS"

run_pbx parrun "$TEST_TMP/e1/experiment.yaml" sd
ok $rc "parrun: $errout"
case $errout in *"data s3://data/fm/: 3 objects"*", 3 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "the 3 objects were staged: $errout"
is "$(s3_calls)" "role:pbx-role:GetObject=3 role:pbx-role:ListObjectsV2=1" \
	"one listing and 3 downloads, every one signed with the head's role credentials"
[ "$(calls role_credentials pbx-role)" -ge 1 ]
ok $? "which the head's IMDS gave out ($(calls role_credentials pbx-role) set)"
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
sed -i 's/^name: sd$/name: sd-two/' "$TEST_TMP/e2/experiment.yaml"
run_pbx parrun "$TEST_TMP/e2/experiment.yaml" sd
case $errout in *"data s3://data/fm/: 3 objects, 0 moved (staged before)"*) r=0 ;; *) r=1 ;; esac
ok $r "a second package moves nothing: $errout"
is "$(gets)" 3 "and downloads nothing"
put fm/sub/b.txt BETA
sed -i 's/^name: sd-two$/name: sd-three/' "$TEST_TMP/e2/experiment.yaml"
run_pbx parrun "$TEST_TMP/e2/experiment.yaml" sd
case $errout in *"data s3://data/fm/: 3 objects"*", 1 moved"*", 1 downloaded"*) r=0 ;; *) r=1 ;; esac
ok $r "one changed object moves alone, as the head reports it: $errout"
is "$(gets)" 4 "one more download, by the head's role"
is "$(s3_calls | tr ' ' '\n' | grep -vc '^role:pbx-role:')" 0 "no S3 request was signed by anyone else: $(s3_calls)"
pkg3=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg3" 120
run_pbx -q harvest "$pkg3"
is "$(cat "$PBX_HOME/results/$pkg3"/*/out.txt 2>/dev/null)" "alphaBETAgamma" "its task read the new version"

run_pbx -q cluster stop --discard-results sd
ok $rc "the cluster stops: $errout"
is "$(holds)" "0 0 0" "no instance, security group or key pair is left"
done_testing
