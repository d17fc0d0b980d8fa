#!/bin/sh
# t0015-cloud-check.sh - `pbx config check --clouds` (like `sky
# check`): against the EC2 harness (moto, signatures checked) and the
# Compute Engine emulator with a T4 quota of 2: each cloud template's
# credentials are found (said where from) and work; a GPU template that
# needs 4 T4s is NOT ENOUGH (exit 1), a small one fits; --json says the
# same; EC2's vCPU quotas from the harness's Service Quotas (G and VT
# on-demand 8: two g4dn.xlarge fit, then not once one runs; spot G and VT
# at its default 0; a key that may not read quotas gets a note; an
# instance type EC2 does not know is named);
# a wrong secret key fails with EC2's reason and never shows the key;
# a configuration with no cloud template asks nothing (the emulator logs
# no request).  Addresses: the harness's subnets $SLOT_NET.1.0/24 and
# $SLOT_NET.2.0/24; no cluster is started.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=$SLOT_NET.1.0/24 H_SUBNET2=$SLOT_NET.2.0/24 H_SLURM_PORT_BASE=$BODY_PORT_BASE
. "$(dirname "$0")/aws_lib.sh"

h_start --service-quota L-DB2E81BA=8
gce_storage_emulator --fault 'quota={"NVIDIA_T4_GPUS": 2}'
[ -s "$PBX_HOME/id" ] || ssh-keygen -q -t ed25519 -N "" -f "$PBX_HOME/id"
AMI=$(json_get 'd["ami"]' <"$TEST_TMP/env.json")
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  e1:
    cloud: aws
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: $AMI
    node_groups:
      - { name: gpu, count: 2, machine_type: g4dn.xlarge, gpus: 1, gpu_type: t4 }
  e-spot:
    cloud: aws
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: $AMI
    node_groups:
      - { name: gpu, count: 2, machine_type: g4dn.xlarge, gpus: 1, gpu_type: t4, spot: true }
  g-small:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    node_groups:
      - { name: cpu, count: 2, machine_type: n1-standard-8 }
  g-gpu:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    node_groups:
      - { name: gpu, count: 2, machine_type: n1-standard-8, gpus: 2, gpu_type: nvidia-tesla-t4 }
  here:
    cloud: local
    node_groups:
      - { name: node, count: 1 }
clouds:
  aws: { region: us-east-1, endpoint: "$URL", subnet: $SUB1 }
  gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"

run_pbx config check --clouds
is "$rc" 1 "a quota that does not fit: exit 1 $errout"
case $out in *"e1 (aws): credentials from environment"*"work (region us-east-1 answered)"*) r=0 ;; *) r=1 ;; esac
ok $r "aws: the credentials' source, and that they work: $out"
case $out in *"e1 (aws)"*"L-1216C47A (Standard vCPUs)"*"needs 4, 0 of 5 in use: ok"*"L-DB2E81BA (G and VT vCPUs)"*"needs 8, 0 of 8 in use: ok"*"e-spot"*) r=0 ;; *) r=1 ;; esac
ok $r "aws: two g4dn.xlarge (4 vCPUs each) fit the account's 8; the m5.xlarge head the default 5: $out"
case $out in *"e-spot (aws)"*"L-3819A6DF (G and VT spot vCPUs)"*"needs 8, 0 of 0 in use: NOT ENOUGH"*) r=0 ;; *) r=1 ;; esac
ok $r "aws: spot nodes count against the spot quota, at its default 0: $out"
case $out in *"g-small (gce): credentials from service account pbx-e2e@pbx-test.iam.gserviceaccount.com"*"work (project pbx-test, region us-central1 answered)"*) r=0 ;; *) r=1 ;; esac
ok $r "gce: the service account, and that it works: $out"
case $out in *"g-gpu (gce)"*"NVIDIA_T4_GPUS"*"needs 4, 0 of 2 in use: NOT ENOUGH"*) r=0 ;; *) r=1 ;; esac
ok $r "the GPU template needs 4 T4s of a quota of 2: not enough: $out"
case $out in *"here ("*) r=1 ;; *) r=0 ;; esac
ok $r "the local template is not asked about"
run_pbx config check --clouds --json
is "$(printf '%s\n' "$out" | json_get '" ".join("%s:%s" % (c["template"], c["ok"]) for c in d)')" \
	"e1:True e-spot:False g-small:True g-gpu:False" "--json: which templates fit"
is "$(printf '%s\n' "$out" | json_get '[(q["metric"], q["need"], q["limit"], q["used"]) for c in d if c["template"] == "e1" for q in c["quotas"]]')" \
	"[('L-1216C47A (Standard vCPUs)', 4.0, 5.0, 0.0), ('L-DB2E81BA (G and VT vCPUs)', 8.0, 8.0, 0.0)]" \
	"--json: e1's quotas"
is "$(printf '%s\n' "$out" | json_get '[(q["metric"], q["need"], q["limit"], q["fits"]) for c in d if c["template"] == "g-small" for q in c["quotas"]]')" \
	"[('INSTANCES', 3.0, 1000.0, True)]" "the small one needs 3 instances of 1000"
calls=$(curl -s "${URL}_harness/calls" | json_get 'd["servicequotas"]')
[ "$calls" -ge 4 ] && r=0 || r=1
ok $r "the quotas came from Service Quotas ($calls calls)"

# one g4dn.xlarge runs already (outside any subnet of the test: no body)
AWS_ACCESS_KEY_ID=$(json_get 'd["admin"]["access_key"]' <"$TEST_TMP/env.json") \
AWS_SECRET_ACCESS_KEY=$(json_get 'd["admin"]["secret_key"]' <"$TEST_TMP/env.json") \
	python3 -c 'import boto3, sys
boto3.client("ec2", region_name="us-east-1", endpoint_url=sys.argv[1]).run_instances(
    ImageId=sys.argv[2], InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1)' "$MOTO" "$AMI"
run_pbx config check --clouds
case $out in *"e1 (aws)"*"L-DB2E81BA (G and VT vCPUs)"*"needs 8, 4 of 8 in use: NOT ENOUGH"*"e-spot"*) r=0 ;; *) r=1 ;; esac
ok $r "aws: a running g4dn.xlarge leaves 4 of the 8: not enough for two more: $out"

# credentials that may look at EC2 but not read Service Quotas: a note
good_id=$AWS_ACCESS_KEY_ID good=$AWS_SECRET_ACCESS_KEY
export AWS_ACCESS_KEY_ID="$(json_get 'd["viewer"]["access_key"]' <"$TEST_TMP/env.json")"
export AWS_SECRET_ACCESS_KEY="$(json_get 'd["viewer"]["secret_key"]' <"$TEST_TMP/env.json")"
run_pbx config check --clouds
case $out in *"e1 (aws): credentials from environment"*" work"*"note: these credentials may not read Service Quotas (servicequotas:GetServiceQuota)"*"e-spot"*) r=0 ;; *) r=1 ;; esac
ok $r "aws: a key that may not read Service Quotas: the check says so and goes on: $out"
export AWS_ACCESS_KEY_ID=$good_id AWS_SECRET_ACCESS_KEY=$good

# an instance type EC2 does not know
sed 's/machine_type: g4dn.xlarge, gpus: 1, gpu_type: t4 }$/machine_type: g4dn.enormous, gpus: 1, gpu_type: t4 }/' \
	"$PBX_HOME/config.yaml" >"$TEST_TMP/badtype.yaml"
chmod 600 "$TEST_TMP/badtype.yaml"
run_pbx config check --clouds "$TEST_TMP/badtype.yaml"
case $out in *"e1 (aws)"*"FAILED"*"not one of region us-east-1"*"g4dn.enormous"*) r=0 ;; *) r=1 ;; esac
ok $r "aws: an instance type the region does not have is named: $out"
run_pbx config check --json
is "$rc" 2 "--json without --clouds is a usage error"

# a wrong secret key: EC2's reason, never the key
good=$AWS_SECRET_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=wrong-secret-never-printed
run_pbx config check --clouds
is "$rc" 1 "a wrong secret key fails the check"
case $out in *"e1 (aws): credentials from environment"*": FAILED asking region us-east-1"*AuthFailure*) r=0 ;; *) r=1 ;; esac
ok $r "saying which template and why: $out"
case "$out$errout" in *wrong-secret-never-printed*) r=1 ;; *) r=0 ;; esac
ok $r "the secret is not shown"
export AWS_SECRET_ACCESS_KEY=$good

# no cloud template: nothing is asked
printf '%s\n' "clusters:" "  here:" "    cloud: local" "    node_groups:" "      - { name: node, count: 1 }" \
	>"$TEST_TMP/local.yaml"
chmod 600 "$TEST_TMP/local.yaml"
before=$(wc -l <"$TEST_TMP/emu.log")
run_pbx config check --clouds "$TEST_TMP/local.yaml"
is "$rc" 0 "a configuration without cloud templates passes: $errout"
case $out in *"nothing to check"*) r=0 ;; *) r=1 ;; esac
ok $r "and says there is nothing to check: $out"
is "$(wc -l <"$TEST_TMP/emu.log")" "$before" "and asks nothing"
done_testing
