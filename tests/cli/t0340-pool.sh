#!/bin/sh
# t0340-pool.sh - a class's results pooled in a bucket (docs/pooling.md),
# on S3 (moto behind tests/emulators/s3/faultproxy.py) and Cloud Storage
# (the GCE emulator's storage), the same round on each: alice runs an
# experiment on a local cluster, harvests and publishes it (through two
# SlowDown/503 answers); publishing again uploads nothing; bob (another
# home) is refused alice's name and publishes under his own; carol pulls
# both (a corrupted download refused, then pulled; a cut one retried), a
# second pull moves nothing, and her pooled report pools both publishers'
# repeats.  Hostile objects (a link, a record that lies about its
# publisher, a name outside the layout) are refused without harm.  Then a
# larger sweep of the same experiment: `parrun --skip-done POOL` submits
# only the points the pool lacks, `--split K/N` one share of them; and a
# third publisher whose losses are far off gets the points flagged.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster pl slot "{ name: node, count: 2 }"
mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: pooled
command: "awk -v lr={lr} -v r={repeat} 'BEGIN { for (s = 1; s <= 3; s++) printf \"{\\\"step\\\": %d, \\\"loss\\\": %.3f}\\n\", s, lr * 10 / s + r }' > metrics.jsonl && mkdir -p sub && echo lr={lr} > sub/model.txt"
sweep: { grid: { lr: [0.1, 0.2] }, repeats: 2 }
outputs: [sub/model.txt]
EXP

# --- the two stores ---------------------------------------------------------
s3_emulator class
gce_storage_emulator --bucket class --static-token t0340
GCS=http://127.0.0.1:$PORT
cat >>"$PBX_HOME/config.yaml" <<CONF
  gce: { project: pbx-test, credentials: $TEST_TMP/sa.json, storage_endpoint: "$GCS/" }
  aws: { region: us-east-1, s3_endpoint: "$S3" }
CONF

# home NAME: a fresh home with the same configuration
home() {
	mkdir -p "$TEST_TMP/$1" && chmod 700 "$TEST_TMP/$1"
	cp "$PBX_HOME/config.yaml" "$TEST_TMP/$1/config.yaml"
}
# arm SCHEME KIND N: the next N requests (downloads for corrupt and cut) fail
arm() {
	case $1 in
	s3) python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b""))' "$S3/__fault__?kind=$2&n=$3" ;;
	gs) emu_post faults "{\"storage_$2\": $3}" >/dev/null ;;
	esac
}
# put_raw SCHEME NAME FILE: an object as someone other than pbx writes it
put_raw() {
	python3 - "$1" "$2" "$3" "$S3" "$GCS" <<'PY'
import sys, urllib.parse, urllib.request
scheme, name, path, s3, gcs = sys.argv[1:]
data = open(path, "rb").read()
if scheme == "s3":
    # signed with the test's keys (moto checks signatures), by boto3
    import os, boto3
    boto3.client("s3", region_name="us-east-1", endpoint_url=s3,
                 aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                 aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"]).put_object(
        Bucket="class", Key=name, Body=data, ContentType="application/gzip")
    sys.exit(0)
else:
    req = urllib.request.Request("%s/upload/storage/v1/b/class/o?uploadType=media&name=%s" % (gcs, urllib.parse.quote(name, safe="")),
                                 data=data, headers={"Authorization": "Bearer t0340", "Content-Type": "application/gzip"})
urllib.request.urlopen(req, timeout=60).read()
PY
}
# hostile KIND FILE: a task object that must be refused
hostile() {
	python3 - "$1" "$2" "$TEST_TMP/evil" <<'PY'
import io, json, sys, tarfile
kind, out, evil = sys.argv[1:]
rec = {"format": "pbx-task/1", "publisher": "mallory", "package": {"id": "0123456789ab" + "0" * 52, "experiment": "pooled"},
       "task": {"idx": 0, "state": "COMPLETED", "params": {"lr": "9"}}, "metrics": [["loss", 1, 0.0]]}
if kind == "liar":
    rec["publisher"] = "alice"
    rec["task"]["idx"] = 1
with tarfile.open(out, "w:gz") as t:
    b = json.dumps(rec).encode()
    i = tarfile.TarInfo("pbx-task.json"); i.size = len(b); t.addfile(i, io.BytesIO(b))
    if kind == "link":
        i = tarfile.TarInfo("results"); i.type = tarfile.SYMTYPE; i.linkname = evil; t.addfile(i)
        i = tarfile.TarInfo("results/x"); i.size = 1; t.addfile(i, io.BytesIO(b"x"))
PY
}

# --- alice's experiment -----------------------------------------------------
run_pbx -q cluster start pl
ok $rc "the cluster starts: $errout"
run_pbx -q parrun "$TEST_TMP/exp/experiment.yaml" pl
ok $rc "parrun of 4 tasks: $errout"
wait_final pooled 120
ok $? "the 4 tasks end"
run_pbx -q harvest pooled
ok $rc "harvest: $errout"
# bob ran the same experiment file: the same package, his own results
# (here: alice's store and results, each loss 1 higher)
home bob
cp -r "$PBX_HOME/pbx.db" "$PBX_HOME/results" "$TEST_TMP/bob/"
sqlite3 "$TEST_TMP/bob/pbx.db" "UPDATE metrics SET value = value + 1"
# carol only pulls: her configuration names the stores and no cluster
mkdir -p "$TEST_TMP/carol" && chmod 700 "$TEST_TMP/carol"
sed -n '/^clouds:/,$p' "$PBX_HOME/config.yaml" | sed '/^  local:/d' >"$TEST_TMP/carol/config.yaml"
chmod 600 "$TEST_TMP/carol/config.yaml"
in_home "$TEST_TMP/carol" config check
ok $rc "a configuration with no cluster template is valid (for pull and report): $out $errout"

# round SCHEME: the whole round on one store (pool SCHEME://class/hw3-SCHEME)
round() {
	sc=$1
	pool=$sc://class/hw3-$sc
	if [ "$sc" = s3 ]; then arm s3 slowdown 2; else arm gs 503 2; fi
	run_pbx publish --json --as alice pooled "$pool"
	ok $rc "$sc: alice publishes (two 503 answers retried): $errout"
	is "$(echo "$out" | json_get '"%d %d %d" % (d["uploaded"], d["already"], d["not_home"])')" "4 0 0" \
		"$sc: 4 tasks uploaded"
	run_pbx publish --json --as alice pooled "$pool"
	is "$rc $(echo "$out" | json_get '"%d %d" % (d["uploaded"], d["already"])')" "0 0 4" \
		"$sc: publishing again uploads nothing"
	in_home "$TEST_TMP/bob" publish --as alice pooled "$pool"
	is "$rc" 4 "$sc: bob is refused alice's name (exit 4)"
	case $errout in *"publisher name 'alice'"*"is taken by someone else"*"--as NAME"*) r=0 ;; *) r=1 ;; esac
	ok $r "$sc: the refusal says whose and what to do: $errout"
	in_home "$TEST_TMP/bob" publish --json --as bob pooled "$pool"
	is "$rc $(echo "$out" | json_get 'd["uploaded"]')" "0 4" "$sc: bob publishes under his own name"

	arm "$sc" corrupt 1
	in_home "$TEST_TMP/carol" pull --json "$pool"
	is "$rc $(echo "$out" | json_get '"%d %d %d" % (d["objects"], d["pulled"], d["refused"])')" "4 8 7 1" \
		"$sc: carol's pull refuses the corrupted object (exit 4) and takes the 7 others"
	case $out in *CRC32C*) r=0 ;; *) r=1 ;; esac
	ok $r "$sc: the refusal names the checksum: $out"
	arm "$sc" cut 1
	in_home "$TEST_TMP/carol" pull --json "$pool"
	is "$rc $(echo "$out" | json_get '"%d %d %d" % (d["pulled"], d["already"], d["refused"])')" "0 1 7 0" \
		"$sc: the next pull brings the one left (a cut transfer retried)"
	in_home "$TEST_TMP/carol" pull --json "$pool"
	is "$rc $(echo "$out" | json_get '"%d %d %d" % (d["pulled"], d["already"], d["bytes"])')" "0 0 8 0" \
		"$sc: pulling again moves nothing"
	in_home "$TEST_TMP/carol" report --pool "$pool" -g lr -f json pooled
	is "$rc $(echo "$out" | json_get '" ".join("%s:%d:%.3f" % (r["lr"], r["tasks"], r["loss.mean"]) for r in d["rows"])')" \
		"0 0.1:4:1.333 0.2:4:1.667" \
		"$sc: the pooled report averages alice's and bob's repeats of each point"
	in_home "$TEST_TMP/carol" report --pool "$pool" -f csv pooled
	is "$(echo "$out" | sed 1d | cut -d, -f2 | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')" \
		"alice=4 bob=4 " "$sc: each row says whose it is"
	in_home "$TEST_TMP/carol" report --pool "$pool" -f html -o "$TEST_TMP/pool-$sc.html" pooled
	ok $rc "$sc: an HTML report of the pool: $errout"

	# hostile objects
	hostile link "$TEST_TMP/link.tgz"
	hostile liar "$TEST_TMP/liar.tgz"
	put_raw "$sc" "hw3-$sc/mallory/0123456789ab/0.tar.gz" "$TEST_TMP/link.tgz"
	put_raw "$sc" "hw3-$sc/mallory/0123456789ab/1.tar.gz" "$TEST_TMP/liar.tgz"
	put_raw "$sc" "hw3-$sc/../outside.tar.gz" "$TEST_TMP/link.tgz"
	in_home "$TEST_TMP/carol" pull --json "$pool"
	is "$rc $(echo "$out" | json_get '"%d %d %d" % (d["pulled"], d["refused"], d["already"])')" "4 0 2 8" \
		"$sc: a link and a record that lies about its publisher are refused (exit 4)"
	[ ! -e "$TEST_TMP/evil" ] && [ -z "$(find "$TEST_TMP/carol/pool" -name '*.partial' -o -type l)" ]
	ok $? "$sc: nothing was written through the link or left half-done"
	in_home "$TEST_TMP/carol" report --pool "$pool" -f csv pooled
	is "$(echo "$out" | grep -c mallory)" 0 "$sc: nothing of the refused objects is reported"
}

round s3
round gs

# --- publishers that disagree -------------------------------------------------
# eve's losses are 50 higher: far beyond alice's and bob's spread (1 apart)
home eve
cp -r "$PBX_HOME/pbx.db" "$PBX_HOME/results" "$TEST_TMP/eve/"
sqlite3 "$TEST_TMP/eve/pbx.db" "UPDATE metrics SET value = value + 50"
in_home "$TEST_TMP/carol" report --pool s3://class/hw3-s3 -g lr -f json pooled
is "$(echo "$out" | json_get '" ".join(str(r["disagree"]) for r in d["rows"])')" "None None" \
	"alice's and bob's repeats agree: no point is flagged"
in_home "$TEST_TMP/eve" publish --as eve pooled s3://class/hw3-s3
ok $rc "eve publishes: $errout"
in_home "$TEST_TMP/carol" pull s3://class/hw3-s3
in_home "$TEST_TMP/carol" report --pool s3://class/hw3-s3 -g lr -f json pooled
is "$(echo "$out" | json_get '" ".join("%s:%d:%s" % (r["lr"], r["tasks"], r["disagree"]) for r in d["rows"])')" \
	"0.1:6:loss 0.2:6:loss" "with eve's, both points are flagged: their publishers disagree on loss"
in_home "$TEST_TMP/carol" report --pool s3://class/hw3-s3 -g lr pooled
case $out in *disagree*loss*) r=0 ;; *) r=1 ;; esac
ok $r "the table shows it: $out"
in_home "$TEST_TMP/carol" report --pool s3://class/hw3-s3 -g publisher,lr -f csv pooled
is "$(echo "$out" | head -n 1 | grep -c disagree),$(echo "$out" | sed 1d | grep -c loss)" "1,0" \
	"grouped by publisher too, no row mixes publishers: none is flagged"

# secrets never show
grep -rqF "$AWS_SECRET_ACCESS_KEY" "$TEST_TMP/carol" "$TEST_TMP/bob" "$PBX_HOME/pbx.db" 2>/dev/null
ok $((!$?)) "the secret key is in no file pbx wrote"
run_pbx publish pooled "s3://Bad_Bucket/x"
is "$rc" 2 "a bad bucket name is a usage error"
run_pbx publish --as ../x pooled s3://class/hw3
is "$rc" 2 "a publisher name that is not a name is refused: $errout"
# --- a class shares one sweep: parrun --skip-done and --split ---------------
# A larger sweep of the same experiment (a new package, the same name):
# the pool holds its first 4 points (lr 0.1 and 0.2, repeats 0 and 1).
mkdir -p "$TEST_TMP/exp2"
sed 's/lr: \[0.1, 0.2\]/lr: [0.1, 0.2, 0.3]/' "$TEST_TMP/exp/experiment.yaml" >"$TEST_TMP/exp2/experiment.yaml"
run_pbx parrun --dry-run --json "$TEST_TMP/exp2/experiment.yaml" pl --skip-done s3://class/hw3-s3 --split 2/2
# (printf, not echo: dash's echo would read the backslashes of the commands)
is "$rc $(printf '%s\n' "$out" | json_get '"%d %d %d %d" % (d["tasks"], d["held"], d["pool_done"], d["other_shares"])')" \
	"0 6 5 4 1" "a dry run: 4 points done in the pool, 1 of the other share, 1 to submit"
case $(printf '%s\n' "$out" | json_get '"%d %s" % (len(d["commands"]), d["commands"][0].replace(chr(39), ""))') in
"1 awk -v lr=0.3 -v r=1 "*) r=0 ;;
*) r=1 ;;
esac
ok $r "its one command is lr 0.3's second repeat (point 5, share 2 of 2): $out"
run_pbx parrun "$TEST_TMP/exp2/experiment.yaml" pl --split 3/2
is "$rc" 2 "--split 3/2 is a usage error: $errout"
run_pbx parrun "$TEST_TMP/exp2/experiment.yaml" pl --skip-done
is "$rc" 2 "--skip-done without its POOL is a usage error: $errout"
run_pbx parrun --json "$TEST_TMP/exp2/experiment.yaml" pl --skip-done=gs://class/hw3-gs
is "$rc $(echo "$out" | json_get '"%d %d %d" % (d["submitted"], d["held"], d["pool_done"])')" "0 2 4 4" \
	"parrun --skip-done submits exactly the 2 points the pool lacks: $errout"
PKG2=$(echo "$out" | json_get 'd["package"]')
wait_secs 120 prints "COMPLETED=2 NEW=4" sh -c "\"$PBX\" state --json $PKG2 | python3 -c 'import json,sys; print(\" \".join(\"%s=%d\" % kv for kv in sorted(json.load(sys.stdin)[\"counts\"].items())))'"
ok $? "lr 0.3's two repeats complete; the 4 held stay NEW"
# a desktop session's notify-send (here one that writes down what it was asked)
mkdir -p "$TEST_TMP/desk"
printf '#!/bin/sh\nprintf "%%s|" "$@" >"%s/desk/said"\n' "$TEST_TMP" >"$TEST_TMP/desk/notify-send"
chmod 755 "$TEST_TMP/desk/notify-send"
DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent PATH="$TEST_TMP/desk:$PATH" \
	timeout 60 "$PBX" -q state -w1 "$PKG2" >/dev/null 2>&1
is "$?" 0 "state --watch ends when every submitted task has ended (the held ones wait for a parrun)"
is "$(cat "$TEST_TMP/desk/said" 2>&1)" "--app-name=pbx|pbx: $PKG2 ended|'pbx harvest' brings the results home|" \
	"and tells the desktop (notify-send)"
run_pbx state "$PKG2"
case $out in *"4 tasks NEW, never submitted: 'pbx parrun $TEST_TMP/exp2/experiment.yaml pl' submits them"*) r=0 ;; *) r=1 ;; esac
ok $r "pbx state says how to submit the held tasks: $out"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT group_concat(json_extract(params_json, '\$.lr') || '/' || json_extract(params_json, '\$.repeat'), ' ') FROM tasks t JOIN submissions s ON s.id = t.submission_id JOIN packages p ON p.id = s.package_id WHERE p.short_id = '$PKG2' AND t.state = 'COMPLETED'")" \
	"0.3/0 0.3/1" "the points that ran are the two the pool lacked"
run_pbx parrun --json "$TEST_TMP/exp2/experiment.yaml" pl
is "$rc $(echo "$out" | json_get '"%d %d %d" % (d["submitted"], d["already_submitted"], d["held"])')" "0 4 2 0" \
	"a parrun without --skip-done submits the held points"
wait_final "$PKG2" 120
ok $? "they end too"
run_pbx -q harvest
ok $rc "harvest: $errout"

run_pbx -q cluster stop pl
ok $rc "the cluster stops (everything was harvested): $errout"
done_testing
