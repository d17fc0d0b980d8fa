#!/bin/sh
# t0305-data-cache.sh - this machine's download cache of staged data
# (docs/data.md, "The download cache"): `pbx cache ls` says what each
# source keeps (objects, disk, what a local cluster shares, the last use,
# a staging holding it); two stagings of one source take turns (the
# second waits, says so, and downloads nothing the first one did);
# `pbx cache rm` removes a source named by its URL, its directory or its
# id, every one or those unused for a while, never one a staging holds,
# and leaves the cluster's copy; bad arguments are usage errors;
# data_cache_max keeps the cache within a bound after each staging.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster dc slot "{ name: node, count: 1 }"
SHARED=$PBX_HOME/clusters/dc/shared
TOKEN=t0305-token
data_storage "$TOKEN"
head -c 2000000 /dev/urandom >"$TEST_TMP/big"
printf 'small\n' >"$TEST_TMP/small"
for o in a/big a/x a/y/z b/x b/y c/x c/y; do
	case $o in */big) f=big ;; *) f=small ;; esac
	gcs_put data "$o" "$TEST_TMP/$f" || exit 1
done
mkdir -p "$TEST_TMP/ldata" && printf 'local\n' >"$TEST_TMP/ldata/f"

# exp NAME FROM: one task reading data/d
exp() {
	mkdir -p "$TEST_TMP/$1"
	cat >"$TEST_TMP/$1/experiment.yaml" <<EXP
name: $1
command: ls -R data/d >/dev/null
data:
  - { from: $2, to: data/d }
EXP
}
exp ea gs://data/a/
exp eb gs://data/b/
exp ec gs://data/c/
exp el "$TEST_TMP/ldata"
IDA=$(data_id gs://data/a/) IDB=$(data_id gs://data/b/) IDC=$(data_id gs://data/c/)
IDL=$(data_id "local:$(realpath "$TEST_TMP/ldata")")

run_pbx cache ls
ok $rc "cache ls with nothing cached: $errout"
is "$out|$errout" "|no staged data is cached on this machine" "it says so"

run_pbx -q cluster start dc
ok $rc "the cluster starts: $errout"
for e in ea eb el; do
	run_pbx -q parrun "$TEST_TMP/$e/experiment.yaml" dc
	ok $rc "parrun $e stages its data: $errout"
done

# ---- ls ------------------------------------------------------------------
run_pbx cache ls --json
ok $rc "cache ls --json: $errout"
echo "$out" >"$TEST_TMP/ls.json"
is "$(json_get 'd["dir"]' <"$TEST_TMP/ls.json")" "$PBX_HOME/data" "dir: \$PBX_HOME/data"
is "$(json_get '" ".join(sorted("%s=%s:%d" % (c["id"], c["source"], c["objects"]) for c in d["caches"]))' <"$TEST_TMP/ls.json")" \
	"$(printf '%s\n' "$IDA=gs://data/a/:3" "$IDB=gs://data/b/:2" "$IDL=local:$(realpath "$TEST_TMP/ldata"):0" | sort | tr '\n' ' ' | sed 's/ $//')" \
	"each source by id, its key and its objects kept (a local source keeps none)"
is "$(json_get '[c for c in d["caches"] if c["id"] == "'"$IDA"'"][0]["bytes"] >= 2000000' <"$TEST_TMP/ls.json")" True \
	"a's size counts its 2 MB object"
# the local cluster's copy is the cache's files (hard links): shared
is "$(json_get '[c for c in d["caches"] if c["id"] == "'"$IDA"'"][0]["shared_bytes"] >= 2000000' <"$TEST_TMP/ls.json")" True \
	"the bytes the local cluster's copy shares are counted as shared"
is "$(json_get '" ".join(str(c["busy"]) for c in d["caches"])' <"$TEST_TMP/ls.json")" "False False False" "none busy"
is "$(json_get 'd["caches"][0]["id"]' <"$TEST_TMP/ls.json")" "$IDL" "the last used first"
run_pbx cache ls
ok $rc "cache ls: $errout"
case $out in *SOURCE*OBJECTS*SIZE*"LAST USED"*ID*gs://data/a/*" 3 "*"$IDA"*) r=0 ;; *) r=1 ;; esac
ok $r "a table of sources: $out"
case $errout in *" in $PBX_HOME/data; "*" of it is also a local cluster's staged data"*) r=0 ;; *) r=1 ;; esac
ok $r "the total, and what a local cluster shares: $errout"

# ---- a staging holds the lock: rm leaves it, a second staging waits ----
# hold ID: a process holding the lock of cache ID (its pid in holder: the
# one that holds it, so that killing it releases it)
hold() {
	rm -f "$TEST_TMP/held"
	sh -c 'exec 9>"$1" && flock 9 && : >"$2" && exec sleep 60' sh \
		"$PBX_HOME/data/$1.lock" "$TEST_TMP/held" &
	holder=$!
	wait_for 20 test -e "$TEST_TMP/held"
}
hold "$IDA"
run_pbx cache ls --json
is "$(echo "$out" | json_get '[c["busy"] for c in d["caches"] if c["id"] == "'"$IDA"'"][0]')" True "ls: busy while held"
run_pbx cache rm gs://data/a/
is "$rc" 1 "rm of a held cache: exit 1"
case $errout in *"gs://data/a/: left, a staging holds it now"*) r=0 ;; *) r=1 ;; esac
ok $r "it says why: $errout"
[ -d "$PBX_HOME/data/$IDA/files" ]
ok $? "the cache is still there"
data_reset_calls
"$PBX" parrun "$TEST_TMP/ea/experiment.yaml" dc >"$TEST_TMP/wait.out" 2>"$TEST_TMP/wait.err" &
waiter=$!
wait_for 30 grep -q "waiting for another pbx staging it" "$TEST_TMP/wait.err"
is "$(cat "$TEST_TMP/wait.err")" "data gs://data/a/: waiting for another pbx staging it on this machine to end" \
	"a second staging of the source says it waits"
kill -0 "$waiter" 2>/dev/null
ok $? "and waits"
kill "$holder"
wait "$holder" 2>/dev/null
wait "$waiter"
ok $? "then goes on: $(cat "$TEST_TMP/wait.err")"
grep -q "data gs://data/a/: 3 objects, 0 moved (staged before)" "$TEST_TMP/wait.err"
ok $? "and finds it staged"

# two parruns of a new source at once take turns: each object is
# downloaded once (the second finds the first one's downloads)
hold "$IDC"
data_reset_calls
"$PBX" parrun "$TEST_TMP/ec/experiment.yaml" dc >/dev/null 2>"$TEST_TMP/c1.err" &
c1=$!
"$PBX" parrun "$TEST_TMP/ec/experiment.yaml" dc >/dev/null 2>"$TEST_TMP/c2.err" &
c2=$!
sleep 2
kill "$holder"
wait "$holder" 2>/dev/null
wait "$c1"
r1=$?
wait "$c2"
ok $((r1 + $?)) "two parruns of one new source at once: $(cat "$TEST_TMP/c1.err" "$TEST_TMP/c2.err")"
is "$(data_gets)" 2 "its 2 objects downloaded once"
is "$(cat "$TEST_TMP/c1.err" "$TEST_TMP/c2.err" | grep -c "waiting for another pbx staging it")" 2 \
	"both said they waited"
is "$(cat "$TEST_TMP/c1.err" "$TEST_TMP/c2.err" | grep -c "data gs://data/c/: 2 objects (.*), 2 moved")" 1 \
	"one staged it"
is "$(cat "$TEST_TMP/c1.err" "$TEST_TMP/c2.err" | grep -c "data gs://data/c/: 2 objects, 0 moved (staged before)")" 1 \
	"the other, reading the cluster's manifest again after its wait, found it staged: nothing sent twice"
is "$(cat "$SHARED/pbx/data/$IDC/x" "$SHARED/pbx/data/$IDC/y")" "small
small" "the cluster has them"

# ---- rm ------------------------------------------------------------------
run_pbx cache rm
is "$rc" 2 "rm with nothing named: usage error"
run_pbx cache rm --all gs://data/a/
is "$rc" 2 "--all with sources: usage error"
run_pbx cache rm --older-than soon
is "$rc" 2 "--older-than that is no duration: usage error"
case $errout in *"--older-than: 'soon' is not a duration"*) r=0 ;; *) r=1 ;; esac
ok $r "it names the option: $errout"
run_pbx cache rm gs://data/zz/
is "$rc" 3 "a source not cached: exit 3"
case $errout in *"gs://data/zz/ is not cached on this machine"*) r=0 ;; *) r=1 ;; esac
ok $r "it says so: $errout"
run_pbx cache rm 'gs://data/../a/'
is "$rc" 2 "a URL with ..: refused"
run_pbx cache rm 'zz;rm -rf /'
is "$rc" 2 "an argument that is no source, no directory, no id: refused"
[ -d "$PBX_HOME/data/$IDA" ] && [ -d "$PBX_HOME/data/$IDB" ]
ok $? "nothing removed by the refused ones"

run_pbx cache rm --all --dry-run --json
ok $rc "rm --all --dry-run: $errout"
is "$(echo "$out" | json_get '" ".join(sorted(g["id"] for g in d["gone"])) + " " + str(d["dry_run"])')" \
	"$(printf '%s\n' "$IDA" "$IDB" "$IDC" "$IDL" | sort | tr '\n' ' ')True" "it names all four, dry run"
is "$(ls "$PBX_HOME/data" | grep -c '^[0-9a-f]*$')" 4 "and removes none"

touch -d '3 days ago' "$PBX_HOME/data/$IDB/.pbx-source"
run_pbx cache rm --older-than 2d --json
ok $rc "rm --older-than 2d: $errout"
is "$(echo "$out" | json_get '" ".join(g["id"] for g in d["gone"])')" "$IDB" "only b, unused for 3 days"
[ ! -e "$PBX_HOME/data/$IDB" ] && [ ! -e "$PBX_HOME/data/$IDB.lock" ]
ok $? "its directory and lock gone"
is "$(cat "$SHARED/pbx/data/$IDB/x")" small "the cluster's copy stays"

run_pbx cache rm gs://data/a
ok $rc "rm by URL, without its trailing slash: $errout"
case $errout in *"removed gs://data/a/ ("*"; "*" stay in a local cluster's staged copy until it goes)"*"freed "*) r=0 ;; *) r=1 ;; esac
ok $r "it says what went: $errout"
[ ! -e "$PBX_HOME/data/$IDA" ]
ok $? "a's cache gone"
run_pbx cache rm "$TEST_TMP/ldata"
ok $rc "rm by local directory: $errout"
[ ! -e "$PBX_HOME/data/$IDL" ]
ok $? "its cache (remembered hashes) gone"
run_pbx cache rm "$(echo "$IDC" | cut -c1-6)"
ok $rc "rm by an id's first 6 digits: $errout"
[ ! -e "$PBX_HOME/data/$IDC" ]
ok $? "c's cache gone"
is "$(ls -A "$PBX_HOME/data")" "" "the cache directory is empty"

# the cluster kept its copy: the next staging lists and moves nothing
data_reset_calls
run_pbx parrun "$TEST_TMP/ea/experiment.yaml" dc
ok $rc "parrun after rm: $errout"
case $errout in *"data gs://data/a/: 3 objects, 0 moved (staged before)"*) r=0 ;; *) r=1 ;; esac
ok $r "the cluster's copy served: $errout"
is "$(data_gets)" 0 "no download"

# ---- data_cache_max: the cache kept within a bound after each staging ---
printf 'data_cache_max: 1GB\n' >>"$PBX_HOME/config.yaml"
run_pbx parrun "$TEST_TMP/eb/experiment.yaml" dc
ok $rc "parrun with data_cache_max 1GB: $errout"
case $errout in *"data cache: removed"*) r=1 ;; *) r=0 ;; esac
ok $r "within the bound nothing is removed"
[ -d "$PBX_HOME/data/$IDA" ] && [ -d "$PBX_HOME/data/$IDB" ]
ok $? "both caches stay"
sed -i 's/^data_cache_max: .*/data_cache_max: 0/' "$PBX_HOME/config.yaml"
run_pbx parrun "$TEST_TMP/ec/experiment.yaml" dc
ok $rc "parrun with data_cache_max 0: $errout"
case $errout in *"data cache: removed gs://data/a/ ("*"), the least recently used, to stay within data_cache_max"*) r=0 ;; *) r=1 ;; esac
ok $r "it says what it removed: $errout"
is "$(ls -A "$PBX_HOME/data")" "" "after the staging every cache is gone, the staged source's too"
sed -i 's/^data_cache_max: .*/data_cache_max: lots/' "$PBX_HOME/config.yaml"
run_pbx parrun "$TEST_TMP/ec/experiment.yaml" dc
is "$rc" 2 "data_cache_max that is no size: exit 2"
case $errout in *"config.yaml:"[0-9]*": data_cache_max: 'lots' is not a size"*) r=0 ;; *) r=1 ;; esac
ok $r "naming the file, line and key: $errout"
sed -i '/^data_cache_max:/d' "$PBX_HOME/config.yaml"

run_pbx -q cluster stop --discard-results dc
ok $rc "stop: $errout"
done_testing
