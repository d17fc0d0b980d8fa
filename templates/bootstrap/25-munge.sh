# shellcheck shell=sh
# templates/bootstrap/25-munge.sh - stage munge: the cluster's key installed
# and munged running with it.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---- munge
stage munge
if [ "$MODE" = systemd ]; then
	key_bytes=$(wc -c <"$STAGE_DIR/munge.key")
	[ "$((key_bytes))" -ge 32 ] || die "munge.key in PBX_STAGE has $key_bytes bytes (need at least 32)"
fi
install_file "$STAGE_DIR/munge.key" "$MUNGE_KEY" 0400
key_changed=$CHANGED
munge_ok() { munge -S "$MUNGE_SOCK" -n </dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null 2>&1; }
if [ "$MODE" = systemd ]; then
	chown munge:munge "$ROOT/etc/munge" "$MUNGE_KEY"
	if [ "$key_changed" = 1 ] || ! systemctl is-active --quiet munge; then
		# (enable runs update-rc.d: seconds on a small VM; skipped when done)
		systemctl is-enabled --quiet munge 2>/dev/null || systemctl enable munge
		systemctl restart munge || die "systemctl restart munge failed (journalctl -u munge)"
	fi
else
	if pid_alive "$MUNGE_PID" munged; then
		if [ "$key_changed" = 1 ] || ! munge_ok; then
			stop_pid munged
		fi
	fi
	if ! pid_alive "$MUNGE_PID" munged; then
		# munged checks the key's length itself (at least 32 bytes).
		# --force: a node prefix under a private directory (/root/.pbx,
		# mktemp -d) fails munged's "ancestors must be world-executable"
		# check of the socket; the prefix is this node's own, so demote it
		# to a warning.  munged still refuses a socket held by a live daemon.
		start_direct munged "$(command -v munged)" --force --socket="$MUNGE_SOCK" \
			--key-file="$MUNGE_KEY" --pid-file="$MUNGE_PID" \
			--log-file="$MUNGE_LOG" --seed-file="$MUNGE_SEED"
	fi
fi
tries=0
until munge_ok; do
	tries=$((tries + 1))
	[ "$tries" -lt 200 ] || die "munge does not work on $MUNGE_SOCK (munge -n | unmunge fails; see $MUNGE_LOG)"
	nap 05
done
