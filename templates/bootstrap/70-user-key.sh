# shellcheck shell=sh
# templates/bootstrap/70-user-key.sh - the user's key (PBX_USER_KEY),
# authorized before slurmd starts.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---- the user's key (docs/power-saving.md, "On EC2"): the head's pbx,
# which makes nodes for SLURM's power saving, passes the user's public key
# from the cluster's record (PBX_USER_KEY, "TYPE BASE64"), and each node it
# bootstraps authorizes it for the login user, tagged "pbx-user:CLUSTER"
# (a key the record changed replaces the line), so the user's pbx reaches
# a node the head woke whatever key the cloud gave it (EC2: the head's key
# pair only).  The file's other lines are kept.  Without PBX_USER_KEY (the
# user's own pbx, which logs in with that key) the file is left alone.
USER_KEY_TAG=pbx-user:$PBX_CLUSTER
user_key_authorize() {
	key=${PBX_USER_KEY:-}
	[ -n "$key" ] || return 0
	kt=${key%% *}
	kb=${key#* }
	case $kt in '' | *[!a-z0-9.@-]*) die "PBX_USER_KEY is not a public key (its type)" ;; esac
	case $kb in '' | *[!A-Za-z0-9+/=]*) die "PBX_USER_KEY is not a public key (TYPE BASE64)" ;; esac
	[ "$kt $kb" = "$key" ] || die "PBX_USER_KEY is not a public key (TYPE BASE64)"
	login_keys_file || die "$AK_WHY"
	dir=${AK_FILE%/*}
	mkdir -p "$dir"
	chmod 700 "$dir"
	begin_new "$AK_FILE"
	{
		[ ! -r "$AK_FILE" ] || awk -v tag="$USER_KEY_TAG" '$NF != tag' "$AK_FILE"
		printf '%s %s %s\n' "$kt" "$kb" "$USER_KEY_TAG"
	} >"$NEW"
	install_new "$AK_FILE" 0600
	[ "$AK_USER" = "$(id -un)" ] || chown "$AK_USER:" "$dir" "$AK_FILE" ||
		die "chown $AK_USER $AK_FILE failed"
	[ "$CHANGED" = 0 ] || log "the user's key is authorized for $AK_USER"
}

# pbx and its configuration (no credential: pbx finds the head's own
# identity) on the head, and ROOT/usr/local/sbin/pbx-head, which runs it
# with them.  HEAD_PBX is pbx-head; empty when there is none (autostop

# the user's key before slurmd: once slurmd runs SLURM starts jobs here and
# the user may reach this node (`exec -n`), so it must let the user in by
# then (a node the head woke on EC2 holds the head's key pair alone)
user_key_authorize
