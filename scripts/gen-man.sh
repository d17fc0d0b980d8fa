#!/bin/sh
# gen-man.sh - regenerates man/*.1 from the pbx binary's own help strings
# (`pbx help --man [VERB]`), and the section-5 pages (pbx-experiment.5,
# pbx-config.5) from their documents (scripts/md2man.py --all).
# tests/cli/t0001-cli.sh fails when a committed page differs.
# Usage: scripts/gen-man.sh [PBX]
set -eu
cd "$(dirname "$0")/.."
PBX=${1:-build/src/cli/pbx}
mkdir -p man
"$PBX" help --man >man/pbx.1
for verb in $("$PBX" help | awk '/^verbs:/ {on = 1; next} /^$/ {on = 0} on && $1 != "help" && $1 != "version" {print $1}'); do
	"$PBX" help --man "$verb" >"man/pbx-$verb.1"
done
python3 scripts/md2man.py --all man
ls man
