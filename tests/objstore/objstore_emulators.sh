#!/bin/sh
# objstore_emulators.sh OBJSTORE_TOOL SOURCE_DIR - src/objstore against
# real emulators on 127.0.0.1, as TAP:
#   S3: moto_server with signatures checked, behind
#       tests/emulators/s3/faultproxy.py (path-style on
#       clouds.aws.s3_endpoint), which corrupts a body or answers 503;
#   GCS: the GCE emulator's Cloud Storage JSON API (tests/emulators/gce,
#       when it has storage.py), credentials an authorized_user file whose
#       token_uri is the emulator's.
# Each store: a create-only put, the same put again (exists), a read with
# its CRC32C checked, 1,100 objects listed (more than one page: S3 pages
# hold 1,000; the GCS emulator's default page is smaller or equal), a
# corrupted body refused (exit 4) and a 503 retried; on S3 a wrong secret
# refused.  Skips (77) without moto_server.
set -u
TOOL=$1
SRC=$2
command -v moto_server >/dev/null 2>&1 || [ -x "$SRC/build/venv/bin/moto_server" ] ||
	{ echo "1..0 # SKIP moto_server missing"; exit 77; }
. "$SRC/tests/objstore/lib.sh"
T() { "$TOOL" "$CFG" "$@"; }
# a config needs a cluster template; the stores use only clouds:
CLUSTERS='clusters:
  local:
    cloud: local
    node_groups:
      - { name: gpu, count: 1, gpus: 1 }'

# The checks every store gets.  $1: the store URL's bucket part (gs://b),
# $2: a command (eval'd here) that makes the next read corrupt, $3: one
# that makes the next request a 503.
store_checks() {
	U=$1
	printf 'hello world' >"$W/hello"
	out=$(T put "$U" dir/hello "$W/hello" 2>"$W/err"); rc=$?
	ok $((rc != 0)) "$U: create-only put of a new object ($(tail -1 "$W/err"))"
	[ "$out" = created ]; ok $? "$U: it says created"
	printf 'other bytes' >"$W/other"
	out=$(T put "$U" dir/hello "$W/other" 2>"$W/err"); rc=$?
	[ $rc -eq 5 ] && [ "$out" = exists ]; ok $? "$U: a second put of that name: exists (rc $rc)"
	T get "$U" dir/hello "$W/got" 2>"$W/err"; rc=$?
	ok $rc "$U: get ($(head -1 "$W/err" | tail -1))"
	cmp -s "$W/hello" "$W/got"; ok $? "$U: the first put's bytes came back, not the second's"
	grep -q "crc32c: checked" "$W/err"; ok $? "$U: the store gave a CRC32C and it was checked"
	T putmany "$U" many/ 1100 2>"$W/err"; ok $? "$U: 1100 puts ($(tail -1 "$W/err"))"
	T ls "$U" many/ >"$W/ls" 2>"$W/err"; rc=$?
	ok $rc "$U: list many/"
	n=$(wc -l <"$W/ls")
	[ "$n" -eq 1100 ]; ok $? "$U: 1100 objects listed (got $n)"
	req=$(sed -n 's/^requests: //p' "$W/err")
	[ "${req:-0}" -ge 2 ]; ok $? "$U: the list took more than one page ($req requests)"
	[ "$(head -1 "$W/ls" | cut -d' ' -f1)" = many/00000 ] && [ "$(tail -1 "$W/ls" | cut -d' ' -f1)" = many/01099 ]
	ok $? "$U: in name order, first and last"
	T get "$U" dir/nonesuch "$W/x" 2>"$W/err"; rc=$?
	[ $rc -eq 3 ]; ok $? "$U: a missing object: exit 3 (rc $rc: $(tail -1 "$W/err"))"
	eval "$2" >/dev/null
	T get "$U" dir/hello "$W/bad" 2>"$W/err"; rc=$?
	[ $rc -eq 4 ] && grep -q "$U/dir/hello" "$W/err" && [ ! -s "$W/bad" ]
	ok $? "$U: a corrupted body refused, naming the object (rc $rc: $(tail -1 "$W/err"))"
	eval "$3" >/dev/null
	T get "$U" dir/hello "$W/got2" 2>"$W/err"; rc=$?
	req=$(sed -n 's/^requests: //p' "$W/err")
	[ $rc -eq 0 ] && cmp -s "$W/hello" "$W/got2" && [ "${req:-0}" -ge 2 ]
	ok $? "$U: a 503 retried ($req requests)"
}

# ---------------------------------------------------------------- S3
# moto_server behind the fault proxy (tests/emulators/s3/faultproxy.py),
# with an IAM user and moto's signature checking on (--auth): every request
# pbx signs (puts, listings of prefixes with '/', gets) is checked, and a
# wrong signature would be 403.  The proxy corrupts a body or answers 503
# SlowDown when armed.
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE AWS_REGION AWS_DEFAULT_REGION
export AWS_EC2_METADATA_DISABLED=true
FP="$SRC/tests/emulators/s3/faultproxy.py"
$PY "$FP" --port 0 --port-file "$W/s3.port" --moto --auth --bucket pbx-s3-bucket \
	--env-file "$W/s3.json" >"$W/s3.log" 2>&1 &
PIDS="$PIDS $!"
i=0
while [ ! -s "$W/s3.port" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$W/s3.json" ]; ok $? "moto_server with signatures checked, behind the fault proxy ($(tail -n 1 "$W/s3.log"))"
S3URL=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["url"])' "$W/s3.json")
AWS_ACCESS_KEY_ID=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["access_key"])' "$W/s3.json")
AWS_SECRET_ACCESS_KEY=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["secret_key"])' "$W/s3.json")
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
CFG=$W/s3.yaml
{ echo "$CLUSTERS"; printf 'clouds:\n  aws: { region: us-east-1, s3_endpoint: "%s" }\n' "$S3URL"; } >"$CFG"
chmod 600 "$CFG"
s3_arm() { $PY -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b""))' "$S3URL/__fault__?kind=$1&n=1"; }
store_checks s3://pbx-s3-bucket "s3_arm corrupt" "s3_arm slowdown"
# a wrong secret is refused by the store (403), not taken
AWS_SECRET_ACCESS_KEY=wrong-$AWS_SECRET_ACCESS_KEY T get s3://pbx-s3-bucket dir/hello "$W/x" 2>"$W/err"
rc=$?
[ $rc -ne 0 ] && grep -q '403' "$W/err" && [ ! -s "$W/x" ]
ok $? "s3://pbx-s3-bucket: a wrong secret is refused (rc $rc: $(tail -n 1 "$W/err"))"

# --------------------------------------------------------------- GCS
mkdir -p "$W/gcs"
$PY "$SRC/tests/emulators/gce/emulator.py" --port 0 --port-file "$W/gcs/port" \
	--state-dir "$W/gcs" --no-bodies --bucket pbx-gcs-bucket >"$W/gcs.log" 2>&1 &
PIDS="$PIDS $!"
i=0
while [ ! -s "$W/gcs/port" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
PORT=$(cat "$W/gcs/port" 2>/dev/null)
[ -n "$PORT" ]; ok $? "GCE emulator with Cloud Storage on 127.0.0.1:$PORT"
emu() { $PY -c 'import sys, urllib.request; print(urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/_emulator/%s" % (sys.argv[1], sys.argv[2]), data=sys.argv[3].encode(), headers={"Content-Type": "application/json"})).read().decode())' "$PORT" "$1" "$2"; }
emu authorized-users '{"client_id": "os.apps.googleusercontent.com", "client_secret": "s", "refresh_token": "1//objstore"}' >/dev/null
cat >"$W/adc.json" <<ADC
{"type": "authorized_user", "client_id": "os.apps.googleusercontent.com", "client_secret": "s",
 "refresh_token": "1//objstore", "token_uri": "http://127.0.0.1:$PORT/token"}
ADC
chmod 600 "$W/adc.json"
CFG=$W/gcs.yaml
{ echo "$CLUSTERS"; printf 'clouds:\n  gce: { project: pbx-test, credentials: %s, storage_endpoint: "http://127.0.0.1:%s/" }\n' \
	"$W/adc.json" "$PORT"; } >"$CFG"
chmod 600 "$CFG"
store_checks gs://pbx-gcs-bucket "emu faults '{\"storage_corrupt\": 1}'" \
	"emu faults '{\"storage_503\": 1}'"
test_done
