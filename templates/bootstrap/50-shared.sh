# shellcheck shell=sh
# templates/bootstrap/50-shared.sh - stage shared: the shared directory
# (systemd: the head's NFS export, as pbx rendered it, a compute node's mount;
# direct: nothing) and the experiments' apt packages.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---- shared
stage shared
if [ "$MODE" = direct ]; then
	: # made with the other directories
elif [ "$ROLE" = head ]; then
	# root's: tasks (the task user) write only their runs' directories,
	# which pbx gives them (src/jobs/arrays.c); 1777 before tasks ran as
	# the task user
	mkdir -p "$ROOT$SHARED"
	chmod 0755 "$ROOT$SHARED"
	# the export line pbx rendered (PBX_STAGE/exports): SHARED to every
	# compute node's NodeAddr, root squashed; empty without compute nodes
	[ -r "$STAGE_DIR/exports" ] || die "no exports in PBX_STAGE ($STAGE_DIR)"
	line=
	read -r line <"$STAGE_DIR/exports" || : # (no newline: read sets it, then fails)
	case $line in
	'') ;;
	"$SHARED "*) ;;
	*) die "PBX_STAGE/exports does not export PBX_SHARED ($SHARED): $line" ;;
	esac
	if [ -z "$line" ]; then
		log "no compute nodes in slurm.conf: $SHARED is not exported"
	else
		table_line "$ROOT/etc/exports" 1 "$SHARED" "$line"
		# Exported again on every run, changed or not: exportfs resolves
		# each client's name when it runs and leaves out a name that does
		# not resolve yet, as a node that sleeps has none until the head's
		# pbx makes it (power saving; its resume runs this bootstrap on the
		# head once the new instances exist).
		if ! systemctl is-active --quiet nfs-server; then
			systemctl enable --now nfs-server || die "could not start nfs-server (journalctl -u nfs-server)"
		fi
		exportfs -ra || die "exportfs -ra failed"
	fi
else
	head_addr=${PBX_HEAD_ADDR:-}
	[ -n "$head_addr" ] || die "PBX_HEAD_ADDR is not set (needed to mount $SHARED)"
	mp=$ROOT$SHARED
	mkdir -p "$mp"
	table_line "$ROOT/etc/fstab" 2 "$SHARED" "$head_addr:$SHARED $SHARED nfs4 defaults,_netdev,nofail 0 0"
	if awk -v p="$mp" '$2 == p { found = 1 } END { exit !found }' /proc/mounts 2>/dev/null; then
		log "$mp already mounted"
	else
		# The head bootstraps at the same time: wait for its export.
		deadline=$(($(date +%s) + ${PBX_NFS_WAIT:-300}))
		# NFSv4 only: `-t nfs` falls back to v3 when it asks while the
		# head's nfs-server is still starting (vm.gce-booted once mounted
		# v3), with other locking and daemons; a v4 refusal is retried
		until mount -t nfs4 "$head_addr:$SHARED" "$mp"; do
			[ "$(date +%s)" -lt "$deadline" ] || die "could not mount $head_addr:$SHARED on $mp"
			log "mount $head_addr:$SHARED failed; retrying"
			sleep 5
		done
	fi
	# ---- the experiments' Debian packages (environment.apt, src/jobs/apt.c):
	# parrun installs them on the nodes that are up and lists them in
	# SHARED/.pbx-apt (root's, on the head's disk), so that a node made
	# later (power saving, resize) has them too.  Trusted only when the
	# file and the directory holding it are root's and no one else may
	# write them; names checked again; a failure is logged, not fatal
	# (the tasks say what is missing)
	apt_list=$mp/.pbx-apt
	if [ -f "$apt_list" ] && [ ! -L "$apt_list" ] &&
		[ "$(stat -c '%u %A' "$apt_list")" = "0 -rw-r--r--" ] &&
		[ "$(stat -c %u "$mp")" = 0 ] && [ -z "$(find "$mp" -maxdepth 0 -perm /022)" ]; then
		apt_want=$(grep -E '^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$' "$apt_list" | tr '\n' ' ')
		apt_names=$(printf '%s' "$apt_want" | sed 's/=[^ ]*//g')
		# shellcheck disable=SC2086 # word splitting of the package list
		if [ -n "$apt_want" ] && ! dpkg -s $apt_names >/dev/null 2>&1; then
			log "installing the experiments' apt: packages: $apt_want"
			# shellcheck disable=SC2086 # word splitting of the package list
			DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -q \
				--no-install-recommends $apt_want </dev/null ||
				log "apt-get install $apt_want failed: tasks that need them fail on this node"
		fi
	fi
fi
