#!/bin/sh
# ec2-data.sh - an experiment's s3:// data on booted Debian 12 VMs behind
# the EC2 harness (docs/data.md, "Credentials"): the twin of
# gce-data-env.sh's data part for S3.  The head has the instance profile
# pbx-head; the user's own keys may not read the bucket (moto checks IAM:
# the harness's user pbx has no s3:* right, the role has).  An aws
# template with 2 compute nodes and no s3_endpoint -> parrun of an
# experiment with `data: s3://pbx-vm-data/ds/` (a 9 MiB object, over the
# 8 MiB that goes through the head's cache file, and two small ones) -> the
# head's pbx stages it with its role's credentials from IMDSv2, at S3's own
# address https://pbx-vm-data.s3.us-east-1.amazonaws.com (the harness's
# proxy behind the namespace's gateway, a certificate the image trusts):
# every S3 request signed by the role, every one by the bucket's virtual
# host -> tasks on both nodes read the objects whole -> a second package
# moves nothing, a changed object moves alone -> the packages forgotten,
# cluster gc removes the dataset and the head's download cache of it ->
# stop -> nothing left.
#
# PBX_VM_IMAGE picks the image kind as for ec2-booted.sh (default: baked,
# i.e. ec2-baked); images are built once into PBX_VM_IMAGES (default:
# build/vm-images) by tests/vm/image.sh.  Skipped, with the reason, where
# this machine cannot boot VMs.
. "$PBX_SOURCE_DIR/tests/cli/lib.sh"
. "$PBX_SOURCE_DIR/tests/vm/lib.sh"

ec2_vm_test_setup d1
BUCKET=pbx-vm-data
VHOST=$BUCKET.s3.us-east-1.amazonaws.com

# s3_as WHO CODE: Python CODE with `s3`, a boto3 S3 client of the harness's
# user WHO (admin, pbx) on moto itself (not through the proxy: not counted)
s3_as() {
	python3 -c "import boto3, json, sys
e = json.load(open('$TEST_TMP/env.json'))
s3 = boto3.client('s3', region_name='us-east-1', endpoint_url=e['moto_url'],
                  aws_access_key_id=e['$1']['access_key'], aws_secret_access_key=e['$1']['secret_key'])
$2"
}
# s3_seen KEY: the proxy's S3 counts (KEY: s3, by signer and operation;
# s3_hosts, by host), "NAME=N" sorted
s3_seen() {
	python3 -c 'import json, sys, urllib.request
d = json.load(urllib.request.urlopen(sys.argv[1] + "_harness/calls"))[sys.argv[2]]
print(" ".join(sorted("%s=%d" % (k.replace(" ", ":"), v) for k, v in d.items())))' "$URL" "$1"
}
gets() { s3_seen s3 | tr ' ' '\n' | sed -n 's/^role:pbx-role:GetObject=//p'; }
on() { "$PBX" -q cluster exec ${2:+-n "$2"} d1 -- sh -c "$1" 2>&1; }

# ------------------------------------------------------------ the images
vm_images_ready "$KIND" "$IMAGES"
vm_user_key ec2-data
ec2_vm_harness 96 127.0.146.0/24
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  d1:
    cloud: aws
    login_user: admin
    ssh_key: $PBX_HOME/id
    image: $(env_get 'd["ami"]')
    boot_timeout: 900
    head: { machine_type: m5.large, instance_profile: $(env_get 'd["instance_profile"]') }
    node_groups:
      - { name: cpu, count: 2, machine_type: m5.large }
clouds:
  aws: { region: us-east-1, endpoint: "$URL", subnet: $(env_get 'd["subnets"][0]') }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"

# ------------------------------------------------------ the dataset
mkdir -p "$TEST_TMP/objects/sub"
head -c $((9 * 1048576 + 333)) /dev/urandom >"$TEST_TMP/objects/big.bin"
echo alpha >"$TEST_TMP/objects/a.txt"
echo beta >"$TEST_TMP/objects/sub/b.txt"
s3_as admin "s3.create_bucket(Bucket='$BUCKET')
for k in ('big.bin', 'a.txt', 'sub/b.txt'):
    s3.upload_file('$TEST_TMP/objects/' + k, '$BUCKET', 'ds/' + k)"
ok $? "the bucket $BUCKET holds 3 objects under ds/"
s3_as pbx "s3.list_objects_v2(Bucket='$BUCKET', Prefix='ds/')" >"$TEST_TMP/denied" 2>&1
grep -q AccessDenied "$TEST_TMP/denied"
ok $? "the user's own keys may not read it: only the head can stage it ($(grep -o 'AccessDenied[^.]*' "$TEST_TMP/denied" | head -n 1))"
# what a task prints of a data directory: its files and a digest of them
digest() { (cd "$1" && find . -type f ! -name '.pbx-data*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16); }
want=$(digest "$TEST_TMP/objects")

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<'EOF'
name: s3data
command: |
  d=$(cd data/ds && find . -type f ! -name '.pbx-data*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
  echo "x=$PBX_PARAM_X node=$(hostname -s) data=$d" > result.txt
sweep: { grid: { x: [1, 2] } }
resources: { exclusive: true }
outputs: [result.txt]
data:
  - { from: "s3://pbx-vm-data/ds/", to: data/ds }
EOF

# ------------------------------------------------------------- start
t0=$(date +%s)
run_pbx cluster start d1
ok $rc "start on booted VMs ($(($(date +%s) - t0)) s): $errout"
is "$(on 'grep -c "127\.0\.0\.1\|endpoint" /etc/pbx/head-config.yaml')" "0" \
	"the head's configuration names no endpoint (its pbx calls S3's own name)"

# -------------------------------------------------------- parrun: data
t0=$(date +%s)
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" d1
ok $rc "parrun of an experiment with s3:// data ($(($(date +%s) - t0)) s): $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
case $errout in *"data s3://$BUCKET/ds/: 3 objects"*", 3 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "the 3 objects were staged: $(echo "$errout" | grep '^data ' | tr '\n' ' ')"
is "$(gets)" 3 "3 downloads, signed by the head's role"
is "$(s3_seen s3 | tr ' ' '\n' | grep -vc '^role:pbx-role:')" 0 \
	"no S3 request was signed by anyone but the head's role: $(s3_seen s3)"
is "$(s3_seen s3_hosts)" "$VHOST=$(s3_seen s3 | tr ' ' '\n' | sed 's/.*=//' | awk '{ n += $1 } END { print n }')" \
	"every one by the bucket's virtual host, over https with the world CA: $(s3_seen s3_hosts)"
ID=$(on 'ls /shared/pbx/data' | head -n 1)
is "$(on "cd /shared/pbx/data/$ID && stat -c '%a %s %n' . big.bin sub/b.txt" | sed 's/^555 [0-9]* \./555 ./')" \
	"555 .
444 $((9 * 1048576 + 333)) big.bin
444 5 sub/b.txt" "on the shared disk ($ID), read-only"
how=$(on "a=/shared/pbx/data/$ID/big.bin b=/var/lib/pbx/home/data/$ID/files/big.bin
if [ \$(stat -c %d \$a) = \$(stat -c %d \$b) ]; then [ \$(stat -c %i \$a) = \$(stat -c %i \$b) ] && echo linked
else cmp -s \$a \$b && echo copied; fi")
case $how in linked | copied) r=0 ;; *) r=1 ;; esac
ok $r "the head's script took the large object from its cache: $how"
on "grep -rlF -e '$AWS_ACCESS_KEY_ID' -e '$AWS_SECRET_ACCESS_KEY' /etc /var/lib/pbx /home /root 2>/dev/null" >"$TEST_TMP/keys"
is "$(cat "$TEST_TMP/keys")" "" "the user's keys are nowhere on the head"

wait_final "$PKG" 900
is "$(task_states "$PKG")" "COMPLETED COMPLETED" "both tasks completed"
run_pbx harvest "$PKG"
ok $rc "harvest: $errout"
res=$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null)
echo "$res" | sed 's/^/# /' >&2
is "$(echo "$res" | sed 's/.* node=\([^ ]*\) .*/\1/' | sort -u | wc -l)" 2 "the tasks ran on two machines (exclusive)"
is "$(echo "$res" | grep -c " data=$want\$")" 2 "each read the bucket's 3 objects whole ($want)"

# ------------------------------------- a second package; one change
sed -i 's/^name: s3data$/name: s3data-two/' "$TEST_TMP/exp/experiment.yaml"
run_pbx parrun "$TEST_TMP/exp/experiment.yaml" d1
case $errout in *"data s3://$BUCKET/ds/: 3 objects, 0 moved (staged before)"*) r=0 ;; *) r=1 ;; esac
ok $r "a second package moves nothing: $(echo "$errout" | grep '^data ' | tr '\n' ' ')"
is "$(gets)" 3 "no download"
echo BETA >"$TEST_TMP/objects/sub/b.txt"
s3_as admin "s3.upload_file('$TEST_TMP/objects/sub/b.txt', '$BUCKET', 'ds/sub/b.txt')"
sed -i 's/^name: s3data-two$/name: s3data-three/' "$TEST_TMP/exp/experiment.yaml"
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" d1
case $errout in *"data s3://$BUCKET/ds/: 3 objects"*", 1 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "one object changed: one moved: $(echo "$errout" | grep '^data ' | tr '\n' ' ')"
is "$(gets)" 4 "one download more"
PKG3=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG3" 900
run_pbx harvest "$PKG3"
is "$(cat "$PBX_HOME"/results/"$PKG3"/*/result.txt 2>/dev/null | grep -c " data=$(digest "$TEST_TMP/objects")\$")" 2 \
	"its tasks read the new version"

# ------------------------------------- gc: the dataset and the head's cache
# of it go once no package names them (an hour after: aged here)
for p in "$PKG" s3data-two "$PKG3"; do
	run_pbx -q forget --discard-results "$p"
	ok $rc "forget $p: $errout"
done
on "touch -d '2 hours ago' /shared/pbx/*/ /shared/pbx/data/$ID"
run_pbx cluster gc --json d1
ok $rc "gc: $errout"
is "$(echo "$out" | json_get '" ".join(g["id"] for g in d["gone"] if g["kind"] == "data")')" "$ID" \
	"it removes the dataset"
# (the shared disk's .ID.lock stays: a staging waiting on it and one
# making a new one would not exclude each other; src/jobs/envgc.c)
is "$(on "ls -A /shared/pbx/data; ls -A /var/lib/pbx/home/data" | grep -c "^$ID")" 0 \
	"from the shared disk, and the head's download cache of it with its lock (its hard links freed)"

# ------------------------------------------------------------- stop
run_pbx cluster stop --discard-results d1
ok $rc "stop: $errout"
is "$(ec2_vm_holds)" "0 0 0" "moto holds no instance, no security group and no key pair"
sleep 1
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM is left running"
ns=pbxvm-$H_PID
h_stop
is "$(ip netns list | grep -c "^$ns\b")" "0" "the harness's namespace is gone"

done_testing
