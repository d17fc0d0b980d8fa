#!/bin/sh
# ec2_power.sh - benchmark: SLURM power saving on EC2
# (docs/power-saving.md "On EC2"), against moto with the EC2 harness
# (tests/emulators/aws/ec2_harness.py: signature and credential checks on,
# a proxy that counts the calls by action, node bodies with IMDS): a
# cluster whose one group has min: 0, so only the head's instance runs;
# its head has an instance profile (head.instance_profile: pbx-head, which
# the harness's setup makes) and runs pbx of its own (pbx-head) with the
# role's credentials from its IMDS.  For each N it submits, on the head,
# `sbatch -N N` of a 1 s job; slurmctld runs pbx-resume of node[1-N] (one
# host list, ResumeRate=0), which runs `pbx-head -q cluster power pw
# resume ...` (src/cluster/slurm_sleep.c): one RunInstances for the group
# (each instance's node in the launch's tags: pbx-role + pbx-launch, read
# with its amiLaunchIndex, src/cloud/aws/launch.c), then the bootstraps.
# Each round measures, in the same run:
#   calls   the EC2 calls the harness's proxy counted, by action, from the
#           submit until pbx-head's resume has ended, and those of the
#           suspend that follows (until pbx-head's suspend has ended and
#           no node instance is left): the goal is calls that do not grow
#           with N.  The resume's count includes the user's own `cluster
#           exec` that carries the submit to the head: the calls of one
#           `cluster exec pw -- true` alone are measured first and shown;
#   wake    seconds from the submit (job pending) until every one of the
#           job's N nodes is up in SLURM (registered: sinfo shows no
#           ~ # % ! * after its state; polled on the head every 0.1 s):
#           RunInstances, the bodies' sshd, bootstrap, no boot (a body
#           needs none); and the same from slurmctld's log (submission to
#           the last "now responding");
#   running seconds from the submit until the job is RUNNING;
#   sleep   seconds from the job's end (squeue empty) until moto holds no
#           node instance that is not shutting-down or terminated
#           (SuspendTime, then pbx-suspend's TerminateInstances; polled
#           every 0.1 s with the harness's admin key, straight to moto,
#           so not counted), and that minus SuspendTime.
# Between rounds it waits (untimed) until SLURM has every node powered
# down again (idle~, SuspendTimeout 30 s after pbx-suspend).
# Node bodies share this machine's cores: the wake of N nodes is N
# bootstraps on the cores here, in parallel on a cloud.  Traffic stays on
# loopback: subnets 127.0.142.0/24 and 127.0.143.0/24 (no test uses
# them), SLURM ports from 6000 (the cluster's bodies take 6000 +
# 64 * (8 + slot) and the 63 after it, whatever N is: 6512-6575 for the
# first slot; no test's range reaches 6000-6999 (every thousand from 7000
# to 32999 is some test's), and it stays below 32768, the kernel's first
# ephemeral port).
# Prints each round's figures and calls by action, the bodies' processes
# and memory, a table and the ratios to the first N.  The group has max(N)
# nodes; 100 bodies take about 2 GiB and load 2 cores heavily.  About 5
# minutes for 1 10 100 (4 of them the rounds), 3 for 1 10.
# Needs python3 with moto[server] 5.2.1 and boto3 (`. scripts/venv.sh`
# from the source tree gives them).
# Usage: bench/ec2_power.sh [PBX] [N...]      (default: build/src/cli/pbx 1 10)
set -eu
PBX=${1:-build/src/cli/pbx}
[ $# -gt 0 ] && shift
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
SRC=$(cd "$(dirname "$0")/.." && pwd)
HARNESS=${PBX_EC2_HARNESS:-$SRC/tests/emulators/aws/ec2_harness.py}
HELPER=${PBX_NODE_BODY_HELPER:-$(dirname "$PBX")/../../tests/emulators/gce/pbx-node-body}
[ -x "$PBX" ] || { echo "build pbx first ($PBX)" >&2; exit 1; }
if [ ! -f "$HARNESS" ] || [ ! -x "$HELPER" ]; then echo "no EC2 harness ($HARNESS) or node-body helper ($HELPER)" >&2; exit 1; fi
python3 -c 'import moto.server, boto3' 2>/dev/null || { echo "python3 lacks moto[server] or boto3 (. scripts/venv.sh)" >&2; exit 1; }
SIZES=${*:-1 10}
MAX=0
for n in $SIZES; do [ "$n" -gt "$MAX" ] && MAX=$n; done
SUSPEND=20
SUBNET1=127.0.142.0/24 SUBNET2=127.0.143.0/24 PORT_BASE=6000

# another run's bodies (or anything) on these addresses would take a
# body's sshd or IMDS port: refuse
if ss -ltn | grep -q ' 127\.0\.14[23]\.'; then
	echo "something listens on $SUBNET1 or $SUBNET2 (another run of this benchmark?)" >&2
	exit 1
fi

W=$(mktemp -d /tmp/pbxep.XXXXXX) # short: slurmstepd's socket under a body's root must fit 108 bytes
chmod 755 "$W" # the bodies' sshd reads the login user's keys as that user
export PBX_HOME="$W/home" HOME="$W/user" # HOME: no ~/.aws of the user's
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_SECURITY_TOKEN AWS_PROFILE \
	AWS_DEFAULT_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE
# loopback only: no credential lookup falls through to a metadata server
export AWS_EC2_METADATA_DISABLED=true
mkdir -m 700 "$PBX_HOME" "$HOME"
H_PID=
cleanup() {
	"$PBX" -q cluster stop --discard-results pw >/dev/null 2>&1 || true
	[ -z "$H_PID" ] || { kill "$H_PID" 2>/dev/null; wait "$H_PID" 2>/dev/null || true; }
	rm -rf "$W"
}
trap cleanup EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM   # dash runs no EXIT trap on a signal by itself

python3 "$HARNESS" --state-dir "$W/h" --env-file "$W/env.json" --node-body-helper "$HELPER" \
	--login-user pbx --subnet "$SUBNET1" --subnet "$SUBNET2" >"$W/h.log" 2>&1 &
H_PID=$!
i=0
while [ ! -s "$W/env.json" ]; do
	if ! kill -0 "$H_PID" 2>/dev/null || [ "$i" -ge 1200 ]; then tail -20 "$W/h.log" >&2; exit 1; fi
	sleep 0.1
	i=$((i + 1))
done
env_get() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$W/env.json" "$1"; }
URL=$(env_get 'd["url"]')
AWS_ACCESS_KEY_ID=$(env_get 'd["pbx"]["access_key"]')
AWS_SECRET_ACCESS_KEY=$(env_get 'd["pbx"]["secret_key"]')
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
ssh-keygen -q -t ed25519 -N "" -C bench -f "$PBX_HOME/id"
cat >"$PBX_HOME/config.yaml" <<CONF
clusters:
  pw:
    cloud: aws
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: $(env_get 'd["ami"]')
    head: { machine_type: m5.large, instance_profile: $(env_get 'd["instance_profile"]') }
    slurm: { suspend_time: ${SUSPEND}s, resume_timeout: 600s }
    node_groups:
      - { name: node, count: $MAX, min: 0, machine_type: t3.large, cpus: 1 }
clouds:
  aws: { region: us-east-1, endpoint: "$URL", subnet: $(env_get 'd["subnets"][0]') }
  local: { slurm_port_base: $PORT_BASE }
CONF
chmod 600 "$PBX_HOME/config.yaml"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# the harness's counters (cumulative, by action) into file $1
snap() { python3 -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1] + "_harness/calls").read())' "$URL" "$1"; }
# the calls since snapshot $1 (now, or to snapshot $2): "TOTAL ACTION=COUNT ..."
calls_since() {
	[ $# -gt 1 ] || { snap "$W/now.json" && set -- "$1" "$W/now.json"; }
	python3 -c 'import json, sys
a, b = (json.load(open(f))["calls"] for f in sys.argv[1:3])
d = {k: v - a.get(k, 0) for k, v in b.items() if v != a.get(k, 0)}
print(sum(d.values()), " ".join("%s=%d" % kv for kv in sorted(d.items())))' "$1" "$2"
}
# moto's node instances of pw (pbx-role not head) that are neither
# shutting-down nor terminated, through the admin's key straight to moto
# (not counted); with "wait": polls every 0.1 s until there is none (at
# most 300 s) and prints the time then
nodes_held() {
	python3 - "$W/env.json" "${1:-}" <<'PY'
import boto3, json, sys, time
e = json.load(open(sys.argv[1]))
c = boto3.client("ec2", region_name="us-east-1", endpoint_url=e["moto_url"],
                 aws_access_key_id=e["admin"]["access_key"], aws_secret_access_key=e["admin"]["secret_key"])
def held():
    n = 0
    for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["pw"]}])["Reservations"]:
        for i in r["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            n += tags.get("pbx-role") != "head" and i["State"]["Name"] not in ("shutting-down", "terminated")
    return n
if sys.argv[2] != "wait":
    print(held())
    sys.exit(0)
end = time.time() + 300
while held() and time.time() < end:
    time.sleep(0.1)
print("%.6f" % time.time())
PY
}
# pbx-head processes running a power action ($1: resume or suspend)
# shellcheck disable=SC2009 # pgrep -f would match this shell's own argv
power_running() { ps -eo args= | grep -F "$W/" | grep -F "cluster power pw $1" | grep -cv grep || true; }
states() { "$PBX" -q cluster exec pw -- sinfo -h -o %t 2>/dev/null | sort -u | tr '\n' ' ' || true; }

t0=$(now)
snap "$W/c0.json"
"$PBX" -q cluster start pw
echo "start (head alone, $MAX nodes asleep): $(secs "$t0" "$(now)") s; node instances: $(nodes_held); calls: $(calls_since "$W/c0.json")"
# what the user's own `cluster exec` costs (it carries each round's submit)
snap "$W/c0.json"
"$PBX" -q cluster exec pw -- true
exec_calls=$(calls_since "$W/c0.json")
echo "cluster exec pw -- true alone: calls: $exec_calls"
# the head runs this: submit; t1 when every node of the job is up in SLURM
# (registered: no ~ # % ! * after its state), t2 when the job is RUNNING;
# then it waits until the job has left the queue
cat >"$W/wake.sh" <<'HEAD'
n=$1
t0=$(date +%s.%N)
j=$(sbatch --parsable -N "$n" -o /dev/null --wrap 'sleep 1') || exit 1
i=0 t1=
while :; do
	st=$(squeue -h -j "$j" -o '%T %r')
	if [ -z "$t1" ]; then
		nl=$(squeue -h -j "$j" -o %N)
		[ -z "$nl" ] || [ "$(sinfo -h -N -n "$nl" -o %t | grep -cv '[~#%!*]')" != "$n" ] || t1=$(date +%s.%N)
	fi
	case $st in
	RUNNING*) t1=${t1:-$(date +%s.%N)} && break ;;
	*held* | *Held* | *BeginTime*) ;; # requeued: the resume failed
	PENDING* | CONFIGURING*) [ $((i += 1)) -lt 6000 ] && sleep 0.1 && continue ;;
	esac
	echo "job $j: $st" >&2
	scancel "$j"
	exit 1
done
t2=$(date +%s.%N)
while [ -n "$(squeue -h -j "$j" -o %T 2>/dev/null)" ]; do sleep 0.1; done
echo "$t0 $t1 $t2"
HEAD

ctld_log=$(find "$W/h/bodies" -path '*/var/log/slurm/slurmctld.log' | head -1)
# slurmctld's own view of a round, from its log past line $1: seconds from
# the job's submission to the last node responding
ctld_wake() { tail -n +"$(($1 + 1))" "$ctld_log" | python3 -c 'import re, sys, datetime
t = lambda l: datetime.datetime.fromisoformat(l[1:24]).timestamp()
a = r = None
for l in sys.stdin:
    if a is None and "_slurm_rpc_submit_batch_job: JobId" in l: a = t(l)
    if re.search(r"Node \S+ now responding", l): r = t(l)
print("%.2f" % (r - a) if a is not None and r is not None else "?")'; }
# the bodies' processes: how many, and their resident memory
# shellcheck disable=SC2009 # pgrep -f would match this shell's own argv
body_procs() { ps -eo rss=,args= | grep -F "$W/h/bodies/" | grep -v grep | awk '{ n++; k += $1 } END { printf "%d processes, %d MiB", n, k / 1024 }'; }

summary=''
t_run=$(now)
for n in $SIZES; do
	snap "$W/c0.json"
	ctld0=$(wc -l <"$ctld_log")
	if ! r=$("$PBX" -q cluster exec pw -- sh -c "$(cat "$W/wake.sh")" wake "$n"); then
		echo "N=$n: the job did not run; pbx-power.log ends:" >&2
		find "$W/h/bodies" -path '*/var/log/pbx-power.log' -exec tail -5 {} + >&2
		exit 1
	fi
	tend=$(now)
	wake=$(echo "$r" | awk '{ printf "%.2f", $2 - $1 }')
	run=$(echo "$r" | awk '{ printf "%.2f", $3 - $1 }')
	i=0
	while [ "$(power_running resume)" != 0 ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	snap "$W/c1.json"
	rc=$(calls_since "$W/c0.json" "$W/c1.json")
	held=$(nodes_held)
	echo "N=$n wake (submit to every node up in SLURM): $wake s; job RUNNING: $run s; slurmctld's log: submission to the last node responding $(ctld_wake "$ctld0") s"
	echo "N=$n node instances: $held; bodies: $(body_procs); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "N=$n resume calls: $rc"
	tgone=$(nodes_held wait)
	sl=$(secs "$tend" "$tgone")
	i=0
	while [ "$(power_running suspend)" != 0 ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	sc=$(calls_since "$W/c1.json")
	echo "N=$n sleep (job end to no node instance left): $sl s, minus SuspendTime: $(secs "$SUSPEND" "$sl") s"
	echo "N=$n suspend calls: $sc"
	summary="$summary
$n $wake $run $sl ${rc%% *} ${sc%% *}"
	# SLURM wakes a node again only once it is powered down (idle~):
	# SuspendTimeout (30 s) after pbx-suspend; not timed, waited for
	i=0
	while [ "$(states)" != "idle~ " ] && [ "$i" -lt 180 ]; do sleep 1; i=$((i + 1)); done
done
echo
echo "rounds of N = $SIZES: $(secs "$t_run" "$(now)") s in all; cluster exec alone: ${exec_calls%% *} calls"
echo "N wake_s running_s sleep_s resume_calls suspend_calls"
echo "$summary" | grep .
echo "$summary" | grep . | awk 'NR == 1 { n1 = $1; c1 = $5; d1 = $6; w1 = $2 }
	NR > 1 { printf "calls(%d)/calls(%d): resume %.2f, suspend %.2f; wake(%d)/wake(%d) = %.2f\n", $1, n1, $5 / c1, $6 / d1, $1, n1, $2 / w1 }'
resumes=$(find "$W/h/bodies" -path '*/var/log/pbx-power.log' -exec grep -h ' resume ' {} + 2>/dev/null | grep -c . || true)
echo "pbx-resume ran $resumes time(s) for $(echo "$SIZES" | wc -w) wake(s)"
