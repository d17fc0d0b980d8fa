#!/bin/sh
# t0292-ssh-accounting.sh - a university's SLURM cluster with its accounting
# database, so that its job submit limit is SLURM's own, enforced for real
# (docs/ssh-clusters.md, "Your job submit limit"): MariaDB (a
# mariadbd of the test's own, on a unix socket in its directory), slurmdbd
# on it, and the cluster's slurmctld restarted with
# AccountingStorageType=accounting_storage/slurmdbd and
# AccountingStorageEnforce=limits.  sacctmgr -i makes the cluster, an
# account and the ordinary user pbx-uni3 (uid 2876, no sudo) with
# MaxSubmitJobs 5, and the cluster has MaxArraySize 4.  As that user, over
# cloud ssh: cluster show reads the limit from the real sacctmgr; SLURM
# refuses a sixth job (so the limit is real); a sweep far larger than the
# limit goes in by parruns repeated as tasks end, each within the limit,
# arrays split by MaxArraySize, every task run once and nothing lost
# (pbx state, the tasks' files and slurmdbd's own sacct agree); a limit pbx
# does not read (the account's GrpSubmitJobs) makes sbatch refuse, and
# parrun quotes sbatch and says what to do.  Addresses and ports: the
# test's slot (lib.sh): the login node's sshd on LOGIN_ADDR:LOGIN_PORT,
# slurmdbd on DBD_ADDR:DBD_PORT; MariaDB has no TCP port.  Not slotted: the
# system user pbx-uni3 and its home, so two runs at once fail (as t0290's
# pbx-uni).  T0292_TASKS sets the sweep's size (200).  About 3 minutes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-uni.sh"

UNI=pbx-uni3 UNI_UID=2876
UNI_HOME=/home/$UNI
LOGIN_ADDR=$SLOT_NET.0.100 LOGIN_PORT=$(slot_port 0)
DBD_ADDR=$SLOT_NET.0.101 DBD_PORT=$(slot_port 1)
# the sweep: NTASKS tasks against a limit of LIMIT jobs
NTASKS=${T0292_TASKS:-200} LIMIT=5

for p in mariadb-install-db mariadbd slurmdbd sacctmgr sacct; do
	command -v "$p" >/dev/null || { echo "1..0 # SKIP $p is not installed (scripts/install-deps.sh)"; exit 77; }
done
local_cluster acct slot "{ name: node, count: 2, gpus: 0, cpus: 4 }" "slurm: { max_array_size: 4 }"
run_pbx -q cluster start acct
ok $rc "the university's cluster runs (a local cluster of root's): $errout"
HEADROOT=$(uni_head_root acct)
CONF=$HEADROOT/etc/slurm/slurm.conf
CLUSTER=$(sed -n 's/^ClusterName=//p' "$CONF")
DB=$TEST_TMP/db
mkdir -p "$DB"
DB_PID= DBD_PID=
stop_accounting() {
	[ -z "$DBD_PID" ] || { kill "$DBD_PID"; wait_secs 20 proc_gone "$DBD_PID"; }
	[ -z "$DB_PID" ] || { kill "$DB_PID"; wait_secs 30 proc_gone "$DB_PID"; }
	kill "${LOGIN_SSHD:-}" 2>/dev/null
	rm -rf "$UNI_HOME/pbx"
	[ "$tap_failed" = 0 ] || tail -n 15 "$DB/slurmdbd.log" "$DB/mysqld.err" \
		"$HEADROOT/var/log/slurm/slurmctld.log" 2>&1 | sed 's/^/# /'
}
trap 'stop_accounting; cleanup_cluster' EXIT

# MariaDB: a database of the test's own, on a unix socket only
mariadb-install-db --no-defaults --datadir="$DB/data" --user=root \
	--auth-root-authentication-method=socket --skip-test-db >"$DB/install.log" 2>&1
ok $? "mariadb-install-db makes the database: $(tail -n 3 "$DB/install.log")"
mariadbd --no-defaults --datadir="$DB/data" --socket="$DB/mysqld.sock" --skip-networking \
	--user=root --pid-file="$DB/mysqld.pid" --log-error="$DB/mysqld.err" \
	--innodb-buffer-pool-size=32M </dev/null >/dev/null 2>&1 &
DB_PID=$!
wait_secs 30 test -S "$DB/mysqld.sock"
ok $? "mariadbd listens on its socket: $(tail -n 3 "$DB/mysqld.err")"

# slurmdbd: its slurmdbd.conf beside a slurm.conf path of its own (it reads
# SLURM_CONF's directory), munge of the cluster's head, MariaDB's socket
# through MYSQL_UNIX_PORT (StorageHost=localhost is a socket connection)
cat >"$DB/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$HEADROOT/run/munge/munge.socket.2
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$DB/slurmdbd.pid
LogFile=$DB/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=pbx_t0292
EOF
chmod 600 "$DB/slurmdbd.conf"
SLURM_CONF=$DB/slurm.conf MYSQL_UNIX_PORT=$DB/mysqld.sock slurmdbd -D </dev/null >/dev/null 2>&1 &
DBD_PID=$!
dbd_up() { grep -q "slurmdbd version .* started" "$DB/slurmdbd.log" 2>/dev/null; }
wait_secs 60 dbd_up
ok $? "slurmdbd runs on MariaDB: $(tail -n 3 "$DB/slurmdbd.log" 2>/dev/null)"

# the cluster's slurmctld with the accounting database, limits enforced
# (AccountingStoragePass: the munge socket for slurmdbd's connections)
sed -i "s|^AccountingStorageType=.*|AccountingStorageType=accounting_storage/slurmdbd\\
AccountingStorageHost=$DBD_ADDR\\
AccountingStoragePort=$DBD_PORT\\
AccountingStoragePass=$HEADROOT/run/munge/munge.socket.2\\
AccountingStorageEnforce=associations,limits|" "$CONF"
export SLURM_CONF="$CONF"
acct() { sacctmgr -i "$@" >>"$DB/sacctmgr.log" 2>&1; }
acct add cluster "$CLUSTER" && acct add account physics cluster="$CLUSTER" &&
	acct add user "$UNI" account=physics cluster="$CLUSTER" MaxSubmitJobs=$LIMIT
ok $? "sacctmgr makes the cluster, the account and the user: $(tail -n 3 "$DB/sacctmgr.log")"
CTLD=$(cat "$HEADROOT/run/slurmctld.pid")
tr '\0' '\n' <"/proc/$CTLD/environ" | grep -v '^$' >"$DB/ctld.env"
kill "$CTLD"
wait_secs 30 proc_gone "$CTLD"
ok $? "slurmctld stops"
# started again as the bootstrap started it (its environment names the
# cluster's directory: cluster stop finds it)
(cd / && xargs -d '\n' -a "$DB/ctld.env" sh -c 'exec env -i "$@" slurmctld -f "$0"' "$CONF" </dev/null >/dev/null 2>&1)
ctld_up() { scontrol ping 2>/dev/null | grep -q UP && [ "$(sinfo -h -o %t 2>/dev/null)" = idle ]; }
wait_secs 60 ctld_up
ok $? "slurmctld runs again, its nodes idle: $(sinfo 2>&1 | tr '\n' ' ')"
is "$(scontrol show config | sed -n 's/^AccountingStorageType *= *//p')" accounting_storage/slurmdbd \
	"slurmctld keeps accounts in slurmdbd"
# its associations come from slurmdbd after it answers pings: a job sent
# before they did was refused "Invalid account" (a flake, 2026-12-05)
assoc_up() { scontrol show assoc_mgr users="$UNI" flags=assoc 2>/dev/null | grep -q "UserName=$UNI("; }
wait_secs 60 assoc_up
ok $? "slurmctld knows the user's association: $(scontrol show assoc_mgr users="$UNI" flags=assoc 2>&1 | grep -m1 "UserName=$UNI(" | cut -c1-120)"
unset SLURM_CONF

# the user: an ordinary account, no sudo; its login node, an sshd of the
# test's own
uni_user "$UNI" "$UNI_UID" "$UNI_HOME" t0292
uni_login "$UNI"
ok $? "the login node's sshd runs"
uni_cluster uni "$UNI"

# 1: pbx reads the limit from the real sacctmgr
run_pbx cluster show uni
case $out in *"your job submit limit (MaxSubmitJobs): $LIMIT (account physics, MaxSubmitJobs; each array task counts)"*) r=0 ;; *) r=1 ;; esac
ok $r "cluster show says the user's limit, from sacctmgr: $out $errout"

# 2: SLURM enforces it: 4 held jobs go in, 4 more do not
run_pbx cluster exec uni -- sbatch --parsable --hold --array=0-3 -o /dev/null --wrap=true
held=$out
ok $rc "the user submits 4 jobs (an array of 4, held): $out $errout"
run_pbx cluster exec uni -- sbatch --parsable --hold --array=0-3 -o /dev/null --wrap=true
refusal=$errout
case $rc:$errout in 0:*) r=1 ;; *"job submit limit"*) r=0 ;; *) r=1 ;; esac
ok $r "SLURM refuses 4 more (MaxSubmitJobs $LIMIT): $errout"
run_pbx cluster exec uni -- scancel "$held"
ok $rc "the held jobs are cancelled: $errout"
user_queue_empty() { [ -z "$("$PBX" cluster exec uni -- squeue -h -u "$UNI" 2>/dev/null)" ]; }
wait_secs 30 user_queue_empty

# 3: a sweep of NTASKS tasks: parrun submits what the limit lets in, and
# again as tasks end, until every task went in
mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/sweep.yaml" <<EOF
name: limited
command: echo "i=\$PBX_PARAM_I \$(id -un)" >>out.txt
sweep: { grid: { i: [$(seq -s, 0 $((NTASKS - 1)))] } }
EOF
new_tasks() { "$PBX" state --json "$pkg" | json_get 'sum(t["state"] == "NEW" for t in d["tasks"])'; }
rounds=0 bad= pkg= t0=$(date +%s)
while :; do
	run_pbx parrun "$TEST_TMP/exp/sweep.yaml" uni
	rounds=$((rounds + 1))
	[ -n "$pkg" ] || pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
	[ "$rc" = 0 ] || bad="$bad round $rounds: rc $rc $out $errout;"
	[ "$rounds" = 1 ] && first_out=$out first_err=$errout
	[ -n "$pkg" ] || break
	[ "$(new_tasks)" = 0 ] && break
	[ $(($(date +%s) - t0)) -lt 900 ] || break
	sleep 1
done
echo "# $NTASKS tasks went in over $rounds parruns in $(($(date +%s) - t0)) s"
is "$bad" "" "every parrun succeeded"
case $first_out in *"$NTASKS tasks, $LIMIT submitted now in 2 arrays"*) r=0 ;; *) r=1 ;; esac
ok $r "the first parrun submits $LIMIT tasks in arrays of at most 4 (MaxArraySize): $first_out"
case $first_err in *"$((NTASKS - LIMIT)) tasks left NEW: your job submit limit is $LIMIT (account physics, MaxSubmitJobs) and you have 0 jobs queued"*"'pbx parrun' again"*) r=0 ;; *) r=1 ;; esac
ok $r "and says why the others wait: $first_err"
is "$(new_tasks)" 0 "every task went in, in $rounds parruns"
wait_final "$pkg" 300
ok $? "every task ended"
is "$(task_states "$pkg" | tr ' ' '\n' | sort | uniq -c | tr -s ' ' | sed 's/^ //')" "$NTASKS COMPLETED" \
	"pbx state: $NTASKS COMPLETED"
R=$UNI_HOME/pbx/pbx/$pkg
is "$(cat "$R"/tasks/*/out.txt | sort -u | grep -c "^i=[0-9]* $UNI\$")" "$NTASKS" \
	"each task ran as the user and wrote its file"
is "$(cat "$R"/tasks/*/out.txt | wc -l)" "$NTASKS" "none ran twice (each appends its line)"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM arrays WHERE ntasks > 4 OR state != 'submitted'")" 0 \
	"no array over MaxArraySize, none failed"
# (slurmctld sends a job's end to slurmdbd a moment later)
sacct_done() {
	run_pbx cluster exec uni -- sacct -n -X -P -u "$UNI" --name="pbx-$pkg" -S now-1hour -o State
	[ "$(echo "$out" | grep -c '^COMPLETED$')" = "$NTASKS" ]
}
wait_secs 60 sacct_done
ok $? "slurmdbd's sacct counts $NTASKS completed jobs of the user: $(echo "$out" | sort | uniq -c | tr '\n' ' ') $errout"

# 4: a limit pbx does not read (the account's GrpSubmitJobs, shared by its
# users): sbatch refuses the array of 4 that pbx's limit allowed; parrun
# quotes it, tries smaller arrays until one is refused, says what to do,
# and the parrun after the tasks ended submits the rest
acct_set() { SLURM_CONF=$CONF sacctmgr -i modify "$@" >>"$DB/sacctmgr.log" 2>&1; }
acct_set account physics set GrpSubmitJobs=3
ok $? "the account physics gets GrpSubmitJobs=3: $(tail -n 2 "$DB/sacctmgr.log")"
# (its tasks last 8 s: none ends while parrun submits)
sed 's/^name: limited$/name: grp/; s/^sweep: .*/sweep: { grid: { i: [0, 1, 2, 3, 4] } }/; s/>>out.txt$/>>out.txt \&\& sleep 8/' \
	"$TEST_TMP/exp/sweep.yaml" >"$TEST_TMP/exp/grp.yaml"
run_pbx parrun "$TEST_TMP/exp/grp.yaml" uni
grp=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT short_id FROM packages WHERE name = 'grp'")
is "$rc" 1 "parrun fails when sbatch refuses: $out"
case $errout in *"2 of 4 arrays were not submitted"*"array of tasks 0-3: "*"AssocGrpSubmitJobsLimit"*"job submit limit"*"array of tasks 2: "*"3 of the 5 tasks went in; the others stay NEW"*"'pbx parrun' again once some have ended"*) r=0 ;; *) r=1 ;; esac
ok $r "quoting sbatch, trying smaller arrays, saying what to do: $errout"
grp_new() { "$PBX" state --json "$grp" | json_get '" ".join(str(t["index"]) for t in d["tasks"] if t["state"] == "NEW")'; }
is "$(grp_new)" "2 3" "3 tasks went in (0 and 1 in a smaller array), 2 and 3 stay NEW"
grp_ended() { "$PBX" state --json "$grp" | json_get 'sum(t["state"] == "COMPLETED" for t in d["tasks"])' | grep -qx 3; }
wait_secs 120 grp_ended
run_pbx parrun "$TEST_TMP/exp/grp.yaml" uni
ok $rc "once they ended, parrun again: $out $errout"
wait_final "$grp" 120
is "$(task_states "$grp")" "COMPLETED COMPLETED COMPLETED COMPLETED COMPLETED" "every task of it ran"
done_testing
