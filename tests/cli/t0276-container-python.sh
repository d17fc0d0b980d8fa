#!/bin/sh
# t0276-container-python.sh - an experiment whose tasks run in a container
# image WITH Python packages installed into it (environment: container: and
# python: together; docs/environments.md) on a local cluster whose tasks run
# as the task user.  The image is a root file system made here from this
# machine's Python 3.11 and its libraries (no registry, no index); the
# requirements (numpy, a pure-Python wheel made here) install from the
# experiment's wheels.  One build job checks the image, unpacks it on its
# node and builds the environment INSIDE it with the image's own python3
# and pip (a lock with hashes, one archive keyed by the lock, the image's
# Python and the image); each node unpacks image and environment once; the
# tasks import both packages at the pinned versions from the environment,
# inside the image; environment.txt (harvested) records image and lock;
# `pbx state` says READY with the environment's key; a second package with
# the same image and requirements builds nothing; `pbx cluster gc` keeps
# both; the same image from a registry (docker://, the test's registry) is
# pulled on the head, then built in; an image without Python fails every
# task with the reason; uv with
# container: is refused with file, line and key.  Addresses and ports: the
# test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

command -v ch-run >/dev/null 2>&1 && [ -x /bin/busybox ] && [ -x /usr/bin/python3.11 ]
ok $? "ch-run, busybox and python3.11 are installed (scripts/install-deps.sh)"
WHEELS=${PBX_SOURCE_DIR:-.}/build/test-wheels
numpy_whl=$(ls "$WHEELS"/numpy-*.whl 2>/dev/null | head -n 1)
[ -n "$numpy_whl" ]
ok $? "scripts/venv.sh fetched the test wheels into $WHEELS"

local_cluster cp slot "{ name: node, count: 2 }"
SHARED=$PBX_HOME/clusters/cp/shared

# py_image DIR: a root file system with busybox's shell and tools, this
# machine's Python 3.11 (the standard library, venv and ensurepip with
# Debian's wheels) and the libraries it and numpy need, and a marker file
# only the image has
py_image() {
	mkdir -p "$1/bin" "$1/etc" "$1/usr/bin" "$1/usr/lib" "$1/usr/share"
	cp /bin/busybox "$1/bin/busybox"
	for c in sh cat echo id ls test wc env; do ln -s busybox "$1/bin/$c"; done
	cp /usr/bin/python3.11 "$1/usr/bin/python3.11"
	ln -s python3.11 "$1/usr/bin/python3"
	tar -C /usr/lib --exclude='*/test' --exclude='*/tests' --exclude='*/idlelib' \
		--exclude='*/tkinter' --exclude='*/__pycache__' -cf - python3.11 | tar -C "$1/usr/lib" -xf -
	cp -r /usr/share/python-wheels "$1/usr/share/"
	copy_libs "$1" /usr/bin/python3.11 /usr/lib/python3.11/lib-dynload/*.so
	for l in libgcc_s.so.1 libstdc++.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libm.so.6; do
		f=$(ls /lib/x86_64-linux-gnu/$l /usr/lib/x86_64-linux-gnu/$l 2>/dev/null | head -n 1)
		[ -z "$f" ] || { mkdir -p "$1${f%/*}" && cp -L "$f" "$1$f"; }
	done
	echo "pbx python image" >"$1/etc/pbx-image"
}
py_image "$TEST_TMP/rootfs"
mkdir -p "$TEST_TMP/exp/wheels"
tar -C "$TEST_TMP/rootfs" -czf "$TEST_TMP/exp/image.tar.gz" .
isum=$(sha256sum <"$TEST_TMP/exp/image.tar.gz" | cut -d' ' -f1)
cp "$numpy_whl" "$TEST_TMP/exp/wheels/"
make_wheel "$TEST_TMP/exp/wheels" pbxdemo 1.0
make_wheel "$TEST_TMP/exp/wheels" pbxdemo 2.0
printf 'numpy==1.26.4\npbxdemo<2\n' >"$TEST_TMP/exp/requirements.txt"
cat >"$TEST_TMP/exp/fit.py" <<'PY'
import os, sys
import numpy, pbxdemo
print("n=%s sum=%d numpy=%s pbxdemo=%s uid=%d image=%s" % (
    sys.argv[1], numpy.arange(int(sys.argv[1])).sum(), numpy.__version__, pbxdemo.__version__,
    os.getuid(), open("/etc/pbx-image").read().strip()))
print("prefix=" + sys.prefix)
print("slurmd=" + ("seen" if os.path.exists("/usr/sbin/slurmd") else "absent"))
PY
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: boxed-fit
command: python fit.py {n}
sweep: { grid: { n: [10, 100, 1000] } }
outputs: [environment.txt]
environment:
  container: image.tar.gz
  python: requirements.txt
  wheels: wheels
EXP

run_pbx -q cluster start cp
ok $rc "the cluster starts: $errout"

# submit_fit EXPERIMENT WHAT: parrun of EXPERIMENT (3 tasks); pkg and R
# name its package and run directory once its tasks all COMPLETED
submit_fit() {
	run_pbx parrun "$1" cp
	ok $rc "parrun of $2: $errout"
	pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
	wait_final "$pkg" 400
	R=$SHARED/pbx/$pkg
	is "$(task_states "$pkg")" "COMPLETED COMPLETED COMPLETED" "every task of $2 ran"
	[ "$(task_states "$pkg")" = "COMPLETED COMPLETED COMPLETED" ] || {
		sed 's/^/# task 0: /' "$R/tasks/0/stderr"
		sed 's/^/# build: /' "$R/env/build.log"
	}
}
submit_fit "$TEST_TMP/exp/experiment.yaml" "the shipped image"
outs=$(cat "$R"/tasks/*/stdout 2>/dev/null)
is "$(echo "$outs" | grep -c '^n=[0-9]* sum=[0-9]* numpy=1.26.4 pbxdemo=1.0 uid=2850 image=pbx python image$')" 3 \
	"each imported numpy 1.26.4 and pbxdemo 1.0 (the lock's) inside the image, as the task user: $(echo "$outs" | head -n 1)"
is "$(echo "$outs" | grep '^n=1000 ' | cut -d' ' -f2)" "sum=499500" "numpy computed"
is "$(echo "$outs" | grep -c '^slurmd=absent$')" 3 "the node's own files are not seen (the image's root)"
is "$(sed -n 's/^READY //p' "$R/env/status")" "$isum" "RUN/env is the image's: its key is the archive's sha256"
key=$(sed -n 's/^READY //p' "$R/env/py/status")
[ "${#key}" = 64 ] && [ "$key" != "$isum" ]
ok $? "RUN/env/py is the environment's, a key of its own: $key"
is "$(echo "$outs" | grep -c "^prefix=$PBX_HOME/clusters/cp/nodes/[a-z0-9]*/var/tmp/pbx-env-2850/$key\$")" 3 \
	"the tasks' Python is the node-local environment, bound into the image: $(echo "$outs" | grep '^prefix=' | sort -u | tr '\n' ' ')"
grep -q "^3\.11\.[0-9]* linux-x86_64 image $isum\$" "$R/env/py/python"
ok $? "the environment was built for the image's Python and the image: $(cat "$R/env/py/python")"
grep -q '^numpy==1.26.4 --hash=sha256:[0-9a-f]\{64\}$' "$R/env/py/lock.txt" &&
	grep -q '^pbxdemo==1.0 --hash=sha256:[0-9a-f]\{64\}$' "$R/env/py/lock.txt"
ok $? "the lock pins both with their hashes: $(tr '\n' '|' <"$R/env/py/lock.txt")"
grep -q "pbx-env: in the image $isum" "$R/env/build.log" && grep -q "ready: $key" "$R/env/build.log"
ok $? "one build job checked the image and built in it: $(tr '\n' '|' <"$R/env/build.log")"
# zstd where the nodes have it (this machine's, for a local cluster)
if command -v zstd >/dev/null; then PACKED=zst; else PACKED=gz; fi
(cd "$SHARED/pbx/envs" && [ "$(sha256sum <"$key.tar.$PACKED" | cut -d' ' -f1)" = "$(cat "$key.sha256")" ])
ok $? "one archive of the environment ($PACKED), its checksum the one recorded"
is "$(stat -c %U "$R/env/py" "$SHARED/pbx/envs/$key.tar.$PACKED" | sort -u)" pbx-task "the build ran as the task user"

is "$("$PBX" state --json "$pkg" | json_get 'd["environment"]["state"] + " " + d["environment"]["key"]')" \
	"READY $key" "state --json: the environment READY, with the Python environment's key"
run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
envtxt=$PBX_HOME/results/$pkg/0/environment.txt
grep -q "^image $isum\$" "$envtxt" && grep -q "^environment $key\$" "$envtxt" &&
	grep -q "^python 3\.11\.[0-9]* linux-x86_64 image $isum\$" "$envtxt" &&
	grep -q '^numpy==1.26.4 --hash=' "$envtxt" && grep -q '^installer pip ' "$envtxt"
ok $? "environment.txt came home with the image, the environment, its installer and the lock: $(tr '\n' '|' <"$envtxt" 2>/dev/null)"

# a second package, the same image and requirements: nothing built again
cp -r "$TEST_TMP/exp" "$TEST_TMP/exp2"
sed -i 's/^name: boxed-fit$/name: boxed-fit-two/' "$TEST_TMP/exp2/experiment.yaml"
submit_fit "$TEST_TMP/exp2/experiment.yaml" "a second package"
log2=$(cat "$R/env/build.log")
case $log2 in *"requirements resolved before"*"environment $key is built already"*) r=0 ;; *) r=1 ;; esac
ok $r "its build neither resolved nor installed: $(echo "$log2" | tr '\n' '|')"
is "$(ls "$SHARED/pbx/envs" | grep -c '\.tar\.\(zst\|gz\)$')" 1 "still one environment archive"

run_pbx cluster gc cp --dry-run --json
gone=$(echo "$out" | json_get '" ".join(g["id"] for g in d["gone"])')
case " $gone " in *" $key "* | *" $isum "*) r=1 ;; *) r=0 ;; esac
ok $r "cluster gc keeps the environment and the image its packages use (would remove: '$gone')"

# the same image from a registry (docker://): pulled on the head by the
# submission, then the build job installs the requirements into it
if command -v skopeo >/dev/null 2>&1 && command -v umoci >/dev/null 2>&1; then
	REG=$PBX_SOURCE_DIR/tests/emulators/registry/registry.py
	PORT=$(slot_port 0)
	trap '[ -z "${REG_PID:-}" ] || kill "$REG_PID" 2>/dev/null; cleanup_cluster' EXIT
	tar -C "$TEST_TMP/rootfs" -cf "$TEST_TMP/py.tar" .
	python3 "$REG" push --root "$TEST_TMP/reg" --name pbx/py --tag v1 "$TEST_TMP/py.tar" >/dev/null
	python3 "$REG" serve --root "$TEST_TMP/reg" --port "$PORT" --port-file "$TEST_TMP/reg.port" \
		--log "$TEST_TMP/registry.log" >"$TEST_TMP/reg.out" 2>&1 &
	REG_PID=$!
	wait_started "$TEST_TMP/reg.port" "$REG_PID" "$TEST_TMP/reg.out" "the registry"
	mkdir -p "$PBX_HOME/clusters/cp/nodes/head/etc/containers"
	printf '[[registry]]\nlocation = "127.0.0.1:%s"\ninsecure = true\n' "$PORT" \
		>"$PBX_HOME/clusters/cp/nodes/head/etc/containers/registries.conf"
	cp -r "$TEST_TMP/exp" "$TEST_TMP/exp3"
	rm "$TEST_TMP/exp3/image.tar.gz"
	sed -i -e 's/^name: boxed-fit$/name: pulled-fit/' \
		-e "s|^  container: image.tar.gz\$|  container: docker://127.0.0.1:$PORT/pbx/py:v1|" "$TEST_TMP/exp3/experiment.yaml"
	submit_fit "$TEST_TMP/exp3/experiment.yaml" "the registry image with requirements"
	R3=$R
	is "$(cat "$R3"/tasks/*/stdout 2>/dev/null | grep -c '^n=[0-9]* sum=[0-9]* numpy=1.26.4 pbxdemo=1.0 uid=2850 image=pbx python image$')" 3 \
		"each imported both packages inside the pulled image"
	dkey=$(sed -n 's/^READY //p' "$R3/env/status")
	key3=$(sed -n 's/^READY //p' "$R3/env/py/status")
	grep -q "^pbx-env: pulling docker://127.0.0.1:$PORT/pbx/py@sha256:$dkey\$" "$R3/env/build.log" &&
		grep -q "pbx-env: in the image $dkey" "$R3/env/build.log" && [ "${#key3}" = 64 ] && [ "$key3" != "$key" ]
	ok $? "pulled once by digest, then built in it: a key of its own, not the shipped image's ($key3)"
else
	skip "the registry image: no skopeo or umoci (scripts/install-deps.sh)"
fi

# an image without Python: every task fails at once, saying why
mkdir -p "$TEST_TMP/nopy/r/bin" "$TEST_TMP/nopy/wheels"
cp /bin/busybox "$TEST_TMP/nopy/r/bin/busybox"
ln -s busybox "$TEST_TMP/nopy/r/bin/sh"
tar -C "$TEST_TMP/nopy/r" -czf "$TEST_TMP/nopy/image.tar.gz" .
cp "$TEST_TMP/exp/wheels/pbxdemo-1.0"* "$TEST_TMP/nopy/wheels/"
cat >"$TEST_TMP/nopy/experiment.yaml" <<'EXP'
name: nopy
command: python -c 'print(1)'
sweep: { grid: { i: [1, 2] } }
environment:
  container: image.tar.gz
  python: ["pbxdemo<2"]
  wheels: wheels
EXP
run_pbx parrun "$TEST_TMP/nopy/experiment.yaml" cp
ok $rc "parrun with an image that has no Python: $errout"
bad=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$bad" 300
is "$(task_states "$bad")" "FAILED FAILED" "both tasks failed"
grep -q 'the environment failed to build: python3 does not run in the image' "$SHARED/pbx/$bad/tasks/0/stderr"
ok $? "each says why: $(grep pbx-env "$SHARED/pbx/$bad/tasks/0/stderr" | head -n 1)"

# uv does not go with container: (the image's pip installs)
printf 'name: k\ncommand: "true"\nenvironment:\n  container: image.tar.gz\n  python: [numpy]\n  installer: uv\n' \
	>"$TEST_TMP/exp/k.yaml"
run_pbx parrun "$TEST_TMP/exp/k.yaml" cp
is "$rc" 2 "installer: uv with container: exits 2"
case $errout in *"k.yaml:6: environment.installer"*"does not go with container:"*) r=0 ;; *) r=1 ;; esac
ok $r "and names the file, line and key: $errout"

run_pbx -q cluster stop --discard-results cp
ok $rc "stop: $errout"
done_testing
