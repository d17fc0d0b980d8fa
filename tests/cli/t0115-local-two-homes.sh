#!/bin/sh
# t0115-local-two-homes.sh - two pbx homes on one machine (two students on
# a shared teaching machine), the same configuration: each runs a local
# cluster at once (docs/SECURITY.md, "Two homes on one machine").  The
# second start takes the next slot (addresses and ports) that no live
# cluster of another home holds (the machine's registry,
# PBX_LOCAL_SLOTS_DIR here); both run a job; a stop gives its slot back;
# a claim whose cluster is gone is taken over.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

export PBX_LOCAL_SLOTS_DIR="$TEST_TMP/slots"
H2=$TEST_TMP/home2
mkdir -p "$H2" && chmod 700 "$H2"
local_cluster th slot "{ name: node, count: 1 }"
cp "$PBX_HOME/config.yaml" "$H2/config.yaml"
stop_at_exit "$H2:th"
addr() { "$PBX" cluster show --json th | json_get '[n["address"] for n in d["nodes"] if n["name"] == "head"][0]'; }

run_pbx -q cluster start th
ok $rc "home 1 starts cluster th: $errout"
in_home "$H2" -q cluster start th
ok $rc "home 2, same configuration, starts its own th at once: $errout"
a1=$(addr)
a2=$(PBX_HOME=$H2 addr)
is "$a1 $a2" "$SLOT_NET.0.1 $SLOT_NET.0.33" "home 1 has slot 0's addresses, home 2 slot 1's"
run_pbx cluster exec th -- srun -N1 hostname
ok $rc "home 1's cluster runs a job: $errout"
in_home "$H2" cluster exec th -- srun -N1 hostname
ok $rc "so does home 2's: $errout"
is "$(ls "$PBX_LOCAL_SLOTS_DIR" | sort | tr '\n' ' ')" "$LOOP_NET-$SLURM_PORT_BASE-0 $LOOP_NET-$SLURM_PORT_BASE-1 " \
	"the machine's registry holds both slots"

run_pbx -q cluster stop --discard-results th
ok $rc "home 1 stops its cluster: $errout"
in_home "$H2" cluster exec th -- srun -N1 hostname
ok $rc "home 2's runs on: $errout"
is "$(ls "$PBX_LOCAL_SLOTS_DIR" | tr '\n' ' ')" "$LOOP_NET-$SLURM_PORT_BASE-1 " "the stop gave slot 0 back"

# a claim whose cluster is gone (its home removed without a stop) is stale
echo "00000000000000000000000000000000 $TEST_TMP/gone/clusters/th" >"$PBX_LOCAL_SLOTS_DIR/$LOOP_NET-$SLURM_PORT_BASE-0"
run_pbx -q cluster start th
ok $rc "home 1 starts again: $errout"
is "$(addr)" "$SLOT_NET.0.1" "over a stale claim: slot 0 again"
run_pbx -q cluster stop --discard-results th
in_home "$H2" -q cluster stop --discard-results th
ok $rc "home 2 stops: $errout"
is "$(ls "$PBX_LOCAL_SLOTS_DIR" | grep -c .)" 0 "nothing is left in the registry"
done_testing
