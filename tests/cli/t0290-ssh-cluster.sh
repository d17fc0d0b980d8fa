#!/bin/sh
# t0290-ssh-cluster.sh - a SLURM cluster pbx did not build, used as it is
# (cloud ssh; docs/ssh-clusters.md) as an ordinary user: "the university's
# cluster" is a local cluster root made here, its login node an sshd of the
# test's own where pbx-uni (uid 2870, no sudo) logs in with a key; setup
# sources the cluster's environment as a `module load` would.  cluster
# start, stop and resize are refused (exit 2); exec runs as the user; parrun
# makes the work directory 0700, submits as the user, and the tasks run as
# the user; state, log, cancel, rerun, harvest and report work; the user's
# job submit limit (a sacctmgr of the test's own) sizes parrun, and a job id
# after a site's job_submit message is read.  Addresses
# and ports: the test's slot (lib.sh); the login node's are LOGIN_ADDR and
# LOGIN_PORT.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-uni.sh"

UNI_UID=2870
UNI_HOME=/home/pbx-uni
uni_campus campus

# the user: an ordinary account, no sudo; its login node, an sshd of the
# test's own, the user's key authorized
uni_user pbx-uni "$UNI_UID" "$UNI_HOME" t0290
is "$(id -u pbx-uni)" "$UNI_UID" "the user pbx-uni exists (uid $UNI_UID)"
uni_login pbx-uni
ok $? "the login node's sshd runs"
uni_cluster uni pbx-uni
stop_login() {
	kill "$LOGIN_SSHD" 2>/dev/null
	rm -rf "$UNI_HOME/pbx" "$UNI_HOME/pbx-acct" "$UNI_HOME/fakebin"
	[ "$tap_failed" = 0 ] || sed 's/^/# login sshd: /' "$TEST_TMP/login/sshd.log" | tail -n 20
}
trap 'stop_login; cleanup_cluster' EXIT

run_pbx cluster start uni
is "$rc" 2 "cluster start is refused (exit 2)"
case $errout in *"cluster uni is not pbx's to start"*"pbx-uni@$LOGIN_ADDR"*) r=0 ;; *) r=1 ;; esac
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
case $out in *"an existing cluster pbx uses as it is"*"login: pbx-uni@$LOGIN_ADDR:$LOGIN_PORT, work_dir pbx"*node1*idle*node2*idle*) r=0 ;; *) r=1 ;; esac
ok $r "cluster show says how pbx reaches it and lists SLURM's nodes there: $out $errout"
run_pbx cluster ssh uni -- id -u
is "$out" "$UNI_UID" "cluster ssh logs in as the user: $errout"

# The user's job submit limit, where slurmdbd is: the test cluster has none,
# so a sacctmgr of the test's own answers for it (-nP, the format pbx asks
# for: docs/slurm-versions.md): MaxSubmitJobs 5 for the association, 4 per
# user for its QOS, which wins.  And an sbatch wrapper prints a site's
# job_submit message on stderr before the job id, as job_submit/lua's
# slurm.user_msg does: the job id is still read.
FAKE=$UNI_HOME/fakebin
mkdir -p "$FAKE"
cat >"$FAKE/sacctmgr" <<'FAKE_SACCTMGR'
#!/bin/sh
case "$*" in
*"show assoc where user=pbx-uni format=Account,Partition,MaxSubmitJobs,QOS,DefaultQOS") echo "physics||5|normal|normal" ;;
*"show qos format=Name,MaxSubmitJobsPerUser") printf 'normal|4\nlong|\n' ;;
*) exit 1 ;;
esac
FAKE_SACCTMGR
printf '#!/bin/sh\necho "sbatch: your project has 100 core-hours left" >&2\nexec %s "$@"\n' \
	"$(command -v sbatch)" >"$FAKE/sbatch"
chmod 755 "$FAKE" "$FAKE/sacctmgr" "$FAKE/sbatch"
uni_cluster uni-acct pbx-uni "work_dir: pbx-acct" "setup: . $HEADROOT/etc/pbx/env.sh && PATH=$FAKE:\$PATH"
sed 's/^name: campus$/name: campus-limit/; s/^sweep: .*/sweep: { grid: { x: [1, 2, 3, 4, 5, 6] } }/; s/ && \[ {x} != 3 \]/ \&\& sleep 300/' \
	"$TEST_TMP/exp/experiment.yaml" >"$TEST_TMP/exp/limit.yaml"
run_pbx parrun "$TEST_TMP/exp/limit.yaml" uni-acct
lim=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
case $out in *"6 tasks, 4 submitted now in 1 array"*) r=0 ;; *) r=1 ;; esac
ok $r "parrun submits what the submit limit lets in, past a job_submit message: $out $errout"
case $errout in *"2 tasks left NEW: your job submit limit is 4 (QOS normal, MaxSubmitJobsPerUser) and you have 0 jobs queued"*"'pbx parrun' again"*) r=0 ;; *) r=1 ;; esac
ok $r "and says why the others wait: $errout"
is "$("$PBX" state --json "$lim" | json_get '" ".join(str(t["index"]) for t in d["tasks"] if t["state"] == "NEW")')" "4 5" \
	"the last two tasks stay NEW: $(task_states "$lim")"
case $(task_states "$lim") in *FAILED* | *MISSING*) r=1 ;; *) r=0 ;; esac
ok $r "the four submitted are SLURM's, none failed: $(task_states "$lim")"
run_pbx cluster show uni-acct
case $out in *"your jobs queued or running: 4"*"your job submit limit (MaxSubmitJobs): 4 (QOS normal, MaxSubmitJobsPerUser; each array task counts)"*) r=0 ;; *) r=1 ;; esac
ok $r "cluster show counts the array's tasks and says the limit: $out $errout"
run_pbx cancel "$lim"
ok $rc "cancel: $errout"
lim_done() { "$PBX" state --json "$lim" | json_get 'all(t["state"] not in ("PENDING","RUNNING") for t in d["tasks"])' | grep -q True; }
wait_secs 60 lim_done

run_pbx cluster stop uni
is "$rc" 2 "cluster stop is refused (exit 2): pbx does not own it"
run_pbx cluster exec uni -- true
ok $rc "and the user's cluster is still there: $errout"
done_testing
