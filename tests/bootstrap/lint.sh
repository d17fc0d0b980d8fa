#!/bin/sh
# Static checks of the shell the nodes run: the bootstrap's driver
# templates/bootstrap.sh and its parts templates/bootstrap/*.sh, the task
# wrapper templates/pbx-task.sh, the preemption watcher
# templates/preempt.sh, power saving's templates/power-ready.sh and the
# Python environments' templates/pbx-env.sh and their collector
# templates/pbx-env-gc.sh: `sh -n` (and dash/posh when present), every
# stage file the driver runs exists and every one there is run; then
# ShellCheck in POSIX sh mode (exit 77, skip, without it), of each file and
# of the bootstrap as the one program it is (its parts in the driver's
# order, so a variable one stage sets and a later one reads is checked).
set -eu
SRC=${1:?usage: lint.sh SOURCE_DIR syntax|shellcheck}
BOOT=$SRC/templates/bootstrap.sh
PARTS=$SRC/templates/bootstrap
TASK=$SRC/templates/pbx-task.sh
PREEMPT=$SRC/templates/preempt.sh
READY=$SRC/templates/power-ready.sh
ENVB=$SRC/templates/pbx-env.sh
ENVGC=$SRC/templates/pbx-env-gc.sh

# The stages the driver runs, in its order (its `for part in ...` list).
# (the list spans lines ending in a backslash, up to "; do")
STAGES=$(sed -n '/^for part in /,/; do$/p' "$BOOT" | sed -e 's/^for part in //' -e 's/; do$//' -e 's/\\$//' | tr -s ' \t\n' ' ')
[ -n "$STAGES" ] || { echo "FAIL: no 'for part in' list of stages in $BOOT"; exit 1; }

case ${2:-syntax} in
syntax)
	for f in "$BOOT" "$PARTS"/*.sh "$TASK" "$PREEMPT" "$READY" "$ENVB" "$ENVGC"; do
		sh -n "$f"
		for s in dash posh; do
			! command -v "$s" >/dev/null 2>&1 || "$s" -n "$f"
		done
	done
	grep -q '^set -eu$' "$BOOT" || { echo "FAIL: no 'set -eu'"; exit 1; }
	for s in $STAGES; do
		[ -f "$PARTS/$s.sh" ] || { echo "FAIL: the driver runs $s, and there is no $PARTS/$s.sh"; exit 1; }
	done
	for f in "$PARTS"/[0-9]*.sh; do
		s=${f##*/}
		case " $STAGES " in
		*" ${s%.sh} "*) ;;
		*) echo "FAIL: $f is no stage the driver runs (its list: $STAGES)"; exit 1 ;;
		esac
	done
	;;
shellcheck)
	command -v shellcheck >/dev/null 2>&1 || { echo "SKIP: shellcheck not installed"; exit 77; }
	shellcheck -s sh "$TASK" "$PREEMPT" "$READY" "$ENVB" "$ENVGC"
	# each file of the bootstrap alone: a stage reads what earlier ones
	# set (SC2154) and sets what later ones read (SC2034), which the whole
	# checks below
	shellcheck -s sh -x -P "$SRC" -e SC2034 "$BOOT"
	shellcheck -s sh -e SC2034,SC2154 "$PARTS"/*.sh
	T=$(mktemp -d /tmp/pbx-bt-lint.XXXXXX)
	trap 'rm -rf "$T"' EXIT
	{
		cat "$BOOT" "$PARTS/lib.sh" "$PARTS/actions.sh"
		for s in $STAGES; do cat "$PARTS/$s.sh"; done
	} >"$T/bootstrap-whole.sh"
	shellcheck -s sh -e SC1091 "$T/bootstrap-whole.sh" ||
		{ echo "FAIL: the bootstrap as one program (driver, lib.sh, actions.sh, the stages in order)"; exit 1; }
	;;
esac
echo PASS
