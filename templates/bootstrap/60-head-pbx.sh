# shellcheck shell=sh
# templates/bootstrap/60-head-pbx.sh - pbx on the head (autostop_action:
# delete): pbx-head and its configuration.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

head_pbx_install() {
	HEAD_PBX=
	[ "$ROLE" = head ] && [ "${PBX_HEAD_PBX:-0}" = 1 ] || return 0
	[ -r "$STAGE_DIR/head-config.yaml" ] || die "no head-config.yaml in PBX_STAGE ($STAGE_DIR)"
	ensure_parent "$ROOT/etc/pbx/head-config.yaml"
	install_file "$STAGE_DIR/head-config.yaml" "$ROOT/etc/pbx/head-config.yaml" 0600
	if [ "$MODE" = direct ]; then
		[ -x "${PBX_SELF_BIN:-}" ] || die "PBX_SELF_BIN (${PBX_SELF_BIN:-}) is not an executable file"
		bin=$PBX_SELF_BIN
	else
		[ -f "$STAGE_DIR/pbx" ] || die "no pbx in PBX_STAGE ($STAGE_DIR)"
		if ! staged_for_here pbx; then
			log "pbx not installed: built on '$built', this head is '$here': autostop stops the cluster instead of deleting it"
			return 0
		fi
		ensure_pkgs "pbx's runtime" "$PBX_PKGS"
		install_file "$STAGE_DIR/pbx" "$ROOT/usr/local/lib/pbx/pbx" 0755
		bin=$ROOT/usr/local/lib/pbx/pbx
		"$bin" version >/dev/null || die "pbx does not run on this head (ldd $bin)"
	fi
	HEAD_PBX=$ROOT/usr/local/sbin/pbx-head
	ensure_parent "$HEAD_PBX"
	begin_new "$HEAD_PBX"
	{
		echo "#!/bin/sh"
		echo "# pbx-head - pbx on the head of cluster $PBX_CLUSTER, as the head's own cloud"
		echo "# identity and with the head's own key: written by pbx's bootstrap"
		echo "# (templates/bootstrap.sh; docs/head-identity.md).  Run it as root.  It runs"
		echo "# the head's own commands itself (PBX_THIS_NODE), the other nodes' over SSH."
		printf 'exec env -u GOOGLE_APPLICATION_CREDENTIALS -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \\\n'
		printf '\t-u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_EC2_METADATA_DISABLED -u GCE_METADATA_HOST \\\n'
		printf '\t-u AWS_EC2_METADATA_SERVICE_ENDPOINT -u SSH_AUTH_SOCK'
		for kv in "HOME=$HEAD_HOME" "PBX_HOME=$HEAD_HOME" "CLOUDSDK_CONFIG=$HEAD_HOME/gcloud" \
			"PBX_CONFIG=$ROOT/etc/pbx/head-config.yaml" "PBX_THIS_NODE=$NODE" \
			${ROOT:+"PBX_BODY_ROOT=$ROOT"} ${ROOT:+"PBX_BODY_SHARED=$SHARED"} \
			$(body_port_env) $(identity_env) $(head_train_env); do
			sq "${kv#*=}"
			printf ' %s=%s' "${kv%%=*}" "$SQ"
		done
		sq "$bin"
		printf ' %s "$@"\n' "$SQ"
	} >"$NEW"
	install_new "$HEAD_PBX" 0755
	head_pbx_munge_key
}

# The cluster's munge key where the head's pbx keeps it (its home's
# clusters/CLUSTER/munge.key, as the user's pbx does): a start the head
# runs (power saving) stages the same key, not a new one.
head_pbx_munge_key() {
	dir=$HEAD_HOME/clusters/$PBX_CLUSTER
	mkdir -p "$dir"
	chmod 700 "$HEAD_HOME/clusters" "$dir"
	install_file "$STAGE_DIR/munge.key" "$dir/munge.key" 0400
}

# A node body's SLURM ports as this bootstrap has them, for the head's pbx,
# whose cluster directory is not the user's (src/cluster/discover.c; with
# PBX_BODY_SHARED, the shared directory); nothing on a VM.
body_port_env() {
	[ "$MODE" = direct ] || return 0
	case $CONF_CTLD_PORT in
	'' | *[!0-9]*) ;;
	*) echo "PBX_BODY_PORT_BASE=$CONF_CTLD_PORT" ;;
	esac
}

# pbx-train as installed above, for the nodes the head's pbx makes (power
# saving): pbx finds it beside itself only in a build tree (PBX_TRAIN_BIN,
# src/util/proc.c); its CUDA module is found from there (../lib/pbx).
head_train_env() {
	[ "$MODE" = systemd ] && [ -x "$ROOT/usr/local/bin/pbx-train" ] || return 0
	echo "PBX_TRAIN_BIN=$ROOT/usr/local/bin/pbx-train"
}

# The metadata server (Compute Engine) or IMDS (EC2) of a node body: its
# own address, which ROOT/etc/hosts names as a VM's does; a VM finds them
# by name.  Prints the environment pbx needs for it (nothing on a VM).
identity_env() {
	[ "$MODE" = direct ] || return 0
	case ${PBX_CLOUD:-} in
	gce) a=$(awk '$2 == "metadata.google.internal" { print $1; exit }' "$ROOT/etc/hosts" 2>/dev/null)
		[ -z "$a" ] || echo "GCE_METADATA_HOST=$a" ;;
	aws) a=$(awk '$2 == "instance-data" { print $1; exit }' "$ROOT/etc/hosts" 2>/dev/null)
		[ -z "$a" ] || echo "AWS_EC2_METADATA_SERVICE_ENDPOINT=http://$a" ;;
	esac
}

head_pbx_install
