#!/bin/sh
# t0470-prices.sh - what a cluster costs an hour (docs/cost.md): `pbx
# cluster price` against the Compute Engine emulator's billing catalogue
# (tests/emulators/gce/billing.py: a fixture of 15 SKUs served 4 a page)
# gives the exact price of a template with a head, spot nodes with GPUs
# and an on-demand group; `start --dry-run` shows it before the requests;
# the catalogue is cached in the store (its pages in the request log, no
# token there), and with the emulator stopped the
# price comes from the cache (and --offline never fetches); a `prices:`
# override replaces an entry; a malformed reply is a clear error and
# caches nothing.  Emulator addresses $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24
# (no cluster is started).
. "$(dirname "$0")/lib.sh"
stop_at_exit
mkdir -p "$PBX_HOME"

gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24"
ssh-keygen -q -t ed25519 -N "" -C t0470 -f "$PBX_HOME/id"
CLOUD=gce
config() {   # config [PRICES-SECTION] (no cluster starts: no SLURM ports)
	cloud_account
	cloud_config "$PBX_HOME/config.yaml" "" "$(cloud_template g1 "$PBX_HOME/id" \
		"head: { machine_type: e2-standard-2 }" "node_groups:" \
		"  - { name: gpu, count: 2, machine_type: n1-standard-8, gpus: 2, gpu_type: nvidia-tesla-t4, spot: true }" \
		"  - { name: cpu, count: 1, machine_type: e2-standard-8 }")" "${1:-}"
}
# field JSON PATH...: a value of the price JSON in $out
field() { printf '%s' "$out" | python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$@"; }
billing() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/_emulator/billing" % sys.argv[1], data=sys.argv[2].encode(), headers={"Content-Type": "application/json"})).read().decode())' "$PORT" "{\"mode\": \"$1\"}" >/dev/null; }
calls() { emu_get billing | python3 -c 'import json, sys; print(json.load(sys.stdin)["calls"])'; }

config
# head e2-standard-2: 2 x 0.02 + 8 GiB x 0.0025 = 0.06
# gpu n1-standard-8 spot: 8 x 0.006 + 30 GiB x 0.0008 + 2 T4 x 0.14 = 0.352, x 2 = 0.704
# cpu e2-standard-8: 8 x 0.02 + 32 GiB x 0.0025 = 0.24
run_pbx cluster price --json g1
ok $rc "cluster price --json: $errout"
is "$(field hourly)" "1.004" "the fixture gives 1.004 USD an hour"
is "$(field groups 0 each):$(field groups 1 each):$(field groups 1 hourly):$(field groups 2 each)" \
	"0.06:0.352:0.704:0.24" "per node kind: head, spot GPU nodes (each and group), cpu"
is "$(field groups 1 spot):$(field region):$(field currency):$(field stale)" "True:us-central1:USD:False" \
	"spot, region, currency, fresh"
is "$(field not_included 0):$(field not_included 1)" "disks:network egress" "what is not included"
is "$(calls)" "4" "15 SKUs, 4 a page: 4 calls"
events() { python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])' "$PBX_HOME/pbx.db" "$1"; }
is "$(events "SELECT count(*) FROM events WHERE kind = 'http' AND detail LIKE '%/v1/services/6F81-5844-456A/skus%'")" \
	"4" "the request log has the 4 pages"
is "$(events "SELECT count(*) FROM events WHERE detail LIKE '%Bearer%' OR detail LIKE '%ya29.%' OR detail LIKE '%BEGIN%'")" \
	"0" "and no token or key"

run_pbx cluster price g1
ok $rc "cluster price (text): $errout"
printf '%s\n' "$out" | grep -q "total .* 1.0040 USD/h"
ok $? "the text says the total: $out"
printf '%s\n' "$out" | grep -q "not included: disks, network egress"
ok $? "and what it leaves out"

run_pbx cluster start --dry-run g1
ok $rc "start --dry-run: $errout"
printf '%s\n' "$errout" | grep -q "total .* 1.0040 USD/h"
ok $? "start --dry-run shows the price first (stderr)"
printf '%s\n' "$out" | grep -q "^POST .*bulkInsert"
ok $? "then the requests (stdout)"
is "$(calls)" "4" "from the cache: the catalogue was not fetched again"
run_pbx -q cluster start --dry-run g1
is "$(printf '%s' "$errout" | grep -c USD/h)" "0" "-q: no price"

# Offline: the emulator gone, the cache answers.
gce_emulator_stop
run_pbx cluster price --json g1
is "$rc:$(field hourly)" "0:1.004" "emulator stopped: the price comes from the cache"
# a stale cache and no catalogue: the old prices, with a warning
sqlite3 "$PBX_HOME/pbx.db" "UPDATE price_fetches SET fetched = fetched - 30 * 86400" 2>/dev/null ||
	python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("UPDATE price_fetches SET fetched = fetched - 30 * 86400"); c.commit()' "$PBX_HOME/pbx.db"
run_pbx cluster price --json g1
is "$rc:$(field hourly):$(field stale)" "0:1.004:True" "a stale cache that cannot be refreshed is used"
printf '%s\n' "$errout" | grep -q "could not be refreshed"
ok $? "with a warning: $errout"
run_pbx cluster price --offline --json g1
is "$rc:$(field stale)" "0:True" "--offline: the cache, however old"

# An override: prices.hourly replaces the catalogue's e2-standard-8.
config "prices:
  hourly: { e2-standard-8: 0.5 }"
run_pbx cluster price --json --offline g1
is "$rc:$(field hourly):$(field groups 2 source)" "0:1.264:prices: override" "prices.hourly overrides an entry"
# an unknown machine type: that line is unknown, the rest priced
config "prices:
  gpu_hourly: { nvidia-tesla-t4: 0.2 }"
run_pbx cluster price --json --offline g1
is "$rc:$(field hourly):$(field groups 1 each)" "0:1.244:0.472" "prices.gpu_hourly overrides the GPUs' price"

# Malformed replies: a clear error, nothing cached.
rm -f "$PBX_HOME/pbx.db"*
gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24"
config
billing malformed
run_pbx cluster price g1
is "$rc" "1" "a reply that is no SKU list fails"
printf '%s\n' "$errout" | grep -q "not a SKU list (no skus array)"
ok $? "saying so: $errout"
billing bad-price
run_pbx cluster price g1
printf '%s\n' "$errout" | grep -q "no price per h in USD"
ok $? "a SKU without a price fails, naming it: $errout"
n=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT (SELECT count(*) FROM prices) + (SELECT count(*) FROM price_fetches)").fetchone()[0])' "$PBX_HOME/pbx.db")
is "$n" "0" "nothing was cached"
run_pbx cluster price --offline g1
is "$rc" "3" "and --offline then has nothing (not found): $errout"
billing ok
run_pbx cluster price --json g1
is "$rc:$(field hourly)" "0:1.004" "a good catalogue again: priced"

done_testing
