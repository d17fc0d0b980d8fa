#!/bin/sh
# pack_formats.sh - templates/pbx-env.sh's archive of a Python environment
# (docs/environments.md, "How it is built"), with no cluster: a package
# whose one requirement is a wheel it ships, built and unpacked in
# directories standing for the shared disk and two nodes' local disks.
#   - a cluster pbx built (its env.sh sets PBX_ROOT) packs with zstd when
#     the builder has it (KEY.tar.zst), which a node unpacks and runs;
#   - elsewhere (cloud ssh: a cluster pbx did not build, whose nodes may
#     lack zstd) it packs with gzip (KEY.tar.gz), unpacked as before;
#   - a node without zstd given a zstd archive refuses it, saying what to
#     install, and leaves nothing behind;
#   - an archive changed after its build is refused by its checksum.
# Usage: pack_formats.sh SOURCE_DIR
set -u
SRC=${1:?usage: pack_formats.sh SOURCE_DIR}
. "$SRC/tests/cli/harness.sh"
command -v zstd >/dev/null 2>&1 || { echo "1..0 # SKIP no zstd here (scripts/install-deps.sh installs it)"; exit 77; }
T=$(mktemp -d /tmp/pbx-env-pack.XXXXXX)
trap 'rm -rf "$T"' EXIT

# the package: env/requirements.txt and env/wheels (one pure-Python wheel)
mkdir -p "$T/pkg/env/wheels"
python3 - "$T/pkg/env/wheels" <<'PY'
import base64, hashlib, sys, zipfile
d = sys.argv[1]
files = {"pbxpack/__init__.py": "__version__ = '3.1'\n",
         "pbxpack-3.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: pbxpack\nVersion: 3.1\n",
         "pbxpack-3.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: pbx-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
rec = ["%s,sha256=%s,%d" % (n, base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode(), len(t))
       for n, t in files.items()] + ["pbxpack-3.1.dist-info/RECORD,,"]
files["pbxpack-3.1.dist-info/RECORD"] = "\n".join(rec) + "\n"
with zipfile.ZipFile("%s/pbxpack-3.1-py3-none-any.whl" % d, "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
PY
echo 'pbxpack==3.1' >"$T/pkg/env/requirements.txt"
echo pip >"$T/pkg/env/installer"
cp "$SRC/templates/pbx-env.sh" "$T/pkg/pbx-env.sh"

# build NAME [VAR=VALUE...]: a build onto the shared disk $T/NAME/shared
build() {
	b=$1
	shift
	mkdir -p "$T/$b/shared" "$T/$b/run"
	env "$@" PBX_PKG_DIR="$T/pkg" PBX_RUN_DIR="$T/$b/run" PBX_SHARED="$T/$b/shared" TMPDIR="$T/$b" \
		sh "$T/pkg/pbx-env.sh" build >"$T/$b/build.log" 2>&1
}
# unpack NAME NODE [VAR=VALUE...]: node NODE's unpack; prints the environment's path
unpack() {
	u=$1 node=$2
	shift 2
	env "$@" PBX_PKG_DIR="$T/pkg" PBX_RUN_DIR="$T/$u/run" PBX_SHARED="$T/$u/shared" \
		PBX_ENV_DIR="$T/$u/$node" sh "$T/pkg/pbx-env.sh" unpack 2>"$T/$u/$node.err"
}
archives() { (cd "$T/$1/shared/pbx/envs" && ls -- *.tar.* 2>/dev/null | sed 's/^[0-9a-f]*\./KEY./'); }

# ---- a cluster pbx built: zstd
build built PBX_ROOT=
ok $? "a build on a cluster pbx built: $(tail -n 3 "$T/built/build.log")"
is "$(archives built)" "KEY.tar.zst" "it packs with zstd"
zstd -q -t "$T"/built/shared/pbx/envs/*.tar.zst
ok $? "the archive is zstd's, whole"
e=$(unpack built node1)
is "$("$e/bin/python" -c 'import pbxpack; print(pbxpack.__version__)' 2>&1)" 3.1 "a node unpacks it and imports the package"

# ---- a cluster pbx did not build (no PBX_ROOT): gzip, as before
build theirs
ok $? "a build on a cluster pbx did not build: $(tail -n 3 "$T/theirs/build.log")"
is "$(archives theirs)" "KEY.tar.gz" "it packs with gzip"
gzip -t "$T"/theirs/shared/pbx/envs/*.tar.gz
ok $? "the archive is gzip's, whole"
e=$(unpack theirs node1)
is "$("$e/bin/python" -c 'import pbxpack; print(pbxpack.__version__)' 2>&1)" 3.1 "a node unpacks it and imports the package"

# ---- a node without zstd, given a zstd archive: refused, nothing left
mkdir -p "$T/nozstd"
for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
	for f in "$d"/*; do
		n=${f##*/}
		[ "$n" != zstd ] && [ ! -e "$T/nozstd/$n" ] && ln -s "$f" "$T/nozstd/$n"
	done
done 2>/dev/null
out=$(unpack built node2 PATH="$T/nozstd")
rc=$?
[ "$rc" != 0 ] && [ -z "$out" ]
ok $? "a node without zstd refuses it (status $rc)"
grep -q "is packed with zstd, which this node ([^)]*) lacks: apt-get install zstd" "$T/built/node2.err"
ok $? "and says what to install: $(cat "$T/built/node2.err")"
is "$(find "$T/built/node2" -mindepth 2 2>/dev/null | grep -v '\.lock$' | wc -l)" 0 "nothing is left of it on the node"

# ---- an archive changed after its build: refused by its checksum
a=$(ls "$T"/built/shared/pbx/envs/*.tar.zst)
printf 'x' >>"$a"
out=$(unpack built node3)
[ $? != 0 ] && grep -q 'archive checksum' "$T/built/node3.err"
ok $? "a changed archive is refused: $(cat "$T/built/node3.err")"

test_done
