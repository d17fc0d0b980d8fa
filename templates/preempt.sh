#!/bin/sh
# preempt.sh - pbx-preempt, the watcher that turns a cloud's preemption
# notice into SIGTERM for the SLURM jobs of a spot compute node, so a task
# checkpoints and is requeued instead of being lost (docs/spot.md).
# templates/bootstrap.sh installs it on the compute nodes of
# `spot: true` groups as ROOT/usr/local/sbin/pbx-preempt with its settings
# in ROOT/etc/pbx/preempt.conf, and runs `pbx-preempt watch` under systemd
# (pbx-preempt.service) or, on a node body, as a daemon of the body.
#
# The notice:
#   gce  the metadata server's instance/preempted turns TRUE (watched with
#        wait_for_change, header Metadata-Flavor: Google); the machine is
#        powered off about 30 s later.
#   aws  IMDSv2's meta-data/spot/instance-action answers 200 (404 until a
#        notice; asked every PBX_PREEMPT_POLL s, default 5); the instance is
#        stopped or terminated about 2 minutes later.
# On a notice it, once:
#   1. drains this node in SLURM (reason "spot preemption notice"), so no
#      job starts on it, a requeued one included; on a cluster with SLURM's
#      power saving (slurm.conf names a ResumeProgram) it marks the node
#      POWER_DOWN_ASAP instead, which drains it too and then has slurmctld
#      run pbx-suspend for it: a node above its group's min: sleeps and is
#      made again, by itself, when a job needs it, and one that always
#      runs pbx-suspend powers up again once SLURM has it down;
#   2. sends SIGTERM to the batch step of every job running on this node
#      (`scancel --signal=TERM --batch`): pbx's task wrapper forwards it to
#      the task, pbx-train writes its checkpoint and exits 75, and the
#      wrapper requeues the job, which resumes on a node that is up;
#   3. logs what it did.
# Nothing it reads from the metadata server is run or put on a command
# line but the ETag, which is cut down to letters and digits first.
#
#   pbx-preempt watch       the loop
#   pbx-preempt notice      acts as on a notice (for a test, or by hand)
#   pbx-preempt stop        what the machine's shutdown does (see stop())
# Settings (preempt.conf, shell assignments written by the bootstrap):
# PBX_MODE, PBX_NODE, PBX_ROOT, SLURM_CONF, PBX_SPOT (gce | aws),
# PBX_PREEMPT_STOP_WAIT (s, default 25).
set -u

CONF_FILE=${PBX_PREEMPT_CONF:-$(dirname "$0")/../../../etc/pbx/preempt.conf}
# shellcheck disable=SC1090 # written by the bootstrap
. "$CONF_FILE" || { echo "pbx-preempt: cannot read $CONF_FILE" >&2; exit 2; }
ROOT=${PBX_ROOT:-}
POLL=${PBX_PREEMPT_POLL:-5}
STATE_DIR=$ROOT/var/lib/pbx
TMP_DIR=$ROOT/run/pbx-preempt
export SLURM_CONF PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

log() { printf '%s pbx-preempt[%s]: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$PBX_NODE" "$*"; }

# meta_addr NAME DEFAULT: the metadata server's address.  A node body's
# files under ROOT stand for the machine's, so its ROOT/etc/hosts (written
# by the emulator) names the server as a VM's /etc/hosts or DNS does;
# anything there that is not a dotted IPv4 address is ignored.
meta_addr() {
	a=
	if [ "$PBX_MODE" = direct ] && [ -r "$ROOT/etc/hosts" ]; then
		a=$(awk -v n="$1" '$1 !~ /^#/ { for (i = 2; i <= NF; i++) if ($i == n) { print $1; exit } }' \
			"$ROOT/etc/hosts")
	fi
	case $a in '' | *[!0-9.]*) a=$2 ;; esac
	echo "$a"
}

# The jobs running on this node, one id a line (only [0-9_]).
node_jobs() {
	squeue -h -w "$PBX_NODE" -t RUNNING -o %A 2>/dev/null | grep -x '[0-9][0-9_]*' || :
}

# Whether SLURM's power saving may remove this node and make it anew: the
# cluster has power saving (its slurm.conf names a ResumeProgram: a group
# has min:, docs/power-saving.md), and pbx makes every Spot node of such a
# cluster again after a preemption (docs/spot.md).
power_saving() {
	grep -q '^ResumeProgram=' "$SLURM_CONF" 2>/dev/null
}

# What a notice does (see the top), once per boot (TMP_DIR/acted, made
# atomically: the watch and the shutdown may both see the notice); DETAIL
# is logged, never run.
on_notice() {
	mkdir -p "$TMP_DIR"
	mkdir "$TMP_DIR/acted" 2>/dev/null || return 0
	log "preemption notice ($1): draining $PBX_NODE and signalling its jobs"
	mkdir -p "$STATE_DIR"
	printf 'noticed_at=%s\ncloud=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$PBX_SPOT" \
		>"$STATE_DIR/preempted"
	if power_saving; then
		# SLURM powers it down once its jobs have left (pbx-suspend
		# deletes the instance) and makes it again: when a job waits for
		# it, the requeued one included, or, for a node that always runs,
		# at once (pbx-suspend powers it up once it is down)
		how=POWER_DOWN_ASAP
	else
		how=DRAIN
	fi
	if scontrol update nodename="$PBX_NODE" state=$how reason="spot preemption notice"; then
		log "$PBX_NODE: $how"
	else
		log "scontrol update nodename=$PBX_NODE state=$how failed"
	fi
	jobs=$(node_jobs)
	[ -n "$jobs" ] || log "no job runs on $PBX_NODE"
	for j in $jobs; do
		if scancel --signal=TERM --batch "$j"; then
			log "job $j: SIGTERM sent to its batch step"
		else
			log "job $j: scancel --signal=TERM --batch failed"
		fi
	done
}

# Compute Engine: whether instance/preempted is TRUE now (one request).
gce_preempted() {
	host=$(meta_addr metadata.google.internal metadata.google.internal)
	v=$(curl -sf --max-time 5 -H 'Metadata-Flavor: Google' \
		"http://$host/computeMetadata/v1/instance/preempted") && [ "$v" = TRUE ]
}

# Compute Engine: instance/preempted, held open with wait_for_change and
# the last ETag, so a change is seen at once.  Returns when it is TRUE.
watch_gce() {
	host=$(meta_addr metadata.google.internal metadata.google.internal)
	base=http://$host/computeMetadata/v1/instance/preempted
	etag=
	while :; do
		url=$base
		[ -z "$etag" ] || url="$base?wait_for_change=true&timeout=60&last_etag=$etag"
		if v=$(curl -sf --max-time 90 -H 'Metadata-Flavor: Google' -D "$TMP_DIR/headers" "$url"); then
			[ "$v" != TRUE ] || return 0
			etag=$(awk -F': *' 'tolower($1) == "etag" { print $2 }' "$TMP_DIR/headers" |
				tr -cd 'A-Za-z0-9' | cut -c1-64)
		else
			etag=
			sleep 2
		fi
	done
}

# EC2: one look at IMDSv2's spot/instance-action (a fresh session token
# when there is none or the last one was refused).  0 on a notice, DETAIL
# its text.
aws_notice() {
	host=$(meta_addr instance-data 169.254.169.254)
	if [ -z "${token:-}" ]; then
		token=$(curl -sf --max-time 10 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 21600' \
			"http://$host/latest/api/token") || token=
		case $token in *[!A-Za-z0-9_=-]*) token= ;; esac
	fi
	[ -n "$token" ] || return 1
	code=$(curl -s --max-time 10 -o "$TMP_DIR/action" -w '%{http_code}' \
		-H "X-aws-ec2-metadata-token: $token" \
		"http://$host/latest/meta-data/spot/instance-action") || code=000
	case $code in
	200)
		DETAIL=$(tr -cd 'A-Za-z0-9:{}",._ -' <"$TMP_DIR/action" | cut -c1-200)
		return 0
		;;
	401) token= ;;
	esac
	return 1
}

# EC2: aws_notice every POLL s.  Returns on a notice, DETAIL its text.
watch_aws() {
	token=
	until aws_notice; do sleep "$POLL"; done
}

# Waits, at most PBX_PREEMPT_STOP_WAIT s (default 25), until no job runs
# on this node.
wait_jobs_gone() {
	end=$(($(date +%s) + ${PBX_PREEMPT_STOP_WAIT:-25}))
	while [ -n "$(node_jobs)" ]; do
		if [ "$(date +%s)" -ge "$end" ]; then
			log "jobs still run on $PBX_NODE after ${PBX_PREEMPT_STOP_WAIT:-25} s: the machine goes off"
			return 0
		fi
		sleep 1
	done
	log "no job runs on $PBX_NODE any more"
}

# The machine's shutdown (ExecStop of pbx-preempt.service; the unit is
# ordered after slurmd, the network and /shared, so this runs while they
# are still up).  Compute Engine's notice comes with ACPI's power button:
# the guest shuts down at once, perhaps before the watch saw the notice,
# and ends 30 s later.  So: a notice not yet acted on is acted on now;
# then, on a notice, it waits (PBX_PREEMPT_STOP_WAIT) for this node's jobs
# to leave, so that each task checkpoints and is requeued while SLURM and
# /shared are there.  A shutdown without a notice (autostop's poweroff, a
# reboot, the bootstrap's restart of the unit) does nothing.
stop() {
	mkdir -p "$TMP_DIR"
	if [ ! -d "$TMP_DIR/acted" ]; then
		DETAIL=
		seen=0
		case $PBX_SPOT in
		gce) gce_preempted && seen=1 DETAIL="instance/preempted is TRUE" ;;
		aws) aws_notice && seen=1 ;;
		*) log "PBX_SPOT must be gce or aws, not '$PBX_SPOT'" ;;
		esac
		[ "$seen" = 1 ] || return 0
		on_notice "$DETAIL; seen at the machine's shutdown"
	fi
	log "the machine shuts down after a preemption notice: waiting for the jobs on $PBX_NODE to leave"
	wait_jobs_gone
}

watch() {
	mkdir -p "$TMP_DIR"
	log "watching for a preemption notice ($PBX_SPOT)"
	DETAIL=
	case $PBX_SPOT in
	gce) watch_gce && DETAIL="instance/preempted is TRUE" ;;
	aws) watch_aws ;;
	*) log "PBX_SPOT must be gce or aws, not '$PBX_SPOT'"; exit 2 ;;
	esac
	on_notice "$DETAIL"
	# Nothing more to do: the machine goes off.  Stay, so a supervisor
	# does not start another watcher that would act again.
	while :; do sleep 3600; done
}

case ${1:-} in
watch) watch ;;
notice) on_notice "by hand" ;;
stop) stop ;;
*) echo "usage: pbx-preempt watch|notice|stop" >&2; exit 2 ;;
esac
