#!/bin/sh
# objstore_large.sh OBJSTORE_TOOL SOURCE_DIR - large uploads (src/objstore:
# S3 multipart, GCS resumable) against the emulators on 127.0.0.1, as TAP,
# with parts of 5 MiB (PBX_OBJSTORE_PART_SIZE) and objects of four:
#   S3 (moto_server behind tests/emulators/s3/faultproxy.py, which checks
#   each part's CRC32C and the whole object's at the completion, as S3
#   does): a part cut half-way is sent again alone and the object comes
#   back whole, its CRC32C checked; a SlowDown on a part retried; an
#   existing name refused at the completion with the upload aborted (no
#   multipart upload left: ListMultipartUploads empty); an object of one
#   part still one PutObject.
#   GCS (the GCE emulator's Cloud Storage): a resumable upload whose chunk
#   is cut half-way resumes from the offset the session holds, and the
#   object comes back whole; a 503 on a chunk: the session asked and the
#   chunk sent again; an existing name refused.
#   Ranged reads (pbx_objstore_get_listed, objects of 4 MiB or more here:
#   PBX_OBJSTORE_RANGE_MIN) on both: one HeadObject or objects.get and 4
#   ranges, the bytes identical and the whole CRC32C checked; a range
#   corrupted refused naming the object (exit 4); a range cut read again; a
#   range pinned to a version the store no longer has refused "changed
#   while it was read"; on S3 an object rewritten between the listing and
#   the read read whole as its new version.
#   Reads into a file as the bytes come (pbx_objstore_get_listed_fd,
#   ranges of 2 MiB at most here: PBX_OBJSTORE_RANGE_PART) on both: 8
#   ranges, identical, the CRC32C combined from the ranges' and checked; a
#   corrupted range refused with no file left; on S3 a cut range written
#   again from its start, an object under the threshold in one request.
# Free ports of 127.0.0.1.  Skips (77) without moto_server.
set -u
TOOL=$1
SRC=$2
. "$SRC/tests/objstore/lib.sh"
"$PY" -c 'import moto.server, boto3' 2>/dev/null || { echo "1..0 # SKIP moto_server missing"; exit 77; }
set -- $(free_ports 3)
PROXY_PORT=$1 MOTO_PORT=$2 GCS_PORT=$3
http() { # http METHOD URL [JSON]: the reply's body
	$PY -c 'import sys, urllib.request
d = sys.argv[3].encode() if len(sys.argv) > 3 else None
r = urllib.request.Request(sys.argv[2], data=d, method=sys.argv[1], headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(r).read().decode())' "$@"
}
jget() { # jget KEY.KEY... < JSON: the value (0 when absent)
	$PY -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v.get(k, 0) if isinstance(v, dict) else 0
print(v)' "$1"
}
T() { "$TOOL" "$CFG" "$@"; }
CLUSTERS='clusters:
  local:
    cloud: local
    node_groups:
      - { name: gpu, count: 1, gpus: 1 }'
export PBX_OBJSTORE_PART_SIZE=5242880
# 4 parts: three of 5 MiB and the rest
head -c $((15 * 1048576 + 123457)) /dev/urandom >"$W/big"
head -c $((15 * 1048576 + 123457)) /dev/urandom >"$W/big2"
head -c 1048576 /dev/urandom >"$W/small"

# ---------------------------------------------------------------- S3
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE AWS_REGION AWS_DEFAULT_REGION
export AWS_ACCESS_KEY_ID=AKIAOBJSTORETEST AWS_SECRET_ACCESS_KEY=objstore-test-secret
export AWS_EC2_METADATA_DISABLED=true
$PY -m moto.server -H 127.0.0.1 -p $MOTO_PORT >"$W/moto.log" 2>&1 &
PIDS="$PIDS $!"
wait_port $MOTO_PORT; ok $? "moto_server on 127.0.0.1:$MOTO_PORT"
http PUT "http://127.0.0.1:$MOTO_PORT/pbx-big" >/dev/null; ok $? "bucket pbx-big made"
$PY "$SRC/tests/emulators/s3/faultproxy.py" --port $PROXY_PORT --upstream "http://127.0.0.1:$MOTO_PORT" \
	--log "$W/proxy.log" >"$W/proxy.out" 2>&1 &
PIDS="$PIDS $!"
wait_port $PROXY_PORT; ok $? "fault proxy on 127.0.0.1:$PROXY_PORT"
P=http://127.0.0.1:$PROXY_PORT
CFG=$W/s3.yaml
{ echo "$CLUSTERS"; printf 'clouds:\n  aws: { region: us-east-1, s3_endpoint: "%s" }\n' "$P"; } >"$CFG"
chmod 600 "$CFG"
stat() { http GET "$P/__stats__" | jget "$1"; }
uploads_left() { # multipart uploads moto still holds in pbx-big
	$PY -c 'import boto3, sys
s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=sys.argv[1], aws_access_key_id="a", aws_secret_access_key="b")
print(len(s3.list_multipart_uploads(Bucket="pbx-big").get("Uploads", [])))' "http://127.0.0.1:$MOTO_PORT"
}

http POST "$P/__fault__?kind=cutput&n=1&op=UploadPart" >/dev/null
out=$(T put s3://pbx-big big "$W/big" 2>"$W/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = created ]; ok $? "S3: a 4-part object created with a part cut half-way (rc $rc: $(tail -1 "$W/err"))"
[ "$(stat fired.cutput)" = 1 ]; ok $? "S3: the cut fired"
[ "$(stat operations.CreateMultipartUpload)" = 1 ] && [ "$(stat operations.UploadPart)" = 5 ] &&
	[ "$(stat operations.CompleteMultipartUpload)" = 1 ] && [ "$(stat operations.PutObject)" = 0 ]
ok $? "S3: one upload, 4 parts and the cut one again, one completion ($(stat operations.UploadPart) UploadPart)"
T get s3://pbx-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 0 ] && cmp -s "$W/big" "$W/got" && grep -q "crc32c: checked" "$W/err"
ok $? "S3: the object read back whole, its CRC32C checked (rc $rc)"

http POST "$P/__stats__/reset" >/dev/null
http POST "$P/__fault__?kind=slowdown&n=1&op=UploadPart" >/dev/null
out=$(T put s3://pbx-big big2 "$W/big2" 2>"$W/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = created ] && [ "$(stat fired.slowdown)" = 1 ] && [ "$(stat operations.UploadPart)" = 5 ]
ok $? "S3: a SlowDown on a part: that part retried (rc $rc, $(stat operations.UploadPart) UploadPart)"
T get s3://pbx-big big2 "$W/got" 2>"$W/err" && cmp -s "$W/big2" "$W/got" && grep -q "crc32c: checked" "$W/err"
ok $? "S3: that object read back whole, its CRC32C checked"

http POST "$P/__stats__/reset" >/dev/null
out=$(T put s3://pbx-big big "$W/big2" 2>"$W/err"); rc=$?
[ $rc -eq 5 ] && [ "$out" = exists ]; ok $? "S3: a large object of a name taken: exists (rc $rc)"
[ "$(stat operations.AbortMultipartUpload)" = 1 ] && [ "$(uploads_left)" = 0 ]
ok $? "S3: its upload aborted, no multipart upload left ($(uploads_left) left)"
T get s3://pbx-big big "$W/got" 2>"$W/err" && cmp -s "$W/big" "$W/got"
ok $? "S3: the first object's bytes kept"

http POST "$P/__stats__/reset" >/dev/null
out=$(T put s3://pbx-big small "$W/small" 2>"$W/err"); rc=$?
[ "$out" = created ] && [ "$(stat operations.PutObject)" = 1 ] && [ "$(stat operations.CreateMultipartUpload)" = 0 ]
ok $? "S3: an object of one part: one PutObject (rc $rc)"

# ------------------------------------------------------- S3 ranged reads
RMIN=4194304
R() { PBX_OBJSTORE_RANGE_MIN=$RMIN "$TOOL" "$CFG" "$@"; }
requests() { sed -n 's/^requests: //p' "$W/err"; }
http POST "$P/__stats__/reset" >/dev/null
R getl s3://pbx-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 0 ] && cmp -s "$W/big" "$W/got" && grep -q "crc32c: checked" "$W/err"
ok $? "S3 ranged: the 15 MiB object read in ranges, identical, its whole CRC32C checked (rc $rc)"
[ "$(stat operations.HeadObject)" = 1 ] && [ "$(stat operations.GetObject)" = 4 ] && [ "$(requests)" = 6 ]
ok $? "S3 ranged: one HeadObject, 4 ranged GetObject, a listing ($(stat operations.GetObject) GetObject, $(requests) requests)"
http POST "$P/__stats__/reset" >/dev/null
R getl s3://pbx-big small "$W/got" 2>"$W/err" && cmp -s "$W/small" "$W/got" &&
	[ "$(stat operations.GetObject)" = 1 ] && [ "$(stat operations.HeadObject)" = 0 ]
ok $? "S3 ranged: an object under the threshold is one GetObject"
http POST "$P/__stats__/reset" >/dev/null
http POST "$P/__fault__?kind=corrupt&n=1&op=GetObject" >/dev/null
rm -f "$W/got"
R getl s3://pbx-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 4 ] && grep -q "s3://pbx-big/big: content does not match the store's checksum" "$W/err" && [ ! -e "$W/got" ]
ok $? "S3 ranged: a range with a byte flipped refused naming the object, nothing written (rc $rc: $(tail -1 "$W/err"))"
http POST "$P/__stats__/reset" >/dev/null
http POST "$P/__fault__?kind=cut&n=1&op=GetObject" >/dev/null
R getl s3://pbx-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 0 ] && cmp -s "$W/big" "$W/got" && [ "$(stat fired.cut)" = 1 ] && [ "$(stat operations.GetObject)" = 5 ]
ok $? "S3 ranged: a range cut half-way read again alone (rc $rc, $(stat operations.GetObject) GetObject)"
R range s3://pbx-big big 0123456789abcdef0123456789abcdef 0 1024 "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 1 ] && grep -q "s3://pbx-big/big: object changed while it was read" "$W/err"
ok $? "S3 ranged: a range pinned to an ETag S3 no longer has refused (rc $rc: $(tail -1 "$W/err"))"
etag=$(T ls s3://pbx-big big 2>/dev/null | awk '$1 == "big" { print $3 }')
R range s3://pbx-big big "$etag" 5000000 1000 "$W/got" 2>"$W/err" &&
	dd if="$W/big" bs=1000 skip=5000 count=1 2>/dev/null | cmp -s - "$W/got"
ok $? "S3 ranged: a range of the listed ETag is those bytes"
# into a file as it comes (pbx_objstore_get_listed_fd: staging's way for
# large objects): ranges of at most 2 MiB here (PBX_OBJSTORE_RANGE_PART),
# 8 of them through 4 streams
F() { PBX_OBJSTORE_RANGE_PART=2097152 R "$@"; }
http POST "$P/__stats__/reset" >/dev/null
rm -f "$W/got"
F getf s3://pbx-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 0 ] && cmp -s "$W/big" "$W/got" && grep -q "crc32c: checked" "$W/err" && [ ! -e "$W/got.part" ]
ok $? "S3 to a file: the 15 MiB object written as it came, identical, its CRC32C combined from the ranges' and checked (rc $rc)"
[ "$(stat operations.HeadObject)" = 1 ] && [ "$(stat operations.GetObject)" = 8 ]
ok $? "S3 to a file: one HeadObject, 8 ranged GetObject of 2 MiB at most ($(stat operations.GetObject) GetObject)"
http POST "$P/__stats__/reset" >/dev/null
F getf s3://pbx-big small "$W/got" 2>"$W/err" && cmp -s "$W/small" "$W/got" &&
	[ "$(stat operations.GetObject)" = 1 ] && [ "$(stat operations.HeadObject)" = 1 ]
ok $? "S3 to a file: an object under the threshold in one GetObject pinned to the HeadObject's ETag"
http POST "$P/__fault__?kind=corrupt&n=1&op=GetObject" >/dev/null
rm -f "$W/got"
F getf s3://pbx-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 4 ] && grep -q "s3://pbx-big/big: content does not match the store's checksum" "$W/err" &&
	[ ! -e "$W/got" ] && [ ! -e "$W/got.part" ]
ok $? "S3 to a file: a range with a byte flipped refused naming the object, no file left (rc $rc: $(tail -1 "$W/err"))"
http POST "$P/__stats__/reset" >/dev/null
http POST "$P/__fault__?kind=cut&n=1&op=GetObject" >/dev/null
F getf s3://pbx-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 0 ] && cmp -s "$W/big" "$W/got" && [ "$(stat fired.cut)" = 1 ] && [ "$(stat operations.GetObject)" = 9 ]
ok $? "S3 to a file: a range cut half-way written again from its start (rc $rc, $(stat operations.GetObject) GetObject)"
# rewritten after the listing, before the read: read whole as the new one
head -c $((6 * 1048576 + 17)) /dev/urandom >"$W/new"
rm -f "$W/go"
OBJSTORE_TOOL_PAUSE=$W/go R getl s3://pbx-big big2 "$W/got" 2>"$W/err" &
tool=$!
i=0
while ! grep -q '^listed' "$W/err" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
$PY -c 'import boto3, sys
boto3.client("s3", region_name="us-east-1", endpoint_url=sys.argv[1]).delete_object(Bucket="pbx-big", Key="big2")' "$P"
T put s3://pbx-big big2 "$W/new" >/dev/null 2>&1
touch "$W/go"
wait $tool; rc=$?
[ $rc -eq 0 ] && cmp -s "$W/new" "$W/got" && grep -q "crc32c: checked" "$W/err"
ok $? "S3 ranged: rewritten between the listing and the read: the new object read whole, checked (rc $rc)"

# --------------------------------------------------------------- GCS
mkdir -p "$W/gcs"
$PY "$SRC/tests/emulators/gce/emulator.py" --port $GCS_PORT --state-dir "$W/gcs" --no-bodies \
	--network-block 127.0.171.0/26 --nat-block 127.0.171.64/26 --bucket pbx-gcs-big >"$W/gcs.log" 2>&1 &
PIDS="$PIDS $!"
wait_port $GCS_PORT; ok $? "GCE emulator with Cloud Storage on 127.0.0.1:$GCS_PORT"
E=http://127.0.0.1:$GCS_PORT/_emulator
http POST "$E/authorized-users" '{"client_id": "os.apps.googleusercontent.com", "client_secret": "s", "refresh_token": "1//large"}' >/dev/null
cat >"$W/adc.json" <<ADC
{"type": "authorized_user", "client_id": "os.apps.googleusercontent.com", "client_secret": "s",
 "refresh_token": "1//large", "token_uri": "http://127.0.0.1:$GCS_PORT/token"}
ADC
chmod 600 "$W/adc.json"
CFG=$W/gcs.yaml
{ echo "$CLUSTERS"; printf 'clouds:\n  gce: { project: pbx-test, credentials: %s, storage_endpoint: "http://127.0.0.1:%s/" }\n' \
	"$W/adc.json" "$GCS_PORT"; } >"$CFG"
chmod 600 "$CFG"
gstat() { http GET "$E/storage" | jget "$1"; }
gcalls() { # gcalls KIND: Cloud Storage calls of that kind (faults too)
	http GET "$E/storage" | $PY -c 'import json, sys; print(json.load(sys.stdin)["calls"].get(sys.argv[1], 0))' "$1"
}

http POST "$E/faults" '{"storage_upload_cut": 1}' >/dev/null
out=$(T put gs://pbx-gcs-big big "$W/big" 2>"$W/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = created ]; ok $? "GCS: a resumable upload created with a chunk cut half-way (rc $rc: $(tail -1 "$W/err"))"
[ "$(gcalls fault.upload_cut)" = 1 ]; ok $? "GCS: the cut fired"
# 5 PUTs to the session: the chunk cut at 2.5 MiB (10 units kept), the
# status query, and chunks from 2.5 MiB on (7.5, 12.5, the end); a client
# that started over would send 6
n=$(gcalls "objects.insert resumable")
[ "$n" = 5 ]; ok $? "GCS: resumed from the offset the session held ($n PUTs to the session)"
[ "$(gstat uploads_open)" = 0 ]; ok $? "GCS: no session left open"
T get gs://pbx-gcs-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 0 ] && cmp -s "$W/big" "$W/got" && grep -q "crc32c: checked" "$W/err"
ok $? "GCS: the object read back whole, its CRC32C checked (rc $rc)"
http POST "$E/faults" '{"storage_upload_503": 1}' >/dev/null
out=$(T put gs://pbx-gcs-big big2 "$W/big2" 2>"$W/err"); rc=$?
n=$(gcalls "objects.insert resumable")
# 5 before, then 4 chunks, the 503 and the status query after it
[ $rc -eq 0 ] && [ "$(gcalls fault.upload_503)" = 1 ] && [ "$n" = 11 ]
ok $? "GCS: a 503 on a chunk: the session asked, the chunk sent again (rc $rc, $n PUTs to sessions)"
T get gs://pbx-gcs-big big2 "$W/got" 2>"$W/err" && cmp -s "$W/big2" "$W/got" && grep -q "crc32c: checked" "$W/err"
ok $? "GCS: that object read back whole, its CRC32C checked"
out=$(T put gs://pbx-gcs-big big "$W/big2" 2>"$W/err"); rc=$?
[ $rc -eq 5 ] && [ "$out" = exists ]; ok $? "GCS: a large object of a name taken: exists (rc $rc)"
T get gs://pbx-gcs-big big "$W/got" 2>"$W/err" && cmp -s "$W/big" "$W/got"
ok $? "GCS: the first object's bytes kept"

# ------------------------------------------------------ GCS ranged reads
n0=$(gcalls objects.get)
R getl gs://pbx-gcs-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 0 ] && cmp -s "$W/big" "$W/got" && grep -q "crc32c: checked" "$W/err"
ok $? "GCS ranged: the 15 MiB object read in ranges, identical, its whole CRC32C checked (rc $rc)"
n=$(($(gcalls objects.get) - n0))
[ "$n" = 5 ] && [ "$(requests)" = 6 ]
ok $? "GCS ranged: objects.get once for the metadata and 4 ranges ($n objects.get, $(requests) requests)"
http POST "$E/faults" '{"storage_corrupt": 1}' >/dev/null
rm -f "$W/got"
R getl gs://pbx-gcs-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 4 ] && grep -q "gs://pbx-gcs-big/big: content does not match the store's checksum" "$W/err" && [ ! -e "$W/got" ]
ok $? "GCS ranged: a range with a byte flipped refused naming the object (rc $rc: $(tail -1 "$W/err"))"
n0=$(gcalls objects.get)
http POST "$E/faults" '{"storage_cut": 1}' >/dev/null
R getl gs://pbx-gcs-big big "$W/got" 2>"$W/err"; rc=$?
n=$(($(gcalls objects.get) - n0))
[ $rc -eq 0 ] && cmp -s "$W/big" "$W/got" && [ "$(gcalls fault.cut)" = 1 ] && [ "$n" = 6 ]
ok $? "GCS ranged: a range cut half-way read again alone (rc $rc, $n objects.get)"
n0=$(gcalls objects.get)
rm -f "$W/got"
F getf gs://pbx-gcs-big big "$W/got" 2>"$W/err"; rc=$?
n=$(($(gcalls objects.get) - n0))
[ $rc -eq 0 ] && cmp -s "$W/big" "$W/got" && grep -q "crc32c: checked" "$W/err" && [ "$n" = 9 ]
ok $? "GCS to a file: the object in 8 ranges of 2 MiB at most, identical, its combined CRC32C checked (rc $rc, $n objects.get)"
http POST "$E/faults" '{"storage_corrupt": 1}' >/dev/null
rm -f "$W/got"
F getf gs://pbx-gcs-big big "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 4 ] && grep -q "gs://pbx-gcs-big/big: content does not match the store's checksum" "$W/err" &&
	[ ! -e "$W/got" ] && [ ! -e "$W/got.part" ]
ok $? "GCS to a file: a range with a byte flipped refused naming the object, no file left (rc $rc)"
gen=$(T ls gs://pbx-gcs-big big 2>/dev/null | awk '$1 == "big" { print $3 }')
R range gs://pbx-gcs-big big $((gen + 1000)) 0 1024 "$W/got" 2>"$W/err"; rc=$?
[ $rc -eq 1 ] && grep -q "gs://pbx-gcs-big/big: object changed while it was read" "$W/err"
ok $? "GCS ranged: a range pinned to a generation GCS does not have refused (rc $rc: $(tail -1 "$W/err"))"
R range gs://pbx-gcs-big big "$gen" 5000000 1000 "$W/got" 2>"$W/err" &&
	dd if="$W/big" bs=1000 skip=5000 count=1 2>/dev/null | cmp -s - "$W/got"
ok $? "GCS ranged: a range of the listed generation is those bytes"
test_done
