#!/bin/sh
# gce-data-env.sh - an experiment's data and Python environment on booted
# Debian 12 VMs (docs/data.md, docs/environments.md):
# a gce template whose head runs as a service account of its own
# (pbx-head@, not the user's pbx-vm@), head + 2 compute nodes -> parrun of
# an experiment with `data: gs://pbx-vm-data/fmnist/` and `environment:
# python: requirements.txt` (numpy and a pure-Python wheel, from the
# experiment's wheels/ with no index: the VMs' only way out is the Debian
# mirror) -> the head stages the bucket itself, at
# https://storage.googleapis.com (the emulator behind the namespace's
# gateway) with its metadata server's token: the emulator saw the head's
# account read it and never the user's, no credential of the user's is
# on the head -> one build job, one archive, unpacked once on each of the
# 2 nodes -> the tasks, on both nodes, import numpy 1.26.4 and pbxdemo 1.0
# (the lock's) from the node-local environment and read the data whole ->
# harvest brings the results, not the data -> a second package: the data
# moves nothing, the environment is not built again -> one object changed:
# one moves -> an experiment in a container image (a local archive; ch-run
# on the nodes) runs on both nodes -> stop -> nothing left.
#
# PBX_VM_IMAGE picks the image (default: the prebaked one); images are
# built once into PBX_VM_IMAGES (default: build/vm-images).  The wheels
# come from build/test-wheels (scripts/venv.sh).  Skipped, with the reason,
# where this machine cannot boot VMs.  External addresses: 127.0.141.0/24.
. "$PBX_SOURCE_DIR/tests/cli/lib.sh"

. "$PBX_SOURCE_DIR/tests/vm/lib.sh"
IMAGES=${PBX_VM_IMAGES:-$(dirname "$PBX")/../../vm-images}
KIND=${PBX_VM_IMAGE:-baked}
numpy_whl=$(ls "$PBX_SOURCE_DIR"/build/test-wheels/numpy-*.whl 2>/dev/null | head -n 1)
why=$(vm_why_not)
[ -n "$numpy_whl" ] || why="${why:+$why
}no numpy wheel in build/test-wheels (scripts/venv.sh fetches it)"
vm_skip_unless "$why"

gce_vm_test_exit d1
BUCKET=pbx-vm-data
HEAD_SA=pbx-head@pbx-test.iam.gserviceaccount.com
USER_SA=pbx-vm@pbx-test.iam.gserviceaccount.com
on() { "$PBX" -q cluster exec ${2:+-n "$2"} d1 -- sh -c "$1" 2>&1; }
# the storage calls principal $1 was let make, as "KIND=N ..." (sorted)
storage_calls() { emu_get storage | python3 -c 'import json,sys; c=json.load(sys.stdin)["principals"].get(sys.argv[1], {}); print(" ".join("%s=%d" % kv for kv in sorted(c.items())))' "$1"; }
vm_images_ready "$KIND" "$IMAGES"
vm_user_key gce-data-env
gce_vm_emulator "$TEST_TMP" "$IMAGES/$KIND" 127.0.141.0/24 "--bucket $BUCKET"
ok $? "the emulator runs with its VM network and bucket $BUCKET: $(tail -n 3 "$TEST_TMP/emu.out")"
# the head's own service account (the metadata server's tokens name it)
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$TEST_TMP/head-sa.pem" 2>/dev/null
python3 -c 'import json, sys, urllib.request
pub = open(sys.argv[3]).read()
urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/_emulator/service-accounts" % sys.argv[1],
    data=json.dumps({"client_email": sys.argv[2], "public_key_pem": pub}).encode(),
    headers={"Content-Type": "application/json"}))' "$PORT" "$HEAD_SA" \
	"$(openssl pkey -in "$TEST_TMP/head-sa.pem" -pubout -out "$TEST_TMP/head-sa.pub" && echo "$TEST_TMP/head-sa.pub")"
gce_vm_config "$PBX_HOME" d1 "$TEST_TMP/sa.json" "$PBX_HOME/id" \
	"{ name: cpu, count: 2, machine_type: e2-standard-2 }" "head: { service_account: $HEAD_SA }"
# the user's pbx reaches the bucket at the emulator too, were it to read it;
# three TCG VMs at load 15-25 took 13 to 14 minutes to boot (2026-12-03)
sed -i "s|boot_timeout: 900 |boot_timeout: 1800|; s|endpoint: \"http://127.0.0.1:$PORT/compute/v1/\" }|endpoint: \"http://127.0.0.1:$PORT/compute/v1/\",\n         storage_endpoint: \"http://127.0.0.1:$PORT/\" }|" \
	"$PBX_HOME/config.yaml"

# ------------------------------------------------------ the dataset
mkdir -p "$TEST_TMP/objects/train"
printf '0 t-shirt\n1 trouser\n' >"$TEST_TMP/objects/labels.txt"
printf '1,2,3\n' >"$TEST_TMP/objects/train/part-0.csv"
printf '4,5,6\n' >"$TEST_TMP/objects/train/part-1.csv"
for f in labels.txt train/part-0.csv train/part-1.csv; do gcs_put "$BUCKET" "fmnist/$f" "$TEST_TMP/objects/$f" || echo "# put $f failed" >&2; done
# what a task prints of a data directory: its files' names and a digest of them
cat >"$TEST_TMP/digest.py" <<'PY'
import hashlib, os, sys
d = sys.argv[1]
files = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs if not f.startswith(".pbx"))
h = hashlib.sha256()
for f in files:
    h.update(f.encode() + b"\0" + open(os.path.join(d, f), "rb").read())
print("files=%d data=%s" % (len(files), h.hexdigest()[:16]))
PY
want_data=$(python3 "$TEST_TMP/digest.py" "$TEST_TMP/objects")

# ------------------------------------------------------- the experiment
mkdir -p "$TEST_TMP/exp/wheels"
cp "$numpy_whl" "$TEST_TMP/exp/wheels/"
make_wheel "$TEST_TMP/exp/wheels" pbxdemo 1.0
make_wheel "$TEST_TMP/exp/wheels" pbxdemo 2.0
printf 'numpy==1.26.4\npbxdemo<2\n' >"$TEST_TMP/exp/requirements.txt"
cp "$TEST_TMP/digest.py" "$TEST_TMP/exp/"
cat >"$TEST_TMP/exp/check.py" <<'PY'
import os, socket, subprocess, sys
import numpy, pbxdemo
data = subprocess.run([sys.executable, "digest.py", "data/fmnist"], capture_output=True, text=True).stdout.strip()
with open("result.txt", "w") as f:
    f.write("x=%s node=%s numpy=%s pbxdemo=%s sum=%d %s prefix=%s\n" % (
        sys.argv[1], socket.gethostname().rsplit("-", 1)[-1], numpy.__version__, pbxdemo.__version__,
        numpy.arange(int(sys.argv[1]) * 10).sum(), data, sys.prefix))
PY
# exclusive: the first two tasks start together, one on each node
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: dataenv
command: python check.py {x} && sleep 5
sweep: { grid: { x: [1, 2, 3, 4] } }
resources: { exclusive: true }
outputs: [result.txt]
data:
  - { from: "gs://pbx-vm-data/fmnist/", to: data/fmnist }
environment:
  python: requirements.txt
  wheels: wheels
EXP

# ------------------------------------------------------------- start
t0=$(date +%s)
run_pbx cluster start d1
ok $rc "start of a cluster whose head has its own service account ($(($(date +%s) - t0)) s): $errout"
echo "# start took $(($(date +%s) - t0)) s" >&2
if [ "$rc" != 0 ]; then   # nothing below can pass: the VMs' consoles say why
	for c in "$TEST_TMP"/emu/vm/*/console.log; do
		echo "# $c:"
		grep -a -e slurmctld -e munge "$c" | tail -n 12 | sed 's/^/#   /'
		tail -n 8 "$c" | sed 's/^/#   /'
	done >&2
	echo "Bail out! the cluster did not start"
	exit 1
fi
is "$(on 'test -x /usr/local/sbin/pbx-head && echo pbx-head; grep -c -e credentials -e 127\.0\.0\.1 /etc/pbx/head-config.yaml')" \
	"pbx-head
0" "the head runs pbx with its own identity: its configuration names no credential and no loopback endpoint"

# -------------------------------------------------- parrun: data + env
t0=$(date +%s)
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" d1
ok $rc "parrun of the experiment with data and an environment ($(($(date +%s) - t0)) s): $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
case $errout in *"data gs://$BUCKET/fmnist/: 3 objects"*", 3 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "the 3 objects were staged: $(echo "$errout" | grep '^data ' | tr '\n' ' ')"
is "$(storage_calls "$HEAD_SA")" "objects.get=3 objects.list=1" \
	"the head read the bucket with its own account: one listing, 3 downloads"
is "$(storage_calls "$USER_SA")" "" "the user's credentials never read it"
is "$(emu_get calls | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata_tokens"].get(sys.argv[1], 0) > 0)' "$HEAD_SA")" \
	"True" "the head's token came from its metadata server"
ID=$(on 'ls /shared/pbx/data' | head -n 1)
is "$(on "cd /shared/pbx/data/$ID && stat -c '%a %n' . labels.txt train/part-1.csv .pbx-data-manifest")" \
	"555 .
444 labels.txt
444 train/part-1.csv
444 .pbx-data-manifest" "on the shared disk ($ID), read-only"
# the head took the objects from its own cache (docs/data.md, "Credentials"):
# hard links when the cache and /shared are one file system, else copies
how=$(on "a=/shared/pbx/data/$ID/labels.txt b=/var/lib/pbx/home/data/$ID/files/labels.txt
if [ \$(stat -c %d \$a) = \$(stat -c %d \$b) ]; then [ \$(stat -c %i \$a) = \$(stat -c %i \$b) ] && echo linked
else cmp -s \$a \$b && echo copied; fi")
case $how in linked | copied) r=0 ;; *) r=1 ;; esac
ok $r "the head's script took them from the head's cache: $how"
on 'grep -rl -e "BEGIN PRIVATE KEY" -e "private_key_id" /etc/pbx /var/lib/pbx/home /home/pbx 2>/dev/null' >"$TEST_TMP/keys"
is "$(cat "$TEST_TMP/keys")" "" "no service-account key on the head"

t0=$(date +%s)
wait_final "$PKG" 1500
is "$(task_states "$PKG")" "COMPLETED COMPLETED COMPLETED COMPLETED" \
	"the 4 tasks completed ($(($(date +%s) - t0)) s after the submit)"
KEY=$(on "sed -n 's/^READY //p' /shared/pbx/$PKG/env/status")
[ "$(task_states "$PKG")" = "COMPLETED COMPLETED COMPLETED COMPLETED" ] ||
	on "cat /shared/pbx/$PKG/env/build.log; tail -n 5 /shared/pbx/$PKG/tasks/*/stderr" | sed 's/^/#   /' >&2
run_pbx harvest "$PKG"
ok $rc "harvest: $errout"
res=$(cat "$PBX_HOME"/results/"$PKG"/*/result.txt 2>/dev/null)
echo "$res" | sed 's/^/# /' >&2
is "$(echo "$res" | grep -c " numpy=1.26.4 pbxdemo=1.0 ")" 4 \
	"each task imported numpy 1.26.4 and pbxdemo 1.0 (the lock's, not 2.0)"
is "$(echo "$res" | sed -n 's/^x=4 .* sum=\([0-9]*\) .*/\1/p')" 780 "numpy computed on the VM"
is "$(echo "$res" | sed 's/.* node=\([^ ]*\) .*/\1/' | sort -u | tr '\n' ' ')" "cpu1 cpu2 " "the tasks ran on both compute nodes"
is "$(echo "$res" | grep -c " $want_data prefix=")" 4 "every task read the bucket's 3 objects whole ($want_data)"
[ -n "$KEY" ] && [ "$(echo "$res" | sed 's/.* prefix=//' | sort -u)" = "/var/tmp/pbx-env-2850/$KEY" ]
ok $? "from the node-local environment $KEY: $(echo "$res" | sed 's/.* prefix=//' | sort -u | tr '\n' ' ')"
is "$(on 'ls /shared/pbx/envs' | grep -c '\.tar\.\(zst\|gz\)$')" 1 "built once: one archive on the shared disk"
is "$(on "test -f /var/tmp/pbx-env-2850/$KEY/.pbx-ready && echo unpacked" cpu1) $(on "test -f /var/tmp/pbx-env-2850/$KEY/.pbx-ready && echo unpacked" cpu2)" \
	"unpacked unpacked" "unpacked on each compute node's own disk"
on "grep -c '^numpy==1.26.4 --hash=sha256:' /shared/pbx/$PKG/env/lock.txt" >"$TEST_TMP/lock"
is "$(cat "$TEST_TMP/lock")" 1 "the lock pins numpy with its hash"
ls "$PBX_HOME"/results/"$PKG"/*/data/fmnist/labels.txt >/dev/null 2>&1
is $? 2 "the harvest did not bring the data back"

# ----------------------------------------------- a second package
cp -r "$TEST_TMP/exp" "$TEST_TMP/exp2"
sed -i 's/^name: dataenv$/name: dataenv-two/; s/x: \[1, 2, 3, 4\]/x: [5, 6]/' "$TEST_TMP/exp2/experiment.yaml"
run_pbx parrun --json "$TEST_TMP/exp2/experiment.yaml" d1
ok $rc "parrun of a second package: $errout"
PKG2=$(echo "$out" | json_get 'd["package"]')
case $errout in *"data gs://$BUCKET/fmnist/: 3 objects, 0 moved (staged before)"*) r=0 ;; *) r=1 ;; esac
ok $r "its data moved nothing: $(echo "$errout" | grep '^data ' | tr '\n' ' ')"
is "$(storage_calls "$HEAD_SA")" "objects.get=3 objects.list=2" "the head listed the bucket once more, read nothing"
wait_final "$PKG2" 900
is "$(task_states "$PKG2")" "COMPLETED COMPLETED" "its tasks completed"
log2=$(on "cat /shared/pbx/$PKG2/env/build.log")
case $log2 in *"requirements resolved before"*"environment $KEY is built already"*) r=0 ;; *) r=1 ;; esac
ok $r "its environment was neither resolved nor built again: $(echo "$log2" | tr '\n' '|')"

# ----------------------------------------------- one object changed
printf '4,5,6\n7,8,9\n' >"$TEST_TMP/objects/train/part-1.csv"
gcs_put "$BUCKET" fmnist/train/part-1.csv "$TEST_TMP/objects/train/part-1.csv"
sed -i 's/^name: dataenv-two$/name: dataenv-three/' "$TEST_TMP/exp2/experiment.yaml"
run_pbx parrun --json "$TEST_TMP/exp2/experiment.yaml" d1
case $errout in *"data gs://$BUCKET/fmnist/: 3 objects"*", 1 moved"*) r=0 ;; *) r=1 ;; esac
ok $r "one object changed: one moved: $(echo "$errout" | grep '^data ' | tr '\n' ' ')"
PKG3=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG3" 900
run_pbx harvest "$PKG3"
is "$(cat "$PBX_HOME"/results/"$PKG3"/*/result.txt 2>/dev/null | grep -c " $(python3 "$TEST_TMP/digest.py" "$TEST_TMP/objects") prefix=")" 2 \
	"its tasks read the new version"

# ------------------------------------ a container image on the VMs
# (environment: container:, a local image archive; Charliecloud's ch-run
# on the nodes, from the bootstrap's ENV_PKGS)
mkdir -p "$TEST_TMP/rootfs/bin" "$TEST_TMP/rootfs/etc" "$TEST_TMP/box"
cp /bin/busybox "$TEST_TMP/rootfs/bin/busybox"
for c in sh cat echo id hostname test sleep; do ln -s busybox "$TEST_TMP/rootfs/bin/$c"; done
echo "pbx vm image" >"$TEST_TMP/rootfs/etc/pbx-image"
tar -C "$TEST_TMP/rootfs" -czf "$TEST_TMP/box/image.tar.gz" .
cat >"$TEST_TMP/box/experiment.yaml" <<'EXP'
name: boxed
command: echo "x={x} node=$(hostname | sed 's/.*-//') uid=$(id -u) image=$(cat /etc/pbx-image) slurmd=$([ -e /usr/sbin/slurmd ] && echo seen || echo absent)" > result.txt && sleep 5
sweep: { grid: { x: [1, 2] } }
resources: { exclusive: true }
outputs: [result.txt]
environment:
  container: image.tar.gz
EXP
run_pbx parrun --json "$TEST_TMP/box/experiment.yaml" d1
ok $rc "parrun of a container experiment: $errout"
BPKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$BPKG" 900
is "$(task_states "$BPKG")" "COMPLETED COMPLETED" "both tasks completed in the image"
run_pbx harvest "$BPKG"
res=$(cat "$PBX_HOME"/results/"$BPKG"/*/result.txt 2>/dev/null)
echo "$res" | sed 's/^/# /' >&2
is "$(echo "$res" | grep -c ' uid=2850 image=pbx vm image slurmd=absent$')" 2 \
	"each ran inside the image with ch-run (its file seen, the VM's slurmd not), as the task user"
is "$(echo "$res" | sed 's/.* node=\([^ ]*\) .*/\1/' | sort -u | tr '\n' ' ')" "cpu1 cpu2 " "on both compute nodes"

# ------------------------------------------------------------- stop
run_pbx cluster stop --discard-results d1
ok $rc "stop: $errout"
is "$(emu_get state | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["instances"]))')" 0 "no instance left"
sleep 1
is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM is left running"

done_testing
