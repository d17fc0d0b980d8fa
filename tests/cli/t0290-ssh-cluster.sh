#!/bin/sh
# t0290-ssh-cluster.sh - a SLURM cluster pbx did not build, used as it is
# (cloud ssh; docs/ssh-clusters.md) as an ordinary user: "the university's
# cluster" is a local cluster root made here, its login node an sshd of the
# test's own where pbx-uni (uid 2870, no sudo) logs in with a key; setup
# sources the cluster's environment as a `module load` would.  cluster
# start, stop and resize are refused (exit 2); exec runs as the user; parrun
# makes the work directory 0700, submits as the user, and the tasks run as
# the user; state, log, cancel, rerun, harvest and report work.  Addresses
# 127.0.157.x, ports 22350 (the cluster), 22351 (its login node) and
# 27100-27163.
. "$(dirname "$0")/lib.sh"

UNI_UID=2870
UNI_HOME=/home/pbx-uni
local_cluster campus 127.0.157.0 22350 27100 "{ name: node, count: 2 }"
run_pbx -q cluster start campus
ok $rc "the university's cluster runs (a local cluster of root's): $errout"
HEADROOT=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT n.root FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.name = 'campus' AND c.state != 'deleted' AND n.name = 'head'")

# the user: an ordinary account, no sudo
if ! getent passwd pbx-uni >/dev/null; then
	useradd --uid "$UNI_UID" --user-group --home-dir "$UNI_HOME" --create-home --shell /bin/sh \
		--comment "t0290 university user" pbx-uni
fi
# no password, not locked ("!" would make sshd refuse the account)
usermod -p '*' pbx-uni
is "$(id -u pbx-uni)" "$UNI_UID" "the user pbx-uni exists (uid $UNI_UID)"
rm -rf "$UNI_HOME/pbx"
# its login node: an sshd of the test's own, the user's key authorized
mkdir -p "$TEST_TMP/login/keys"
chmod 755 "$TEST_TMP/login" "$TEST_TMP/login/keys"
ssh-keygen -q -t ed25519 -N "" -C t0290-host -f "$TEST_TMP/login/host"
ssh-keygen -q -t ed25519 -N "" -C t0290-uni -f "$PBX_HOME/uni_id"
cp "$PBX_HOME/uni_id.pub" "$TEST_TMP/login/keys/pbx-uni"
chmod 644 "$TEST_TMP/login/keys/pbx-uni"
mkdir -p /run/sshd
/usr/sbin/sshd -D -f /dev/null -h "$TEST_TMP/login/host" -E "$TEST_TMP/login/sshd.log" \
	-o ListenAddress=127.0.157.100:22351 -o "AuthorizedKeysFile=$TEST_TMP/login/keys/%u" \
	-o PidFile="$TEST_TMP/login/sshd.pid" -o StrictModes=no -o PasswordAuthentication=no \
	-o KbdInteractiveAuthentication=no -o PermitRootLogin=no -o UseDNS=no \
	-o "Subsystem=sftp internal-sftp" -o LogLevel=VERBOSE </dev/null >/dev/null 2>&1 &
LOGIN_SSHD=$!
wait_secs 10 test -s "$TEST_TMP/login/sshd.pid"
ok $? "the login node's sshd runs"
python3 - "$PBX_HOME/config.yaml" "$PBX_HOME/uni_id" "$HEADROOT" <<'PY'
import sys
path, key, root = sys.argv[1:]
text = open(path).read()
uni = """  uni:
    cloud: ssh
    host: 127.0.157.100
    port: 22351
    login_user: pbx-uni
    ssh_key: %s
    setup: . %s/etc/pbx/env.sh
""" % (key, root)
text = text.replace("clusters:\n", "clusters:\n" + uni, 1)
open(path, "w").write(text)
PY
stop_login() {
	kill "$LOGIN_SSHD" 2>/dev/null
	rm -rf "$UNI_HOME/pbx"
	[ "$tap_failed" = 0 ] || sed 's/^/# login sshd: /' "$TEST_TMP/login/sshd.log" | tail -n 20
}
trap 'stop_login; cleanup_cluster' EXIT

run_pbx cluster start uni
is "$rc" 2 "cluster start is refused (exit 2)"
case $errout in *"cluster uni is not pbx's to start"*"pbx-uni@127.0.157.100"*) r=0 ;; *) r=1 ;; esac
ok $r "saying that pbx uses it as it is: $errout"
run_pbx cluster resize uni +1
is "$rc" 2 "so is resize"
run_pbx cluster exec uni -- sh -c 'echo "$(id -u) $(id -un) $PBX_SHARED"; sudo -n true 2>/dev/null && echo sudo'
is "$out" "$UNI_UID pbx-uni $UNI_HOME/pbx" "exec runs as the user, in the work directory, without sudo: $errout"
is "$(stat -c '%a %U' "$UNI_HOME/pbx")" "700 pbx-uni" "the work directory is the user's, 0700"

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: campus
command: echo "x=$PBX_PARAM_X uid=$(id -u) node=$PBX_NODE" && echo {x} >out.txt && [ {x} != 3 ]
sweep: { grid: { x: [1, 2, 3] } }
outputs: [out.txt]
EXP
run_pbx parrun "$TEST_TMP/exp/experiment.yaml" uni
ok $rc "parrun on the user's cluster: $out $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg" 120
is "$(task_states "$pkg")" "COMPLETED COMPLETED FAILED" "the tasks ran (x=3 fails, as it should)"
R=$UNI_HOME/pbx/pbx/$pkg
is "$(cat "$R"/tasks/*/stdout 2>/dev/null | grep -c "^x=[123] uid=$UNI_UID node=")" 3 \
	"each ran as the user: $(cat "$R"/tasks/*/stdout 2>/dev/null | tr '\n' ' ')"
is "$(find "$R" ! -user pbx-uni | wc -l)" 0 "everything pbx made there is the user's"
run_pbx log "$pkg:0"
case $out in *"x=1 uid=$UNI_UID"*) r=0 ;; *) r=1 ;; esac
ok $r "pbx log shows a task's output: $out"
run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
is "$(cat "$PBX_HOME/results/$pkg"/*/out.txt | sort | tr '\n' ' ')" "1 2 3 " "the results are home"
run_pbx report "$pkg" -f csv
is "$(echo "$out" | grep -c COMPLETED)" 2 "report lists the completed tasks"
run_pbx rerun --failed "$pkg"
ok $rc "rerun --failed: $errout"
wait_final "$pkg" 120
is "$(task_states "$pkg")" "COMPLETED COMPLETED FAILED" "the rerun ran (and failed again)"

# cancel: a task that would run long
sed 's/^name: campus$/name: campus-long/; s/ && \[ {x} != 3 \]/ \&\& sleep 300/' \
	"$TEST_TMP/exp/experiment.yaml" >"$TEST_TMP/exp/long.yaml"
run_pbx parrun "$TEST_TMP/exp/long.yaml" uni
long=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
running() { "$PBX" state --json "$long" | json_get 'sum(t["state"] == "RUNNING" for t in d["tasks"])' | grep -qv '^0$'; }
wait_secs 60 running
run_pbx rerun "$long:0"
is "$rc" 2 "rerun of a task still running is refused (exit 2)"
case $errout in *"task 0 of $long is "[PR]*": it runs again once it has ended ('pbx cancel $long:0' ends it)"*) r=0 ;; *) r=1 ;; esac
ok $r "saying how to end it: $errout"
run_pbx cancel "$long"
ok $rc "cancel: $errout"
wait_final "$long" 60
is "$(task_states "$long")" "CANCELLED CANCELLED CANCELLED" "every task is cancelled"

run_pbx config check
ok $rc "config check accepts the template: $out $errout"
run_pbx cluster list
case $out in *uni*ssh*) r=0 ;; *) r=1 ;; esac
ok $r "cluster list lists it: $out $errout"
run_pbx cluster show uni
case $out in *"an existing cluster pbx uses as it is"*"login: pbx-uni@127.0.157.100:22351, work_dir pbx"*node1*idle*node2*idle*) r=0 ;; *) r=1 ;; esac
ok $r "cluster show says how pbx reaches it and lists SLURM's nodes there: $out $errout"
run_pbx cluster ssh uni -- id -u
is "$out" "$UNI_UID" "cluster ssh logs in as the user: $errout"

run_pbx cluster stop uni
is "$rc" 2 "cluster stop is refused (exit 2): pbx does not own it"
run_pbx cluster exec uni -- true
ok $rc "and the user's cluster is still there: $errout"
done_testing
