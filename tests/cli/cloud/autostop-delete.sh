# cloud/autostop-delete.sh - one body for t0451 (CLOUD=gce) and t0456
# (CLOUD=aws), sourced after lib.sh: autostop_action: delete
# (docs/autostop.md) on the emulators' node bodies.  A cluster (head +
# node1, autostop 12 s) whose head has an identity of its own (Compute
# Engine: a service account, tokens from its metadata server; EC2:
# instance profile pbx-head, the role's credentials from its IMDSv2).
# pbx on the head reaches the nodes with a key of the head's own, which a
# task cannot replace through SHARED.  While a finished task's results are
# not harvested, the idle cluster stops (TERMINATED or `stopped`, disks
# kept) and the head records why it did not delete; what a task can write
# in SHARED (a forged harvested mark, FIFOs and a link where the head
# writes its stop request, a hostile task name) decides nothing.  Once
# `pbx harvest` has brought everything home (and recorded it on the head's
# own disk), the idle head deletes the whole cluster with its own
# identity, itself last: nothing is left (Compute Engine: no instance,
# firewall rule or router; EC2: no instance, security group or key pair,
# the head leaving the group before deleting it), and the user's `stop`
# then finds nothing and forgets the cluster.  Addresses: the slot's
# $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24; SLURM ports from BODY_PORT_BASE +
# 64*8.
stop_at_exit ad
cloud_emulator
case $CLOUD in
gce)
	HEAD="head: { service_account: pbx-e2e@pbx-test.iam.gserviceaccount.com }"
	NODE_TYPE=e2-standard-4 OFF="TERMINATED TERMINATED" HEAD_INSTANCE='.*-head'
	# states: the cluster's instances' states, sorted ("-": none)
	states() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted(i["status"] for i in json.load(sys.stdin)["instances"])) or "-")'; }
	left() { emu_get state | json_get 'len(d["instances"]), len(d["firewalls"]), len(d["routers"])'; }
	LEFT="instance, firewall rule or router"
	group_in_use() { :; }
	with_identity() {
		is "$(emu_get calls | json_get 'd["metadata_tokens"].get("pbx-e2e@pbx-test.iam.gserviceaccount.com", 0) > 0')" "True" \
			"with its service account's token from its metadata server"
	}
	;;
aws)
	HEAD="head: { machine_type: m5.large, instance_profile: pbx-head }"
	NODE_TYPE=t3.large OFF="stopped stopped" HEAD_INSTANCE='i-[0-9a-f]*'
	states() {
		h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["ad"]}])["Reservations"]:
    for i in r["Instances"]:
        if i["State"]["Name"] != "terminated":
            out.append(i["State"]["Name"])
print(" ".join(sorted(out)) or "-")
PY
	}
	left() { holds; }
	LEFT="instance, security group or key pair"
	# As EC2 does, the harness refuses to delete a group instances still
	# run in (DependencyViolation).
	group_in_use() {
		in_use=$(python3 - "$TEST_TMP/env.json" <<'PY'
import boto3, botocore, json, sys
e = json.load(open(sys.argv[1]))
c = boto3.client("ec2", region_name="us-east-1", endpoint_url=e["url"],
                 aws_access_key_id=e["pbx"]["access_key"], aws_secret_access_key=e["pbx"]["secret_key"],
                 config=botocore.config.Config(retries={"max_attempts": 10, "mode": "standard"}))
g = c.describe_security_groups(Filters=[{"Name": "tag:pbx-cluster", "Values": ["ad"]}])["SecurityGroups"][0]
try:
    c.delete_security_group(GroupId=g["GroupId"])
    print("deleted")
except botocore.exceptions.ClientError as x:
    print(x.response["Error"]["Code"])
PY
		)
		is "$in_use" "DependencyViolation" "the cluster's group cannot be deleted while its instances run in it"
	}
	# The group cannot go while the head runs in it: the head moves itself
	# into its VPC's default group first, then deletes the cluster's group
	# and key pair, and terminates itself last.
	with_identity() {
		is "$(calls role_credentials pbx-role)" 1 "with its role's credentials from its IMDS"
		is "$(calls faults DependencyViolation)" 1 \
			"the head never tried to delete a group still in use (the one refusal: the test's own)"
	}
	;;
esac
cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(cloud_template ad "$PBX_HOME/id" \
	"autostop: 12s" "autostop_action: delete" "$HEAD" \
	"node_groups:" "  - { name: node, count: 1, machine_type: $NODE_TYPE }")"
export PBX_AUTOSTOP_TICK=1
alogs() { find "$BODIES" -name pbx-autostop.log -exec cat {} +; }
nodes_of() { json_get 'd["state"] + " " + " ".join("%s=%s@%s" % (n["name"], n["state"], n["address"]) for n in d["nodes"])'; }

test_expect_success 'a cluster with autostop_action: delete starts' '
	run_pbx -q cluster start ad
	ok $rc "the cluster starts: $errout"
	run_pbx cluster show ad
	echo "$out" | grep -q "autostop: after 12s idle (no SLURM job, no SSH session), then the head deletes the cluster once every result is harvested"
	ok $? "show says the head deletes it once every result is harvested: $(echo "$out" | grep autostop)"
	is "$("$PBX" cluster show ad --json | json_get "d[\"autostop_action\"]")" "delete" "show --json: autostop_action delete"
	group_in_use
'
# The head's pbx reaches the nodes with a key of the head's own
# (docs/head-identity.md): made on the head, its private half only there,
# its public half authorized on every node; the user's key is nowhere on a
# node's disk.
test_expect_success 'the head reaches the nodes with a key of its own' '
	pbx_head=$(find "$BODIES" -path "*/usr/local/sbin/pbx-head" | head -1)
	head_root=${pbx_head%/usr/local/sbin/pbx-head}
	head_key=$head_root/var/lib/pbx/home/.ssh/id_ed25519
	is "$(stat -c %a "$head_key" 2>/dev/null)" 600 "the head made a key of its own, 0600"
	is "$(find "$BODIES" -name id_ed25519 | wc -l)" 1 "its private half is on the head only"
	node_ip=$("$PBX" cluster show ad --json | json_get "[n[\"address\"] for n in d[\"nodes\"] if n[\"name\"] == \"node1\"][0]")
	authorized=$(find "$BODIES" -path "*/.ssh/authorized_keys" -exec grep -l " pbx-head:ad\$" {} + | wc -l)
	is "$authorized" 2 "both nodes authorize it for the login user, tagged pbx-head:ad"
	out=$(ssh -F /dev/null -o LogLevel=ERROR -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o IdentitiesOnly=yes -o IdentityAgent=none -i "$head_key" "pbx@$node_ip" echo reached 2>&1)
	is "$out" "reached" "the head'"'"'s key logs in to node1 at its private address"
	user_key_line=$(sed -n 3p "$PBX_HOME/id") # line 2 starts every ed25519 key alike
	is "$(grep -rlF -- "$user_key_line" "$BODIES" 2>/dev/null)" "" "no node'"'"'s disk holds the user'"'"'s private key"
'
# SHARED is writable by every user of the cluster: a directory a task puts
# there in place of the head's is replaced by the head's bootstrap, and the
# nodes authorize the head's key only (a node's refusal of a key a task
# published: bootstrap.direct).
test_expect_success 'a key a task puts in SHARED is never authorized' '
	pub=$(find "$TEST_TMP" -path "*/.pbx/head_key.pub" | head -1)
	real_key=$(cut -d" " -f2 "$pub")
	ssh-keygen -q -t ed25519 -N "" -C forged -f "$TEST_TMP/forged"
	rm -rf "${pub%/*}" && mkdir "${pub%/*}" && echo "$(cut -d" " -f1,2 "$TEST_TMP/forged.pub") pbx-head:ad" >"$pub" &&
		chown -R nobody "${pub%/*}"
	run_pbx -q cluster start ad
	ok $rc "a start repairs the cluster: $errout"
	node_keys=$(find "$BODIES" -path "*/.ssh/authorized_keys" ! -path "$head_root/*")
	is "$(grep -c "$(cut -d" " -f2 "$TEST_TMP/forged.pub")" $node_keys)" 0 "node1 never authorizes a key a task put in SHARED"
	is "$(grep -c "$real_key pbx-head:ad\$" $node_keys)" 1 "it authorizes the head'"'"'s, once"
	is "$(stat -c %U "${pub%/*}")" root "the head'"'"'s bootstrap replaced the task'"'"'s directory"
'
# pbx on the head took in the cluster's record after the start: it knows
# the cluster as the user's pbx does, and reaches every node with its key
# (a node by its private address: it runs inside the cluster's network).
test_expect_success 'pbx on the head knows the cluster and runs commands' '
	is "$("$pbx_head" cluster show ad --json | nodes_of)" "$("$PBX" cluster show ad --json | nodes_of)" \
		"pbx-head'"'"'s store knows the cluster'"'"'s nodes as the user'"'"'s does"
	is "$("$pbx_head" cluster show ad --json | json_get "[n[\"public_address\"] for n in d[\"nodes\"]]")" "[None, None]" \
		"and reaches the head at its private address too"
	is "$("$pbx_head" -q cluster exec -n node1 ad -- sh -c "echo \"\$PBX_SHARED\"" 2>&1 | grep -c /)" 1 \
		"pbx-head runs a command on node1 with the head'"'"'s key"
	# commands for the head it runs itself, not over SSH to itself
	is "$("$pbx_head" -q cluster exec ad -- sinfo -h -o %T -n node1 2>&1)" "idle" \
		"pbx-head runs SLURM'"'"'s sinfo on the head itself"
	is "$("$pbx_head" cluster show ad --json | json_get "[n[\"slurm_state\"] for n in d[\"nodes\"] if n[\"name\"] == \"node1\"][0]")" "idle" \
		"pbx-head'"'"'s cluster show asks SLURM on the head"
	# PBX_THIS_NODE is honoured only where the disk of the node holds
	# pbx-head: that of node1 does not, so the pbx of the user still
	# reaches node1 over SSH, as the login user pbx (run here, the command
	# would run as root).
	is "$(PBX_THIS_NODE=node1 "$PBX" -q cluster exec -n node1 ad -- sh -c "printf %s \"\$SUDO_USER\"" 2>&1)" "pbx" \
		"a stray PBX_THIS_NODE runs nothing here: node1 answered over SSH"
'
test_expect_success 'two tasks run' 'two_echo_tasks ad'
# Not harvested: the idle cluster stops instead, and says why.  A task
# directory with a hostile name (an escape, a newline and a forged
# stopped_at= line) sorts first: the record names it in safe characters.
# What a task can write in SHARED decides nothing (docs/SECURITY.md): a
# forged harvested mark in the run's directory (every status line, the
# old .pbx-harvested) deletes nothing; a FIFO and a link where the head
# writes its stop request, and a FIFO where it reads node1's answer,
# neither hang its stop nor get followed.
test_expect_success 'not harvested: the idle cluster stops, not deleted, and says why' '
	shared_run=$(find "$TEST_TMP" -path "*/pbx/*/tasks/0/status" | head -1)
	shared_run=${shared_run%/tasks/0/status}
	evil="$shared_run/tasks/$(printf "\033[31mx\nstopped_at=1999")"
	mkdir -p "$evil" && cp "$shared_run/tasks/0/status" "$evil/status"
	cat "$shared_run"/tasks/*/status >"$shared_run/.pbx-harvested"
	req_dir=${shared_run%/pbx/*}/.pbx-autostop
	echo untouched >"$TEST_TMP/victim"
	mkdir -p "$req_dir/off" && mkfifo "$req_dir/request.new" "$req_dir/off/node1" &&
		ln -s "$TEST_TMP/victim" "$req_dir/request" && chown -R nobody "$req_dir"
	t0=$(date +%s)
	wait_secs 150 prints "$OFF" states
	is "$(states)" "$OFF" "idle with results not harvested (a forged mark, FIFOs and a link planted): both instances stopped, not deleted ($(($(date +%s) - t0)) s)"
	is "$(cat "$TEST_TMP/victim")" "untouched" "the file a planted link named is untouched"
	is "$(stat -c %U "$req_dir")" root "the head made the request'"'"'s directory its own"
	is "$(alogs | grep -c "not answered")" 0 "the head had node1'"'"'s own answer, not the planted FIFO'"'"'s: $(alogs | grep "not answered")"
	last=$(find "$BODIES" -path "*/var/lib/pbx/autostop.last" -exec cat {} + 2>/dev/null)
	echo "$last" | grep -q "^reason=idle for 12 s (autostop).*; stopped, not deleted: the results of 3 task(s) are not harvested (first: package [0-9a-f]* task .*): '"'"'pbx harvest'"'"' brings them home\$"
	ok $? "the head records why it did not delete: $(echo "$last" | grep "^reason=")"
	echo "$last" | grep "^reason=" | grep -q "(first: package [0-9a-f]* task 31mxstopped_at1999)"
	ok $? "naming the hostile task in safe characters"
	is "$(echo "$last" | grep -c "^stopped_at=")" 1 "the record holds one stopped_at= line"
	rm -rf "$evil"
	# as in t0450: the cloud says TERMINATED or stopped only once the
	# shutdown of the guest has completed (the watcher, which ends last,
	# included), so the start cannot find the old watcher alive
	is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
'
# Not writable on the head: the files come home all the same, and a
# warning says the head does not know it yet.
test_expect_success 'a harvest brings the results home and records it on the head' '
	run_pbx -q cluster start ad
	ok $rc "start brings it back: $errout"
	marks=$head_root/var/lib/pbx/harvested
	rm -rf "$marks" && : >"$marks"
	run_pbx harvest del
	is "$rc" 0 "a harvest that cannot record it on the head still succeeds"
	echo "$errout" | grep -q "warning: could not record on the head that every result is home"
	ok $? "and warns: $errout"
	rm -f "$marks"
	run_pbx -q harvest del
	ok $rc "harvest brings the results home: $errout"
	is "$(cat "$PBX_HOME"/results/*/1/stdout 2>/dev/null)" "result-1" "a task'"'"'s output is home"
	marker=$(find "$marks" -type f ! -name ".new.*" | head -1)
	is "$(grep -c . "$marker" 2>/dev/null)" 2 "the package'"'"'s mark on the head'"'"'s own disk lists both tasks'"'"' status lines"
	is "$(stat -c %a "$marks" 2>/dev/null)" 700 "in a directory of root'"'"'s alone"
'
test_expect_success 'harvested: the idle head deletes everything, itself last' '
	t0=$(date +%s)
	wait_secs 200 prints "0 0 0" left
	is "$(left)" "0 0 0" "idle with everything harvested: the head deleted every $LEFT ($(($(date +%s) - t0)) s)"
	[ "$(left)" = "0 0 0" ] || find "$BODIES" \( -name delete.log -o -name "pbx-autostop.log" \) \
		-exec sh -c "echo \"# \$1:\"; grep -v \"cannot open /proc\" \"\$1\" | tail -8 | sed \"s/^/#   /\"" _ {} \;
	with_identity
	wait_for 100 prints "" procs_mentioning "$BODIES/"
	is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
	ls "$PBX_HOME"/results/*/0/stdout >/dev/null 2>&1
	ok $? "the results stay home"
'
test_expect_success 'the user'"'"'s pbx sees it gone; its stop forgets the cluster' '
	is "$("$PBX" cluster list --refresh --json | json_get "[c[\"state\"] for c in d if c[\"name\"] == \"ad\"][0]")" "stopped" \
		"cluster list --refresh asks the cloud: no longer running"
	run_pbx cluster show ad
	echo "$out $errout" | grep -q "its head instance $HEAD_INSTANCE no longer exists (deleted: by the head itself with autostop_action: delete, or outside pbx); '"'"'pbx cluster stop ad'"'"' removes what is left"
	ok $? "show says the head instance no longer exists and what to do: $out $errout"
	run_pbx -q cluster stop --discard-results ad
	ok $rc "the user'"'"'s stop finds nothing left and forgets the cluster: $errout"
	is "$(left)" "0 0 0" "nothing is left"
	is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM clusters WHERE name = '"'"'ad'"'"'")" "deleted" "the store says deleted"
'
test_done
