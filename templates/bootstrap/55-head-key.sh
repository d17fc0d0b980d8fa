# shellcheck shell=sh
# templates/bootstrap/55-head-key.sh - the head's own SSH key (pbx on the
# head), made on the head and authorized for the login user.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---- the head's pbx (src/cluster/headdelete.c, docs/head-identity.md):
# with PBX_HEAD_PBX=1 pbx runs on the head as the head's own cloud identity
# (autostop_action: delete), through ROOT/usr/local/sbin/pbx-head.  It
# reaches the nodes with a key of the head's own, never the user's: the
# head makes it once (it stays on the head's disk, its private half never
# leaves it) and publishes the public half in SHARED/.pbx; every node, the
# head too, authorizes it for the login user, tagged "pbx-head:CLUSTER"
# (a node of a cluster without PBX_HEAD_PBX drops the line).
HEAD_HOME=$ROOT/var/lib/pbx/home
HEAD_KEY=$HEAD_HOME/.ssh/id_ed25519
HEAD_KEY_PUB=$SHARED_HERE/.pbx/head_key.pub
HEAD_KEY_TAG=pbx-head:$PBX_CLUSTER

# The head's key pair, made once; its public half published in SHARED.
head_key_make() {
	mkdir -p "$HEAD_HOME/.ssh"
	chmod 700 "$HEAD_HOME" "$HEAD_HOME/.ssh"
	if [ ! -s "$HEAD_KEY" ] || [ ! -s "$HEAD_KEY.pub" ]; then
		rm -f "$HEAD_KEY" "$HEAD_KEY.pub"
		ssh-keygen -q -t ed25519 -N '' -C "$HEAD_KEY_TAG" -f "$HEAD_KEY" </dev/null >/dev/null ||
			die "ssh-keygen could not make the head's key ($HEAD_KEY)"
		log "made the head's key ($HEAD_KEY)"
	fi
	# SHARED is writable by all: the key's directory must be this
	# script's own, never a link or another user's
	pubdir=${HEAD_KEY_PUB%/*}
	if [ -L "$pubdir" ] || { [ -e "$pubdir" ] && [ "$(stat -c %u "$pubdir")" != "$(id -u)" ]; }; then
		log "removing $pubdir: not this script's own directory"
		rm -rf "$pubdir"
	fi
	mkdir -p "$pubdir"
	chmod 755 "$pubdir"
	install_file "$HEAD_KEY.pub" "$HEAD_KEY_PUB" 0644
}

# The login user's authorized_keys, in its HOME (PBX_LOGIN_USER and
# PBX_LOGIN_HOME: pbx passes them through sudo, which resets HOME; a root
# login's own).  On a node body that HOME is under ROOT (sshd reads
# HOME/.ssh/authorized_keys there too): never a file of the host.  Sets
# AK_FILE and AK_USER; returns 1 with why in AK_WHY when there is none.
login_keys_file() {
	AK_USER=${PBX_LOGIN_USER:-$(id -un)}
	home=${PBX_LOGIN_HOME:-${HOME:-}}
	AK_FILE=
	case $home in
	/*) ;;
	*) AK_WHY="no home directory for the login user $AK_USER (PBX_LOGIN_HOME)"; return 1 ;;
	esac
	case $home/ in
	*/../* | */./*) AK_WHY="the login user's home ($home) is not a plain path"; return 1 ;;
	esac
	if [ "$MODE" = direct ]; then
		case $home/ in
		"$ROOT"/*) ;;
		*) AK_WHY="the login user's home ($home) is outside this node body ($ROOT)"; return 1 ;;
		esac
	fi
	AK_FILE=$home/.ssh/authorized_keys
}

# Whether the head's key is published: the file and its directory are
# this script's user's (root's on a VM: what the head's bootstrap wrote
# through NFS), not a link; anything a task could have put in SHARED is not.
head_key_published() {
	pubdir=${HEAD_KEY_PUB%/*}
	me=$(id -u)
	[ -r "$HEAD_KEY_PUB" ] && [ ! -L "$pubdir" ] && [ ! -L "$HEAD_KEY_PUB" ] &&
		[ "$(stat -c %u "$pubdir")" = "$me" ] && [ "$(stat -c %u "$HEAD_KEY_PUB")" = "$me" ]
}

# Authorizes the head's key for the login user (PBX_HEAD_PBX=1), or drops
# it (otherwise); the file's other lines are kept as they are.  The head
# reads its key from its own disk, never back from SHARED, where a task
# could have put its own (docs/SECURITY.md, "The head's control state");
# a compute node reads what the head published.  Either way the one line
# is read without following a link or blocking on a FIFO (read_small).
head_key_authorize() {
	want=
	if [ "${PBX_HEAD_PBX:-0}" = 1 ] && [ "$ROLE" = head ]; then
		src=$HEAD_KEY.pub
		want=$(read_small "$src")
	elif [ "${PBX_HEAD_PBX:-0}" = 1 ]; then
		src=$HEAD_KEY_PUB
		# a compute node's bootstrap runs beside the head's: wait for it
		waited=0
		while ! head_key_published && [ "$waited" -lt "${PBX_NFS_WAIT:-300}" ]; do
			sleep 1
			waited=$((waited + 1))
		done
		head_key_published || die "the head published no key ($HEAD_KEY_PUB, by root, in a directory of root's) in ${waited} s"
		want=$(read_small "$src")
	fi
	if [ "${PBX_HEAD_PBX:-0}" = 1 ]; then
		want=${want%%"$NL"*}
		case $want in
		"ssh-ed25519 "*" $HEAD_KEY_TAG") ;;
		*) die "$src is not this cluster's head key" ;;
		esac
		[ "$(printf %s "$want" | tr -cd 'A-Za-z0-9+/= :.@_-')" = "$want" ] ||
			die "$src holds characters no key has"
	fi
	if ! login_keys_file; then
		[ -z "$want" ] || die "$AK_WHY"
		return 0    # nothing to add, and no file of the user's to look at
	fi
	[ -n "$want" ] || grep -q " $HEAD_KEY_TAG\$" "$AK_FILE" 2>/dev/null || return 0
	dir=${AK_FILE%/*}
	mkdir -p "$dir"
	chmod 700 "$dir"
	begin_new "$AK_FILE"
	{
		[ ! -r "$AK_FILE" ] || awk -v tag="$HEAD_KEY_TAG" '$NF != tag' "$AK_FILE"
		[ -z "$want" ] || printf '%s\n' "$want"
	} >"$NEW"
	install_new "$AK_FILE" 0600
	# sshd reads it as the user
	[ "$AK_USER" = "$(id -un)" ] || chown "$AK_USER:" "$dir" "$AK_FILE" ||
		die "chown $AK_USER $AK_FILE failed"
	[ "$CHANGED" = 0 ] || log "the head's key ${want:+is}${want:-is no longer} authorized for $AK_USER"
}

if [ "$ROLE" = head ]; then
	[ "${PBX_HEAD_PBX:-0}" = 0 ] || head_key_make
	head_key_authorize
fi
