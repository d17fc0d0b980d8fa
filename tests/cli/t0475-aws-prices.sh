#!/bin/sh
# t0475-aws-prices.sh - EC2 prices (docs/cost.md): `pbx cluster price`
# against the EC2 harness's Price List Query API (tests/emulators/aws/
# pricing.py: GetProducts with SigV4 checked, PriceList entries as JSON
# strings) gives the exact on-demand price of template e1 (head m5.large,
# 2 x g4dn.xlarge); the proxy counts one GetProducts per instance type and
# nothing against EC2; the cache answers with the harness stopped; a spot
# group is priced from DescribeSpotPriceHistory (moto's), or by
# prices.spot_hourly; wrong
# credentials are a clear error, naming the code.  No instance is made
# (--no-bodies); subnets $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24
. "$(dirname "$0")/aws_lib.sh"
ssh-keygen -q -t ed25519 -N "" -C t0475 -f "$PBX_HOME/id"
field() { printf '%s' "$out" | python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$@"; }

h_start --no-bodies
run_pbx cluster price --json e1
ok $rc "cluster price --json on EC2: $errout"
# m5.large 0.096 + 2 x g4dn.xlarge 0.526
is "$(field hourly):$(field groups 0 each):$(field groups 1 hourly)" "1.148:0.096:1.052" \
	"the exact on-demand price from the Price List"
is "$(field region):$(field currency)" "us-east-1:USD" "region and currency"
is "$(python3 -c 'import json, sys, urllib.request; d = json.load(urllib.request.urlopen(sys.argv[1] + "_harness/calls")); print(d["pricing"], sum(d["calls"].values()))' "$URL")" \
	"2 0" "one GetProducts per instance type, no EC2 call"

h_stop
run_pbx cluster price --json e1
is "$rc:$(field hourly)" "0:1.148" "harness stopped: from the cache"

sed -i 's/gpu_type: t4 }/gpu_type: t4, spot: true }/' "$PBX_HOME/config.yaml"
run_pbx cluster price --offline --json e1
is "$rc" "3" "offline, a spot price never fetched: not found"
printf '%s\n' "$errout" | grep -q "no cached prices for us-east-1 spot:g4dn.xlarge (offline)"
ok $? "saying what is not cached: $errout"
h_start --no-bodies
sed -i 's/gpu_type: t4 }/gpu_type: t4, spot: true }/' "$PBX_HOME/config.yaml"
run_pbx cluster price --json e1
# moto's DescribeSpotPriceHistory: 0.00001 in every zone
is "$rc:$(field hourly):$(field groups 1 each):$(field groups 1 spot)" "0:0.09602:1e-05:True" \
	"spot from DescribeSpotPriceHistory: 0.096 + 2 x 0.00001"
is "$(python3 -c 'import json, sys, urllib.request; d = json.load(urllib.request.urlopen(sys.argv[1] + "_harness/calls")); print(d["calls"].get("DescribeSpotPriceHistory"))' "$URL")" \
	"1" "one DescribeSpotPriceHistory"
printf 'prices:\n  spot_hourly: { g4dn.xlarge: 0.1578 }\n' >>"$PBX_HOME/config.yaml"
run_pbx cluster price --json e1
is "$rc:$(field hourly):$(field groups 1 source)" "0:0.4116:prices: override" "prices.spot_hourly overrides it"

h_start --no-bodies
rm -f "$PBX_HOME/pbx.db"*
export AWS_SECRET_ACCESS_KEY=wrong-secret
run_pbx cluster price e1
is "$rc" "1" "a wrong secret key fails"
printf '%s\n' "$errout" | grep -q "HTTP 403 InvalidSignatureException"
ok $? "naming the error: $errout"
printf '%s\n' "$errout" | grep -q "wrong-secret"
ok $((! $?)) "and not the secret"

done_testing
