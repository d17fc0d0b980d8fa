#!/bin/sh
# t0012-parrun-dry-run.sh - `pbx parrun --dry-run`:
# what a submission would ship and run, with no cluster and nothing sent
# or recorded: the files (count, bytes, the largest), the first tasks'
# commands with hostile values quoted, the sbatch options with overrides,
# the environment; --json; a Python virtual environment in the directory
# refused with the .pbxignore line that leaves it out.
. "$(dirname "$0")/lib.sh"
trap 'rm -rf "$TEST_TMP"' EXIT

exp=$TEST_TMP/ridge
mkdir -p "$exp"
cat >"$exp/experiment.yaml" <<'EOF'
name: ridge
command: python3 fit.py --alpha {alpha} --seed {repeat} > out.txt
sweep:
  grid: { alpha: [0.01, 0.1, "1; touch /tmp/pwned"] }
  repeats: 3
resources: { time: "00:05:00", mem: 1G }
environment: { python: requirements.txt }
EOF
echo "print(1)" >"$exp/fit.py"
echo numpy >"$exp/requirements.txt"
head -c 50000 /dev/zero >"$exp/data.bin"

run_pbx parrun --dry-run "$exp/experiment.yaml" local --time=00:10:00
ok $rc "a dry run with no cluster running exits 0: $errout"
is "$out" "dry run: nothing is sent to cluster local
experiment ridge: 9 tasks
package $(echo "$out" | sed -n 's/^package \([0-9a-f]*\):.*/\1/p'): 4 files, 49.1 KiB; the largest: data.bin (48.8 KiB), experiment.yaml (235 B), fit.py (9 B)
  (leave files out with .pbxignore or name them with files:, pbx-experiment(5))
task 0: python3 fit.py --alpha '0.01' --seed '0' > out.txt
task 1: python3 fit.py --alpha '0.01' --seed '1' > out.txt
task 2: python3 fit.py --alpha '0.01' --seed '2' > out.txt
... and 6 more tasks
sbatch: --mem=1G --time=00:10:00, --array sized from the cluster's MaxArraySize at submission
environment: python requirements.txt (built once on the cluster, in a SLURM job before the array)" \
	"it names the files, the first commands, the options (the override applied) and the environment"
is "$errout" "pbx: warning: cluster local is not running: 'pbx cluster start local' before the real parrun" \
	"and says the cluster is not running"
is "$(sqlite3 "$PBX_HOME/pbx.db" 'SELECT count(*) FROM packages' 2>/dev/null || echo 0)" 0 "nothing is recorded"
is "$(ls "$PBX_HOME/clusters" 2>/dev/null | wc -l)" 0 "no cluster was started"

run_pbx parrun -n -j "$exp/experiment.yaml" nosuch
ok $rc "--json: $errout"
is "$(echo "$out" | json_get 'd["dry_run"], d["tasks"], d["package"]["files"], d["package"]["bytes"], [f["path"] for f in d["package"]["largest"]][0], d["sbatch"]')" \
	"True 9 4 50250 data.bin ['--time=00:05:00', '--mem=1G']" "JSON: tasks, files, bytes, the largest, sbatch"
is "$(echo "$out" | json_get 'd["commands"][0]')" "python3 fit.py --alpha '0.01' --seed '0' > out.txt" "JSON: the first command"
echo "$errout" | grep -q "nosuch: no cluster and no template of that name"
ok $? "an unknown cluster name is said: $errout"

# the hostile value is one quoted argument, not a command
run_pbx parrun -n -j "$exp/experiment.yaml" local
is "$(echo "$out" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["commands"]))')" 3 "three commands shown"
sed -i 's/repeats: 3/repeats: 1/' "$exp/experiment.yaml"
run_pbx parrun -n -j "$exp/experiment.yaml" local
is "$(echo "$out" | json_get 'd["commands"][2]')" "python3 fit.py --alpha '1; touch /tmp/pwned' --seed '0' > out.txt" \
	"a value with shell metacharacters stays one quoted argument"

# a virtual environment in the directory: refused with the line that leaves it out
mkdir -p "$exp/.venv/bin"
: >"$exp/.venv/pyvenv.cfg"
ln -s /usr/bin/python3 "$exp/.venv/bin/python3"
run_pbx parrun -n "$exp/experiment.yaml" local
is "$rc" 2 "a .venv with links out of the directory: exit 2"
echo "$errout" | grep -qF "$exp/.venv/bin/python3: a symlink to an absolute path (/usr/bin/python3) cannot be shipped; leave it out with the line '.venv/' in $exp/.pbxignore (a Python virtual environment: the cluster builds its own from environment: python:, pbx-experiment(5))"
ok $? "the error says how to leave it out: $errout"
echo ".venv/" >"$exp/.pbxignore"
run_pbx parrun -n -j "$exp/experiment.yaml" local
is "$rc:$(echo "$out" | json_get 'd["package"]["files"]')" "0:5" "with the line in .pbxignore the dry run goes through: $errout"
done_testing
