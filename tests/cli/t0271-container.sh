#!/bin/sh
# t0271-container.sh - an experiment whose tasks run in a container image
# (environment: container:; docs/environments.md) on a local cluster whose
# tasks run as the task user: an image made here from a root file system
# (busybox, no registry), shipped with the code as a tar.gz; one build job
# checks it once; each node unpacks it once (its checksum verified) and
# every task runs in it with ch-run, as the task user, with its task
# directory, code and parameters, writing results that harvest brings home
# with environment.txt (the image's key); a second package with the same
# image unpacks nothing again; hostile archives (a member above the top, an
# absolute one, not a tar, no /bin/sh) fail every task with the reason and
# write nothing outside; a reference other than docker:// (t0273 pulls
# those; t0276 installs python: into an image) is refused with file, line
# and key.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

command -v ch-run >/dev/null 2>&1 && [ -x /bin/busybox ]
ok $? "ch-run and busybox are installed (scripts/install-deps.sh)"

local_cluster ct slot "{ name: node, count: 2 }"
SHARED=$PBX_HOME/clusters/ct/shared

# image DIR: a small root file system in DIR (busybox's shell and tools,
# a marker file only the image has)
image() {
	mkdir -p "$1/bin" "$1/etc"
	cp /bin/busybox "$1/bin/busybox"
	for c in sh cat echo id ls test wc; do ln -s busybox "$1/bin/$c"; done
	echo "pbx test image" >"$1/etc/pbx-image"
}
image "$TEST_TMP/rootfs"
mkdir -p "$TEST_TMP/exp"
tar -C "$TEST_TMP/rootfs" -czf "$TEST_TMP/exp/image.tar.gz" .
sum=$(sha256sum <"$TEST_TMP/exp/image.tar.gz" | cut -d' ' -f1)
cat >"$TEST_TMP/exp/step.sh" <<'SH'
echo "x=$1 uid=$(id -u) image=$(cat /etc/pbx-image) slurmd=$([ -e /usr/sbin/slurmd ] && echo seen || echo absent) home=$( (: >"$HOME/.t0271" && echo writable) 2>&1)"
echo "$1" >result.txt
SH
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: boxed
command: sh step.sh {x}
sweep: { grid: { x: [1, 2, 3, 4] } }
outputs: [result.txt]
environment:
  container: image.tar.gz
EXP

run_pbx -q cluster start ct
ok $rc "the cluster starts: $errout"

run_pbx parrun "$TEST_TMP/exp/experiment.yaml" ct
ok $rc "parrun: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg" 300
is "$(task_states "$pkg")" "COMPLETED COMPLETED COMPLETED COMPLETED" "every task ran in the image"
R=$SHARED/pbx/$pkg
[ "$(task_states "$pkg")" = "COMPLETED COMPLETED COMPLETED COMPLETED" ] || sed 's/^/# task 0: /' "$R/tasks/0/stderr"
outs=$(cat "$R"/tasks/*/stdout 2>/dev/null)
is "$(echo "$outs" | grep -c '^x=[1-4] uid=2850 image=pbx test image slurmd=absent home=writable$')" 4 \
	"each ran inside the image (its file seen, the node's slurmd not), as the task user, its home writable: $(echo "$outs" | head -n 2 | tr '\n' ' ')"
is "$(sed -n 's/^READY //p' "$R/env/status")" "$sum" "the build's key is the archive's sha256"
is "$(stat -c %U "$R/env/status")" pbx-task "the build ran as the task user"
grep -q "ready: image $sum" "$R/env/build.log"
ok $? "the build checked the image once: $(tr '\n' '|' <"$R/env/build.log")"
nodes_with=$(ls -d "$PBX_HOME"/clusters/ct/nodes/*/var/tmp/pbx-env-2850/"$sum" 2>/dev/null | wc -l)
[ "$nodes_with" -ge 1 ] && [ "$nodes_with" -le 2 ] &&
	[ -f "$(ls -d "$PBX_HOME"/clusters/ct/nodes/*/var/tmp/pbx-env-2850/"$sum" | head -n 1)/.pbx-ready" ]
ok $? "unpacked once on each node that ran a task, on its local disk ($nodes_with)"

run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
is "$(cat "$PBX_HOME"/results/"$pkg"/*/result.txt 2>/dev/null | sort | tr '\n' ' ')" "1 2 3 4 " \
	"the results written in the image came home: $(ls "$PBX_HOME/results/$pkg/0" | tr "\n" " ")"
envtxt=$PBX_HOME/results/$pkg/0/environment.txt
grep -q "^image $sum\$" "$envtxt" && grep -q '^archive image image.tar.gz$' "$envtxt"
ok $? "environment.txt came home with the image's key: $(tr '\n' '|' <"$envtxt" 2>/dev/null)"

# a second package, the same image: no second unpack on any node
cp -r "$TEST_TMP/exp" "$TEST_TMP/exp2"
sed -i 's/^name: boxed$/name: boxed-two/' "$TEST_TMP/exp2/experiment.yaml"
# ready_stamps: "NODE:MTIME.INODE" of each node's unpacked image's .pbx-ready
ready_stamps() {
	for n in "$PBX_HOME"/clusters/ct/nodes/*; do
		r=$n/var/tmp/pbx-env-2850/$sum/.pbx-ready
		[ ! -f "$r" ] || echo "${n##*/}:$(stat -c %Y.%i "$r")"
	done | tr '\n' ' '
}
ready_before=$(ready_stamps)
sleep 1
run_pbx parrun "$TEST_TMP/exp2/experiment.yaml" ct
pkg2=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg2" 300
is "$(task_states "$pkg2")" "COMPLETED COMPLETED COMPLETED COMPLETED" "a second package with the image ran"
after=$(ready_stamps)
r=0
for w in $ready_before; do case " $after " in *" $w "*) ;; *) r=1 ;; esac; done
ok $r "the nodes' unpacked image is the one made before (before: $ready_before after: $after)"
is "$(ls "$PBX_HOME"/clusters/ct/nodes/*/var/tmp/pbx-env-2850 | grep -c '^[0-9a-f]\{64\}$')" \
	"$(echo "$after" | wc -w)" "one image directory per node that ran a task"

# hostile archives: every task fails with the reason, nothing is written
# outside, the command never runs
# bad_image NAME TAR-MAKING-COMMAND WORDS: a package whose image is made by
# the command (in TEST_TMP/NAME, writing image.tar.gz), whose tasks fail
# with WORDS in their stderr
bad_image() {
	mkdir -p "$TEST_TMP/$1"
	(cd "$TEST_TMP/$1" && eval "$2")
	printf 'name: %s\ncommand: touch %s/ran\nsweep: { grid: { i: [1, 2] } }\nenvironment:\n  container: image.tar.gz\n' \
		"$1" "$TEST_TMP" >"$TEST_TMP/$1/experiment.yaml"
	run_pbx parrun "$TEST_TMP/$1/experiment.yaml" ct
	ok $rc "$1: parrun: $errout"
	bp=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
	wait_final "$bp" 300
	is "$(task_states "$bp")" "FAILED FAILED" "$1: both tasks failed"
	grep -q "$3" "$SHARED/pbx/$bp/tasks/0/stderr"
	ok $? "$1: each says why: $(grep pbx-env "$SHARED/pbx/$bp/tasks/0/stderr" | head -n 1)"
}
bad_image dotdot "python3 -c 'import tarfile, io
t = tarfile.open(\"image.tar.gz\", \"w:gz\")
i = tarfile.TarInfo(\"bin/sh\"); t.addfile(i, io.BytesIO(b\"\"))
i = tarfile.TarInfo(\"../../escaped\"); i.size = 1; t.addfile(i, io.BytesIO(b\"x\"))
t.close()'" "has a member outside its top, refused: '../../escaped'"
bad_image absolute "python3 -c 'import tarfile, io
t = tarfile.open(\"image.tar.gz\", \"w:gz\")
i = tarfile.TarInfo(\"bin/sh\"); t.addfile(i, io.BytesIO(b\"\"))
i = tarfile.TarInfo(\"$TEST_TMP/abs-escaped\"); i.size = 1; t.addfile(i, io.BytesIO(b\"x\"))
t.close()'" "has a member outside its top"
bad_image notatar "head -c 4096 /dev/urandom >image.tar.gz" "is not a tar archive of a root file system"
bad_image noshell "mkdir -p r/etc && echo x >r/etc/x && tar -C r -czf image.tar.gz ." "has no bin/sh"
[ ! -e "$TEST_TMP/ran" ] && [ ! -e "$TEST_TMP/escaped" ] && [ ! -e "$TEST_TMP/abs-escaped" ] &&
	[ -z "$(find "$PBX_HOME/clusters/ct" -name escaped -o -name abs-escaped)" ]
ok $? "no command ran and no member was written anywhere"

# bad keys: file, line and key, exit 2, nothing submitted
bad_key() {
	printf 'name: k\ncommand: "true"\nenvironment:\n%s\n' "$1" >"$TEST_TMP/exp/k.yaml"
	run_pbx parrun "$TEST_TMP/exp/k.yaml" ct
	is "$rc" 2 "$2: exit 2"
	case $errout in *"k.yaml:$3: environment.$4"*"$5"*) r=0 ;; *) r=1 ;; esac
	ok $r "$2: names the line and key: $errout"
}
bad_key "  container: oci://python:3.11-slim" "a reference pbx does not pull" 4 container "want docker://"
bad_key "  container: ../image.tar.gz" "a path above the experiment" 4 container "inside the experiment"
bad_key "  container: nothere.tar.gz" "an archive that is not shipped" 4 container "not a file of the package"
bad_key "  container: image.tar.gz
  wheels: ." "wheels: without python:" 5 wheels "go with python:"

run_pbx -q cluster stop --discard-results ct
ok $rc "stop: $errout"
done_testing
