#!/bin/sh
# t0258-random-labels.sh - the study of templates/experiments/random-labels
# (Zhang et al.'s randomization test on Fashion-MNIST) at a reduced size
# (1,000 training images, 60 epochs) through the whole path: parrun on a
# real local cluster, pbx-train on the nodes, harvest, report (its HTML page
# also as headless Chromium draws it).  The report
# must show train accuracy >= 0.9 at every corruption level and test
# accuracy falling monotonically to within 0.03 of chance (0.10) at
# corruption 1.0; the HTML page plots final accuracy against the
# corruption and a learning curve per task.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

DATA=/usr/share/datasets/fashion-mnist
if [ ! -r "$DATA/train-images-idx3-ubyte.gz" ]; then
	echo "1..0 # SKIP $DATA missing (apt-get install dataset-fashion-mnist)"
	rm -rf "$TEST_TMP"
	exit 0
fi
local_cluster rl slot "{ name: node, count: 2, gpus: 0, cpus: 2 }"
run_pbx -q cluster start rl
ok $rc "cluster starts: $errout"

# The template, reduced: 1,000 images, 60 epochs, a test evaluation every 20.
mkdir -p "$TEST_TMP/rl"
sed -e 's/^  subset: .*/  subset: 1000/' -e 's/^  epochs: .*/  epochs: 60/' \
	-e 's/^  eval_every: .*/  eval_every: 20/' \
	"$PBX_SOURCE_DIR/templates/experiments/random-labels/experiment.yaml" >"$TEST_TMP/rl/experiment.yaml"
grep -q '^  subset: 1000$' "$TEST_TMP/rl/experiment.yaml" && grep -q '^  epochs: 60$' "$TEST_TMP/rl/experiment.yaml"
ok $? "the template reduced"
run_pbx parrun --json "$TEST_TMP/rl/experiment.yaml" rl
ok $rc "parrun random-labels: $errout"
is "$(echo "$out" | json_get 'd["tasks"]')" "6" "6 corruption levels"
wait_final random-labels 300
is "$(json_get '[t["state"] for t in d["tasks"]]' <"$TEST_TMP/state.json")" "$(python3 -c 'print(["COMPLETED"] * 6)')" \
	"all 6 tasks complete"
run_pbx -q harvest random-labels
ok $rc "harvest: $errout"

run_pbx report random-labels -f json -s corruption_prob
echo "$out" >"$TEST_TMP/report.json"
python3 - "$TEST_TMP/report.json" >"$TEST_TMP/check.out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = sorted(d["rows"], key=lambda r: float(r["corruption_prob"]))
p = [float(r["corruption_prob"]) for r in rows]
tr = [r["train_acc.final"] for r in rows]
te = [r["test_acc.final"] for r in rows]
print("corruption", " ".join("%g" % x for x in p))
print("train", " ".join("%.3f" % x for x in tr))
print("test", " ".join("%.3f" % x for x in te))
print("train_ok", all(x >= 0.9 for x in tr))
print("test_falls", all(a > b for a, b in zip(te, te[1:])))
print("chance_at_1", abs(te[-1] - 0.10) <= 0.03)
PY
echo "# $(grep -E '^(corruption|train|test) ' "$TEST_TMP/check.out" | tr '\n' ';')"
is "$(grep -c '^corruption 0 0.2 0.4 0.6 0.8 1$' "$TEST_TMP/check.out")" "1" "the report has the 6 levels"
is "$(grep '^train_ok' "$TEST_TMP/check.out")" "train_ok True" "train accuracy >= 0.9 at every corruption level"
is "$(grep '^test_falls' "$TEST_TMP/check.out")" "test_falls True" "test accuracy falls monotonically"
is "$(grep '^chance_at_1' "$TEST_TMP/check.out")" "chance_at_1 True" "test accuracy at corruption 1.0 is within 0.03 of 0.10"

run_pbx report random-labels -f html -o "$TEST_TMP/rl.html" -m train_acc -m test_acc
ok $rc "report -f html: $errout"
grep -q 'final test_acc by corruption_prob' "$TEST_TMP/rl.html" && grep -q 'final train_acc by corruption_prob' "$TEST_TMP/rl.html"
ok $? "the page plots final train and test accuracy against corruption_prob"
is "$(grep -o 'class="curve"[^>]*data-task="5"' "$TEST_TMP/rl.html" | wc -l | tr -d ' ')" \
	"$(grep -o 'class="curve"[^>]*data-task="0"' "$TEST_TMP/rl.html" | wc -l | tr -d ' ')" \
	"learning curves for the first and last task alike"
# the page as a browser draws it (headless Chromium's DOM and a screenshot):
# corruption_prob's 6 levels evenly spaced in order, an error bar at each in
# both final-value charts, no y axis below 0, the best box for train_acc
chrome() {
	timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$TEST_TMP/chrome" --window-size=1400,900 "$@" \
		"file://$TEST_TMP/rl.html" 2>>"$TEST_TMP/chromium.log"
}
chrome --dump-dom >"$TEST_TMP/rl-dom.html"
ok $? "headless Chromium loads the page"
chrome --screenshot="$TEST_TMP/rl.png" >/dev/null
is "$(od -An -tx1 -N8 "$TEST_TMP/rl.png" 2>/dev/null | tr -d ' \n')" "89504e470d0a1a0a" "and draws it (a PNG)"
python3 - "$TEST_TMP/rl-dom.html" >"$TEST_TMP/dom.out" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
# one repeat a level: a point (circle) where repeats would draw a bar
bars = re.findall(r'class="errorbar" data-x="([^"]+)"[^>]*><title>corruption_prob =[^<]*</title><(?:line x1|circle cx)="([0-9.]+)"', s)
xs = {}
for v, x in bars:
    xs.setdefault(v, float(x))
vals = sorted(xs, key=float)
gaps = [xs[b] - xs[a] for a, b in zip(vals, vals[1:])]
print("levels", " ".join(vals))
print("bars", len(bars))
print("even", len(gaps) == 5 and max(gaps) - min(gaps) < 0.5)
neg = sum(1 for c in re.findall(r'<svg class="param-chart".*?</svg>', s, re.S)
          for t in re.findall(r'class="ticklabel"[^>]*>(-[0-9.]+)<', c))
print("negative", neg)
print("best", len(re.findall(r'<p class="box" data-metric="train_acc"', s)))
PY
is "$(grep '^levels' "$TEST_TMP/dom.out")" "levels 0 0.2 0.4 0.6 0.8 1.0" "an error bar at each of the 6 levels"
is "$(grep -e '^bars' -e '^even' -e '^negative' -e '^best' "$TEST_TMP/dom.out" | tr '\n' ' ')" \
	"bars 12 even True negative 0 best 1 " \
	"in both charts, evenly spaced in order, no y axis below 0, the best configuration's box"
done_testing
