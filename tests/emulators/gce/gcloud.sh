#!/bin/sh
# gcloud.sh - the real gcloud CLI drives the Compute Engine emulator: it
# creates (a GPU Spot instance as in docs/cloud-api.md, "Compute Engine:
# instance body" and "Compute Engine: gcloud against the emulator", and a
# plain one), lists, describes and deletes instances, and creates, lists and
# deletes a firewall rule; refusals reach the user as gcloud's errors.
# Several instances in one command go as one multipart batch
# (/batch/compute/v1).  No node bodies; 127.0.0.1 only.  TAP output;
# skipped (77) only when gcloud is not installed.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../cli/lib.sh
. "$here/../../cli/lib.sh"
command -v gcloud >/dev/null 2>&1 || { echo "1..0 # SKIP gcloud is not installed"; exit 77; }

TEST_TMP=$(mktemp -d)
trap 'kill "$emu" 2>/dev/null; wait "$emu" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT
python3 "$here/emulator.py" --port 0 --port-file "$TEST_TMP/port" --state-dir "$TEST_TMP" \
	--project p --no-bodies --fault op_delay=0.05 --log "$TEST_TMP/requests.log" &
emu=$!
i=0
while [ ! -s "$TEST_TMP/port" ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i + 1)); done
port=$(cat "$TEST_TMP/port")
# ctl METHOD WHAT [JSON]: the emulator's control endpoint
ctl() {
	python3 -c 'import sys, urllib.request as u
d = sys.argv[3].encode() if len(sys.argv) > 3 else None
print(u.urlopen(u.Request(sys.argv[2], data=d, method=sys.argv[1])).read().decode())' \
		"$1" "http://127.0.0.1:$port/_emulator/$2" ${3:+"$3"}
}
ctl POST token '{}' | json_get 'd["access_token"]' >"$TEST_TMP/token"

export CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE="http://127.0.0.1:$port/compute/v1/"
export CLOUDSDK_AUTH_ACCESS_TOKEN_FILE="$TEST_TMP/token" CLOUDSDK_CONFIG="$TEST_TMP/gcloud"
export CLOUDSDK_CORE_PROJECT=p CLOUDSDK_CORE_DISABLE_PROMPTS=1 CLOUDSDK_CORE_CHECK_GCE_METADATA=false
export CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=true CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=true
export GCE_METADATA_HOST=127.0.0.1:1 NO_PROXY='*'
z=us-central1-a
# words TEXT: TEXT's words on one line, one space apart
words() { printf '%s\n' "$1" | tr -s ' \t\n' '   ' | sed 's/ $//'; }
g() { gcloud --quiet "$@" >"$TEST_TMP/out" 2>"$TEST_TMP/err"; rc=$?; out=$(cat "$TEST_TMP/out"); err=$(cat "$TEST_TMP/err"); }

g compute instances create gpu-1 --zone $z --machine-type n1-standard-8 --image-family debian-12 \
	--image-project debian-cloud --accelerator type=nvidia-tesla-t4,count=1 \
	--maintenance-policy TERMINATE --provisioning-model SPOT --labels pbx-cluster=c1 \
	--metadata 'ssh-keys=pbx:ssh-ed25519 AAAAC3Nza test' --format json
ok $rc "gcloud creates a GPU Spot instance ($err)"
is "$(echo "$out" | json_get 'd[0]["status"], d[0]["scheduling"]["provisioningModel"], d[0]["guestAccelerators"][0]["acceleratorCount"]')" \
	"RUNNING SPOT 1" "it is RUNNING, Spot, with one GPU"
g compute instances create plain-1 --zone $z --machine-type e2-standard-2 --image-family debian-12 \
	--image-project debian-cloud --labels pbx-cluster=c2
ok $rc "gcloud creates a plain instance ($err)"
echo "$out" | grep -q '127\.0\.70\.[0-9]*  *127\.0\.71\.[0-9]*  *RUNNING'
ok $? "its table shows loopback internal and external IPs, RUNNING: $out"

g compute instances list --zones $z --format 'value(name)'
is "$(words "$out")" "gpu-1 plain-1" "list in a zone"
g compute instances list --format 'value(name,zone.basename())'
is "$(words "$out")" "gpu-1 us-central1-a plain-1 us-central1-a" "list across zones (aggregatedList)"
g compute instances list --filter 'labels.pbx-cluster=c1' --format 'value(name)'
is "$out" "gpu-1" "list with a label filter"
g compute instances describe gpu-1 --zone $z --format 'value(labels.pbx-cluster,networkInterfaces[0].accessConfigs[0].natIP)'
ok $rc "describe"
echo "$out" | grep -q '^c1	127\.0\.71\.[0-9]*$'
ok $? "describe shows the label and the natIP: $out"

g compute instances create gpu-1 --zone $z --machine-type n1-standard-8 --image-family debian-12 \
	--image-project debian-cloud
[ $rc -ne 0 ] && echo "$err" | grep -q "already exists"
ok $? "a second gpu-1 is refused: already exists ($err)"
g compute instances create gpu-2 --zone $z --machine-type n1-standard-8 --image-family debian-12 \
	--image-project debian-cloud --accelerator type=nvidia-tesla-t4,count=1 --maintenance-policy MIGRATE
[ $rc -ne 0 ] && echo "$err" | grep -q "do not support live migration"
ok $? "a GPU instance that would live-migrate is refused ($err)"
g compute instances create Bad_Name --zone $z --machine-type n1-standard-8
[ $rc -ne 0 ]
ok $? "an invalid name is refused ($err)"

g compute instances create b-1 b-2 --zone $z --machine-type e2-small --image-family debian-12 \
	--image-project debian-cloud --format 'value(name,status)'
is "$(words "$out")" "b-1 RUNNING b-2 RUNNING" "one command creates two instances through a batch request ($err)"
g compute instances delete b-1 b-2 --zone $z
ok $rc "and deletes both in one batch ($err)"
grep -q 'POST /batch/compute/v1 HTTP/1.1" 200' "$TEST_TMP/requests.log"
ok $? "gcloud used /batch/compute/v1"

g compute firewall-rules create pbx-c1 --network default --allow tcp:22,tcp:6817-6819 \
	--source-ranges 127.0.0.1/32 --target-tags pbx-c1
ok $rc "gcloud creates a firewall rule ($err)"
g compute firewall-rules list --format 'value(name)'
is "$out" "pbx-c1" "firewall rules list"
g compute firewall-rules delete pbx-c1
ok $rc "gcloud deletes the firewall rule ($err)"

g compute instances delete gpu-1 --zone $z
ok $rc "gcloud deletes gpu-1 ($err)"
g compute instances delete plain-1 --zone $z
ok $rc "gcloud deletes plain-1 ($err)"
g compute instances describe gpu-1 --zone $z
[ $rc -ne 0 ] && echo "$err" | grep -q "was not found"
ok $? "gpu-1 is gone ($err)"
is "$(ctl GET state | json_get 'len(d["instances"]), len(d["firewalls"])')" "0 0" \
	"the emulator holds no instance and no firewall rule"
grep -q '/wait' "$TEST_TMP/requests.log"
ok $? "gcloud waited on operations through operations.wait"
done_testing
