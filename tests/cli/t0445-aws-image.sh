#!/bin/sh
# t0445-aws-image.sh - `pbx image build|list|delete` on EC2 against moto
# with the harness's EC2 strictness (tests/emulators/aws/ec2_harness.py and
# lifecycle.py: StopInstances `stopping` until the node body is off, then
# `stopped`; CreateImage `pending`, then `available`; AMI names unique per
# account; a snapshot of a registered AMI cannot be deleted), node bodies
# for the instances: a build makes one builder instance (tags
# pbx-cluster=pbx-image, pbx-cluster-id, pbx-image=NAME) with its security
# group and key pair, runs the bootstrap's install action, stops the
# instance, makes the AMI (the AMI and its snapshot tagged pbx-image and
# pbx-image-id), deletes the builder, its group and key pair, and records
# the AMI id; a template naming the AMI starts a cluster; delete
# deregisters the AMI and deletes its snapshot.  Refusals: a name that is
# ready, a name EC2 would refuse, an AMI of that name carrying another
# build id (exit 4, left as it was, the builder still removed).  pbx killed
# with -9 while the builder runs and while the AMI is pending: `pbx image
# delete` leaves no instance that is not terminated, no security group, no
# key pair, no AMI and no snapshot.  And the harness: a stopped instance's
# body stops, StartInstances brings it back.
# Addresses: subnets 127.0.105.0/24 and 127.0.106.0/24; SLURM ports from
# 19000 + 64*8, below the kernel's ephemeral range (32768-60999).
. "$(dirname "$0")/lib.sh"
H_SUBNET1=127.0.105.0/24 H_SUBNET2=127.0.106.0/24 H_SLURM_PORT_BASE=19000 H_CLUSTERS="e1 c2"
. "$(dirname "$0")/aws_lib.sh"

nothing_left() { [ "$(holds):$(amis):$(snapshots)" = "0 0 0::0" ]; }

# ------------------------------------------------------------ build
h_start
SRC=$(json_get 'd["ami"]' <"$TEST_TMP/env.json")
run_pbx image build --json e1 img-a
ok $rc "image build e1 img-a: $errout"
[ $rc = 0 ] || tail -n 20 "$TEST_TMP/h.log" | sed 's/^/# /'   # the harness's word on it
AMI=$(echo "$out" | json_get 'd["image"]')
is "$(echo "$out" | json_get 'd["name"], d["state"], d["image"][:4], d["cloud"], d["project"], d["zone"] == "'"$SUB1"'", d["template"], sorted(d["seconds"])')" \
	"img-a ready ami- aws us-east-1 True e1 ['cleanup', 'image', 'install', 'instance', 'stop', 'total']" \
	"--json: the image, its AMI id, the region and subnet, the seconds of each stage"
UID1=$(image_row uid img-a)
is "$(amis)" "img-a:available:$UID1" "moto holds AMI img-a, available, tagged with the build's id"
is "$(h_py "$AMI" <<'PY'
i = c.describe_images(ImageIds=[sys.argv[1]])["Images"][0]
snap = i["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
s = c.describe_snapshots(SnapshotIds=[snap])["Snapshots"][0]
for what in (i, s):
    print(sorted((t["Key"], t["Value"]) for t in what.get("Tags", [])))
PY
)" "[('pbx-image', 'img-a'), ('pbx-image-id', '$UID1')]
[('pbx-image', 'img-a'), ('pbx-image-id', '$UID1')]" "the AMI and its snapshot carry pbx-image and pbx-image-id"
is "$(holds):$(snapshots)" "0 0 0:1" "the builder instance, its security group and key pair are gone; one snapshot"
wait_for 300 prints 0 bodies
is "$(bodies)" "0" "no node body is left"
for stage in install stopping imaging "deleting builder" ready; do
	case $errout in *"$stage"*) r=0 ;; *) r=1 ;; esac
	ok $r "progress names the stage '$stage'"
done
is "$(calls calls RunInstances) $(calls calls StopInstances) $(calls calls CreateImage)" "1 1 1" \
	"one instance made, stopped once, one CreateImage"
is "$(image_row "state || ' ' || cloud || ' ' || project || ' ' || source_image || ' ' || link" img-a)" \
	"ready aws us-east-1 $SRC $AMI" "the store records the AMI id"
run_pbx image list
is "$(echo "$out" | awk 'NR == 2 {print $1, $2, $3, $4}')" "img-a aws us-east-1 ready" "image list shows it"
run_pbx image list --json
is "$(echo "$out" | json_get '[(i["name"], i["state"], i["id"], i["image"]) for i in d]')" \
	"[('img-a', 'ready', '$UID1', '$AMI')]" "image list --json"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM host_keys WHERE hostport LIKE 'pbx-image-%'")" "0" \
	"the builder's host key pin is forgotten"

# ------------------------------------------------------------ refusals
run_pbx image build e1 img-a
is "$rc" "2" "building a name that is ready is refused (exit 2)"
run_pbx image build e1 ab
case $errout in *"3 to 63 characters"*) r=0 ;; *) r=1 ;; esac
is "$rc:$r:$(holds)" "2:0:0 0 0" "a name EC2 would refuse (2 characters): exit 2, saying why, nothing made"
# An AMI named img-o that another build made (another pbx-image-id).
h_py <<'PY'
i = c.run_instances(ImageId=e["ami"], MinCount=1, MaxCount=1, SubnetId=e["subnets"][0])["Instances"][0]["InstanceId"]
c.create_image(InstanceId=i, Name="img-o", NoReboot=True, TagSpecifications=[{"ResourceType": "image",
    "Tags": [{"Key": "pbx-image", "Value": "img-o"}, {"Key": "pbx-image-id", "Value": "another"}]}])
c.terminate_instances(InstanceIds=[i])
PY
wait_for 100 prints "img-a:available:$UID1 img-o:available:another" amis
run_pbx image build e1 img-o
is "$rc" "4" "an AMI of that name carrying another build id is refused (exit 4)"
case $errout in *"image img-o (ami-"*"is not this build's"*"left alone"*) r=0 ;; *) r=1 ;; esac
case $errout in *"cleanup failed"*) r=1 ;; esac
ok $r "saying whose it is, once: $errout"
is "$(amis):$(holds)" "img-a:available:$UID1 img-o:available:another:0 0 0" \
	"the other AMI is untouched; the builder, its group and key pair are gone"
is "$(image_row state img-o)" "failed" "the build is recorded as failed"
run_pbx image delete img-o
is "$rc:$(amis)" "4:img-a:available:$UID1 img-o:available:another" "image delete refuses it too (exit 4), untouched"

# ------------------------------------------------- a template names it
h_template c2 "$AMI"
run_pbx cluster start c2
ok $rc "a cluster whose template names the AMI starts: $errout"
[ $rc = 0 ] || tail -n 15 "$TEST_TMP"/h/bodies/aws/*/*/var/log/slurm/slurmctld.log 2>/dev/null | sed 's/^/# /'
run_pbx cluster exec c2 -- sinfo -h -N -o '%N %t'
is "$out" "cpu1 idle" "its compute node is idle"
is "$(h_py "$AMI" <<'PY'
print(sorted({i["ImageId"] == sys.argv[1] for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster",
      "Values": ["c2"]}, {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]}))
PY
)" "[True]" "its instances were launched from the AMI"
run_pbx cluster stop --discard-results c2
ok $rc "stop: $errout"

# ------------------------------------------------------------ delete
run_pbx image delete img-a
ok $rc "image delete img-a: $errout"
is "$(amis):$(snapshots):$(image_row state img-a)" "img-o:available:another:1:deleted" \
	"the AMI is deregistered and its snapshot deleted (the other AMI's stays); the row is deleted"
is "$(calls calls DeregisterImage) $(calls calls DeleteSnapshot)" "1 1" "one DeregisterImage, one DeleteSnapshot"

# ------------------------------------------- kill -9 while the builder runs
h_start --image-delay 6
pbx_bg image build e1 img-k
builder_made() { case $(image_row detail img-k) in "builder instance i-"*) return 0 ;; esac; return 1; }
wait_bg 300 0.1 builder_made
kill9
is "$(image_row state img-k):$(holds | cut -d' ' -f1)" "building:1" "after kill -9 the image is recorded as building; its builder is there"
run_pbx image list --json
case $(echo "$out" | json_get 'd[0]["detail"]') in *"builder instance i-"*) r=0 ;; *) r=1 ;; esac
ok $r "with the builder's instance in its detail: $out"
run_pbx image delete img-k
ok $rc "image delete after kill -9: $errout"
nothing_left
ok $? "nothing is left: no live instance, group, key pair, AMI or snapshot ($(holds):$(amis):$(snapshots))"
is "$(image_row state img-k)" "deleted" "the row is deleted"
wait_for 300 prints 0 bodies
is "$(bodies)" "0" "no node body is left"

# --------------------------------- kill -9 while the AMI is pending
h_start --image-delay 6
pbx_bg image build e1 img-k2
ami_begun() { [ -n "$(amis)" ]; }
wait_bg 1200 0.1 ami_begun
kill9
OLD=$(image_row uid img-k2)
is "$(image_row state img-k2):$(amis)" "building:img-k2:pending:$OLD" "killed while the AMI is pending"
run_pbx image delete img-k2
ok $rc "image delete waits for the pending AMI, then deletes it: $errout"
nothing_left
ok $? "nothing is left: no live instance, group, key pair, AMI or snapshot ($(holds):$(amis):$(snapshots))"

# ------------------- a delete killed between DeregisterImage and DeleteSnapshot
# (the AMI is gone, its snapshot, tagged with the build's id, is not)
h_start --image-delay 0.2
run_pbx image build e1 img-s
ok $rc "image build e1 img-s: $errout"
h_py "$(image_row link img-s)" <<'PY'
c.deregister_image(ImageId=sys.argv[1])
PY
is "$(amis):$(snapshots)" ":1" "the AMI is deregistered behind pbx's back; its snapshot stays (and is billed)"
run_pbx image delete img-s
ok $rc "image delete: $errout"
is "$(snapshots):$(image_row state img-s):$(image_row detail img-s)" "0:deleted:deleted (there was no image)" \
	"it finds the snapshot by the build's id and deletes it"

# ------------------- the harness: a stopped instance's body stops, a start brings it back
IID=$(h_py "$PBX_HOME/id.pub" <<'PY'
print(c.run_instances(ImageId=e["ami"], MinCount=1, MaxCount=1, SubnetId=e["subnets"][0], KeyName=c.import_key_pair(
    KeyName="k1", PublicKeyMaterial=open(sys.argv[1]).read().encode())["KeyName"])["Instances"][0]["InstanceId"])
PY
)
wait_for 300 prints 1 bodies
is "$(bodies)" "1" "the harness gives a running instance a body"
h_py "$IID" <<'PY'
c.stop_instances(InstanceIds=[sys.argv[1]])
PY
state() { h_py "$IID" <<'PY'
print(c.describe_instances(InstanceIds=[sys.argv[1]])["Reservations"][0]["Instances"][0]["State"]["Name"])
PY
}
wait_for 300 prints stopped state
is "$(state)" "stopped" "StopInstances: stopping, then stopped"
# a stopped instance keeps its disk (the body's root) and runs nothing
wait_for 300 prints "" procs_mentioning "$TEST_TMP/h/bodies/"
is "$(procs_mentioning "$TEST_TMP/h/bodies/")" "" "the stopped instance's body runs no process"
is "$(bodies)" "1" "its disk (the body's root) is kept"
h_py "$IID" <<'PY'
c.start_instances(InstanceIds=[sys.argv[1]])
PY
wait_for 300 prints running state
wait_for 300 eval '[ -n "$(procs_mentioning "$TEST_TMP/h/bodies/")" ]'
r=$?
ok $r "StartInstances brings its body back (its sshd runs again)"
[ $r = 0 ] || tail -n 20 "$TEST_TMP/h.log" | sed 's/^/# /'   # the harness's word on it
h_py "$IID" <<'PY'
c.terminate_instances(InstanceIds=[sys.argv[1]])
PY

done_testing
