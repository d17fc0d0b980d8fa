# shellcheck shell=sh
# cloud/image.sh - one body for t0440 (CLOUD=gce) and t0445 (CLOUD=aws),
# sourced after lib.sh: `pbx image build|list|delete` on the emulators'
# node bodies (Compute Engine: images are records of the emulator; EC2:
# moto with the harness's strictness, tests/emulators/aws/ec2_harness.py
# and lifecycle.py: StopInstances `stopping` until the node body is off,
# then `stopped`; CreateImage `pending`, then `available`; AMI names unique
# per account; a snapshot of a registered AMI cannot be deleted).  A build
# makes one builder instance (labels or tags pbx-cluster=pbx-image,
# pbx-image=NAME; EC2: with its security group and key pair), runs the
# bootstrap's install action, stops the instance, makes the image from its
# disk (labelled or tagged pbx-image and pbx-image-id; on EC2 its snapshot
# too), deletes the builder (and its firewall rules; its group and key
# pair), and records the image (its link; the AMI id); a template naming it
# (Compute Engine: by its bare name) starts a cluster from it; delete
# removes it (EC2: deregisters the AMI and deletes its snapshot).
# Refusals: a name that is ready, a name the cloud would refuse.  pbx
# killed with -9 while the builder runs and while the image is being made:
# the record says "building", and `image delete` (or a rebuild of the
# name) cleans up.  Then what only one cloud has (functions at the top):
# on Compute Engine an unknown template, a local one, an unknown image, an
# image that does not exist (the emulator's 404, naming it); on EC2 an AMI
# of that name carrying another build id (exit 4, left as it was, the
# builder still removed), a delete killed between DeregisterImage and
# DeleteSnapshot, and the harness: a stopped instance's body stops,
# StartInstances brings it back.  Addresses: the slot's $SLOT_NET.1.0/24
# and $SLOT_NET.2.0/24; SLURM ports from BODY_PORT_BASE + 64*8.
# shellcheck disable=SC2154 # rc, out, errout: run_pbx's; the rest set below
# shellcheck disable=SC2016 # single-quoted Python and sh -c: theirs to expand
case $CLOUD in
gce)
	T=g1 PROJECT=pbx-test PENDING=PENDING BUILDER=pbx-image- KILL_FLAGS="--fault op_delay=0.3" PEND_FLAGS="--fault op_delay=1.0"
	SETTLE=2   # s after the kill before the delete
	IMG=image RECORDS="the store records the image"
	stop_at_exit c2
	# "instances firewalls routers images" the emulator holds
	emu_holds() { emu_get state | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["instances"]), len(d["firewalls"]), len(d["routers"]), len(d["images"]))'; }
	# images: NAME:STATUS:pbx-image-id of the images the cloud holds
	images() { emu_get state | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join("%s:%s:%s" % (i["name"], i["status"], i["labels"].get("pbx-image-id", "-")) for i in sorted(d["images"], key=lambda i: i["name"])))'; }
	# image_emulator [FLAG...]: a fresh emulator, config.yaml pointing at
	# it: g1 builds, c2 boots img-a by its bare name, c3 an image that
	# does not exist, l1 is local
	image_emulator() {
		cloud_emulator "$@"
		group="  - { name: cpu, count: 1, machine_type: e2-standard-2 }"
		cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(cloud_template g1 "$PBX_HOME/id" "node_groups:" "$group")
$(cloud_template c2 "$PBX_HOME/id" "node_groups:" "$group" | sed 's/^    image: .*/    image: img-a/')
$(cloud_template c3 "$PBX_HOME/id" "node_groups:" "$group" | sed 's/^    image: .*/    image: no-such-image/')
  l1:
    cloud: local
    node_groups:
      - { name: cpu, count: 1 }"
	}
	built() {
		is "$(echo "$out" | json_get 'd["name"], d["state"], d["image"], d["cloud"], d["project"], d["template"], sorted(d["seconds"])')" \
			"img-a ready projects/pbx-test/global/images/img-a gce pbx-test g1 ['cleanup', 'image', 'install', 'instance', 'stop', 'total']" \
			"--json: the image, its link and the seconds of each stage"
		is "$(images)" "img-a:READY:$UID1" "the emulator holds image img-a, READY, labelled with the build's id"
		is "$(emu_holds)" "0 0 0 1" "the builder instance and its firewall rules are gone"
	}
	made_calls() { emu_get calls | python3 -c 'import json,sys; c=json.load(sys.stdin)["calls"]; print(c.get("POST instances_stop"), c.get("POST images_insert"), c.get("POST instances_bulk_insert"))'; }
	MADE="one instance made, stopped once, one images.insert"
	LIST_FIELDS='i["name"], i["state"], i["id"]'
	listed_more() { :; }
	refused() {
		case $errout in *"image img-a exists"*"pbx image delete img-a"*) r=0 ;; *) r=1 ;; esac
		ok $r "and says how to go on: $errout"
		run_pbx image build g1 Bad_Name
		is "$rc:$(emu_holds)" "2:0 0 0 1" "a name Compute Engine would refuse: exit 2, nothing made"
		run_pbx image build nosuch img-b
		is "$rc" "3" "an unknown template is exit 3"
		run_pbx image build l1 img-b
		is "$rc" "2" "a template of a cloud without images (local) is refused (exit 2)"
		case $errout in *"config.yaml:"*"clusters.l1"*"cloud local has no images"*) r=0 ;; *) r=1 ;; esac
		ok $r "saying so, with file, line and key: $errout"
		run_pbx image delete nosuch
		is "$rc" "3" "deleting an unknown image is exit 3"
		run_pbx image build
		is "$rc" "2" "image build without a template is a usage error"
		run_pbx image list extra
		is "$rc" "2" "image list takes no argument"
	}
	name_it() { :; }   # c2 names it already
	NAMED="a cluster whose template names the image by its bare name"
	from_it() { :; }
	# an image that does not exist is the emulator's 404, naming it
	not_there() {
		run_pbx cluster start c3
		is "$rc" "1" "a template naming an image that does not exist fails"
		case $errout in *"projects/pbx-test/global/images/no-such-image"*) r=0 ;; *) r=1 ;; esac
		ok $r "naming the image: $errout"
		"$PBX" -q cluster stop --discard-results c3 >/dev/null 2>&1
	}
	deleted() {
		is "$(emu_holds):$(image_row state img-a)" "0 0 0 0:deleted" "the image is gone, its row deleted"
		run_pbx image list
		is "$(echo "$out" | wc -l)" "1" "image list shows nothing but its header"
	}
	builder_made() { [ "$(emu_holds | cut -d' ' -f1)" -gt 0 ]; }
	BUILDER_S=150
	killed_building() { is "$(image_row state img-k)" "building" "after kill -9 the image is recorded as building"; }
	killed_deleted() { is "$(emu_holds):$(image_row state img-k)" "0 0 0 0:deleted" "nothing is left: no instance, rule, router or image"; }
	image_begun() { [ "$(emu_holds | cut -d' ' -f4)" -gt 0 ]; }
	IMAGE_S=600
	# a rebuild of the name cleans up and builds
	pending_cleaned() {
		run_pbx image build g1 img-k2
		ok "$rc" "building the name again cleans up and builds: $errout"
		NEW=$(image_row uid img-k2)
		[ "$NEW" != "$OLD" ]
		ok $? "with a new build id"
		is "$(images):$(emu_holds)" "img-k2:READY:$NEW:0 0 0 1" "only the new image is left"
		is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(state, ' ') FROM images WHERE name = 'img-k2' ORDER BY id")" \
			"deleted ready" "the killed build's row is deleted, the new one ready"
		run_pbx image delete img-k2
		is "$rc:$(emu_holds)" "0:0 0 0 0" "and delete leaves nothing"
	}
	more() { :; }
	;;
aws)
	T=e1 PROJECT=us-east-1 PENDING=pending BUILDER=i- KILL_FLAGS="--image-delay 6" PEND_FLAGS="--image-delay 6"
	SETTLE=0
	IMG=AMI RECORDS="the store records the AMI id"
	stop_at_exit e1 c2
	images() { amis; }
	nothing_left() { [ "$(holds):$(amis):$(snapshots)" = "0 0 0::0" ]; }
	# image_emulator [FLAG...]: a fresh harness, config.yaml (h_start's)
	# pointing at it: e1 builds
	image_emulator() { cloud_emulator "$@"; }
	built() {
		[ "$rc" = 0 ] || tail -n 20 "$TEST_TMP/h.log" | sed 's/^/# /'   # the harness's word on it
		is "$(echo "$out" | json_get 'd["name"], d["state"], d["image"][:4], d["cloud"], d["project"], d["zone"] == "'"$SUB1"'", d["template"], sorted(d["seconds"])')" \
			"img-a ready ami- aws us-east-1 True e1 ['cleanup', 'image', 'install', 'instance', 'stop', 'total']" \
			"--json: the image, its AMI id, the region and subnet, the seconds of each stage"
		is "$(amis)" "img-a:available:$UID1" "moto holds AMI img-a, available, tagged with the build's id"
		is "$(h_py "$LINK" <<'PY'
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
	}
	made_calls() { echo "$(calls calls RunInstances) $(calls calls StopInstances) $(calls calls CreateImage)"; }
	MADE="one instance made, stopped once, one CreateImage"
	LIST_FIELDS='i["name"], i["state"], i["id"], i["image"]'
	listed_more() { echo ", '$LINK'"; }
	refused() {
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
	}
	name_it() { h_template c2 "$LINK"; }
	NAMED="a cluster whose template names the AMI"
	from_it() {
		[ "$started" = 0 ] || tail -n 15 "$BODIES"/aws/*/*/var/log/slurm/slurmctld.log 2>/dev/null | sed 's/^/# /'
		is "$(h_py "$LINK" <<'PY'
print(sorted({i["ImageId"] == sys.argv[1] for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster",
      "Values": ["c2"]}, {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]}))
PY
)" "[True]" "its instances were launched from the AMI"
	}
	not_there() { :; }
	deleted() {
		is "$(amis):$(snapshots):$(image_row state img-a)" "img-o:available:another:1:deleted" \
			"the AMI is deregistered and its snapshot deleted (the other AMI's stays); the row is deleted"
		is "$(calls calls DeregisterImage) $(calls calls DeleteSnapshot)" "1 1" "one DeregisterImage, one DeleteSnapshot"
	}
	builder_made() { case $(image_row detail img-k) in "builder instance i-"*) return 0 ;; esac; return 1; }
	BUILDER_S=300
	killed_building() { is "$(image_row state img-k):$(holds | cut -d' ' -f1)" "building:1" "after kill -9 the image is recorded as building; its builder is there"; }
	killed_deleted() {
		nothing_left
		ok $? "nothing is left: no live instance, group, key pair, AMI or snapshot ($(holds):$(amis):$(snapshots))"
		is "$(image_row state img-k)" "deleted" "the row is deleted"
		wait_for 300 prints 0 bodies
		is "$(bodies)" "0" "no node body is left"
	}
	image_begun() { [ -n "$(amis)" ]; }
	IMAGE_S=1200
	# delete waits for the pending AMI
	pending_cleaned() {
		run_pbx image delete img-k2
		ok "$rc" "image delete waits for the pending AMI, then deletes it: $errout"
		nothing_left
		ok $? "nothing is left: no live instance, group, key pair, AMI or snapshot ($(holds):$(amis):$(snapshots))"
	}
	more() {
		# a delete killed between DeregisterImage and DeleteSnapshot (the
		# AMI is gone, its snapshot, tagged with the build's id, is not)
		image_emulator --image-delay 0.2
		run_pbx image build e1 img-s
		ok "$rc" "image build e1 img-s: $errout"
		h_py "$(image_row link img-s)" <<'PY'
c.deregister_image(ImageId=sys.argv[1])
PY
		is "$(amis):$(snapshots)" ":1" "the AMI is deregistered behind pbx's back; its snapshot stays (and is billed)"
		run_pbx image delete img-s
		ok "$rc" "image delete: $errout"
		is "$(snapshots):$(image_row state img-s):$(image_row detail img-s)" "0:deleted:deleted (there was no image)" \
			"it finds the snapshot by the build's id and deletes it"

		# the harness: a stopped instance's body stops, a start brings it back
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
		state() {
			h_py "$IID" <<'PY'
print(c.describe_instances(InstanceIds=[sys.argv[1]])["Reservations"][0]["Instances"][0]["State"]["Name"])
PY
		}
		wait_for 300 prints stopped state
		is "$(state)" "stopped" "StopInstances: stopping, then stopped"
		# a stopped instance keeps its disk (the body's root) and runs nothing
		wait_for 300 prints "" procs_mentioning "$BODIES/"
		is "$(procs_mentioning "$BODIES/")" "" "the stopped instance's body runs no process"
		is "$(bodies)" "1" "its disk (the body's root) is kept"
		h_py "$IID" <<'PY'
c.start_instances(InstanceIds=[sys.argv[1]])
PY
		wait_for 300 prints running state
		wait_for 300 eval '[ -n "$(procs_mentioning "$BODIES/")" ]'
		r=$?
		ok $r "StartInstances brings its body back (its sshd runs again)"
		[ $r = 0 ] || tail -n 20 "$TEST_TMP/h.log" | sed 's/^/# /'   # the harness's word on it
		h_py "$IID" <<'PY'
c.terminate_instances(InstanceIds=[sys.argv[1]])
PY
	}
	;;
*) bail_out "CLOUD is gce or aws, not '$CLOUD'" ;;
esac

# ------------------------------------------------------------ build
image_emulator
run_pbx image build --json "$T" img-a
ok "$rc" "image build $T img-a: $errout"
UID1=$(image_row uid img-a)
LINK=$(echo "$out" | json_get 'd["image"]')
built
for stage in install stopping imaging "deleting builder" ready; do
	case $errout in *"$stage"*) r=0 ;; *) r=1 ;; esac
	ok $r "progress names the stage '$stage'"
done
is "$(made_calls)" "1 1 1" "$MADE"
is "$(image_row "state || ' ' || cloud || ' ' || project || ' ' || source_image || ' ' || link" img-a)" \
	"ready $CLOUD $PROJECT $CLOUD_IMAGE $LINK" "$RECORDS"
run_pbx image list
is "$(echo "$out" | awk 'NR == 2 {print $1, $2, $3, $4}')" "img-a $CLOUD $PROJECT ready" "image list shows it"
run_pbx image list --json
is "$(echo "$out" | json_get "[($LIST_FIELDS) for i in d]")" "[('img-a', 'ready', '$UID1'$(listed_more))]" "image list --json"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM host_keys WHERE hostport LIKE 'pbx-image-%'")" "0" \
	"the builder's host key pin is forgotten"

# ------------------------------------------------------------ refusals
run_pbx image build "$T" img-a
is "$rc" "2" "building a name that is ready is refused (exit 2)"
refused

# ------------------------------------------------- a template names it
name_it
run_pbx cluster start c2
started=$rc
ok "$rc" "$NAMED starts: $errout"
run_pbx cluster exec c2 -- sinfo -h -N -o '%N %t'
is "$out" "cpu1 idle" "its compute node is idle"
from_it
run_pbx cluster stop --discard-results c2
ok "$rc" "stop: $errout"
not_there

# ------------------------------------------------------------ delete
run_pbx image delete img-a
ok "$rc" "image delete img-a: $errout"
deleted

# ------------------------------------------- kill -9 while the builder runs
# shellcheck disable=SC2086 # the flags' words
image_emulator $KILL_FLAGS
pbx_bg image build "$T" img-k
wait_bg "$BUILDER_S" 0.1 builder_made
kill9
killed_building
run_pbx image list --json
case $(echo "$out" | json_get 'd[0]["detail"]') in *"builder instance $BUILDER"*) r=0 ;; *) r=1 ;; esac
ok $r "with the builder's instance in its detail: $out"
sleep "$SETTLE"
run_pbx image delete img-k
ok "$rc" "image delete after kill -9: $errout"
killed_deleted

# --------------------------------- kill -9 while the image is being made
# shellcheck disable=SC2086 # the flags' words
image_emulator $PEND_FLAGS
pbx_bg image build "$T" img-k2
wait_bg "$IMAGE_S" 0.1 image_begun
kill9
OLD=$(image_row uid img-k2)
is "$(image_row state img-k2):$(images)" "building:img-k2:$PENDING:$OLD" "killed while the $IMG is $PENDING"
pending_cleaned

more
done_testing
