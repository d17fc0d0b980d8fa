#!/bin/sh
# t0451-gce-autostop-delete.sh - autostop_action: delete on Compute Engine
# (the emulator's node bodies; docs/autostop.md): a cluster whose head runs
# as a service account, autostop 12 s.  While a finished task's results
# are not harvested, the idle cluster stops (TERMINATED, disks kept) and
# the head records why it did not delete; once `pbx harvest` has brought
# everything home (and recorded it on the head's own disk), the
# idle head deletes the whole cluster with its own identity, itself last:
# no instance, firewall rule, router or body process is left, and the
# user's `stop` then finds nothing and forgets the cluster.  Emulator
# addresses $SLOT_NET.1.0/24 (private) and $SLOT_NET.2.0/24 (public); SLURM
# ports from 21000 + 64*8.
. "$(dirname "$0")/lib.sh"

stop_at_exit ad
gce_emulator "$SLOT_NET.1.0/24" "$SLOT_NET.2.0/24"
mkdir -p "$PBX_HOME"
ssh-keygen -q -t ed25519 -N "" -C t0451 -f "$PBX_HOME/id"
cat >"$PBX_HOME/config.yaml" <<CONFIG
clusters:
  ad:
    cloud: gce
    login_user: pbx
    ssh_key: $PBX_HOME/id
    image: projects/debian-cloud/global/images/family/debian-12
    autostop: 12s
    autostop_action: delete
    head: { service_account: pbx-e2e@pbx-test.iam.gserviceaccount.com }
    node_groups:
      - { name: node, count: 1, machine_type: e2-standard-4 }
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $TEST_TMP/sa.json,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
  local: { slurm_port_base: $BODY_PORT_BASE }
CONFIG
chmod 600 "$PBX_HOME/config.yaml"
export PBX_AUTOSTOP_TICK=1
statuses() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted(i["status"] for i in json.load(sys.stdin)["instances"])) or "-")'; }
held() { emu_get state | json_get 'len(d["instances"]), len(d["firewalls"]), len(d["routers"])'; }
BODIES=$TEST_TMP/emu/bodies

run_pbx -q cluster start ad
ok $rc "the cluster starts: $errout"
run_pbx cluster show ad
echo "$out" | grep -q "autostop: after 12s idle (no SLURM job, no SSH session), then the head deletes the cluster once every result is harvested"
ok $? "show says the head deletes it once every result is harvested: $(echo "$out" | grep autostop)"
is "$("$PBX" cluster show ad --json | json_get 'd["autostop_action"]')" "delete" "show --json: autostop_action delete"

# The head's pbx reaches the nodes with a key of the head's own
# (docs/head-identity.md): made on the head, its private half only there,
# its public half authorized on every node; the user's key is nowhere on a
# node's disk.
pbx_head=$(find "$BODIES" -path '*/usr/local/sbin/pbx-head' | head -1)
head_root=${pbx_head%/usr/local/sbin/pbx-head}
head_key=$head_root/var/lib/pbx/home/.ssh/id_ed25519
is "$(stat -c %a "$head_key" 2>/dev/null)" 600 "the head made a key of its own, 0600"
is "$(find "$BODIES" -name id_ed25519 | wc -l)" 1 "its private half is on the head only"
node_ip=$("$PBX" cluster show ad --json | json_get '[n["address"] for n in d["nodes"] if n["name"] == "node1"][0]')
authorized=$(find "$BODIES" -path '*/.ssh/authorized_keys' -exec grep -l " pbx-head:ad\$" {} + | wc -l)
is "$authorized" 2 "both nodes authorize it for the login user, tagged pbx-head:ad"
out=$(ssh -F /dev/null -o LogLevel=ERROR -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
	-o IdentitiesOnly=yes -o IdentityAgent=none -i "$head_key" "pbx@$node_ip" echo reached 2>&1)
is "$out" "reached" "the head's key logs in to node1 at its private address"
user_key_line=$(sed -n 3p "$PBX_HOME/id")   # line 2 starts every ed25519 key alike
is "$(grep -rlF -- "$user_key_line" "$BODIES" 2>/dev/null)" "" "no node's disk holds the user's private key"
# SHARED is writable by every user of the cluster: a directory a task puts
# there in place of the head's is replaced by the head's bootstrap, and the
# nodes authorize the head's key only (a node's refusal of a key a task
# published: bootstrap.direct).
pub=$(find "$TEST_TMP" -path '*/.pbx/head_key.pub' | head -1)
real_key=$(cut -d' ' -f2 "$pub")
ssh-keygen -q -t ed25519 -N "" -C forged -f "$TEST_TMP/forged"
rm -rf "${pub%/*}" && mkdir "${pub%/*}" && echo "$(cut -d' ' -f1,2 "$TEST_TMP/forged.pub") pbx-head:ad" >"$pub" &&
	chown -R nobody "${pub%/*}"
run_pbx -q cluster start ad
ok $rc "a start repairs the cluster: $errout"
node_keys=$(find "$BODIES" -path '*/.ssh/authorized_keys' ! -path "$head_root/*")
is "$(grep -c "$(cut -d' ' -f2 "$TEST_TMP/forged.pub")" $node_keys)" 0 "node1 never authorizes a key a task put in SHARED"
is "$(grep -c "$real_key pbx-head:ad\$" $node_keys)" 1 "it authorizes the head's, once"
is "$(stat -c %U "${pub%/*}")" root "the head's bootstrap replaced the task's directory"

# pbx on the head took in the cluster's record after the start: it knows
# the cluster as the user's pbx does, and reaches every node with its key
# (a node by its private address: it runs inside the cluster's network).
nodes_of() { json_get 'd["state"] + " " + " ".join("%s=%s@%s" % (n["name"], n["state"], n["address"]) for n in d["nodes"])'; }
is "$("$pbx_head" cluster show ad --json | nodes_of)" "$("$PBX" cluster show ad --json | nodes_of)" \
	"pbx-head's store knows the cluster's nodes as the user's does"
is "$("$pbx_head" cluster show ad --json | json_get '[n["public_address"] for n in d["nodes"]]')" "[None, None]" \
	"and reaches the head at its private address too"
is "$("$pbx_head" -q cluster exec -n node1 ad -- sh -c 'echo "$PBX_SHARED"' 2>&1 | grep -c /)" 1 \
	"pbx-head runs a command on node1 with the head's key"
# the head's own commands it runs itself, not over SSH to itself
is "$("$pbx_head" -q cluster exec ad -- sinfo -h -o %T -n node1 2>&1)" "idle" \
	"pbx-head runs SLURM's sinfo on the head itself"
is "$("$pbx_head" cluster show ad --json | json_get '[n["slurm_state"] for n in d["nodes"] if n["name"] == "node1"][0]')" "idle" \
	"pbx-head's cluster show asks SLURM on the head"
# PBX_THIS_NODE is honoured only where the node's disk holds pbx-head:
# node1's does not, so the user's pbx still reaches node1 over SSH, as the
# login user pbx (run here, the command would be root's own).
is "$(PBX_THIS_NODE=node1 "$PBX" -q cluster exec -n node1 ad -- sh -c 'printf %s "$SUDO_USER"' 2>&1)" "pbx" \
	"a stray PBX_THIS_NODE runs nothing here: node1 answered over SSH"

two_echo_tasks ad

# Not harvested: the idle cluster stops instead, and says why.  A task
# directory with a hostile name (an escape, a newline and a forged
# stopped_at= line) sorts first: the record names it in safe characters.
# What a task can write in SHARED decides nothing (docs/SECURITY.md): a
# forged harvested mark in the run's directory (every status line, the
# old .pbx-harvested) deletes nothing; a FIFO and a link where the head
# writes its stop request neither hang its stop nor get followed.
shared_run=$(find "$TEST_TMP" -path '*/pbx/*/tasks/0/status' | head -1)
shared_run=${shared_run%/tasks/0/status}
evil="$shared_run/tasks/$(printf '\033[31mx\nstopped_at=1999')"
mkdir -p "$evil" && cp "$shared_run/tasks/0/status" "$evil/status"
cat "$shared_run"/tasks/*/status >"$shared_run/.pbx-harvested"
req_dir=${shared_run%/pbx/*}/.pbx-autostop
echo untouched >"$TEST_TMP/victim"
mkdir -p "$req_dir" && mkfifo "$req_dir/request.new" && ln -s "$TEST_TMP/victim" "$req_dir/request" &&
	chown -R nobody "$req_dir"
i=0
while [ "$(statuses)" != "TERMINATED TERMINATED" ] && [ $i -lt 90 ]; do sleep 1; i=$((i + 1)); done
is "$(statuses)" "TERMINATED TERMINATED" "idle with results not harvested (a forged mark, a FIFO and a link planted): both instances stopped, not deleted (${i} s)"
is "$(cat "$TEST_TMP/victim")" "untouched" "the file a planted link named is untouched"
is "$(stat -c %U "$req_dir")" root "the head made the request's directory its own"
is "$(held | cut -d' ' -f1)" 2 "they are still there"
last=$(find "$BODIES" -path '*/var/lib/pbx/autostop.last' -exec cat {} + 2>/dev/null)
echo "$last" | grep -q "^reason=idle for 12 s (autostop).*; stopped, not deleted: the results of 3 task(s) are not harvested (first: package [0-9a-f]* task .*): 'pbx harvest' brings them home\$"
ok $? "the head records why it did not delete: $(echo "$last" | grep "^reason=")"
echo "$last" | grep "^reason=" | grep -q "(first: package [0-9a-f]* task 31mxstopped_at1999)"
ok $? "naming the hostile task in safe characters"
is "$(echo "$last" | grep -c '^stopped_at=')" 1 "the record holds one stopped_at= line"
rm -rf "$evil"
# as in t0450: the emulator says TERMINATED only once the guest's shutdown
# has completed (the watcher, which ends last, included), so the start
# cannot find the old watcher alive
is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
run_pbx -q cluster start ad
ok $rc "start brings it back: $errout"
# Not writable on the head: the files come home all the same, and a
# warning says the head does not know it yet.
marks=$head_root/var/lib/pbx/harvested
rm -rf "$marks" && : >"$marks"
run_pbx harvest del
is "$rc" 0 "a harvest that cannot record it on the head still succeeds"
echo "$errout" | grep -q "warning: could not record on the head that every result is home"
ok $? "and warns: $errout"
rm -f "$marks"
run_pbx -q harvest del
ok $rc "harvest brings the results home: $errout"
is "$(cat "$PBX_HOME"/results/*/1/stdout 2>/dev/null)" "result-1" "a task's output is home"
marker=$(find "$marks" -type f ! -name '.new.*' | head -1)
is "$(grep -c . "$marker" 2>/dev/null)" 2 "the package's mark on the head's own disk lists both tasks' status lines"
is "$(stat -c %a "$marks" 2>/dev/null)" 700 "in a directory of root's alone"

# Harvested: the idle head deletes everything, itself last.
i=0
while [ "$(held)" != "0 0 0" ] && [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done
is "$(held)" "0 0 0" "idle with everything harvested: the head deleted every instance, firewall rule and router (${i} s)"
[ "$(held)" = "0 0 0" ] || find "$BODIES" \( -name delete.log -o -name 'pbx-autostop.log' \) \
	-exec sh -c 'echo "# $1:"; grep -v "cannot open /proc" "$1" | tail -8 | sed "s/^/#   /"' _ {} \;
if [ "$(held)" != "0 0 0" ]; then
	echo "# head's watcher pid file: $(cat "$head_root/run/pbx-autostop.pid" 2>&1)"
	ps -eo pid,stat,args | grep '[p]bx-autostop' | sed 's/^/#   /'
fi
is "$(emu_get calls | json_get 'd["metadata_tokens"].get("pbx-e2e@pbx-test.iam.gserviceaccount.com", 0) > 0')" "True" \
	"with its service account's token from its metadata server"
wait_for 100 prints "" procs_mentioning "$BODIES/"
is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
ls "$PBX_HOME"/results/*/0/stdout >/dev/null 2>&1
ok $? "the results stay home"

is "$("$PBX" cluster list --refresh --json | json_get '[c["state"] for c in d if c["name"] == "ad"][0]')" "stopped" \
	"cluster list --refresh asks the cloud: no longer running"
run_pbx cluster show ad
echo "$out $errout" | grep -q "its head instance .*-head no longer exists (deleted: by the head itself with autostop_action: delete, or outside pbx); 'pbx cluster stop ad' removes what is left"
ok $? "show says the head instance no longer exists and what to do: $out $errout"
run_pbx -q cluster stop --discard-results ad
ok $rc "the user's stop finds nothing left and forgets the cluster: $errout"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM clusters WHERE name = 'ad'")" "deleted" "the store says deleted"
done_testing
