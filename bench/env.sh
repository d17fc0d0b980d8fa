#!/bin/sh
# env.sh - benchmark: a Python environment ready on N = 1, 2, 4 nodes,
# pbx's way (templates/pbx-env.sh: one build, then each node unpacks the
# archive) against each node running `python3 -m venv` and
# `pip install -r requirements.txt` itself (SkyPilot's and
# ParallelCluster's way), in the same run; then a second package with the
# same requirements (pbx: no resolve, no install), and numpy's import time
# from the unpacked environment against a venv built in place.  pbx's
# build runs twice a round: with pip (installer: pip) and with uv (the
# default when the wheels hold uv's: its one install on a fresh cluster
# counted in).  Nodes are
# directories on this machine, their work run at once (the local cluster's
# node bodies share its disk and cores the same way; on a cloud every node
# has its own, so the per-node pip time stays flat there while here it
# grows with N).  Wheels come from build/test-wheels (scripts/venv.sh) and
# a requirements file naming them: no index, so the figures measure
# installing, not downloading.  pbx's builds run as on a cluster pbx built
# (PBX_ROOT set, as its env.sh does: zstd packs when this machine has it;
# BENCH_PACK=gz leaves it unset: gzip, as on a cloud ssh cluster).
# BENCH_WHEELS (a directory of wheels,
# uv's among them) and BENCH_REQS (requirement lines, space-separated)
# measure another set, e.g. the scientific one:
#   pip download -d DIR numpy scipy scikit-learn pandas; cp build/test-wheels/uv-*.whl DIR
#   BENCH_WHEELS=DIR BENCH_REQS='numpy scipy scikit-learn pandas' sh bench/env.sh
# Usage: bench/env.sh [ROUNDS]
set -eu
ROUNDS=${1:-3}
SRC=$(cd "$(dirname "$0")/.." && pwd)
WHEELS=${BENCH_WHEELS:-$SRC/build/test-wheels}
ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "no wheels in $WHEELS: source scripts/venv.sh first" >&2; exit 1; }
PY=/usr/bin/python3
W=$(mktemp -d /tmp/pbx-bench-env.XXXXXX)
trap 'rm -rf "$W"' EXIT

# the package as pbx ships it: env/requirements.txt, env/wheels, pbx-env.sh
# (numpy; uv's wheel is among the wheels, not a requirement); pkgpip the
# same with installer: pip
mkdir -p "$W/pkg/env"
if [ -n "${BENCH_REQS:-}" ]; then
	printf '%s\n' $BENCH_REQS >"$W/pkg/env/requirements.txt"
else
	sed 's/[[:space:]]*#.*//; /^$/d; /^uv==/d' "$SRC/scripts/test-wheels.txt" >"$W/pkg/env/requirements.txt"
fi
ln -s "$WHEELS" "$W/pkg/env/wheels"
cp "$SRC/templates/pbx-env.sh" "$W/pkg/pbx-env.sh"
cp -a "$W/pkg" "$W/pkgpip"
echo pip >"$W/pkgpip/env/installer"

# a cluster pbx built, unless BENCH_PACK=gz (pbx-env.sh's pack_format)
if [ "${BENCH_PACK:-}" = gz ]; then as_built=; else as_built=PBX_ROOT=; fi
now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{ printf "%.2f\n", $2 - $1 }'; }

# pbx_ready N ROUND PKG: a fresh cluster (shared disk, run directory); the
# build of package PKG (pkg: uv, pkgpip: pip), then N nodes unpacking at
# once; prints build and total seconds
pbx_ready() {
	c=$W/$3-c$2-$1
	mkdir -p "$c/shared" "$c/run"
	t0=$(now)
	env $as_built PBX_PKG_DIR="$W/$3" PBX_RUN_DIR="$c/run" PBX_SHARED="$c/shared" TMPDIR="$c" \
		sh "$W/$3/pbx-env.sh" build >"$c/build.log" 2>&1 || { cat "$c/build.log" >&2; exit 1; }
	t1=$(now)
	i=1
	while [ "$i" -le "$1" ]; do
		env PBX_PKG_DIR="$W/$3" PBX_RUN_DIR="$c/run" PBX_SHARED="$c/shared" \
			PBX_ENV_DIR="$c/node$i" sh "$W/$3/pbx-env.sh" unpack >"$c/unpack$i.log" 2>&1 &
		i=$((i + 1))
	done
	wait
	t2=$(now)
	echo "$(secs "$t0" "$t1") $(secs "$t0" "$t2")" | tr '\n' ' '
	echo
}

# pip_ready N ROUND: N nodes each making a venv and pip-installing the
# requirements at once; prints the seconds until the last is ready
pip_ready() {
	c=$W/p$2-$1
	mkdir -p "$c"
	t0=$(now)
	i=1
	while [ "$i" -le "$1" ]; do
		(
			"$PY" -m venv "$c/node$i" &&
				"$c/node$i/bin/pip" install -q --disable-pip-version-check --no-index \
					--find-links "$WHEELS" -r "$W/pkg/env/requirements.txt"
		) >"$c/node$i.log" 2>&1 &
		i=$((i + 1))
	done
	wait
	t1=$(now)
	secs "$t0" "$t1"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "requirements: $(tr '\n' ' ' <"$W/pkg/env/requirements.txt")(wheels, no index); $ROUNDS rounds; $(nproc) cores"
echo "seconds until the last node is ready (build only in brackets), medians"
printf '%-6s %-18s %-22s %-22s %s\n' nodes "pip on each node" "pbx, installer pip" "pbx, installer uv" "uv/pip-on-each"
# all ROUNDS values, sorted, after the median
spread() { echo "$(median <"$1") ($(sort -n "$1" | tr '\n' ' ' | sed 's/ $//'))"; }
for n in 1 2 4; do
	: >"$W/pip.$n"
	for k in pkgpip pkg; do : >"$W/$k.$n" && : >"$W/$k.build.$n"; done
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		pip_ready "$n" "$r" >>"$W/pip.$n"
		for k in pkgpip pkg; do
			t=$(pbx_ready "$n" "$r" "$k")
			echo "${t%% *}" >>"$W/$k.build.$n"
			echo "$t" | cut -d' ' -f2 >>"$W/$k.$n"
		done
		r=$((r + 1))
	done
	p=$(median <"$W/pip.$n")
	u=$(median <"$W/pkg.$n")
	printf '%-6s %-18s %-22s %-22s %s\n' "$n" "$(spread "$W/pip.$n")" \
		"$(median <"$W/pkgpip.$n") [$(median <"$W/pkgpip.build.$n")]" \
		"$u [$(median <"$W/pkg.build.$n")]" "$(echo "$u $p" | awk '{ printf "%.2f", $1 / $2 }')"
done

# a second package with the same requirements, on a cluster that built
# them: its build job's work (no resolve, no venv, no install)
c=$W/pkg-c1-1
: >"$W/second"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	rm -rf "$c/run2"
	mkdir -p "$c/run2"
	t0=$(now)
	env PBX_PKG_DIR="$W/pkg" PBX_RUN_DIR="$c/run2" PBX_SHARED="$c/shared" TMPDIR="$c" \
		sh "$W/pkg/pbx-env.sh" build >/dev/null 2>&1
	t1=$(now)
	secs "$t0" "$t1" >>"$W/second"
	r=$((r + 1))
done
echo "second package, same requirements: build job $(median <"$W/second") s (median of $ROUNDS: $(sort -n "$W/second" | tr '\n' ' '))"

# import numpy: from a node's unpacked environment, and from a venv
# built in place (pip's way), 10 times each
envdir=$(env PBX_PKG_DIR="$W/pkg" PBX_RUN_DIR="$c/run" PBX_SHARED="$c/shared" \
	PBX_ENV_DIR="$c/node1" sh "$W/pkg/pbx-env.sh" unpack)
imp() {
	: >"$W/imp"
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		t0=$(now)
		"$1/bin/python" -c 'import numpy' || exit 1
		t1=$(now)
		secs "$t0" "$t1" >>"$W/imp"
	done
	median <"$W/imp"
}
a=$(imp "$envdir")
b=$(imp "$W/p1-1/node1")
echo "import numpy: unpacked environment $a s, venv built in place $b s (median of 10)"
