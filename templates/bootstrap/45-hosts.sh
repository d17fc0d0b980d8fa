# shellcheck shell=sh
# templates/bootstrap/45-hosts.sh - the staged names of the nodes power saving
# makes, in /etc/hosts.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# The names of the nodes that power saving makes, on a cloud whose DNS
# does not know them (EC2): the head's pbx stages "ADDRESS NAME" of the
# awake ones as it wakes nodes, the user's start those of the Spot nodes
# that always run, which it makes (src/cluster/slurm_sleep_steps.c), and every node
# keeps them in a block of its /etc/hosts, which slurm.conf's NodeAddr
# names.  A staged name's line replaces that name's; the others stay (a
# node asleep is asked nothing, and its next wake stages it anew), so
# neither pbx drops a name the other staged.  On a node body /etc/hosts may
# be a bind mount of ROOT/etc/hosts: written in place there.  Before the
# shared directory's export, which names the nodes.
HOSTS_BEGIN="# pbx: nodes of cluster ${PBX_CLUSTER:-} that sleep (begin)"
HOSTS_END="# pbx: nodes of cluster ${PBX_CLUSTER:-} that sleep (end)"
power_hosts() {
	staged=$STAGE_DIR/hosts hosts=$ROOT/etc/hosts
	[ -r "$staged" ] || return 0
	while read -r addr name rest; do
		case $addr in '' | *[!0-9a-f.:]*) die "staged hosts: bad address '$addr'" ;; esac
		case $name in '' | -* | *[!a-z0-9-]*) die "staged hosts: bad name '$name'" ;; esac
		[ -z "$rest" ] || die "staged hosts: more than an address and a name: '$rest'"
	done <"$staged"
	ensure_parent "$hosts"
	[ -e "$hosts" ] || : >"$hosts" || die "cannot write $hosts"
	awk -v b="$HOSTS_BEGIN" -v e="$HOSTS_END" '
		FILENAME == ARGV[1] { staged[$2] = 1; add[++n] = $0; next }
		$0 == b { inside = 1; next }
		$0 == e { inside = 0; next }
		inside { if (!($2 in staged)) kept[++k] = $0; next }
		{ print }
		END {
			print b
			for (i = 1; i <= k; i++) print kept[i]
			for (i = 1; i <= n; i++) print add[i]
			print e
		}' "$staged" "$hosts" >"$hosts.pbx-in" || die "cannot write $hosts.pbx-in"
	if cmp -s "$hosts.pbx-in" "$hosts"; then
		rm -f "$hosts.pbx-in"
	elif [ "$MODE" = systemd ]; then
		{ chmod 0644 "$hosts.pbx-in" && mv -f "$hosts.pbx-in" "$hosts"; } || die "cannot replace $hosts"
	else
		cat "$hosts.pbx-in" >"$hosts" || die "cannot write $hosts"
		rm -f "$hosts.pbx-in"
	fi
}
power_hosts
