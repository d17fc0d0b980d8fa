#!/bin/sh
# t0273-container-pull.sh - an experiment whose tasks run in a registry
# image (environment: container: docker://REF; docs/environments.md) on a
# local cluster: the test's own OCI registry (tests/emulators/registry,
# plain HTTP on 127.0.0.1, reached through the head's registries.conf)
# serves a busybox image made here; the submission on the head resolves
# the tag to its digest and pulls it once (skopeo, umoci) into the shared
# disk, keyed by that digest; every task runs in it (ch-run) and
# environment.txt records docker://NAME@sha256:DIGEST; a second package of
# the same tag asks the registry for the manifest only (no blob), one named
# by digest asks nothing; a missing tag, an unreachable registry, a layer
# with a '..' or an absolute member, an image without a shell and a layer whose bytes do
# not match its digest fail every task with the reason ("environment
# failed" in pbx state), no command runs and nothing is written outside.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-registry.sh"

registry_needs
local_cluster cp slot "{ name: node, count: 2 }"
trap 'registry_stop; cleanup_cluster' EXIT
SHARED=$PBX_HOME/clusters/cp/shared
PORT=$REG_PORT

# the good image: a small busybox root file system
registry_box
digest=$(registry_push pbx/box v1 "$TEST_TMP/box.tar")
ok $? "the image is stored in the registry: $digest"
# a hostile image: a shell, and a second layer with a member above the top
python3 -c 'import tarfile, io, sys
t = tarfile.open(sys.argv[1], "w")
i = tarfile.TarInfo("../../t0273-escaped"); i.size = 1; t.addfile(i, io.BytesIO(b"x"))
t.close()' "$TEST_TMP/dotdot.tar"
registry_push pbx/dotdot v1 "$TEST_TMP/box.tar" "$TEST_TMP/dotdot.tar" >/dev/null
python3 -c 'import tarfile, io, sys
t = tarfile.open(sys.argv[1], "w")
i = tarfile.TarInfo(sys.argv[2]); i.size = 1; t.addfile(i, io.BytesIO(b"x"))
t.close()' "$TEST_TMP/absolute.tar" "$TEST_TMP/t0273-abs-escaped"
registry_push pbx/absolute v1 "$TEST_TMP/box.tar" "$TEST_TMP/absolute.tar" >/dev/null
# an image with no shell
mkdir -p "$TEST_TMP/noshell/etc" && echo x >"$TEST_TMP/noshell/etc/x"
tar -C "$TEST_TMP/noshell" -cf "$TEST_TMP/noshell.tar" .
registry_push pbx/noshell v1 "$TEST_TMP/noshell.tar" >/dev/null
# an image whose own second layer's bytes the registry corrupts (one byte
# changed; the first layer is the good image's)
mkdir -p "$TEST_TMP/extra/etc" && head -c 4096 /dev/urandom >"$TEST_TMP/extra/etc/noise"
tar -C "$TEST_TMP/extra" -cf "$TEST_TMP/extra.tar" .
cm=$(registry_push pbx/corrupt v1 "$TEST_TMP/box.tar" "$TEST_TMP/extra.tar")
cl=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["layers"][1]["digest"][7:])' "$TEST_TMP/reg/blobs/sha256/${cm#sha256:}")
cp "$TEST_TMP/reg/blobs/sha256/$cl" "$TEST_TMP/layer.gz"
rm "$TEST_TMP/reg/blobs/sha256/$cl"
{ head -c 100 "$TEST_TMP/layer.gz"; printf 'X'; tail -c +102 "$TEST_TMP/layer.gz"; } >"$TEST_TMP/reg/blobs/sha256/$cl"
registry_serve

run_pbx -q cluster start cp
ok $rc "the cluster starts: $errout"
registry_conf cp

REF=docker://127.0.0.1:$PORT/pbx/box:v1
box_exp pulled "$REF" "$TEST_TMP/exp"

t0=$(date +%s.%N)
run_pbx parrun "$TEST_TMP/exp/experiment.yaml" cp
t1=$(date +%s.%N)
ok $rc "parrun: $errout"
pkg=$(printf '%s\n' "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg" 300
R=$SHARED/pbx/$pkg
is "$(task_states "$pkg")" "COMPLETED COMPLETED COMPLETED COMPLETED" "every task ran in the pulled image"
[ "$(task_states "$pkg")" = "COMPLETED COMPLETED COMPLETED COMPLETED" ] || {
	sed 's/^/# task 0: /' "$R/tasks/0/stderr"
	sed 's/^/# env: /' "$R/env/build.log"
}
outs=$(cat "$R"/tasks/*/stdout 2>/dev/null)
is "$(printf '%s\n' "$outs" | grep -c '^x=[1-4] uid=2850 os=pbxbox image=pbx registry image slurmd=absent$')" 4 \
	"each ran inside the image (its os-release and marker, the node's slurmd not seen), as the task user: $(printf '%s\n' "$outs" | head -n 1)"
hex=${digest#sha256:}
is "$(sed -n 's/^READY //p' "$R/env/status")" "$hex" "the key is the manifest's digest"
[ -s "$SHARED/pbx/envs/$hex.tar.gz" ] && [ "$(sha256sum <"$SHARED/pbx/envs/$hex.tar.gz" | cut -d' ' -f1)" = "$(cat "$SHARED/pbx/envs/$hex.sha256")" ]
ok $? "the root file system is on the shared disk, keyed by digest, its checksum beside it"
is "$(stat -c %U "$SHARED/pbx/envs/$hex.tar.gz")" pbx-task "the pull ran as the task user"
is "$(grep -c '/blobs/' "$REGLOG")" 2 "the first pull fetched the layer and the config once each"
grep -q "^GET /v2/pbx/box/manifests/$digest 200\$" "$REGLOG"
ok $? "the image was pulled by its digest, not by its tag again"
nodes_with=$(ls -d "$PBX_HOME"/clusters/cp/nodes/*/var/tmp/pbx-env-2850/"$hex" 2>/dev/null | wc -l)
[ "$nodes_with" -ge 1 ] && [ "$nodes_with" -le 2 ]
ok $? "unpacked on the local disk of each node that ran a task ($nodes_with)"
grep -q "pbx-env: pulling docker://127.0.0.1:$PORT/pbx/box@$digest" "$R/env/build.log"
ok $? "the log says what was pulled: $(tr '\n' '|' <"$R/env/build.log")"

run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
is "$(cat "$PBX_HOME"/results/"$pkg"/*/result.txt 2>/dev/null | sort | tr '\n' ' ')" "1 2 3 4 " \
	"the results written in the image came home"
envtxt=$PBX_HOME/results/$pkg/0/environment.txt
grep -qx "image docker://127.0.0.1:$PORT/pbx/box@$digest" "$envtxt" && grep -qx "reference $REF" "$envtxt"
ok $? "environment.txt came home with the digest: $(tr '\n' '|' <"$envtxt" 2>/dev/null)"
run_pbx report -f json "$pkg"
case $out in *"image docker://127.0.0.1:$PORT/pbx/box@$digest"*) r=0 ;; *) r=1 ;; esac
ok $r "pbx report -f json has the digest"

# a second package, the same tag: the manifest asked for, no blob
box_exp pulled-two "$REF" "$TEST_TMP/exp2"
n_before=$(wc -l <"$REGLOG")
t2=$(date +%s.%N)
run_pbx parrun "$TEST_TMP/exp2/experiment.yaml" cp
t3=$(date +%s.%N)
pkg2=$(printf '%s\n' "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg2" 300
is "$(task_states "$pkg2")" "COMPLETED COMPLETED COMPLETED COMPLETED" "a second package of the same tag ran"
second=$(tail -n +"$((n_before + 1))" "$REGLOG")
is "$(printf '%s\n' "$second" | grep -c '/blobs/')" 0 "it pulled nothing: $(printf '%s\n' "$second" | tr '\n' '|')"
is "$(printf '%s\n' "$second" | grep -c "^GET /v2/pbx/box/manifests/v1 200\$")" 1 "it resolved the tag once"
grep -q "is pulled already" "$SHARED/pbx/$pkg2/env/build.log"
ok $? "its log says so"
echo "# parrun: first (pull) $(awk "BEGIN { print $t1 - $t0 }") s, second (tag resolved, no pull) $(awk "BEGIN { print $t3 - $t2 }") s"

# a third, named by digest: the registry is not asked at all
box_exp pinned "docker://127.0.0.1:$PORT/pbx/box@$digest" "$TEST_TMP/exp3"
n_before=$(wc -l <"$REGLOG")
run_pbx parrun "$TEST_TMP/exp3/experiment.yaml" cp
pkg3=$(printf '%s\n' "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg3" 300
is "$(task_states "$pkg3")" "COMPLETED COMPLETED COMPLETED COMPLETED" "a package naming the digest ran"
is "$(wc -l <"$REGLOG")" "$n_before" "the registry was not asked"

# failures: every task fails with the reason, the command never runs
# bad_ref NAME REF WORDS: a package of REF whose tasks fail with WORDS
bad_ref() {
	mkdir -p "$TEST_TMP/$1"
	printf 'name: %s\ncommand: touch %s/ran\nsweep: { grid: { i: [1, 2] } }\nenvironment:\n  container: %s\n' \
		"$1" "$TEST_TMP" "$2" >"$TEST_TMP/$1/experiment.yaml"
	run_pbx parrun "$TEST_TMP/$1/experiment.yaml" cp
	ok $rc "$1: parrun: $errout"
	bp=$(printf '%s\n' "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
	wait_final "$bp" 300
	is "$(task_states "$bp")" "FAILED FAILED" "$1: both tasks failed"
	grep -q "$3" "$SHARED/pbx/$bp/tasks/0/stderr"
	ok $? "$1: each says why: $(grep pbx-env "$SHARED/pbx/$bp/tasks/0/stderr" | head -n 1)"
	run_pbx state "$bp"
	printf '%s\n' "$out" | grep -q "environment failed: .*$3"
	ok $? "$1: pbx state says the environment failed: $(printf '%s\n' "$out" | grep -m1 environment)"
}
bad_ref missing "docker://127.0.0.1:$PORT/pbx/box:nope" "cannot resolve docker://127.0.0.1:$PORT/pbx/box:nope: .*manifest unknown"
bad_ref unreachable "docker://127.0.0.1:$(slot_port 1)/pbx/box:v1" "cannot resolve docker://127.0.0.1:$(slot_port 1)/pbx/box:v1: .*connection refused"
bad_ref dotdot "docker://127.0.0.1:$PORT/pbx/dotdot:v1" "has a layer with a member outside its top, refused: '../../t0273-escaped'"
bad_ref absolute "docker://127.0.0.1:$PORT/pbx/absolute:v1" "has a layer with a member outside its top, refused: '$TEST_TMP/t0273-abs-escaped'"
bad_ref noshell "docker://127.0.0.1:$PORT/pbx/noshell:v1" "has no bin/sh"
bad_ref corrupt "docker://127.0.0.1:$PORT/pbx/corrupt:v1" "cannot pull .*Digest did not match"
[ ! -e "$TEST_TMP/ran" ] && [ ! -e "$TEST_TMP/t0273-abs-escaped" ] &&
	[ -z "$(find "$PBX_HOME" "$TEST_TMP" /var/tmp -name t0273-escaped -o -name t0273-abs-escaped 2>/dev/null)" ]
ok $? "no command ran and neither hostile member was written anywhere"
is "$(ls "$SHARED/pbx/envs" | grep -c '\.tar\.gz$')" 1 "only the good image is on the shared disk"

# a reference with shell characters: refused where the experiment is read
printf 'name: k\ncommand: "true"\nenvironment:\n  container: "docker://127.0.0.1/a:v1;touch %s/ran"\n' "$TEST_TMP" >"$TEST_TMP/k.yaml"
n_before=$(wc -l <"$REGLOG")
run_pbx parrun "$TEST_TMP/k.yaml" cp
is "$rc" 2 "a reference with shell characters: exit 2"
case $errout in *"k.yaml:4: environment.container: "*"want docker://"*) r=0 ;; *) r=1 ;; esac
ok $r "it names the file, line and key: $errout"
[ ! -e "$TEST_TMP/ran" ] && [ "$(wc -l <"$REGLOG")" = "$n_before" ]
ok $? "nothing ran, the registry was not asked"

run_pbx -q cluster stop --discard-results cp
ok $rc "stop: $errout"
done_testing
