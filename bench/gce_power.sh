#!/bin/sh
# gce_power.sh - benchmark: SLURM power saving on Compute Engine
# (docs/power-saving.md "On Compute Engine"), against the emulator
# (tests/emulators/gce) with node bodies: a cluster whose one group has
# min: 0, so only the head's instance runs; its head runs pbx of its own
# (pbx-head, head.service_account).  For each N it submits, on the head,
# `sbatch -N N` of a 1 s job; slurmctld runs pbx-resume of node[1-N] (one
# host list, ResumeRate=0), which runs `pbx-head -q cluster power pw
# resume ...` (src/cluster/slurm_sleep.c), which makes the N instances and
# bootstraps them.  Each round measures, in the same run:
#   calls   the compute API calls the emulator counted (by method and
#           route) from the submit until pbx-head's resume has ended, and
#           those of the suspend that follows (until every node instance
#           is gone): the goal is calls that do not grow with N;
#   wake    seconds from the submit (job pending) until every one of
#           the job's N nodes is up in SLURM (registered: sinfo shows no
#           ~ # % ! * after its state; polled on the head every 0.1 s):
#           creation and bootstrap, no boot (a body needs none); and the
#           same from slurmctld's log (submission to the last "now
#           responding");
#   running seconds from the submit until the job is RUNNING (SLURM
#           22.05 takes a batch job out of CONFIGURING only in
#           slurmctld's 30 s periodic pass);
#   sleep   seconds from the job's end (squeue empty) until the emulator
#           holds no node instance (SuspendTime, then pbx-suspend's
#           deletes), and that minus SuspendTime.
# Between rounds it waits (untimed) until SLURM has every node powered
# down again (idle~, SuspendTimeout 30 s after pbx-suspend).
# Node bodies share this machine's cores: the wake of N nodes is N
# bootstraps on 2 cores here, in parallel on a cloud.  Traffic stays on
# loopback: emulator addresses 127.0.121.0/24 (private) and 127.0.122.0/24
# (public), SLURM ports from 29000.
# Prints each round's figures, the bodies' processes and memory, a table
# and the ratios to N=1.  The group has max(N) nodes; 100 bodies take
# about 2 GiB and load 2 cores heavily.  About 6 minutes for 1 10 50 100.
# Usage: bench/gce_power.sh [PBX] [N...]      (default: build/src/cli/pbx 1 10)
set -eu
PBX=${1:-build/src/cli/pbx}
[ $# -gt 0 ] && shift
case $PBX in /*) ;; *) PBX=$(pwd)/$PBX ;; esac
SRC=$(cd "$(dirname "$0")/.." && pwd)
EMU=${PBX_GCE_EMULATOR:-$SRC/tests/emulators/gce/emulator.py}
HELPER=${PBX_NODE_BODY_HELPER:-$(dirname "$PBX")/../../tests/emulators/gce/pbx-node-body}
[ -x "$PBX" ] || { echo "build pbx first ($PBX)" >&2; exit 1; }
if [ ! -f "$EMU" ] || [ ! -x "$HELPER" ]; then echo "no emulator ($EMU) or node-body helper ($HELPER)" >&2; exit 1; fi
SIZES=${*:-1 10}
MAX=0
for n in $SIZES; do [ "$n" -gt "$MAX" ] && MAX=$n; done
SUSPEND=20

W=$(mktemp -d /tmp/pbxgp.XXXXXX) # short: slurmstepd's socket under a body's root must fit 108 bytes
chmod 755 "$W" # the bodies' sshd reads the login user's keys as that user
export PBX_HOME="$W/home"
# loopback only: no credential lookup falls through to a metadata server
export AWS_EC2_METADATA_DISABLED=true GCE_METADATA_HOST=127.0.0.1:1 CLOUDSDK_CONFIG="$W/no-gcloud"
unset GOOGLE_APPLICATION_CREDENTIALS
mkdir -m 700 "$PBX_HOME"
EMU_PID=
cleanup() {
	"$PBX" -q cluster stop --discard-results pw >/dev/null 2>&1 || true
	[ -z "$EMU_PID" ] || { kill "$EMU_PID" 2>/dev/null; wait "$EMU_PID" 2>/dev/null || true; }
	rm -rf "$W"
}
trap cleanup EXIT
trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM   # dash runs no EXIT trap on a signal by itself

# another run's bodies (or anything) on these addresses would take the
# head's metadata server's port: refuse
if ss -ltn | grep -q ' 127\.0\.12[12]\.'; then
	echo "something listens on 127.0.121.0/24 or 127.0.122.0/24 (another run of this benchmark?)" >&2
	exit 1
fi
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$W/sa.pem" 2>/dev/null
python3 "$EMU" --port 0 --port-file "$W/port" --state-dir "$W/emu" --project pbx-test \
	--network-block 127.0.121.0/24 --nat-block 127.0.122.0/24 \
	--node-body-helper "$HELPER" --create-accounts --log "$W/emu.log" >"$W/emu.out" 2>&1 &
EMU_PID=$!
i=0
while [ ! -s "$W/port" ]; do
	if ! kill -0 "$EMU_PID" 2>/dev/null || [ "$i" -ge 600 ]; then tail -20 "$W/emu.out" >&2; exit 1; fi
	sleep 0.1
	i=$((i + 1))
done
PORT=$(cat "$W/port")
emu() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/_emulator/%s" % (sys.argv[1], sys.argv[2]), data=sys.argv[3].encode() if sys.argv[3] else None, headers={"Content-Type": "application/json"})).read().decode())' "$PORT" "$1" "${2:-}"; }
python3 - "$W/sa.pem" "$W/sa.json" <<PY
import json, os, sys
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump({"type": "service_account", "project_id": "pbx-test", "private_key_id": "k1",
               "private_key": open(sys.argv[1]).read(), "client_email": "pbx-bench@pbx-test.iam.gserviceaccount.com",
               "client_id": "1", "token_uri": "http://127.0.0.1:$PORT/token"}, f)
PY
emu service-accounts "{\"key_file\": \"$W/sa.json\"}" >/dev/null
ssh-keygen -q -t ed25519 -N "" -C bench -f "$PBX_HOME/id"
cat >"$PBX_HOME/config.yaml" <<CONF
clusters:
  pw:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    head: { service_account: pbx-bench@pbx-test.iam.gserviceaccount.com }
    slurm: { suspend_time: ${SUSPEND}s, resume_timeout: 600s }
    node_groups:
      - { name: node, count: $MAX, min: 0, machine_type: e2-standard-2, cpus: 1 }
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $W/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
  local: { slurm_port_base: 29000 }
CONF
chmod 600 "$PBX_HOME/config.yaml"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# node instances the emulator holds (the head's aside)
nodes_held() { emu state | python3 -c 'import json,sys; print(sum(not i["name"].endswith("-head") for i in json.load(sys.stdin)["instances"]))'; }
# the calls counted since the last reset: "TOTAL METHOD route=COUNT ..."
calls() { emu calls | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["total"], " ".join("%s=%d" % (k.replace(" ", ":"), v) for k, v in sorted(d["calls"].items())))'; }
# pbx-head processes running a power action ($1: resume or suspend)
# shellcheck disable=SC2009 # pgrep -f would match this shell's own argv
power_running() { ps -eo args= | grep -F "$W/" | grep -F "cluster power pw $1" | grep -cv grep || true; }
states() { "$PBX" -q cluster exec pw -- sinfo -h -o %t 2>/dev/null | sort -u | tr '\n' ' ' || true; }

t0=$(now)
"$PBX" -q cluster start pw
echo "start (head alone, $MAX nodes asleep): $(secs "$t0" "$(now)") s; instances: $(nodes_held) node(s) + head"
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

ctld_log=$(find "$W/emu/bodies" -path '*/var/log/slurm/slurmctld.log' | head -1)
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
body_procs() { ps -eo rss=,args= | grep -F "$W/emu/bodies/" | grep -v grep | awk '{ n++; k += $1 } END { printf "%d processes, %d MiB", n, k / 1024 }'; }

summary=''
for n in $SIZES; do
	emu calls/reset '{}' >/dev/null
	ctld0=$(wc -l <"$ctld_log")
	if ! r=$("$PBX" -q cluster exec pw -- sh -c "$(cat "$W/wake.sh")" wake "$n"); then
		echo "N=$n: the job did not run; pbx-power.log ends:" >&2
		find "$W/emu/bodies" -path '*/var/log/pbx-power.log' -exec tail -5 {} + >&2
		exit 1
	fi
	tend=$(now)
	wake=$(echo "$r" | awk '{ printf "%.2f", $2 - $1 }')
	run=$(echo "$r" | awk '{ printf "%.2f", $3 - $1 }')
	i=0
	while [ "$(power_running resume)" != 0 ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	rc=$(calls)
	emu calls/reset '{}' >/dev/null
	held=$(nodes_held)
	echo "N=$n wake (submit to every node up in SLURM): $wake s; job RUNNING: $run s; slurmctld's log: submission to the last node responding $(ctld_wake "$ctld0") s"
	echo "N=$n node instances: $held; bodies: $(body_procs); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "N=$n resume calls: $rc"
	i=0
	while [ "$(nodes_held)" != 0 ] && [ "$i" -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
	tgone=$(now)
	sl=$(secs "$tend" "$tgone")
	i=0
	while [ "$(power_running suspend)" != 0 ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	sc=$(calls)
	echo "N=$n sleep (job end to no node instance): $sl s, minus SuspendTime: $(secs "$SUSPEND" "$sl") s"
	echo "N=$n suspend calls: $sc"
	summary="$summary
$n $wake $run $sl ${rc%% *} ${sc%% *}"
	# SLURM wakes a node again only once it is powered down (idle~):
	# SuspendTimeout (30 s) after pbx-suspend; not timed, waited for
	i=0
	while [ "$(states)" != "idle~ " ] && [ "$i" -lt 180 ]; do sleep 1; i=$((i + 1)); done
done
echo
echo "N wake_s running_s sleep_s resume_calls suspend_calls"
echo "$summary" | grep .
echo "$summary" | grep . | awk 'NR == 1 { n1 = $1; c1 = $5; d1 = $6; w1 = $2 }
	NR > 1 { printf "calls(%d)/calls(%d): resume %.2f, suspend %.2f; wake(%d)/wake(%d) = %.2f\n", $1, n1, $5 / c1, $6 / d1, $1, n1, $2 / w1 }'
resumes=$(find "$W/emu/bodies" -path '*/var/log/pbx-power.log' -exec grep -h ' resume ' {} + 2>/dev/null | grep -c . || true)
echo "pbx-resume ran $resumes time(s) for $(echo "$SIZES" | wc -w) wake(s)"
