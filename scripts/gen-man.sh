#!/bin/sh
# gen-man.sh - regenerates man/*.1 from the pbx binary's own help strings
# (`pbx help --man [VERB]`).  tests/cli/t0001-cli.sh fails when the
# committed pages differ from what the binary prints.
# Usage: scripts/gen-man.sh [PBX]
set -eu
cd "$(dirname "$0")/.."
PBX=${1:-build/src/cli/pbx}
mkdir -p man
"$PBX" help --man >man/pbx.1
for verb in $("$PBX" help | awk '/^verbs:/ {on = 1; next} /^$/ {on = 0} on && $1 != "help" && $1 != "version" {print $1}'); do
	"$PBX" help --man "$verb" >"man/pbx-$verb.1"
done
python3 scripts/md2man.py src/experiment/FORMAT.md pbx-experiment 5 \
	"the experiment file format of pbx parrun" >man/pbx-experiment.5
ls man
