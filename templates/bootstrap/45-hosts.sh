# shellcheck shell=sh
# templates/bootstrap/45-hosts.sh - the block of /etc/hosts that pbx staged
# (the names of the nodes power saving makes), merged into ROOT/etc/hosts.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# The names of the nodes that power saving makes, on a cloud whose DNS
# does not know them (EC2): the head's pbx stages the awake ones as it
# wakes nodes, the user's start those of the Spot nodes that always run,
# which it makes (src/cluster/slurm_sleep_steps.c), and every node keeps
# them in a block of its /etc/hosts, which slurm.conf's NodeAddr names.
# pbx renders the block (PBX_STAGE/hosts: src/cluster/bootstrap_render.c,
# pbx_bootstrap_hosts_block): its begin marker, "ADDRESS NAME" lines whose
# address and name it checked, its end marker.  A staged name's line
# replaces that name's; the block's other lines stay (a node asleep is
# asked nothing, and its next wake stages it anew), so neither pbx drops a
# name the other staged: the merge needs the node's own file, so it is
# made here.  A stage is a block or refused, before anything is written.
# On a node body /etc/hosts may be a bind mount of ROOT/etc/hosts: written
# in place there.  Before the shared directory's export, which names the
# nodes.
power_hosts() {
	staged=$STAGE_DIR/hosts hosts=$ROOT/etc/hosts
	[ -r "$staged" ] || return 0
	ensure_parent "$hosts"
	[ -e "$hosts" ] || : >"$hosts" || die "cannot write $hosts"
	awk '
		FILENAME == ARGV[1] {
			if (++n == 1) b = $0; else e = $0
			if (n > 1) { staged[$2] = 1; add[n] = $0 }
			next
		}
		$0 == b { inside = 1; next }
		$0 == e { inside = 0; next }
		inside { if (!($2 in staged)) kept[++k] = $0; next }
		{ print }
		END {
			if (n < 2 || b !~ /^# pbx: .* \(begin\)$/ || e !~ /^# pbx: .* \(end\)$/) exit 3
			print b
			for (i = 1; i <= k; i++) print kept[i]
			for (i = 2; i < n; i++) print add[i]
			print e
		}' "$staged" "$hosts" >"$hosts.pbx-in" || {
		rm -f "$hosts.pbx-in"
		die "staged hosts ($staged) is not a block of pbx's markers, or $hosts.pbx-in cannot be written"
	}
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
