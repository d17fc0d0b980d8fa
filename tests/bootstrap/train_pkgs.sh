#!/bin/sh
# train_pkgs.sh - the bootstrap's TRAIN_PKGS (what systemd mode apt-gets so
# that the staged pbx-train runs on a VM) covers every shared library the
# pbx-train under test needs (ELF NEEDED): each library's Debian package is
# in TRAIN_PKGS, in their dependency closure, or Essential/required.  A
# library added to pbx-train without its package made every train: task
# fail on VMs with "pbx-train does not run on this node".  With a third
# argument, another list of the bootstrap against another binary: PBX_PKGS
# against pbx itself (a head that deletes its own cluster runs it).
#   train_pkgs.sh SOURCE_DIR PBX_TRAIN [TRAIN_PKGS]
#   train_pkgs.sh SOURCE_DIR PBX PBX_PKGS
set -eu
SRC=${1:?usage: train_pkgs.sh SOURCE_DIR BINARY [LIST]}
BIN=${2:?usage: train_pkgs.sh SOURCE_DIR BINARY [LIST]}
LIST=${3:-TRAIN_PKGS}
for t in readelf ldd dpkg-query apt-cache; do
	command -v "$t" >/dev/null 2>&1 || { echo "SKIP: $t missing"; exit 77; }
done
case $LIST in TRAIN_PKGS | PBX_PKGS) ;; *) echo "FAIL: LIST is TRAIN_PKGS or PBX_PKGS" >&2; exit 1 ;; esac
line=$(grep -E "^$LIST=\"[a-z0-9. +-]*\"\$" "$SRC/templates/bootstrap.sh") ||
	{ echo "FAIL: no $LIST line in templates/bootstrap.sh" >&2; exit 1; }
TRAIN_PKGS=${line#*=}
TRAIN_PKGS=${TRAIN_PKGS#\"}
TRAIN_PKGS=${TRAIN_PKGS%\"}
# shellcheck disable=SC2086 # the list's words
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
	--no-replaces --no-enhances $TRAIN_PKGS 2>/dev/null | sed -n 's/^\([a-z0-9][^ <>]*\)$/\1/p' | sed 's/:amd64$//' | sort -u)
# owner PATH: the package that ships PATH, trying the name as ldd gives it,
# its target, and both with /usr added or taken off (merged /usr)
owner() {
	real=$(readlink -f "$1")
	for p in "$1" "$real" "${1#/usr}" "${real#/usr}" "/usr$1" "/usr$real"; do
		o=$(dpkg-query -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1)
		[ -z "$o" ] || { echo "$o"; return; }
	done
}
fail=0
for lib in $(readelf -d "$BIN" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
	case $lib in lib[al]san.so.* | libubsan.so.* | libtsan.so.*) continue ;; esac   # a sanitizer build's runtime: never staged to a VM
	path=$(ldd "$BIN" | awk -v l="$lib" '$1 == l { print $3 }')
	[ -n "$path" ] || { echo "FAIL: $lib: not found by ldd" >&2; fail=1; continue; }
	pkg=$(owner "$path")
	[ -n "$pkg" ] || { echo "FAIL: $lib ($path) belongs to no package" >&2; fail=1; continue; }
	prio=$(dpkg-query -W -f '${Essential} ${Priority}' "$pkg" 2>/dev/null || true)
	case " $TRAIN_PKGS " in *" $pkg "*) continue ;; esac
	case $prio in yes* | *required) continue ;; esac
	echo "$closure" | grep -qx "$pkg" && continue
	echo "FAIL: $(basename "$BIN") needs $lib from $pkg, which $LIST (templates/bootstrap.sh) does not bring" >&2
	fail=1
done
[ "$fail" = 0 ] && echo "ok: $LIST covers $(basename "$BIN")'s libraries"
exit "$fail"
