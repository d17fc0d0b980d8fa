#!/bin/sh
# html.sh - the HTML report of the results fixture (tests/results/fixture.c:
# 12 tasks, metrics acc and loss), rendered by `pbx report` and loaded in
# headless Chromium: the dumped DOM must hold one polyline.curve per task
# and metric, an error bar per x value per chart, the best configuration's
# box before the charts and its rows marked, one line per value of the
# other parameter in each final-value chart (the interaction), the axes
# (categories for a few values, --linear-x, --log-x, never past the data's
# sign), and no external resource;
# the screenshot must be a real PNG.  Fails (never skips) without Chromium.
# Environment: PBX (the pbx binary), TEST_RESULTS (tests/results' program).
set -u
# shellcheck source=tests/cli/harness.sh
. "$(dirname "$0")/../cli/harness.sh"
finish() {
	if [ "$tap_failed" -ne 0 ]; then echo "# files kept in $T"; else rm -rf "$T"; fi
	test_done
}

if ! command -v chromium >/dev/null 2>&1; then
	echo "not ok 1 - chromium is not installed: run 'sh scripts/install-deps.sh' (Debian package chromium)"
	exit 1
fi
T=$(mktemp -d /tmp/pbx-results-html-XXXXXX)
"$TEST_RESULTS" --make-store "$T" >"$T/fixture.log"
ok $? "fixture store built"
PBX_HOME="$T" "$PBX" -q report -o "$T/report.html"
ok $? "pbx report -o report.html"

chrome() {
	timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$(mktemp -d "$T/profile-XXXXXX")" --window-size=1400,900 "$@" \
		"file://$T/report.html" 2>>"$T/chromium.log"
}
chrome --dump-dom >"$T/dom.html"
ok $? "chromium --dump-dom"
chrome --screenshot="$T/shot.png" >/dev/null
ok $? "chromium --screenshot"

count() { grep -o "$1" "$T/dom.html" | wc -l | tr -d ' '; }
charts=$(count 'class="learning-curves"')
ok "$([ "$charts" -eq 2 ]; echo $?)" "two learning-curve charts (acc, loss): $charts"
curves=$(count '<polyline class="curve"')
ok "$([ "$curves" -eq 24 ]; echo $?)" "12 curves in each of the 2 charts: $curves"
missing=
for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
	[ "$(count "class=\"curve\" data-task=\"$i\"")" -eq "$charts" ] || missing="$missing $i"
done
ok "$([ -z "$missing" ]; echo $?)" "every task has a curve in every chart${missing:+ (missing:$missing)}"
for x in 0.1 0.03 0.01 16 32; do
	bars=$(count "class=\"errorbar\" data-x=\"$x\"")
	ok "$([ "$bars" -eq "$charts" ]; echo $?)" "error bar at x = $x in each final-value chart: $bars"
done
# the best configuration at the top (acc, the first metric: the highest
# mean over repeats is lr 0.01, width 16: 0.88 and 0.89), its rows marked
best=$(grep -o '<p class="box" data-metric="acc" data-mean="0.88[0-9]*" data-std="0.0070[0-9]*" data-n="2">' "$T/dom.html" | wc -l)
ok "$([ "$best" -eq 1 ]; echo $?)" "the best configuration's box: acc 0.885 over 2 repeats"
grep -q '<code>lr = 0.01</code>, <code>width = 16</code></p>' "$T/dom.html"
ok $? "it names its parameters"
rows=$(count '<tr class="best">')
ok "$([ "$rows" -eq 2 ]; echo $?)" "its two tasks' rows are highlighted in the table: $rows"
# the table's header in two rows: each metric once over its statistics
heads=$(count '<th colspan="2" class="metric">')
stats=$(grep -o '<tr class="stats"><th class="num">final</th><th class="num">best</th><th class="num">final</th><th class="num">best</th></tr>' "$T/dom.html" | wc -l)
ok "$([ "$heads" -eq 2 ] && [ "$stats" -eq 1 ]; echo $?)" "each metric's name once over its final and best columns: $heads $stats"
before=$(grep -n 'id="best"' "$T/dom.html" | head -1 | cut -d: -f1)
curves_at=$(grep -n 'id="curves"' "$T/dom.html" | head -1 | cut -d: -f1)
ok "$([ -n "$before" ] && [ -n "$curves_at" ] && [ "$before" -lt "$curves_at" ]; echo $?)" "the box comes before the charts"
# beside each metric's curves, the mean curve of each colour group (lr:
# 3 values) with its ± std band
ok "$([ "$(count 'class="mean-curves"')" -eq 2 ] && [ "$(count '<polyline class="meancurve"')" -eq 6 ] && [ "$(count '<polygon class="band"')" -eq 6 ]; echo $?)" \
	"a mean-curve chart per metric, one mean line and band per lr"
# the interaction: in each final-value chart one line per value of the
# other swept parameter (2 charts by lr: width 16 and 32; 2 by width: lr
# 0.01, 0.03 and 0.1), named in the legend
inter=$(count '<polyline class="interaction"')
ok "$([ "$inter" -eq 10 ]; echo $?)" "one line per value of the other parameter in each final-value chart: $inter"
ok "$(grep -q '>width = 16<' "$T/dom.html" && grep -q '>lr = 0.03<' "$T/dom.html"; echo $?)" "the legends name them"
# axes: lr's three values evenly spaced in order by default (a grid
# sweep's points), at their values with --linear-x, on a log axis with
# --log-x; the final-value charts' y axes never go below 0 (acc, loss >= 0)
lr_xs() {   # the x of lr's error bars in FILE, in order: "0.01:X 0.03:X 0.1:X"
	python3 - "$1" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
print(" ".join("%s:%s" % m for m in re.findall(r'class="errorbar" data-x="([^"]+)"[^>]*><title>lr =[^<]*</title><line x1="([0-9.]+)"', s)[:3]))
PY
}
even() { python3 -c 'import sys; x=[float(w.split(":")[1]) for w in sys.argv[1].split()]; sys.exit(not (len(x) == 3 and abs((x[1]-x[0]) - (x[2]-x[1])) < 0.2))' "$1"; }
xs=$(lr_xs "$T/dom.html")
ok "$(even "$xs"; echo $?)" "lr's 3 values evenly spaced, in numeric order: $xs"
PBX_HOME="$T" "$PBX" -q report --linear-x -o "$T/linear.html"
xs=$(lr_xs "$T/linear.html")
ok "$(! even "$xs"; echo $?)" "--linear-x: at their values: $xs"
PBX_HOME="$T" "$PBX" -q report --log-x -o "$T/log.html"
ok "$(grep -q 'lr (log scale)' "$T/log.html"; echo $?)" "--log-x: lr on a log axis"
neg=$(python3 - "$T/dom.html" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
print(sum(1 for c in re.findall(r'<svg class="param-chart".*?</svg>', s, re.S) for t in re.findall(r'class="ticklabel"[^>]*>(-[0-9.]+)<', c)))
PY
)
ok "$([ "$neg" = 0 ]; echo $?)" "no final-value chart's y axis goes below 0: $neg negative ticks"
for f in "$T/report.html" "$T/dom.html"; do
	grep -Eiq "src=|href=[\"']?(https?:)?//|@import|url\(" "$f"
	ok "$([ $? -ne 0 ]; echo $?)" "no external resource in $(basename "$f")"
done
magic=$(od -An -tx1 -N8 "$T/shot.png" 2>/dev/null | tr -d ' \n')
ok "$([ "$magic" = 89504e470d0a1a0a ]; echo $?)" "the screenshot is a PNG"
size=$(wc -c <"$T/shot.png" 2>/dev/null || echo 0)
ok "$([ "$size" -gt 20000 ]; echo $?)" "the screenshot is not blank ($size bytes)"
# the widest table the fixture makes (grouped by both parameters, every
# statistic of both metrics, five summary.json keys: 18 columns) fits a
# 1400 px window without a sideways scroll, as Chromium lays it out
i=0
while [ $i -lt 12 ]; do
	mkdir -p "$T/results/0123456789ab/$i"
	printf '{"test_acc": 0.%d5, "converged": true, "seconds": %d, "peak_rss_kb": 123456, "gflops": 12.5}\n' \
		"$i" $((10 + i)) >"$T/results/0123456789ab/$i/summary.json"
	i=$((i + 1))
done
PBX_HOME="$T" "$PBX" -q report -g lr,width --summary -o "$T/wide.html"
sed 's|</body>|<script>addEventListener("load", () => { const d = document.querySelector("#table .scroll"); document.body.setAttribute("data-overflow", d.scrollWidth - d.clientWidth); });</script></body>|' \
	"$T/wide.html" >"$T/report.html"
chrome --virtual-time-budget=3000 --dump-dom >"$T/wide-dom.html"
over=$(grep -o 'data-overflow="[^"]*"' "$T/wide-dom.html")
ok "$([ "$over" = 'data-overflow="0"' ]; echo $?)" "an 18-column table fits 1400 px without scrolling: $over"
finish
