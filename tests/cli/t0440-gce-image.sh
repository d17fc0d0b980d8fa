#!/bin/sh
# t0440-gce-image.sh - `pbx image build|list|delete` against the Compute
# Engine emulator with node bodies (images are records there): a build
# makes one builder instance (labels pbx-cluster=pbx-image, pbx-image=NAME),
# runs the bootstrap's install action, stops the instance, makes the image
# from its disk (labels pbx-image, pbx-image-id), deletes the builder and
# its firewall rules, and records the image; a template names it by its
# bare name and a cluster starts from it (an image that does not exist is
# the emulator's 404, naming it); refusals (a taken name, a bad name, an
# unknown template, a local template, an unknown image); pbx killed with -9
# while the builder runs and while the image is being made: the record says
# "building", and `image delete` or a rebuild of the name cleans up.
# Emulator addresses $SLOT_NET.1.0/24 (private) and $SLOT_NET.2.0/24 (public);
# SLURM ports from BODY_PORT_BASE + 64*8.
. "$(dirname "$0")/lib.sh"
stop_at_exit c2

# "instances firewalls routers images" the emulator holds
emu_holds() { emu_get state | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["instances"]), len(d["firewalls"]), len(d["routers"]), len(d["images"]))'; }
emu_images() { emu_get state | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join("%s:%s:%s" % (i["name"], i["status"], i["labels"].get("pbx-image-id", "-")) for i in sorted(d["images"], key=lambda i: i["name"])))'; }

# emu_start [FLAG...]: a fresh emulator (gce_emulator), config.yaml
# pointing at it.
emu_start() {
	gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24" "$@"
	cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  g1:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    node_groups:
      - { name: cpu, count: 1, machine_type: e2-standard-2 }
  c2:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: img-a
    node_groups:
      - { name: cpu, count: 1, machine_type: e2-standard-2 }
  c3:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: no-such-image
    node_groups:
      - { name: cpu, count: 1, machine_type: e2-standard-2 }
  l1:
    cloud: local
    node_groups:
      - { name: cpu, count: 1 }
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
  local: { slurm_port_base: $BODY_PORT_BASE }
CONFIG
	chmod 600 "$PBX_HOME/config.yaml"
}

mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C t0440 -f "$PBX_HOME/id"

# ------------------------------------------------------------ build
emu_start
run_pbx image build --json g1 img-a
ok $rc "image build g1 img-a: $errout"
is "$(echo "$out" | json_get 'd["name"], d["state"], d["image"], d["cloud"], d["project"], d["template"], sorted(d["seconds"])')" \
	"img-a ready projects/pbx-test/global/images/img-a gce pbx-test g1 ['cleanup', 'image', 'install', 'instance', 'stop', 'total']" \
	"--json: the image, its link and the seconds of each stage"
UID1=$(image_row uid img-a)
is "$(emu_images)" "img-a:READY:$UID1" "the emulator holds image img-a, READY, labelled with the build's id"
is "$(emu_holds)" "0 0 0 1" "the builder instance and its firewall rules are gone"
for stage in install stopping imaging "deleting builder" ready; do
	case $errout in *"$stage"*) r=0 ;; *) r=1 ;; esac
	ok $r "progress names the stage '$stage'"
done
is "$(emu_get calls | python3 -c 'import json,sys; c=json.load(sys.stdin)["calls"]; print(c.get("POST instances_stop"), c.get("POST images_insert"), c.get("POST instances_bulk_insert"))')" \
	"1 1 1" "one instance made, stopped once, one images.insert"
is "$(image_row "state || ' ' || cloud || ' ' || project || ' ' || source_image || ' ' || link" img-a)" \
	"ready gce pbx-test projects/debian-cloud/global/images/family/debian-12 projects/pbx-test/global/images/img-a" \
	"the store records the image"
run_pbx image list
is "$(echo "$out" | awk 'NR == 2 {print $1, $2, $3, $4}')" "img-a gce pbx-test ready" "image list shows it"
run_pbx image list --json
is "$(echo "$out" | json_get '[(i["name"], i["state"], i["id"]) for i in d]')" "[('img-a', 'ready', '$UID1')]" "image list --json"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM host_keys WHERE hostport LIKE 'pbx-image-%'")" "0" \
	"the builder's host key pin is forgotten"

# ------------------------------------------------------------ refusals
run_pbx image build g1 img-a
is "$rc" "2" "building a name that is ready is refused (exit 2)"
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

# ------------------------------------------------- a template names it
run_pbx cluster start c2
ok $rc "a cluster whose template names the image by its bare name starts: $errout"
run_pbx cluster exec c2 -- sinfo -h -N -o '%N %t'
is "$out" "cpu1 idle" "its compute node is idle"
run_pbx cluster stop --discard-results c2
ok $rc "stop: $errout"
run_pbx cluster start c3
is "$rc" "1" "a template naming an image that does not exist fails"
case $errout in *"projects/pbx-test/global/images/no-such-image"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the image: $errout"
"$PBX" -q cluster stop --discard-results c3 >/dev/null 2>&1

# ------------------------------------------------------------ delete
run_pbx image delete img-a
ok $rc "image delete img-a: $errout"
is "$(emu_holds):$(image_row state img-a)" "0 0 0 0:deleted" "the image is gone, its row deleted"
run_pbx image list
is "$(echo "$out" | wc -l)" "1" "image list shows nothing but its header"

# ------------------------------------------- kill -9 while the builder runs
emu_start --fault op_delay=0.3
pbx_bg image build g1 img-k
builder_made() { [ "$(emu_holds | cut -d' ' -f1)" -gt 0 ]; }
wait_bg 150 0.1 builder_made
kill9
is "$(image_row state img-k)" "building" "after kill -9 the image is recorded as building"
run_pbx image list --json
case $(echo "$out" | json_get 'd[0]["detail"]') in *"builder instance pbx-image-"*) r=0 ;; *) r=1 ;; esac
ok $r "with the builder's instance in its detail: $out"
sleep 2
run_pbx image delete img-k
ok $rc "image delete after kill -9: $errout"
is "$(emu_holds):$(image_row state img-k)" "0 0 0 0:deleted" "nothing is left: no instance, rule, router or image"

# --------------------------------- kill -9 while the image is being made
emu_start --fault op_delay=1.0
pbx_bg image build g1 img-k2
image_begun() { [ "$(emu_holds | cut -d' ' -f4)" -gt 0 ]; }
wait_bg 600 0.1 image_begun
kill9
OLD=$(image_row uid img-k2)
is "$(image_row state img-k2):$(emu_images)" "building:img-k2:PENDING:$OLD" "killed while the image is PENDING"
run_pbx image build g1 img-k2
ok $rc "building the name again cleans up and builds: $errout"
NEW=$(image_row uid img-k2)
[ "$NEW" != "$OLD" ]
ok $? "with a new build id"
is "$(emu_images):$(emu_holds)" "img-k2:READY:$NEW:0 0 0 1" "only the new image is left"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(state, ' ') FROM images WHERE name = 'img-k2' ORDER BY id")" \
	"deleted ready" "the killed build's row is deleted, the new one ready"
run_pbx image delete img-k2
is "$rc:$(emu_holds)" "0:0 0 0 0" "and delete leaves nothing"

done_testing
