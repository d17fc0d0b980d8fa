#!/bin/sh
# t0274-env-gc.sh - `pbx cluster gc` (docs/environments.md, "Removing old
# environments") on a local cluster whose tasks run as the task user: two
# packages with environments of their own (a pure-Python wheel at 1.0 and
# at 2.0, no index); while both are known nothing goes; once one is
# forgotten (its run directory made two hours old, as time would), a dry
# run says what would go and removes nothing, then gc removes its run
# directory, its archive and its unpacked copy and keeps the other's; the
# forgotten experiment submitted again builds and runs; an environment
# whose lock a build holds is left (busy); a run directory the store does
# not know that changed in the last hour, a file that is not an
# environment, and a status naming a key with '..' are left alone.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster gc slot "{ name: node, count: 2 }"
SHARED=$PBX_HOME/clusters/gc/shared
ENVS=$SHARED/pbx/envs
# environments are packed with zstd where the nodes have it (this
# machine's, for a local cluster); a gzip one (the orphan below) goes too
if command -v zstd >/dev/null; then PACKED=zst; else PACKED=gz; fi
LOCAL=$PBX_HOME/clusters/gc/nodes/head/var/tmp

# exp NAME VERSION: an experiment importing pbxdemo==VERSION from its wheels
exp() {
	mkdir -p "$TEST_TMP/$1/wheels"
	make_wheel "$TEST_TMP/$1/wheels" pbxdemo "$2"
	echo "pbxdemo==$2" >"$TEST_TMP/$1/requirements.txt"
	cat >"$TEST_TMP/$1/experiment.yaml" <<EXP
name: $1
command: python3 -c 'import pbxdemo; print(pbxdemo.__version__, {i})'
sweep: { grid: { i: [1, 2] } }
environment: { python: requirements.txt, wheels: wheels }
EXP
}
exp old 1.0
exp new 2.0

run_pbx -q cluster start gc
ok $rc "the cluster starts: $errout"
submit() {
	run_pbx parrun "$TEST_TMP/$1/experiment.yaml" gc
	pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
	wait_final "$pkg" 300
	echo "$pkg"
}
old=$(submit old)
new=$(submit new)
is "$(task_states "$old") $(task_states "$new")" "COMPLETED COMPLETED COMPLETED COMPLETED" "both packages ran"
kold=$(sed -n 's/^READY //p' "$SHARED/pbx/$old/env/status")
knew=$(sed -n 's/^READY //p' "$SHARED/pbx/$new/env/status")
[ -n "$kold" ] && [ -n "$knew" ] && [ "$kold" != "$knew" ]
ok $? "two environments: $kold $knew"
[ -f "$ENVS/$kold.tar.$PACKED" ] && [ -f "$ENVS/$knew.tar.$PACKED" ] && [ -d "$LOCAL/pbx-env-2850/$kold" ] &&
	[ -d "$LOCAL/pbx-env-2850/$knew" ]
ok $? "both archived on the shared disk and unpacked on the nodes' disk"
run_pbx -q harvest
ok $rc "harvest: $errout"

# planted: not an environment, a status with a hostile key, a young stranger
echo x >"$ENVS/notakey.tar.gz"
mkdir -p "$SHARED/pbx/0123456789ab/pkg" "$SHARED/pbx/0123456789ab/env"
echo "READY ../../../etc" >"$SHARED/pbx/0123456789ab/env/status"

run_pbx cluster gc --json gc
ok $rc "gc with both packages known: $errout"
is "$(printf '%s\n' "$out" | json_get 'len(d["gone"]), sorted(d["kept"]) == sorted(["'"$kold"'", "'"$knew"'"]), d["young"]')" \
	"0 True 1" "nothing goes; both environments are kept; the young stranger is counted"

run_pbx -q forget "$old"
ok $rc "forget the old package: $errout"
run_pbx cluster gc --dry-run gc
case $errout in *"2 forgotten packages changed in the last hour, left: gc again later"*) r=0 ;; *) r=1 ;; esac
ok $r "a package forgotten just now is left, and gc says so: $errout"
touch -d '2 hours ago' "$SHARED/pbx/$old"
before=$(du -sb "$SHARED/pbx" | cut -f1)
run_pbx cluster gc --dry-run gc
ok $rc "a dry run: $errout"
case $out in *"would remove run directory of forgotten package $old"*"would remove environment ${kold%"${kold#????????????}"}"*"would remove unpacked environment ${kold%"${kold#????????????}"}"*) r=0 ;; *) r=1 ;; esac
ok $r "says the forgotten package's directory, its environment and its copy would go: $out"
case $errout in *"would free"*"1 environment in use kept"*) r=0 ;; *) r=1 ;; esac
ok $r "and what it would free: $errout"
is "$(du -sb "$SHARED/pbx" | cut -f1)" "$before" "and removes nothing"

# what a gc killed half way leaves: a run directory renamed out of the way
mkdir -p "$SHARED/pbx/.gc.abcdef012345/tasks/0"
run_pbx cluster gc --json gc
ok $rc "gc: $errout"
[ ! -e "$SHARED/pbx/.gc.abcdef012345" ]
ok $? "what a gc cut short left renamed goes too"
is "$(printf '%s\n' "$out" | json_get '" ".join(sorted(g["kind"] + ":" + g["id"][:12] for g in d["gone"]))')" \
	"env:${kold%"${kold#????????????}"} local:${kold%"${kold#????????????}"} package:$old" \
	"the run directory, the archive and the unpacked copy went: $out"
[ ! -e "$SHARED/pbx/$old" ] && [ ! -e "$ENVS/$kold.tar.$PACKED" ] && [ ! -e "$ENVS/$kold.sha256" ] &&
	[ ! -e "$LOCAL/pbx-env-2850/$kold" ]
ok $? "gone from the disks"
[ -f "$ENVS/$knew.tar.$PACKED" ] && [ -d "$LOCAL/pbx-env-2850/$knew/bin" ] && [ -d "$SHARED/pbx/$new/tasks" ]
ok $? "the known package, its environment and its copy stay"
[ -f "$ENVS/notakey.tar.gz" ] && [ -d "$SHARED/pbx/0123456789ab" ] && [ -d /etc ]
ok $? "what is not an environment, and a young directory the store does not know, stay"
is "$(printf '%s\n' "$out" | json_get 'd["freed_bytes"] > 0')" True "freed bytes counted"

# the forgotten experiment again: a new environment, built, and run
again=$(submit old)
is "$(task_states "$again")" "COMPLETED COMPLETED" "the experiment submitted again runs"
is "$(sed -n 's/^READY //p' "$SHARED/pbx/$again/env/status")" "$kold" "with the same environment, built again"

# an environment being built (its lock held) is left, and goes once free
orphan=$(printf '%064d' 7)
echo x >"$ENVS/$orphan.tar.gz"
echo x >"$ENVS/$orphan.sha256"
chown pbx-task: "$ENVS/$orphan.tar.gz" "$ENVS/$orphan.sha256"
(
	exec 9>"$ENVS/.$orphan.lock"
	flock 9
	exec sleep 60
) &
holder=$!
wait_for 50 sh -c "! flock -n '$ENVS/.$orphan.lock' true"
run_pbx cluster gc --json gc
is "$(printf '%s\n' "$out" | json_get 'd["busy"], [g["id"] for g in d["gone"]]')" "1 []" \
	"an environment whose lock is held is left: $out"
[ -f "$ENVS/$orphan.tar.gz" ]
ok $? "still there"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
run_pbx cluster gc --json gc
is "$(printf '%s\n' "$out" | json_get '[g["kind"] + ":" + g["id"] for g in d["gone"]]')" "['env:$orphan']" \
	"once free, it goes"

run_pbx cluster gc
is "$rc" 2 "a missing NAME is a usage error"
done_testing
