#!/bin/sh
# aws_moto.sh TEST_AWS_MOTO HARNESS - runs test_aws_moto against moto with
# signatures checked (ec2_harness.py --no-bodies: no sshd, nothing but
# moto and its proxy on 127.0.0.1 free ports, so no lock is needed).
# Skips (77) without moto[server] and boto3.
set -u
python3 -c 'import moto.server, boto3' 2>/dev/null || { echo "1..0 # SKIP moto[server]/boto3 missing"; exit 77; }
W=$(mktemp -d /tmp/pbx-aws-moto.XXXXXX)
python3 "$2" --state-dir "$W/h" --env-file "$W/env.json" --no-bodies --subnet 127.0.62.0/24 \
	>"$W/h.log" 2>&1 &
H=$!
trap 'kill $H 2>/dev/null; wait $H 2>/dev/null; rm -rf "$W"' EXIT
i=0
while [ ! -s "$W/env.json" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
e() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$W/env.json"; }
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE
export AWS_ACCESS_KEY_ID="$(e 'd["pbx"]["access_key"]')" AWS_SECRET_ACCESS_KEY="$(e 'd["pbx"]["secret_key"]')"
export AWS_EC2_METADATA_DISABLED=true
ssh-keygen -q -t ed25519 -N "" -C aws-moto -f "$W/id"
cat >"$W/config.yaml" <<CONFIG
clusters:
  e1:
    cloud: aws
    login_user: pbx
    ssh_key: $W/id
    image: $(e 'd["ami"]')
    node_groups:
      - { name: gpu, count: 2, machine_type: g4dn.xlarge, gpus: 1 }
  e2:
    cloud: aws
    login_user: pbx
    ssh_key: $W/id
    image: $(e 'd["ami"]')
    min_nodes: 1
    node_groups:
      - { name: gpu, count: 2, machine_type: g4dn.xlarge, gpus: 1 }
clouds:
  aws: { region: us-east-1, endpoint: "$(e 'd["url"]')", subnet: $(e 'd["subnets"][0]') }
CONFIG
chmod 600 "$W/config.yaml"
"$1" "$W/config.yaml"
