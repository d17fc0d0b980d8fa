#!/bin/sh
# Static checks of the shell the nodes run, templates/bootstrap.sh, the
# task wrapper templates/pbx-task.sh, the preemption watcher
# templates/preempt.sh, power saving's templates/power-ready.sh and the
# Python environments' templates/pbx-env.sh and their collector
# templates/pbx-env-gc.sh: `sh -n` (and dash/posh when present),
# then ShellCheck in POSIX sh mode (exit 77, skip, without it).
set -eu
SRC=${1:?usage: lint.sh SOURCE_DIR syntax|shellcheck}
BOOT=$SRC/templates/bootstrap.sh
TASK=$SRC/templates/pbx-task.sh
PREEMPT=$SRC/templates/preempt.sh
READY=$SRC/templates/power-ready.sh
ENVB=$SRC/templates/pbx-env.sh
ENVGC=$SRC/templates/pbx-env-gc.sh
case ${2:-syntax} in
syntax)
	for f in "$BOOT" "$TASK" "$PREEMPT" "$READY" "$ENVB" "$ENVGC"; do
		sh -n "$f"
		for s in dash posh; do
			! command -v "$s" >/dev/null 2>&1 || "$s" -n "$f"
		done
	done
	grep -q '^set -eu$' "$BOOT" || { echo "FAIL: no 'set -eu'"; exit 1; }
	;;
shellcheck)
	command -v shellcheck >/dev/null 2>&1 || { echo "SKIP: shellcheck not installed"; exit 77; }
	shellcheck -s sh "$BOOT" "$TASK" "$PREEMPT" "$READY" "$ENVB" "$ENVGC"
	;;
esac
echo PASS
