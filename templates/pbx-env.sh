#!/bin/sh
# pbx-env.sh - a package's Python environment or container image (the
# experiment's `environment:` key; docs/environments.md): built ONCE per
# cluster as one content-addressed archive on the shared disk (an image:
# checked once, where the package ships it), unpacked once per node to its
# local disk.  POSIX sh (dash).  Shipped in the package by pbx, next to
# pbx-task.sh.
#
#   pbx-env.sh build    the build job pbx submits before a package's arrays
#                       (they depend on it: afterany), as the task user
#   pbx-env.sh unpack   from pbx-task.sh: prints the node-local environment
#                       (or image root) the task runs with, unpacking it
#                       first if needed
#   pbx-env.sh unpack-py  the same for the Python environment of an image
#                       that has one (python: with container:)
#   pbx-env.sh pull     on the head, from the submission (src/jobs/arrays.c),
#                       as the task user: a registry image (env/image-ref)
#                       pulled and converted once per cluster
#   pbx-env.sh login REGISTRY USER   on the head, as the task user (pbx
#                       cluster registry-login: src/jobs/registry.c, which
#                       made the auth file's directory as root): skopeo
#                       login with the password on stdin; prints the
#                       auth file's path
#   pbx-env.sh logout REGISTRY   the same, skopeo logout: prints "gone
#                       FILE" or "none" (no credentials for REGISTRY)
#
# An image (env/image, a link to the archive in code/): a tar archive of a
# root file system (plain or compressed: docker export, ch-convert).  The
# build checks it once: a tar, no member above its top (no absolute name,
# no '..'), a /bin/sh; its key is the archive's sha256.  Each node unpacks
# it as the task user (devices left out) and adds the mount points ch-run
# needs; the task runs in it with ch-run (Charliecloud).
#
# A registry image (env/image-ref: docker://REF, checked where the
# experiment is read): the tag resolved to its manifest's digest (skopeo
# inspect --raw: one manifest request), then, unless SHARED/pbx/envs has
# it, pulled by that digest into an OCI layout (skopeo copy), every layer's
# members checked (none absolute or with '..'), unpacked (umoci unpack
# --rootless) and packed as one root file system archive, KEY.tar.gz with
# KEY.sha256, where KEY is the digest's hex: the nodes unpack it as they do
# a shipped image.  Credentials: the auth file `pbx cluster registry-login`
# writes (auth_file below: the head's own disk, the task user's, 0600),
# else skopeo's own lookup (the task user's ~/.config/containers/auth.json
# ...); never logged, and a registry that answers 401 fails the pull with
# the command that gives it credentials.  On a node body, its
# ROOT/etc/containers/registries.conf when it has one (the tests' plain-HTTP
# loopback registry).
#
# An image with Python packages (python: with container:): the build job
# runs after the image is checked (shipped) or pulled (registry), unpacks
# the image on its node and builds the environment INSIDE it (ch-run: the
# image's python3 -m venv and pip, the shared disk and /tmp bound at their
# own paths), keyed by the lock, the image's Python and the image's key;
# its files are RUN/env/py's, as RUN/env's below are the image's.  A task
# runs in the image with the environment bound at its node-local path and
# first on PATH.  uv is not used there (the image's pip is).
#
# Environment in: PBX_PKG_DIR (the package: env/requirements.txt, and
# env/wheels when the experiment brings its own wheels: then no index is
# asked), PBX_RUN_DIR (the run: RUN/env keeps this package's lock and
# status), PBX_SHARED (the cluster's shared disk: SHARED/pbx/envs holds
# the archives), PBX_ENV_DIR (optional: the node-local directory under
# which each user's environments go, PBX_ENV_DIR/pbx-env-UID; default
# /var/tmp; a node body's env.sh names its var/tmp).
#
# Files (RUN/env, one package's):
#   lock.txt     what pip installed for requirements.txt (its --report):
#                NAME==VERSION --hash=sha256:H, written once: a rerun and a
#                later parrun of the package install exactly this (--no-deps,
#                --require-hashes), never a fresh resolve
#   python       the interpreter's version and platform, e.g. 3.11.2 linux-x86_64
#   key          the environment's key: sha256 of lock.txt and python
#   status       READY KEY | FAILED REASON (one line, replaced atomically)
#   build.log    the build job's output (SLURM's --output), or the pull's
#   python       for a registry image: docker://NAME@sha256:DIGEST
# Files (SHARED/pbx/envs, the cluster's):
#   KEY.tar.zst  the environment (its top directory: env/), renamed into
#   or KEY.tar.gz  place only when whole (zstd where the cluster's nodes
#                have it: see pack_format; gzip otherwise); KEY.sha256 its
#                checksum, written first; spec-SPEC.lock a resolved spec's lock (SPEC: sha256
#                of requirements.txt, the wheels and python), so a second
#                package with the same spec neither resolves nor builds
# Node-local (PBX_ENV_DIR/pbx-env-UID, 0700): KEY/ the unpacked environment, KEY/.pbx-ready
# once it is whole; made under a lock, one unpack per node.
set -u

die() {
	printf 'pbx-env: %s\n' "$1" >&2
	exit 1
}

# login and logout act on the head's credentials, not on a package
case ${1:-} in login | logout) NO_PKG=1 ;; *) NO_PKG= ;; esac
if [ -z "$NO_PKG" ]; then
	[ -n "${PBX_PKG_DIR:-}" ] || die "PBX_PKG_DIR is not set"
	[ -n "${PBX_RUN_DIR:-}" ] || die "PBX_RUN_DIR is not set"
	[ -n "${PBX_SHARED:-}" ] || die "PBX_SHARED is not set"
fi
REQ=${PBX_PKG_DIR:-}/env/requirements.txt
WHEELS=${PBX_PKG_DIR:-}/env/wheels
IMAGE=${PBX_PKG_DIR:-}/env/image
REF_FILE=${PBX_PKG_DIR:-}/env/image-ref
E=${PBX_RUN_DIR:-}/env
ENVS=${PBX_SHARED:-}/pbx/envs
LOCAL=${PBX_ENV_DIR:-/var/tmp}/pbx-env-$(id -u)
# is_ref: the package's image is a registry reference (env/image-ref)
is_ref() {
	[ -f "$REF_FILE" ]
}

# is_image: the package's environment is a container image
is_image() {
	[ -e "$IMAGE" ] || [ -L "$IMAGE" ] || is_ref
}

# has_python: the package has Python requirements (alone, or to install
# into its image)
has_python() {
	[ -f "$REQ" ] || [ -L "$REQ" ]
}

# IMG_ROOT: the image the Python environment is built in (python: with
# container:), "" for the node's own python3
IMG_ROOT=

# run_py CMD ARGS...: CMD run where the environment's Python is: in the
# image (ch-run, as a task runs there) or here
run_py() {
	if [ -z "$IMG_ROOT" ]; then
		"$@"
		return
	fi
	case $PBX_SHARED in /tmp/*) rp_bind= ;; *) rp_bind=$PBX_SHARED ;; esac
	case $tmp in /tmp/*) rp_tmp= ;; *) rp_tmp=$tmp ;; esac
	USER=${USER:-$(id -un)} ch-run --unset-env=LD_LIBRARY_PATH --unset-env=LD_PRELOAD \
		${rp_bind:+-b "$rp_bind"} ${rp_tmp:+-b "$rp_tmp"} "$IMG_ROOT" -- "$@"
}

# Debian's interpreter, the same path on every node (a venv points to it)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || PY=
[ -n "$PY" ] || [ -n "$NO_PKG" ] || is_image || die "no python3 on $(hostname)"


# put FILE TEXT: FILE holds TEXT (one line), replaced atomically
put() {
	printf '%s\n' "$2" >"$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"
}

sha_of() {
	sha256sum | cut -d' ' -f1
}

# plain_path PATH: PATH has only [A-Za-z0-9/._-] (it goes into sed and
# into scripts' #! lines)
plain_path() {
	case $1 in '' | *[!A-Za-z0-9/._-]*) return 1 ;; esac
}

# ------------------------------------------------------------ build --

# failed REASON: the package's status says FAILED, and so does
# the job (its log has REASON last)
failed() {
	put "$E/status" "FAILED $1"
	die "$1"
}

# pip VENV ARGS...: VENV's pip, quiet, with the experiment's own wheels
# and no index when it brings them
pip() {
	venv_pip=$1/bin/pip
	shift
	if [ -d "$WHEELS" ]; then set -- --no-index --find-links "$WHEELS" "$@"; fi
	run_py "$venv_pip" install -q --disable-pip-version-check "$@"
}

# resolve VENV: installs requirements.txt into VENV (pip's resolver) and
# writes what it installed as RUN/env/lock.txt (pip's report), every line
# pinned, hashed where the index or the wheel gives one
resolve() {
	pip "$1" --cache-dir "$ENVS/pip-cache" --report "$tmp/report.json" \
		-r "$REQ" >"$tmp/resolve.out" 2>&1 || {
		cat "$tmp/resolve.out" >&2
		failed "cannot resolve requirements.txt: $(grep -m1 'ERROR' "$tmp/resolve.out" || tail -n 1 "$tmp/resolve.out")"
	}
	run_py "$PY" - "$tmp/report.json" >"$tmp/lock.txt" <<'PYEOF' || failed "cannot read pip's report"
import json, sys
report = json.load(open(sys.argv[1]))
for item in sorted(report["install"], key=lambda i: i["metadata"]["name"].lower()):
    meta, info = item["metadata"], item.get("download_info", {})
    line = "%s==%s" % (meta["name"], meta["version"])
    hashes = info.get("archive_info", {}).get("hashes") or {}
    legacy = info.get("archive_info", {}).get("hash", "")
    if "sha256" in hashes:
        line += " --hash=sha256:" + hashes["sha256"]
    elif legacy.startswith("sha256="):
        line += " --hash=sha256:" + legacy[7:]
    print(line)
PYEOF
	mv -f "$tmp/lock.txt" "$E/lock.txt"
}

# install VENV: the lock into VENV, nothing more (--no-deps: the lock is
# whole), checked against its hashes when every line has one
install() {
	set -- "$1" --no-deps --cache-dir "$ENVS/pip-cache" -r "$E/lock.txt"
	grep -qv -- '--hash=sha256:' "$E/lock.txt" || set -- "$@" --require-hashes
	pip "$@" >"$tmp/install.out" 2>&1 || {
		cat "$tmp/install.out" >&2
		failed "cannot install the lock: $(grep -m1 'ERROR' "$tmp/install.out" || tail -n 1 "$tmp/install.out")"
	}
}

# venv: TMP/env, a fresh virtual environment, made on first use (a
# package whose environment is built already needs none): uv's, or
# python3 -m venv's (with pip)
venv() {
	[ ! -x "$tmp/env/bin/python" ] || return 0
	if [ -n "$UV" ]; then
		"$UV" venv -q --python "$PY" "$tmp/env" >"$tmp/venv.out" 2>&1 || {
			cat "$tmp/venv.out" >&2
			failed "uv venv failed: $(tail -n 1 "$tmp/venv.out")"
		}
		return 0
	fi
	run_py "$PY" -m venv "$tmp/env" >"$tmp/venv.out" 2>&1 || {
		cat "$tmp/venv.out" >&2
		[ -z "$IMG_ROOT" ] || failed "$PY -m venv failed in the image (it needs python3 with its venv and ensurepip modules): $(tail -n 1 "$tmp/venv.out")"
		failed "$PY -m venv failed (on Debian: apt-get install python3-venv)"
	}
}

# ------------------------------------------------------------- uv --
# uv (docs/environments.md, "The installer"): resolves and installs about
# ten times faster than pip here (BENCHMARKS.md).  The cluster's copy is
# installed once into SHARED/pbx/envs/tools/uv from the experiment's
# wheels when they hold a uv wheel, else from the index when the
# experiment brings no wheels (never from the index when it does: no
# index at all then).  INSTALLER (env/installer: uv or pip; default: uv
# when it can be had, else pip) chooses.

# uv_run ARGS...: uv with the experiment's wheels and no index when it
# brings them, its cache on the shared disk, trusting the node's own
# certificate store as Debian's pip does (uv's default is a bundle of its
# own, which refuses a site's proxy CA: UV_SYSTEM_CERTS, and UV_NATIVE_TLS
# for older uv)
uv_run() {
	if [ -d "$WHEELS" ]; then set -- "$@" --no-index --find-links "$WHEELS"; fi
	UV_SYSTEM_CERTS=1 UV_NATIVE_TLS=1 "$UV" "$@" --cache-dir "$ENVS/uv-cache"
}

# find_uv: sets UV to the uv this build uses, or "" (pip)
find_uv() {
	UV=
	[ "$INSTALLER" != pip ] || return 0
	tools=$ENVS/tools/uv
	if [ ! -x "$tools/bin/uv" ]; then
		if [ -d "$WHEELS" ] && ! ls "$WHEELS"/uv-*.whl >/dev/null 2>&1; then
			[ "$INSTALLER" != uv ] || failed "installer: uv, but the experiment's wheels hold no uv wheel (pip download uv -d WHEELS)"
			echo "pbx-env: installer pip (the experiment's wheels hold no uv wheel)"
			return 0
		fi
		install_uv "$tools" || {
			[ "$INSTALLER" != uv ] || failed "installer: uv, but uv could not be installed: $(tail -n 1 "$tmp/uv.out")"
			echo "pbx-env: installer pip (uv could not be installed: $(tail -n 1 "$tmp/uv.out"))"
			return 0
		}
	fi
	UV=$tools/bin/uv
	echo "pbx-env: installer $("$UV" --version 2>/dev/null || echo uv)"
}

# install_uv DIR: uv into DIR (a virtual environment of its own), once
# for the cluster (under a lock: the second builder finds it made)
install_uv() {
	exec 7>"$ENVS/.tools-uv.lock" || return 1
	flock 7 || return 1
	if [ ! -x "$1/bin/uv" ]; then
		rm -rf "$1.part"
		mkdir -p "${1%/*}" &&
			"$PY" -m venv "$1.part" >"$tmp/uv.out" 2>&1 &&
			pip "$1.part" --cache-dir "$ENVS/pip-cache" uv >>"$tmp/uv.out" 2>&1
		if [ -x "$1.part/bin/uv" ] && mv "$1.part" "$1"; then :; else
			rm -rf "$1.part"
			exec 7>&-
			return 1
		fi
	fi
	exec 7>&-
}

# uv_reason LOG: the line of uv's LOG that says why (its "Because ..."
# explanation, else its error), without uv's drawing characters
uv_reason() {
	{ grep -m1 'Because' "$1" || grep -m1 'error' "$1" || tail -n 1 "$1"; } | sed 's/^[^A-Za-z]*//; s/^cause: //'
}

# uv_lock: requirements.txt resolved by uv into RUN/env/lock.txt, one
# line a package: NAME==VERSION --hash=sha256:H ... (every artifact's)
uv_lock() {
	uv_run pip compile -q "$REQ" --generate-hashes --no-header --no-annotate --python "$PY" \
		>"$tmp/lock.raw" 2>"$tmp/resolve.out" || {
		cat "$tmp/resolve.out" >&2
		failed "cannot resolve requirements.txt: $(uv_reason "$tmp/resolve.out")"
	}
	awk '{ sub(/[ \t]*#.*/, "") } /\\$/ { sub(/[ \t]*\\$/, ""); line = line $0 " "; next }
	     { line = line $0; gsub(/[ \t]+/, " ", line); sub(/^ /, "", line); sub(/ $/, "", line)
	       if (line != "") print line; line = "" }' "$tmp/lock.raw" >"$tmp/lock.txt" ||
		failed "cannot read uv's lock"
	mv -f "$tmp/lock.txt" "$E/lock.txt"
}

# uv_install VENV: the lock into VENV, nothing more, checked against its
# hashes when every line has one; its modules compiled to bytecode once
# here, as pip does (uv does not by default: every node's every task
# would compile them again where it cannot write them, 2.3x numpy's
# import time measured)
uv_install() {
	set -- --python "$1/bin/python" --no-deps --compile-bytecode
	grep -qv -- '--hash=sha256:' "$E/lock.txt" || set -- "$@" --require-hashes
	uv_run pip install -q "$@" --link-mode copy -r "$E/lock.txt" >"$tmp/install.out" 2>&1 || {
		cat "$tmp/install.out" >&2
		failed "cannot install the lock: $(uv_reason "$tmp/install.out")"
	}
}

# outside_member LIST: prints the first member of LIST (tar -t's) that is
# absolute or has a '..' component; false when none
outside_member() {
	grep -m 1 -E '^/|(^|/)\.\.(/|$)' "$1"
}

# has_shell LIST: LIST (tar -t's) has bin/sh or usr/bin/sh
has_shell() {
	grep -qxE '(\./)?(usr/)?bin/sh' "$1"
}

# build_image: checks the package's image archive once for the cluster;
# its key is its sha256 (each node checks its copy against it)
build_image() {
	name=$(readlink "$IMAGE") || name=$IMAGE
	name=${name#../code/}
	[ -f "$IMAGE" ] || failed "the image $name is not a file of the package"
	echo "pbx-env: checking the image $name ($(wc -c <"$IMAGE") bytes)"
	tar -tf "$IMAGE" >"$tmp/members" 2>"$tmp/tar.err" ||
		failed "the image $name is not a tar archive of a root file system: $(head -n 1 "$tmp/tar.err")"
	bad=$(outside_member "$tmp/members") &&
		failed "the image $name has a member outside its top, refused: '$bad'"
	has_shell "$tmp/members" ||
		failed "the image $name has no bin/sh: is it an archive of a root file system (docker export, ch-convert)?"
	key=$(sha_of <"$IMAGE") || failed "cannot read the image $name"
	put "$E/key" "$key"
	put "$E/python" "image $name"
	put "$E/status" "READY $key"
	echo "pbx-env: ready: image $key ($(wc -l <"$tmp/members") members, $(($(date +%s) - started)) s)"
}

build() {
	mkdir -p "$E" "$ENVS" || die "cannot create $E or $ENVS"
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/pbx-env.XXXXXX") || failed "cannot make a temporary directory"
	plain_path "$tmp" || { rm -rf "$tmp"; failed "TMPDIR '$TMPDIR' has characters other than A-Za-z0-9/._-"; }
	trap 'rm -rf "$tmp"' EXIT
	started=$(date +%s)
	if is_ref && ! has_python; then
		failed "a registry image is pulled on the head by the submission, not by a build job"
	fi
	if is_image; then
		is_ref || build_image
		has_python || return 0
		in_image
	fi
	build_python
}

# in_image: the Python environment is built in the package's image from
# here on: the image unpacked on this node (IMG_ROOT), its python3, and
# RUN/env/py for the environment's files (RUN/env is the image's)
in_image() {
	command -v ch-run >/dev/null 2>&1 ||
		failed "the experiment's Python packages are installed in its image: that needs ch-run on $(hostname) (Debian: apt-get install charliecloud-runtime)"
	img_out=$(unpack 2>&1) || failed "$(printf '%s\n' "$img_out" | tail -n 1)"
	IMG_ROOT=$(printf '%s\n' "$img_out" | tail -n 1)
	img_key=${IMG_ROOT##*/}
	mount_point "$IMG_ROOT" "$tmp"
	E=$E/py
	mkdir -p "$E" || die "cannot create $E"
	PY=python3
	echo "pbx-env: in the image $img_key"
}

# build_python: the package's requirements resolved once (the lock), then
# built once per cluster into ENVS/KEY.tar.gz
build_python() {
	[ -r "$REQ" ] || failed "the package has no env/requirements.txt"
	pyid=$(run_py "$PY" -c 'import sys, sysconfig; print("%d.%d.%d" % sys.version_info[:3], sysconfig.get_platform())') ||
		failed "$PY does not run${IMG_ROOT:+ in the image}"
	# in an image, the image is part of what the environment is built for
	[ -z "$IMG_ROOT" ] || pyid="$pyid image $img_key"
	put "$E/python" "$pyid"
	echo "pbx-env: python $pyid ($PY) on $(hostname)${SLURM_JOB_PARTITION:+, partition $SLURM_JOB_PARTITION}"
	INSTALLER=$(cat "$PBX_PKG_DIR/env/installer" 2>/dev/null) || INSTALLER=auto
	case $INSTALLER in auto | uv | pip) ;; *) failed "env/installer says '$INSTALLER', not uv or pip" ;; esac
	# the image's own pip installs into it
	[ -z "$IMG_ROOT" ] || INSTALLER=pip
	installed=
	if [ ! -s "$E/lock.txt" ]; then
		spec=$({
			cat "$REQ"
			echo "$pyid"
			[ ! -d "$WHEELS" ] || (cd "$WHEELS" && find . -type f | LC_ALL=C sort | xargs -r sha256sum)
		} | sha_of)
		if [ -s "$ENVS/spec-$spec.lock" ]; then
			cp "$ENVS/spec-$spec.lock" "$E/lock.txt" || failed "cannot copy the lock"
			echo "pbx-env: requirements resolved before (spec $spec)"
		else
			echo "pbx-env: resolving requirements.txt$([ -d "$WHEELS" ] && echo ' (its wheels, no index)')"
			find_uv
			if [ -n "$UV" ]; then
				uv_lock
			else
				venv
				resolve "$tmp/env"
				installed=1
			fi
			cp "$E/lock.txt" "$ENVS/.spec-$spec.$$" && mv -f "$ENVS/.spec-$spec.$$" "$ENVS/spec-$spec.lock"
		fi
	else
		echo "pbx-env: the package's lock, as before"
	fi
	key=$({ cat "$E/lock.txt"; echo "$pyid"; } | sha_of)
	put "$E/key" "$key"
	# one builder of KEY at a time, cluster-wide (two packages with the
	# same lock may build at once): the second finds it made
	exec 8>"$ENVS/.$key.lock" || failed "cannot open $ENVS/.$key.lock"
	flock 8 || failed "cannot lock $ENVS/.$key.lock"
	if env_archive "$key" >/dev/null && [ -s "$ENVS/$key.sha256" ]; then
		echo "pbx-env: environment $key is built already"
	else
		if [ -z "$installed" ]; then
			[ -n "${UV+set}" ] || find_uv
			echo "pbx-env: installing $(wc -l <"$E/lock.txt") packages into environment $key"
			venv
			if [ -n "$UV" ]; then uv_install "$tmp/env"; else install "$tmp/env"; fi
		fi
		if [ -n "${UV:-}" ]; then
			"$UV" --version >"$tmp/env/pbx-installer" 2>/dev/null || echo uv >"$tmp/env/pbx-installer"
		else
			run_py "$tmp/env/bin/pip" --version 2>/dev/null | cut -d' ' -f1-2 >"$tmp/env/pbx-installer"
		fi
		echo "pbx-env: packing environment $key ($(wc -l <"$E/lock.txt") packages)"
		printf '%s\n' "$tmp/env" >"$tmp/env/.pbx-built-at"
		cp "$E/lock.txt" "$tmp/env/pbx-lock.txt"
		part=$(mktemp "$ENVS/.$key.XXXXXX") || failed "cannot write in $ENVS"
		chmod 644 "$part"
		pack_format
		if ! { tar -C "$tmp" -cf - env || : >"$tmp/tar.failed"; } | pack_stream >"$part" ||
			[ -e "$tmp/tar.failed" ]; then
			rm -f "$part"
			failed "cannot pack the environment into $ENVS"
		fi
		sum=$(sha_of <"$part")
		if ! put "$ENVS/$key.sha256" "$sum" || ! mv -f "$part" "$ENVS/$key.tar.$PACK"; then
			rm -f "$part"
			failed "cannot write $ENVS/$key.tar.$PACK"
		fi
		echo "pbx-env: packed $(wc -c <"$ENVS/$key.tar.$PACK") bytes ($PACK)"
	fi
	exec 8>&-
	put "$E/status" "READY $key"
	echo "pbx-env: ready: $key ($(($(date +%s) - started)) s)"
}

# pack_format: PACK = zst where every node of the cluster can unpack
# zstd (a cluster pbx built, whose env.sh sets PBX_ROOT: its bootstrap
# installs zstd with ENV_PKGS on each compute node, and node bodies share
# this machine), else gz.  zstd -1 packed a 363 MB scientific environment
# in 1.2 s where gzip -1 took 4.9 s, 7% smaller, and unpacked faster
# (BENCHMARKS.md, "Python environments")
pack_format() {
	PACK=gz
	[ -z "${PBX_ROOT+set}" ] || ! command -v zstd >/dev/null 2>&1 || PACK=zst
}

# pack_stream: stdin compressed as PACK says, to stdout
pack_stream() {
	if [ "$PACK" = zst ]; then zstd -q -1 -T0; else gzip -1; fi
}

# env_archive KEY: prints ENVS/KEY's archive (KEY.tar.zst or KEY.tar.gz);
# false when it has none
env_archive() {
	for ea in "$ENVS/$1.tar.zst" "$ENVS/$1.tar.gz"; do
		[ ! -s "$ea" ] || { echo "$ea"; return 0; }
	done
	return 1
}

# ----------------------------------------------------------- unpack --

# unpack_locked KEY: makes LOCAL/KEY (the caller holds its lock)
unpack_locked() {
	[ ! -f "$LOCAL/$1/.pbx-ready" ] || return 0
	want=$(cat "$ENVS/$1.sha256" 2>/dev/null) || die "environment $1: no $ENVS/$1.sha256"
	archive=$(env_archive "$1") || die "environment $1: no archive in $ENVS"
	part=$LOCAL/.$1.$$
	rm -rf "$part" "${LOCAL:?}/$1"
	mkdir -p "$part" || die "cannot create $part"
	# one read of the archive: checked and unpacked from the same bytes
	cp "$archive" "$part.pack" || die "environment $1: cannot copy its archive"
	got=$(sha_of <"$part.pack")
	[ "$got" = "$want" ] || { rm -rf "$part" "$part.pack"; die "environment $1: archive checksum $got, want $want"; }
	# GNU tar: no absolute names, no member above the top, no owners
	case $archive in
	*.zst)
		command -v zstd >/dev/null 2>&1 || {
			rm -rf "$part" "$part.pack"
			die "environment $1 is packed with zstd, which this node ($(hostname)) lacks: apt-get install zstd"
		}
		{ zstd -q -d -c "$part.pack" || : >"$part.failed"; } | tar -C "$part" --no-same-owner -xf - &&
			[ ! -e "$part.failed" ]
		;;
	*) tar -C "$part" --no-same-owner -xzf "$part.pack" ;;
	esac || { rm -rf "$part" "$part.pack" "$part.failed"; die "environment $1: cannot unpack"; }
	rm -f "$part.pack"
	if [ ! -d "$part/env" ] || [ -L "$part/env" ]; then
		rm -rf "$part"
		die "environment $1: no env/ in its archive"
	fi
	# scripts in bin/ name the directory it was built in: now this one
	old=$(cat "$part/env/.pbx-built-at") || die "environment $1: no .pbx-built-at"
	for f in "$part/env/bin"/*; do
		if [ -f "$f" ] && [ ! -L "$f" ] && grep -qF "$old" "$f" 2>/dev/null; then
			sed -i "s|$old|$LOCAL/$1|g" "$f" || die "cannot rewrite $f"
		fi
	done
	: >"$part/env/.pbx-ready"
	mv "$part/env" "$LOCAL/$1" || die "cannot move the environment to $LOCAL/$1"
	rmdir "$part"
}

# unpack_image_locked KEY: makes LOCAL/KEY, the image's root file system
# (the caller holds its lock): from a copy checked against KEY, devices
# left out, every directory the task user's to remove later, and the mount
# points ch-run binds
unpack_image_locked() {
	[ ! -f "$LOCAL/$1/.pbx-ready" ] || return 0
	part=$LOCAL/.$1.$$
	rm -rf "$part" "${LOCAL:?}/$1"
	mkdir -p "$part" || die "cannot create $part"
	# a shipped archive's key is its checksum; a pulled image's is its
	# digest, its archive's checksum beside it on the shared disk
	src=$IMAGE want=$1
	if is_ref; then
		src=$ENVS/$1.tar.gz
		want=$(cat "$ENVS/$1.sha256" 2>/dev/null) || die "image $1: no $ENVS/$1.sha256"
	fi
	cp "$src" "$part.tar" || die "image $1: cannot copy its archive"
	got=$(sha_of <"$part.tar")
	[ "$got" = "$want" ] || { rm -rf "$part" "$part.tar"; die "image $1: archive checksum $got, want $want"; }
	# GNU tar: no absolute names, no member above the top, no owners,
	# links planted before files never written through
	tar -C "$part" --no-same-owner --anchored --exclude='./dev/?*' --exclude='dev/?*' -xf "$part.tar" 2>"$part.err" || {
		msg=$(head -n 1 "$part.err")
		chmod -R u+rwX "$part" 2>/dev/null
		rm -rf "$part" "$part.tar" "$part.err"
		die "image $1: cannot unpack: $msg"
	}
	rm -f "$part.tar" "$part.err"
	find "$part" -type d ! -perm -u=rwx -exec chmod u+rwx {} + || die "image $1: cannot make its directories writable"
	for d in dev proc sys tmp home mnt etc; do
		[ -d "$part/$d" ] && [ ! -L "$part/$d" ] && continue
		if ! rm -f "${part:?}/$d" || ! mkdir "$part/$d"; then die "image $1: cannot make /$d"; fi
	done
	for f in passwd group hosts resolv.conf; do
		[ -f "$part/etc/$f" ] && [ ! -L "$part/etc/$f" ] && continue
		if ! rm -rf "${part:?}/etc/$f" || ! : >"$part/etc/$f"; then die "image $1: cannot make /etc/$f"; fi
	done
	: >"$part/.pbx-ready"
	mv "$part" "$LOCAL/$1" || die "cannot move the image to $LOCAL/$1"
}

# image_dir ROOT PATH WHAT: directory PATH exists in the image at ROOT,
# made one component at a time, never through a link the image holds (an
# image's absolute link would lead the mkdir out of it); WHAT names PATH's
# use in the message
image_dir() {
	mp_at=$1
	mp_rest=${2#/}
	while [ -n "$mp_rest" ]; do
		mp_at=$mp_at/${mp_rest%%/*}
		case $mp_rest in */*) mp_rest=${mp_rest#*/} ;; *) mp_rest= ;; esac
		[ ! -L "$mp_at" ] || die "the image has a link at ${mp_at#"$1"}, where $3 $2 goes"
		[ -d "$mp_at" ] || mkdir "$mp_at" || die "cannot make $2 in the image $1"
	done
}

# mount_point ROOT PATH: PATH exists in the image at ROOT, for ch-run's
# bind (under /tmp it needs none: ch-run binds the node's /tmp)
mount_point() {
	case $2 in /tmp/*) return 0 ;; esac
	[ ! -d "$1$2" ] || [ -L "$1$2" ] || return 0
	image_dir "$1" "$2" "the shared directory"
}

# ------------------------------------------------------- GPU driver --
# A GPU node's NVIDIA driver is the host's, never the image's: its user
# libraries (libcuda, libnvidia-*: what the node's dynamic linker cache
# lists) are copied into the unpacked image at GPU_DIR, which the image's
# own ldconfig then adds to the image's cache, as Charliecloud's
# `ch-fromhost --nvidia` does (its Debian package brings docker.io and
# buildah, so pbx does this itself).  /dev/nvidia* come with ch-run's
# /dev.  Done at a task's unpack, under the image's lock, and again when
# the node's driver changed (the stamp: each library's name, path, size
# and time); a node without the driver adds nothing.  A node body reads
# its cluster's PBX_ROOT/etc/ld.so.cache when it has one.
GPU_DIR=/usr/local/lib/pbx-gpu

# gpu_driver_libs: "NAME PATH" of each 64-bit driver library the node's
# linker cache lists
gpu_driver_libs() {
	gl_cache=/etc/ld.so.cache
	if [ -n "${PBX_ROOT:-}" ] && [ -f "$PBX_ROOT/etc/ld.so.cache" ]; then gl_cache=$PBX_ROOT/etc/ld.so.cache; fi
	# "\tNAME (libc6,x86-64[, OS ABI: ...]) => PATH"
	# (ldconfig is in /sbin: not on the PATH of a task user's submission)
	PATH=$PATH:/usr/sbin:/sbin ldconfig -p -C "$gl_cache" 2>/dev/null | awk '
		$1 ~ /^lib(cuda|cudadebugger|nvidia-[a-z0-9-]+|nvcuvid|nvoptix)\.so(\.[0-9]+)*$/ &&
		/\((libc6,)?(x86-64|AArch64)/ && $(NF - 1) == "=>" && $NF ~ /^\/[^ ]*$/ &&
		!seen[$1]++ { print $1, $NF }'
}

# gpu_driver KEY: the node's driver in the unpacked image LOCAL/KEY, when
# it changed since the last time (or was never put there)
gpu_driver() {
	gd_img=$LOCAL/$1
	gd_libs=$(gpu_driver_libs)
	gd_stamp=
	if [ -n "$gd_libs" ]; then
		gd_stamp=$(printf '%s\n' "$gd_libs" | while read -r n p; do
			printf '%s %s %s\n' "$n" "$p" "$(stat -L -c '%s %Y' "$p" 2>/dev/null)"
		done)
	fi
	gd_had=$(cat "$gd_img/.pbx-gpu" 2>/dev/null) || gd_had=
	if [ "$gd_stamp" != "$gd_had" ]; then
		exec 8>"$LOCAL/.$1.lock" || die "cannot lock $LOCAL/.$1.lock"
		flock 8 || die "cannot lock $LOCAL/.$1.lock"
		gd_had=$(cat "$gd_img/.pbx-gpu" 2>/dev/null) || gd_had=
		[ "$gd_stamp" = "$gd_had" ] || (gpu_driver_put "$gd_img" "$gd_libs" "$gd_stamp") || exit 1
		exec 8>&-
	fi
	# said to every task, not only to the one that put the driver in
	[ ! -f "$gd_img/.pbx-gpu-note" ] || cat "$gd_img/.pbx-gpu-note" >&2
}

# gpu_driver_lacks IMG LIBS: the libraries the node's libcuda.so.1 (in
# LIBS, "NAME PATH" lines) links that the image IMG's own dynamic loader
# does not find there (glibc's libdl, libpthread, librt: a hand-made image
# may lack them), space-separated; nothing when it finds them all, or when
# the image has no such loader (not glibc: it cannot load the driver at all)
gpu_driver_lacks() {
	gl_cuda=$(printf '%s\n' "$2" | awk '$1 == "libcuda.so.1" { print $2; exit }')
	[ -n "$gl_cuda" ] || return 0
	# the loader the driver names: "/lib64/ld-linux-x86-64.so.2 (0x...)"
	gl_ld=$(ldd "$gl_cuda" 2>/dev/null | awk '$1 ~ /^\// && $2 ~ /^\(/ { print $1; exit }')
	[ -n "$gl_ld" ] || return 0
	# as ldd does it (ld.so --list stops at the first missing library)
	USER=${USER:-$(id -un)} ch-run --set-env=LD_TRACE_LOADED_OBJECTS=1 "$1" -- "$gl_ld" "$GPU_DIR/libcuda.so.1" 2>/dev/null |
		awk '$2 == "=>" && $3 == "not" { print $1 }' | tr '\n' ' ' | sed 's/ $//'
}

# gpu_driver_put IMG LIBS STAMP: LIBS ("NAME PATH" lines, may be empty)
# copied into IMG's GPU_DIR in place of what it held, the image's linker
# cache remade, STAMP recorded (the caller holds the image's lock)
gpu_driver_put() {
	# the paths checked for the image's links (made where missing) before
	# anything is removed there: rm would follow a link above the name
	image_dir "$1" "$GPU_DIR" "the node's GPU driver"
	image_dir "$1" /etc/ld.so.conf.d "the GPU driver's linker configuration"
	rm -rf "${1:?}$GPU_DIR" "$1/etc/ld.so.conf.d/000-pbx-gpu.conf" "$1/.pbx-gpu" "$1/.pbx-gpu-note"
	if [ -n "$2" ]; then
		mkdir "$1$GPU_DIR" || die "cannot make $GPU_DIR in the image $1"
		printf '%s\n' "$2" | while read -r n p; do
			cp -L "$p" "$1$GPU_DIR/$n" || die "cannot copy the node's GPU driver library $p into the image"
		done || exit 1
		printf '%s\n' "$GPU_DIR" >"$1/etc/ld.so.conf.d/000-pbx-gpu.conf" || die "cannot write the image's /etc/ld.so.conf.d"
		# glibc's ldconfig reads ld.so.conf.d through ld.so.conf's
		# include (every Debian image has it; a minimal one may not)
		if [ ! -e "$1/etc/ld.so.conf" ] && [ ! -L "$1/etc/ld.so.conf" ]; then
			echo 'include /etc/ld.so.conf.d/*.conf' >"$1/etc/ld.so.conf" || die "cannot write the image's /etc/ld.so.conf"
		fi
	fi
	# the image's own ldconfig, in the image (3: it has none)
	# shellcheck disable=SC2016 # the image's PATH
	USER=${USER:-$(id -un)} ch-run -w "$1" -- /bin/sh -c \
		'PATH=/sbin:/usr/sbin:$PATH; command -v ldconfig >/dev/null || exit 3; exec ldconfig' >/dev/null 2>&1
	case $?,$2 in
	0,* | 3,) ;;
	3,*)
		echo "pbx-env: the image has no ldconfig: the node's GPU driver is in $GPU_DIR there; its programs find it with LD_LIBRARY_PATH=$GPU_DIR" >"$1/.pbx-gpu-note" ||
			die "cannot write $1/.pbx-gpu-note"
		;;
	*) die "the image's ldconfig failed: its programs cannot find the node's GPU driver" ;;
	esac
	gp_lacks=$(gpu_driver_lacks "$1" "$2")
	if [ -n "$gp_lacks" ]; then
		echo "pbx-env: the image lacks $gp_lacks, which the node's GPU driver (libcuda.so.1) links: its CUDA programs cannot load the driver (CUDA says \"driver version is insufficient\"); use an image with all of glibc (any Debian or Ubuntu base)" >>"$1/.pbx-gpu-note" ||
			die "cannot write $1/.pbx-gpu-note"
	fi
	if [ -n "$3" ]; then printf '%s\n' "$3" >"$1/.pbx-gpu" || die "cannot write $1/.pbx-gpu"; fi
}

# unpack [image|python]: prints LOCAL/KEY, the environment (or image) E's
# status names, unpacked first if this node has none; default: the kind
# of the package's environment
unpack() {
	kind=${1:-python}
	if [ $# = 0 ] && is_image; then kind=image; fi
	status=$(cat "$E/status" 2>/dev/null) || status=
	case $status in
	READY\ *) key=${status#READY } ;;
	FAILED\ *) die "the environment failed to build: ${status#FAILED } (pbx log PKG:env has its build log)" ;;
	*) die "the environment was not built (its build job ended without a word: see $E/build.log)" ;;
	esac
	case $key in *[!0-9a-f]* | '') die "bad environment key '$key' in $E/status" ;; esac
	plain_path "$LOCAL" || die "PBX_ENV_DIR '${PBX_ENV_DIR:-}' has characters other than A-Za-z0-9/._-"
	if [ ! -f "$LOCAL/$key/.pbx-ready" ]; then
		mkdir -p "$LOCAL" || die "cannot create $LOCAL"
		chmod 700 "$LOCAL" || die "cannot make $LOCAL private"
		exec 9>"$LOCAL/.$key.lock" || die "cannot lock $LOCAL/.$key.lock"
		flock 9 || die "cannot lock $LOCAL/.$key.lock"
		if [ "$kind" = image ]; then (unpack_image_locked "$key") || exit 1; else (unpack_locked "$key") || exit 1; fi
		exec 9>&-
	fi
	if [ "$kind" = image ]; then
		gpu_driver "$key"
		mount_point "$LOCAL/$key" "$PBX_SHARED"
	fi
	printf '%s\n' "$LOCAL/$key"
}

# unpack_py: prints the node-local Python environment of the package's
# image (python: with container:), unpacked first if needed, with its
# mount point in the unpacked image
unpack_py() {
	if ! is_image || ! has_python; then die "the package has no Python environment in an image"; fi
	up_img=$(unpack image) || exit 1
	E=$E/py
	up_env=$(unpack python) || exit 1
	mount_point "$up_img" "$up_env"
	printf '%s\n' "$up_env"
}

# ------------------------------------------------------------- pull --

# skopeo_ SECONDS ARGS...: skopeo for at most SECONDS, with a node body's
# own registries.conf when it has one (a VM's is
# /etc/containers/registries.conf, skopeo's default)
skopeo_() {
	sk_limit=$1
	shift
	if [ -n "${PBX_BODY_ROOT:-}" ] && [ -f "$PBX_BODY_ROOT/etc/containers/registries.conf" ]; then
		set -- --registries-conf "$PBX_BODY_ROOT/etc/containers/registries.conf" "$@"
	fi
	timeout "$sk_limit" skopeo "$@"
}

# skopeo_error: skopeo's message (its last msg="..."), from TMP/err
skopeo_error() {
	msg=$(sed -n 's/.*msg="\(.*\)"$/\1/p' "$tmp/err" | tail -n 1 |
		sed -e 's/\\"/"/g' -e 's/^Error parsing image name "[^"]*": //')
	[ -n "$msg" ] || msg=$(tail -n 1 "$tmp/err")
	printf '%s' "$msg"
}

# own_runtime_dir: skopeo looks for credentials in XDG_RUNTIME_DIR first:
# a directory of the user that ran pbx's command (root's login session) is
# not ours
own_runtime_dir() {
	if [ -n "${XDG_RUNTIME_DIR:-}" ] && [ ! -O "$XDG_RUNTIME_DIR" ]; then unset XDG_RUNTIME_DIR; fi
}

# make_tmp: TMP, this run's own directory, removed on exit
make_tmp() {
	tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/pbx-pull.XXXXXX") || return 1
	trap 'chmod -R u+rwX "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
}

# auth_file: this user's registry credentials on the head, which `pbx
# cluster registry-login` writes (skopeo's auth.json, 0600, in a directory
# of the user's own, 0700, that pbx made as root): the head's own disk (a
# node body's own root), never the shared one, which the compute nodes
# mount and whose tasks run as this user too
auth_file() {
	printf '%s/var/lib/pbx-registry/%s/auth.json' "${PBX_ROOT:-}" "$(id -un)"
}

# registry_of NAME: the registry of a reference's NAME as skopeo's auth
# file names it: NAME's first component when it is a host (a '.' or a
# ':' in it, or localhost), else docker.io
registry_of() {
	case $1 in */*) ;; *)
		echo docker.io
		return
		;;
	esac
	case ${1%%/*} in *.* | *:* | localhost) echo "${1%%/*}" ;; *) echo docker.io ;; esac
}

# skopeo_failed WHAT: the pull's end when skopeo failed to WHAT: a
# registry that wants credentials (its 401: unauthorized, denied) says the
# command that gives them, skopeo's words in the log; else skopeo's message
skopeo_failed() {
	if grep -q -e unauthorized -e 'authentication required' -e 'requested access to the resource is denied' "$tmp/err"; then
		sed 's/^/pbx-env: skopeo: /' "$tmp/err"
		reg=$(registry_of "$name")
		[ -z "$authfile" ] ||
			failed "registry $reg refused the credentials pbx cluster registry-login gave it, for $name: run pbx cluster registry-login ${PBX_CLUSTER:-CLUSTER} $reg again"
		failed "registry $reg wants credentials: run pbx cluster registry-login ${PBX_CLUSTER:-CLUSTER} $reg"
	fi
	failed "$1: $(skopeo_error)"
}

# plain_ref REF: REF has only a reference's characters (environment.c
# checked it; the package is read again here)
plain_ref() {
	case $1 in docker://*) ;; *) return 1 ;; esac
	case ${1#docker://} in '' | *[!A-Za-z0-9/._:@-]*) return 1 ;; esac
}

# check_layers PINNED: every tar blob of TMP/oci (the layers; the
# manifest and the config are not tars) has no member above its top;
# umoci would keep such a member inside the root, pbx refuses the image
check_layers() {
	for b in "$tmp/oci/blobs/sha256"/*; do
		tar -tf "$b" >"$tmp/members" 2>/dev/null || continue
		bad=$(outside_member "$tmp/members") &&
			failed "the image $1 has a layer with a member outside its top, refused: '$bad'"
	done
	return 0
}

# convert PINNED KEY: pulls PINNED (a reference by digest) into an OCI
# layout, unpacks it as a root file system and packs that as
# ENVS/KEY.tar.gz, its checksum in ENVS/KEY.sha256 written first (the
# caller holds KEY's lock)
convert() {
	echo "pbx-env: pulling $1"
	skopeo_ 3600 copy -q "$1" "oci:$tmp/oci:pbx" </dev/null >"$tmp/err" 2>&1 ||
		skopeo_failed "cannot pull $1"
	check_layers "$1"
	umoci unpack --rootless --image "$tmp/oci:pbx" "$tmp/bundle" >"$tmp/err" 2>&1 ||
		failed "cannot unpack the image $1: $(tail -n 1 "$tmp/err")"
	part=$(mktemp "$ENVS/.$2.XXXXXX") || failed "cannot write in $ENVS"
	chmod 644 "$part"
	if ! { tar -C "$tmp/bundle/rootfs" -cf - . || : >"$tmp/tar.failed"; } | gzip -1 >"$part" ||
		[ -e "$tmp/tar.failed" ]; then
		rm -f "$part"
		failed "cannot pack the image $1 into $ENVS"
	fi
	tar -tzf "$part" >"$tmp/members" || { rm -f "$part"; failed "cannot read back the image $1"; }
	has_shell "$tmp/members" || { rm -f "$part"; failed "the image $1 has no bin/sh (the task's command runs with the image's /bin/sh)"; }
	sum=$(sha_of <"$part")
	if ! put "$ENVS/$2.sha256" "$sum" || ! mv -f "$part" "$ENVS/$2.tar.gz"; then
		rm -f "$part"
		failed "cannot write $ENVS/$2.tar.gz"
	fi
	echo "pbx-env: image $1: $(wc -l <"$tmp/members") members, $(wc -c <"$ENVS/$2.tar.gz") bytes packed"
}

# pull: the package's registry image, once per cluster: the tag resolved
# to a digest (unless the reference names one), pulled and converted
# unless SHARED/pbx/envs has that digest's archive; RUN/env/status says
# READY DIGEST or FAILED REASON, the log goes to RUN/env/build.log
pull() {
	mkdir -p "$E" "$ENVS" || die "cannot create $E or $ENVS"
	exec >>"$E/build.log" 2>&1
	started=$(date +%s)
	ref=$(head -n 1 "$REF_FILE")
	plain_ref "$ref" || failed "env/image-ref: not a docker:// reference"
	if ! command -v skopeo >/dev/null || ! command -v umoci >/dev/null; then
		failed "the head $(hostname) has no skopeo or no umoci (Debian: apt-get install skopeo umoci)"
	fi
	own_runtime_dir
	# registry-login's credentials, when it gave some (REGISTRY_AUTH_FILE:
	# skopeo's --authfile of every command)
	authfile=$(auth_file)
	if [ -f "$authfile" ]; then export REGISTRY_AUTH_FILE="$authfile"; else authfile=; fi
	make_tmp || failed "cannot make a temporary directory"
	plain_path "$tmp" || failed "TMPDIR '$TMPDIR' has characters other than A-Za-z0-9/._-"
	name=${ref%@*}
	name=${name#docker://}
	case ${name##*/} in *:*) name=${name%:*} ;; esac
	case $ref in
	*@sha256:*) digest=${ref##*@} ;;
	*)
		skopeo_ 300 inspect --raw "$ref" </dev/null >"$tmp/manifest" 2>"$tmp/err" ||
			skopeo_failed "cannot resolve $ref"
		digest=sha256:$(sha_of <"$tmp/manifest")
		;;
	esac
	key=${digest#sha256:}
	pinned=docker://$name@$digest
	echo "pbx-env: $ref is $pinned"
	# one puller of a digest at a time, cluster-wide: the second finds it
	exec 8>"$ENVS/.$key.lock" || failed "cannot open $ENVS/.$key.lock"
	flock 8 || failed "cannot lock $ENVS/.$key.lock"
	if [ -s "$ENVS/$key.tar.gz" ] && [ -s "$ENVS/$key.sha256" ]; then
		echo "pbx-env: image $pinned is pulled already"
	else
		convert "$pinned" "$key"
	fi
	exec 8>&-
	put "$E/key" "$key"
	put "$E/python" "$pinned"
	put "$E/status" "READY $key"
	echo "pbx-env: ready: image $pinned ($(($(date +%s) - started)) s)"
}

# ------------------------------------------------------ login, logout --

# need_skopeo: skopeo is here
need_skopeo() {
	command -v skopeo >/dev/null || die "the head $(hostname) has no skopeo (Debian: apt-get install skopeo)"
}

# login REGISTRY USER: skopeo login into auth_file, the password on stdin
# (never on a command line); prints the file
login() {
	need_skopeo
	own_runtime_dir
	make_tmp || die "cannot make a temporary directory"
	af=$(auth_file)
	skopeo_ 120 login --authfile "$af" --username "$2" --password-stdin "$1" >"$tmp/err" 2>&1 ||
		die "registry $1 refused the login as $2: $(skopeo_error)"
	chmod 600 "$af" || die "cannot make $af private"
	printf '%s\n' "$af"
}

# logout REGISTRY: its credentials out of auth_file, and the file with the
# last registry's; prints "gone FILE", or "none" when it had none
logout() {
	af=$(auth_file)
	if [ ! -f "$af" ]; then
		echo none
		return 0
	fi
	need_skopeo
	own_runtime_dir
	make_tmp || die "cannot make a temporary directory"
	if ! skopeo_ 60 logout --authfile "$af" "$1" >"$tmp/err" 2>&1; then
		if grep -q 'not logged in' "$tmp/err"; then
			echo none
			return 0
		fi
		die "cannot log out of $1: $(skopeo_error)"
	fi
	if python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])) not in ({}, {"auths": {}}))' "$af"; then
		rm -f "$af"
	fi
	echo "gone $af"
}

case ${1:-} in
build) build ;;
unpack) unpack ;;
unpack-py) unpack_py ;;
pull) pull ;;
login) login "${2:-}" "${3:-}" ;;
logout) logout "${2:-}" ;;
*) die "usage: pbx-env.sh build|unpack|unpack-py|pull|login REGISTRY USER|logout REGISTRY" ;;
esac
