# shellcheck shell=sh
# templates/bootstrap/85-autostop.sh - stage autostop: the autostop watcher.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---- autostop (templates/autostop.sh, docs/autostop.md): a watcher on
# every node; the head's decides when the cluster has been idle for
# PBX_AUTOSTOP seconds, or its budget is spent (PBX_BUDGET_UNTIL, unix s:
# docs/cost.md), and powers it off, the others obey.  Neither: none runs
# on the head.
if [ -n "${PBX_AUTOSTOP:-}" ]; then
	stage autostop
	is_uint "$PBX_AUTOSTOP" || die "PBX_AUTOSTOP must be a number of seconds (got '$PBX_AUTOSTOP')"
	is_uint "${PBX_BUDGET_UNTIL:-0}" || die "PBX_BUDGET_UNTIL must be a time in unix seconds (got '$PBX_BUDGET_UNTIL')"
	# the head's watcher: off when it has nothing to decide
	head_off=0
	[ "$ROLE" = head ] && [ "$PBX_AUTOSTOP" = 0 ] && [ "${PBX_BUDGET_UNTIL:-0}" = 0 ] && head_off=1
	watcher_install pbx-autostop autostop.sh
	watcher=$WPATH
	watcher_changed=$CHANGED
	settings_file "$ROOT/etc/pbx/autostop.conf" pbx-autostop "PBX_MODE=$MODE" "PBX_ROLE=$ROLE" \
		"PBX_NODE=$NODE" "PBX_ROOT=$ROOT" "PBX_SHARED=$SHARED" "SLURM_CONF=$CONF" \
		"PBX_AUTOSTOP_S=$PBX_AUTOSTOP" "PBX_BUDGET_UNTIL=${PBX_BUDGET_UNTIL:-0}" \
		${PBX_AUTOSTOP_TICK:+"PBX_AUTOSTOP_TICK=$PBX_AUTOSTOP_TICK"} \
		${PBX_AUTOSTOP_BOOT_GRACE:+"PBX_AUTOSTOP_BOOT_GRACE=$PBX_AUTOSTOP_BOOT_GRACE"} \
		${HEAD_PBX:+"PBX_AUTOSTOP_ACTION=${PBX_AUTOSTOP_ACTION:-stop}"} ${HEAD_PBX:+"PBX_BIN=$HEAD_PBX"} \
		${HEAD_PBX:+"PBX_CLUSTER=$PBX_CLUSTER"} ${HEAD_PBX:+"PBX_CLUSTER_ID=$PBX_CLUSTER_ID"} \
		${HEAD_PBX:+"PBX_CLOUD=$PBX_CLOUD"} ${HEAD_PBX:+"PBX_HEAD_INSTANCE=$PBX_HEAD_INSTANCE"}
	[ "$CHANGED" = 0 ] || watcher_changed=1
	# a new start: no stop request of an earlier life stands
	[ "$ROLE" = compute ] || rm -rf "$SHARED_HERE/.pbx-autostop"
	if [ "$MODE" = systemd ]; then
		watcher_unit pbx-autostop
		[ "$CHANGED" = 0 ] || watcher_changed=1
	fi
	watcher_run pbx-autostop "$watcher_changed" "$head_off" "$watcher" watch
fi
