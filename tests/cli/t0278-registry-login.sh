#!/bin/sh
# t0278-registry-login.sh - registry images that want credentials
# (environment: container: docker://REF; docs/environments.md,
# "Credentials") on a local cluster: the test's registry
# (tests/emulators/registry) with token authentication (serve --users);
# without credentials every task fails at once saying which command gives
# them; `pbx cluster registry-login` with a wrong password fails naming the
# registry, not the password; with the right one (from stdin, and typed at
# a prompt that does not echo) the tasks run in the image, and once the
# registry changed the password the pull says it refused the credentials;
# the auth file on
# the head is the task user's, 0600, in a 0700 directory of its own; the
# password is nowhere in pbx's store, logs, `pbx log`, the cluster's files
# or the test's captured output; registry-logout removes the file and a
# new tag's pull fails again.  Addresses and ports: the test's slot
# (lib.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-registry.sh"

registry_needs
local_cluster rl slot "{ name: node, count: 1 }"
trap 'registry_stop; cleanup_cluster' EXIT
SHARED=$PBX_HOME/clusters/rl/shared
REGISTRY=127.0.0.1:$REG_PORT
CAPTURED=$TEST_TMP/captured
SECRETS=$TEST_TMP/secrets
mkdir -p "$SECRETS"
# rpx ARGS...: run_pbx, its output kept for the check that no secret shows
rpx() {
	run_pbx "$@"
	printf '%s\n%s\n' "$out" "$errout" >>"$CAPTURED"
}

# the password, the registry's users file and a wrong password: files,
# never a command line
PW=pw-t0278-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
printf '%s\n' "$PW" >"$SECRETS/pw"
printf 'not-%s\n' "$PW" >"$SECRETS/wrong"
printf 'alice:%s\n' "$PW" >"$SECRETS/users"
B64=$(printf 'alice:%s' "$PW" | base64 -w0)

registry_box
digest=$(registry_push pbx/private v1 "$TEST_TMP/box.tar")
ok $? "the image is stored in the registry: $digest"
mkdir -p "$TEST_TMP/v2/etc" && echo two >"$TEST_TMP/v2/etc/v2"
tar -C "$TEST_TMP/v2" -cf "$TEST_TMP/v2.tar" .
registry_push pbx/private v2 "$TEST_TMP/box.tar" "$TEST_TMP/v2.tar" >/dev/null
registry_serve --users "$SECRETS/users"

rpx -q cluster start rl
ok $rc "the cluster starts: $errout"
registry_conf rl
HEAD=$PBX_HOME/clusters/rl/nodes/head
AUTH=$HEAD/var/lib/pbx-registry/pbx-task/auth.json

# parrun_box NAME REF: parrun of a 4-task experiment in REF; PKG its package
parrun_box() {
	box_exp "$1" "$2" "$TEST_TMP/$1"
	rpx parrun "$TEST_TMP/$1/experiment.yaml" rl
	ok $rc "$1: parrun: $errout"
	PKG=$(printf '%s\n' "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
	wait_final "$PKG" 300
}
WANTS="registry $REGISTRY wants credentials: run pbx cluster registry-login rl $REGISTRY"
# refused NAME TAG WHY: a package of TAG fails every task at once, saying
# WHY (the registry wants credentials, and how to give them)
refused() {
	parrun_box "$1" "docker://$REGISTRY/pbx/private:$2"
	is "$(task_states "$PKG")" "FAILED FAILED FAILED FAILED" "$1: every task failed"
	why=$3
	grep -qF "$why" "$SHARED/pbx/$PKG/tasks/0/stderr"
	ok $? "$1: each says why: $(grep pbx-env "$SHARED/pbx/$PKG/tasks/0/stderr" | head -n 1)"
	rpx state "$PKG"
	printf '%s\n' "$out" | grep -qF "environment failed: $why"
	ok $? "$1: pbx state says the environment failed: $(printf '%s\n' "$out" | grep -m1 environment)"
	[ ! -e "$SHARED/pbx/$PKG/tasks/0/result.txt" ]
	ok $? "$1: no command ran"
}

refused anonymous v1 "$WANTS"
grep -q "^GET /v2/pbx/private/manifests/v1 401\$" "$REGLOG"
ok $? "the registry refused the anonymous manifest request (401)"

# a wrong password: refused, the registry named, the password not
rpx cluster registry-login -u alice --password-stdin rl "$REGISTRY" <"$SECRETS/wrong"
is "$rc" 1 "registry-login with a wrong password fails"
case $errout in *"registry $REGISTRY refused the login as alice"*"invalid username/password"*) r=0 ;; *) r=1 ;; esac
ok $r "it says which registry refused whom, and why: $errout"
[ ! -e "$AUTH" ]
ok $? "no auth file was written"

# usage errors, before anything reaches the head
rpx cluster registry-login --password-stdin rl "$REGISTRY" <"$SECRETS/pw"
is "$rc" 2 "no -u USER: exit 2"
rpx cluster registry-login -u alice --password-stdin rl "docker://$REGISTRY" <"$SECRETS/pw"
case $rc:$errout in 2:*"want HOST[:PORT]"*) r=0 ;; *) r=1 ;; esac
ok $r "a REGISTRY that is not HOST[:PORT]: exit 2: $(printf '%s\n' "$errout" | head -n 1)"
rpx cluster registry-login -u alice rl "$REGISTRY" </dev/null
case $rc:$errout in 2:*"--password-stdin"*) r=0 ;; *) r=1 ;; esac
ok $r "no terminal and no --password-stdin: exit 2, saying so: $(printf '%s\n' "$errout" | head -n 1)"

# the right one, from stdin
rpx cluster registry-login -u alice --password-stdin rl "$REGISTRY" <"$SECRETS/pw"
ok $rc "registry-login with the password: $errout"
is "$(stat -c '%U %a' "$AUTH" 2>&1)" "pbx-task 600" "the auth file is the task user's, mode 0600"
is "$(stat -c '%U %a' "${AUTH%/*}" 2>&1)" "pbx-task 700" "in a directory of its own, mode 0700"
case $AUTH in "$SHARED"/*) r=1 ;; *) r=0 ;; esac
ok $r "on the head's own disk, not the shared one"
grep -q "^GET /token?account=alice&service=pbx-test-registry 200\$" "$REGLOG"
ok $? "skopeo logged in with a token (/token answered 200)"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT kind || ' ' || detail FROM events WHERE kind LIKE 'registry.%'" 2>&1)" \
	"registry.login $REGISTRY as alice" "the store records who logged in where (no secret)"

parrun_box granted "docker://$REGISTRY/pbx/private:v1"
is "$(task_states "$PKG")" "COMPLETED COMPLETED COMPLETED COMPLETED" "with credentials every task ran"
outs=$(cat "$SHARED/pbx/$PKG"/tasks/*/stdout 2>/dev/null)
is "$(printf '%s\n' "$outs" | grep -c '^x=[1-4] uid=2850 os=pbxbox image=pbx registry image slurmd=absent$')" 4 \
	"each in the private image, as the task user: $(printf '%s\n' "$outs" | head -n 1)"
is "$(sed -n 's/^READY //p' "$SHARED/pbx/$PKG/env/status")" "${digest#sha256:}" "the key is the manifest's digest"
rpx log "$PKG:env"
ok $rc "pbx log PKG:env: $errout"
rpx log "$PKG"

# logging in again at a prompt that does not echo (a terminal of its own)
python3 "$PBX_SOURCE_DIR/tests/cli/pty_answer.py" "Password for alice at $REGISTRY: " "$SECRETS/pw" \
	"$PBX" cluster registry-login -u alice rl "$REGISTRY" >"$TEST_TMP/pty.out" 2>&1
ok $? "registry-login at a terminal: $(tr -d '\r' <"$TEST_TMP/pty.out" | tr '\n' '|')"
cat "$TEST_TMP/pty.out" >>"$CAPTURED"
grep -q "logged in to $REGISTRY as alice" "$TEST_TMP/pty.out" && ! grep -qF "$PW" "$TEST_TMP/pty.out"
ok $? "the terminal showed the prompt and the result, not the password"

# the secret: nowhere in pbx's store, logs or files, nor in what the test
# saw; its base64 only in the head's auth file
sqlite3 "$PBX_HOME/pbx.db" .dump >"$TEST_TMP/store.sql"
for f in "$TEST_TMP/store.sql" "$CAPTURED" "$TEST_TMP/registry.log"; do
	! grep -qF -e "$PW" -e "$B64" "$f"
	ok $? "no password in ${f##*/}"
done
leaks=$(grep -rlF -e "$PW" -e "$B64" "$PBX_HOME" "$TEST_TMP" 2>/dev/null | grep -v -e "^$SECRETS/" -e "^$AUTH\$")
is "$leaks" "" "no password, in clear or base64, in any file of PBX_HOME (the cluster's included) or the test's, but the auth file"
grep -qF "$B64" "$AUTH"
ok $? "the auth file holds the credentials (skopeo's base64)"

# the registry changes alice's password: the pull says so
registry_stop
printf 'alice:changed-%s\n' "$PW" >"$SECRETS/users"
registry_serve --users "$SECRETS/users"
refused changed v2 "registry $REGISTRY refused the credentials pbx cluster registry-login gave it, for 127.0.0.1:$REG_PORT/pbx/private: run pbx cluster registry-login rl $REGISTRY again"

# logout: the file goes, a new tag's pull wants credentials again
rpx cluster registry-logout rl "$REGISTRY"
ok $rc "registry-logout: $errout"
[ ! -e "$AUTH" ]
ok $? "the auth file is gone"
case $errout in *"logged out of $REGISTRY"*) r=0 ;; *) r=1 ;; esac
ok $r "it says so: $errout"
rpx cluster registry-logout rl "$REGISTRY"
case $rc:$errout in 0:*"not logged in to $REGISTRY"*) r=0 ;; *) r=1 ;; esac
ok $r "a second logout: not logged in, not an error: $errout"
refused after-logout v2 "$WANTS"

rpx -q cluster stop --discard-results rl
ok $rc "stop: $errout"
done_testing
