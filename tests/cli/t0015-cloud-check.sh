#!/bin/sh
# t0015-cloud-check.sh - `pbx config check --clouds` (issue 39, like `sky
# check`): against the EC2 harness (moto, signatures checked) and the
# Compute Engine emulator with a T4 quota of 2: each cloud template's
# credentials are found (said where from) and work; a GPU template that
# needs 4 T4s is NOT ENOUGH (exit 1), a small one fits; --json says the
# same; a wrong secret key fails with EC2's reason and never shows the key;
# a configuration with no cloud template asks nothing (the emulator logs
# no request).  Addresses: the harness's subnets 127.0.65.0/24 and
# 127.0.66.0/24; no cluster is started.
. "$(dirname "$0")/lib.sh"
H_SUBNET1=127.0.65.0/24 H_SUBNET2=127.0.66.0/24 H_SLURM_PORT_BASE=31900
. "$(dirname "$0")/aws_lib.sh"

h_start
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
case $out in *"e1 (aws): credentials from environment"*"work (region us-east-1 answered)"*"Service Quotas"*) r=0 ;; *) r=1 ;; esac
ok $r "aws: the credentials' source, and that they work; its limits are in Service Quotas: $out"
case $out in *"g-small (gce): credentials from service account pbx-e2e@pbx-test.iam.gserviceaccount.com"*"work (project pbx-test, region us-central1 answered)"*) r=0 ;; *) r=1 ;; esac
ok $r "gce: the service account, and that it works: $out"
case $out in *"g-gpu (gce)"*"NVIDIA_T4_GPUS"*"needs 4, 0 of 2 in use: NOT ENOUGH"*) r=0 ;; *) r=1 ;; esac
ok $r "the GPU template needs 4 T4s of a quota of 2: not enough: $out"
case $out in *"here ("*) r=1 ;; *) r=0 ;; esac
ok $r "the local template is not asked about"
run_pbx config check --clouds --json
is "$(printf '%s\n' "$out" | json_get '" ".join("%s:%s" % (c["template"], c["ok"]) for c in d)')" \
	"e1:True g-small:True g-gpu:False" "--json: which templates fit"
is "$(printf '%s\n' "$out" | json_get '[(q["metric"], q["need"], q["limit"], q["fits"]) for c in d if c["template"] == "g-small" for q in c["quotas"]]')" \
	"[('INSTANCES', 3.0, 1000.0, True)]" "the small one needs 3 instances of 1000"
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
