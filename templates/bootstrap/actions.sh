# shellcheck shell=sh
# templates/bootstrap/actions.sh - the actions other than up: status, down and
# install (for `pbx image build`).  Defines do_status, do_down and do_install.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---------------------------------------------------------------- status / down

do_status() {
	conf_load
	for d in munged "$SLURM_DAEMON"; do
		if daemon_running "$d"; then
			say "$d running"
		else
			say "$d stopped"
		fi
	done
	exit 0
}

do_down() {
	conf_load
	if [ "$MODE" = systemd ]; then
		for w in pbx-autostop pbx-preempt; do
			! systemctl is-active --quiet "$w" || systemctl stop "$w" || log "systemctl stop $w failed"
		done
		systemctl stop "$SLURM_DAEMON" || log "systemctl stop $SLURM_DAEMON failed"
		systemctl stop munge || log "systemctl stop munge failed"
	else
		# Both SLURM daemons: a prefix should never have both, but if it
		# does, leave nothing behind.
		stop_pid pbx-autostop
		stop_pid pbx-preempt
		stop_pid slurmd
		stop_pid slurmctld
		stop_pid munged
	fi
	log "down"
	exit 0
}

# ---------------------------------------------------------------- install

# The packages of both roles, pbx-train's runtime, Python environments' and
# pbx's: HEAD_PKGS, COMPUTE_PKGS, TRAIN_PKGS, ENV_PKGS, HEAD_ENV_PKGS and
# PBX_PKGS above (tests/vm/image.sh's baked image has the same).

do_install() {
	stage install
	if [ "$MODE" = direct ]; then
		missing=
		for b in munged munge unmunge sinfo scontrol slurmctld slurmd; do
			command -v "$b" >/dev/null 2>&1 || missing="$missing $b"
		done
		[ -z "$missing" ] || die "direct mode installs nothing, and this machine lacks:$missing"
		log "direct mode: everything is there; nothing installed"
		stage 'done'
		exit 0
	fi
	want=
	for p in $HEAD_PKGS $COMPUTE_PKGS $TRAIN_PKGS $ENV_PKGS $HEAD_ENV_PKGS $PBX_PKGS; do
		case " $want " in *" $p "*) continue ;; esac
		dpkg -s "$p" >/dev/null 2>&1 || want="$want $p"
	done
	# a template behind a proxy (its proxy:): apt goes through it here;
	# the image keeps none (a cluster's up installs its own: 15-install.sh)
	apt_proxy_conf=$ROOT/etc/apt/apt.conf.d/80pbx-proxy
	if [ -r "${PBX_STAGE:-}/apt-proxy.conf" ]; then
		install_text "$PBX_STAGE/apt-proxy.conf" "$apt_proxy_conf"
	fi
	if [ -n "$want" ]; then
		log "installing:$want"
		n=0
		until DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 update -q </dev/null; do
			n=$((n + 1))
			[ "$n" -lt 5 ] || die "apt-get update failed"
			sleep "${PBX_APT_RETRY_SLEEP:-10}"
		done
		# shellcheck disable=SC2086 # word splitting of the package list
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -q \
			--no-install-recommends $want </dev/null || die "apt-get install$want failed"
	else
		log "everything is installed already"
	fi
	stage clean
	# every cluster's nodes get pbx's key; a machine started from the image
	# must not run munge with a key it shares with every other such machine
	systemctl stop munge 2>/dev/null || :
	# neither SLURM daemon starts from the image by itself: `up` enables
	# its role's one (and so need not disable the other at every start)
	systemctl disable --now slurmctld slurmd >/dev/null 2>&1 || :
	rm -f "$ROOT/etc/munge/munge.key"
	# apt-get clean takes apt's cache lock, which DPkg::Lock::Timeout does
	# not wait for: another apt on the machine (unattended-upgrades, or
	# two image builds on one test host) makes it fail at once, status 100
	n=0
	until apt-get clean; do
		n=$((n + 1))
		[ "$n" -lt 60 ] || die "apt-get clean failed (apt's cache locked for 2 minutes)"
		sleep 2
	done
	rm -rf "$ROOT"/var/lib/apt/lists/*
	rm -f "$apt_proxy_conf"
	sync
	stage 'done'
	exit 0
}
