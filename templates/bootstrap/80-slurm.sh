# shellcheck shell=sh
# templates/bootstrap/80-slurm.sh - stage slurmctld|slurmd: the role's SLURM
# daemon started (or restarted when its configuration changed), and a
# restarted slurmd's node resumed.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ping_ctld CC: true once `scontrol ping` says slurmctld is up, asking
# every CC hundredths of a second for up to PBX_CTLD_WAIT seconds (60).
ping_ctld() {
	waited=0
	while :; do
		out=$(SLURM_CONF=$CONF scontrol ping 2>/dev/null) || out=
		case $out in *'is UP'*) return 0 ;; esac
		[ "$waited" -lt $((${PBX_CTLD_WAIT:-60} * 100)) ] || return 1
		nap "$1"
		waited=$((waited + ${1#0}))
	done
}

# Waits until slurmctld answers, so a slurmd started while the head is
# still bootstrapping registers at once instead of after its own retry
# delay.  With PBX_CTLD_LOCK (node bodies on pbx's host) it first blocks on
# that lock, which pbx holds until the head's bootstrap is over and then
# fills with "ok" or "failed"; after "failed" it does not wait for a
# slurmctld that is not coming.  Then (or else) it pings every 0.1 s.
# Never fails: slurmd retries.
wait_for_ctld() {
	if [ -n "${PBX_CTLD_LOCK:-}" ] && [ -e "$PBX_CTLD_LOCK" ] &&
		command -v flock >/dev/null 2>&1; then
		exec 8<"$PBX_CTLD_LOCK"
		flock -s -w "${PBX_CTLD_WAIT:-60}" 8 || true
		head_went=
		read -r head_went <&8 || true
		exec 8<&-
		if [ "$head_went" = failed ]; then
			log "the head's bootstrap failed: not waiting for slurmctld"
			CTLD_GONE=1
			return 0
		fi
	fi
	if ping_ctld 10; then
		ctld_readdress
	else
		log "slurmctld does not answer yet; slurmd will keep trying to register"
	fi
}

# remade: whether this node is one that SLURM's power saving makes anew
# (pbx_power_remade in src/cluster/slurm_sleep_plan.c): a node that sleeps
# (State=CLOUD in slurm.conf), or a Spot node on a cluster with power
# saving (slurm.conf names a ResumeProgram), made anew after a preemption
# (docs/spot.md).  RA_LINE is this node's own line of slurm.conf, its name
# compared whole (a '.' in it is no pattern).
remade() {
	RA_LINE=$(awk -v n="NodeName=$NODE" '$1 == n' "$CONF" 2>/dev/null)
	case $RA_LINE in
	*" State=CLOUD") return 0 ;;
	'') return 1 ;;
	esac
	[ -n "${PBX_SPOT:-}" ] && grep -q '^ResumeProgram=' "$CONF"
}

# A node that power saving makes (remade) is a new machine at each wake,
# often at another address under the same NodeAddr (its instance's DNS
# name).  slurmctld resolves a node's NodeAddr once and keeps the
# address (SLURM 22.05: read_config.c, slurm_conf_get_addr), so it would
# send the woken node's pings and jobs to its previous instance's address
# (vm.gce-power: the node "not responding", its job requeued).  Setting the
# same NodeAddr again makes slurmctld resolve it afresh (slurm_reset_alias);
# asked before slurmd starts, so slurmctld talks to this instance from its
# first registration.  Root on a node is a SLURM administrator (munge).
ctld_readdress() {
	remade || return 0
	ra_addr='' ra_host=''
	for f in $RA_LINE; do
		case $f in
		NodeAddr=*) ra_addr=${f#NodeAddr=} ;;
		NodeHostname=*) ra_host=${f#NodeHostname=} ;;
		esac
	done
	[ -n "$ra_addr" ] || return 0
	SLURM_CONF=$CONF scontrol update NodeName="$NODE" NodeAddr="$ra_addr" ${ra_host:+NodeHostname="$ra_host"} ||
		log "scontrol update NodeName=$NODE NodeAddr=$ra_addr failed: slurmctld may still use the node's previous address"
}

# ---- slurmctld / slurmd
stage "$SLURM_DAEMON"
if [ "$ROLE" = head ]; then
	changed=$conf_changed
	ctld_host=${CONF_CTLD_HOST%%(*}
	short=
	read -r short </proc/sys/kernel/hostname 2>/dev/null || short=$(hostname)
	short=${short%%.*}
	if [ "$ctld_host" != "$short" ] && [ "$MODE" = systemd ]; then
		# a VM whose name has not come from DHCP yet (a booted VM on a
		# loaded machine was still "localhost" here): slurmctld, which
		# knows itself by the hostname, would refuse to start
		log "this host is '$short', not SlurmctldHost '$ctld_host': setting its hostname"
		printf '%s' "$ctld_host" >/proc/sys/kernel/hostname || die "cannot set this host's name to $ctld_host, which slurmctld needs"
	elif [ "$ctld_host" != "$short" ]; then
		log "warning: SlurmctldHost is '$ctld_host' but this host is '$short'; slurmctld will refuse to start"
	fi
else
	changed=0
	[ "$conf_changed$gres_changed$defaults_changed" = 000 ] || changed=1
fi
started=0
if [ "$MODE" = systemd ]; then
	if ! systemctl is-active --quiet "$SLURM_DAEMON"; then
		# As in direct mode: slurmd registers at once when slurmctld answers.
		[ "$ROLE" = head ] || wait_for_ctld
		systemctl enable --now "$SLURM_DAEMON" || die "systemctl enable --now $SLURM_DAEMON failed (journalctl -u $SLURM_DAEMON)"
		started=1
	elif [ "$changed" = 1 ]; then
		log "configuration changed: restarting $SLURM_DAEMON"
		systemctl restart "$SLURM_DAEMON" || die "systemctl restart $SLURM_DAEMON failed (journalctl -u $SLURM_DAEMON)"
		started=1
	fi
	if [ "$started" = 1 ]; then
		# Type=simple units report success at once; catch a quick death.
		sleep 1
		if ! systemctl is-active --quiet "$SLURM_DAEMON"; then
			logfile_of "$SLURM_DAEMON"
			last_words "$LF"
			die "$SLURM_DAEMON exited right after starting${LAST_WORDS:+ ($LAST_WORDS)}; see journalctl -u $SLURM_DAEMON and $LF"
		fi
	fi
else
	bin=$(command -v "$SLURM_DAEMON")
	pidfile_of "$SLURM_DAEMON"
	if pid_alive "$PF" "$SLURM_DAEMON"; then
		if [ "$changed" = 1 ]; then
			log "configuration changed: restarting $SLURM_DAEMON"
			stop_pid "$SLURM_DAEMON"
		else
			log "$SLURM_DAEMON already running (pid $PID)"
		fi
	fi
	if ! pid_alive "$PF" "$SLURM_DAEMON"; then
		if [ "$ROLE" = head ]; then
			start_direct slurmctld "$bin" -f "$CONF"
		else
			wait_for_ctld
			# A node that power saving makes (remade) that SLURM woke
			# must report a boot after the wake-up, as a machine made
			# then would (slurmctld ignores its registration until
			# then: "Still waiting for boot"); a node body shares this
			# host's boot, so its slurmd reports its own start as the
			# boot (-b)
			if [ "$MODE" = direct ] && remade; then
				start_direct slurmd "$bin" -b -N "$NODE" -f "$CONF"
			else
				start_direct slurmd "$bin" -N "$NODE" -f "$CONF"
			fi
		fi
		started=1
	fi
	if [ "$ROLE" = head ]; then
		# Done means slurmctld answers (asking every 10 ms: only the
		# head asks; the compute nodes wait for this).
		logfile_of slurmctld
		ping_ctld 01 || die "slurmctld does not answer scontrol ping; see ${LF:-its log}"
	fi
fi

# A restarted slurmd may find its node DOWN or DRAINED in slurmctld; resume
# it.  While slurmctld is not up yet (the head bootstraps at the same time)
# this waits a little and then leaves it to ReturnToService.
# A slurmd's first start needs none of this: its node is new to slurmctld
# (and pbx resumes a node that still comes up down); nor does a node whose
# head failed (there is no slurmctld to ask).
if [ "$ROLE" = compute ] && [ "$started" = 1 ] && [ "$first_start" = 0 ] &&
	[ -z "${CTLD_GONE:-}" ]; then
	waited=0
	resumed=0
	while :; do
		st=$(SLURM_CONF=$CONF sinfo -h -n "$NODE" -o %t 2>/dev/null) || st=
		case $st in
		*'*') ;; # not responding (yet): wait for the registration
		idle* | alloc* | mix* | comp* | resv* | plnd* | maint*) break ;;
		down* | drain* | drng* | inval* | fail*)
			if [ "$resumed" = 0 ]; then
				log "node $NODE is $st in slurmctld: resuming"
				SLURM_CONF=$CONF scontrol update nodename="$NODE" state=resume ||
					log "scontrol update nodename=$NODE state=resume failed"
				resumed=1
			fi
			;;
		esac
		if [ "$waited" -ge $((${PBX_RESUME_WAIT:-30} * 100)) ]; then
			log "node $NODE is '${st:-unknown}' in sinfo (slurmctld not reachable yet?)"
			break
		fi
		nap 25   # every node polls at once
		waited=$((waited + 25))
	done
fi
