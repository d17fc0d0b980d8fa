# cloud/autostop.sh - one body for t0450 (CLOUD=gce) and t0455
# (CLOUD=aws), sourced after lib.sh: autostop (docs/autostop.md) on the
# emulators' node bodies.  An idle cluster (autostop 12 s) powers itself
# off from inside, with no credential on the head: Compute Engine makes
# every instance TERMINATED through a guest shutdown (the emulator's
# compute.instances.guestTerminate, as Compute Engine records one); EC2
# stops the head and the on-demand node (shutdown behaviour `stop`,
# StateReason Client.InstanceInitiatedShutdown) and terminates a one-time
# Spot node (which cannot be stopped).  No body process is left and the
# stopped bodies' disks stay; `cluster show` and `exec` say the cluster is
# stopped; `cluster start` starts the stopped instances (EC2: one
# StartInstances, and the Spot node made again), the same head disk comes
# back and a job runs on every node.  Then what only one cloud has (as_more:
# on Compute Engine the head alone powered off, and `cluster list
# --refresh` names what is still billed; on EC2 an instance profile the
# account does not have is refused and leaves nothing).  The head has an
# identity of its own (a service account whose tokens its metadata server
# gives; instance profile pbx-head, whose role's credentials its IMDSv2
# gives), a node none; pbx run with it alone deletes the cluster by its id;
# the user's `stop` then finds nothing and forgets it.  Addresses: the
# slot's $SLOT_NET.1.0/24 and $SLOT_NET.2.0/24; SLURM ports from
# BODY_PORT_BASE + 64*8.
# shellcheck disable=SC2154 # rc, out, errout: run_pbx's; the rest set in the steps
stop_at_exit as np
cloud_emulator
case $CLOUD in
gce)
	template() {
		cloud_template "$1" "$PBX_HOME/id" "autostop: 12s" "head: { service_account: $2 }" \
			"node_groups:" "  - { name: node, count: 1, machine_type: e2-standard-4 }"
	}
	HEAD_ID=pbx-e2e@pbx-test.iam.gserviceaccount.com
	UP="head:RUNNING node1:RUNNING" NODES="node1" OFF_WORD=TERMINATED
	OFF="head:TERMINATED node1:TERMINATED"
	# states: NODE:STATUS of the cluster's instances, sorted
	states() { emu_get state | python3 -c 'import json,sys; print(" ".join(sorted("%s:%s" % (i["name"].rsplit("-", 1)[-1], i["status"]) for i in json.load(sys.stdin)["instances"])))'; }
	up_states() { states; }
	runs_as() {
		is "$(emu_get state | python3 -c 'import json,sys; print(" ".join(sorted("%s=%s" % (i["name"].rsplit("-", 1)[-1], ",".join(s["email"] for s in i.get("serviceAccounts", [])) or "-") for i in json.load(sys.stdin)["instances"])))')" \
			"head=$HEAD_ID node1=-" "the head runs as its service account, the node as none"
	}
	calls_made() { :; }
	started_stopped() { :; }
	ip_of() {
		emu_get state | python3 -c 'import json, sys
print(" ".join(i["networkIP"] for i in json.load(sys.stdin)["instances"]
               if i["name"].endswith("-" + sys.argv[1])))' "$1"
	}
	# The head's metadata server hands it tokens for its service account,
	# which the compute API takes; the node, which runs as no account,
	# gets none.
	head_identity() {
		md_get() { curl -s -o "$TEST_TMP/md" -w '%{http_code}' -H 'Metadata-Flavor: Google' "http://$1/computeMetadata/v1/instance/$2"; }
		# shellcheck disable=SC2153 # HEAD_IP: the step's
		is "$(md_get "$HEAD_IP" service-accounts/default/email):$(cat "$TEST_TMP/md")" \
			"200:$HEAD_ID" "the head's metadata server names its service account"
		# shellcheck disable=SC2153 # HEAD_IP: the step's
		is "$(md_get "$HEAD_IP" service-accounts/default/token)" 200 "and gives it a token"
		tok=$(json_get 'd["access_token"]' <"$TEST_TMP/md")
		is "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" \
			"http://127.0.0.1:$PORT/compute/v1/projects/pbx-test/zones/us-central1-a/instances")" 200 \
			"the compute API takes the head's token"
		is "$(md_get "$NODE_IP" service-accounts/default/token)" 404 "the node, with no service account, gets no token"
		is "$(curl -s -o /dev/null -w '%{http_code}' "http://$HEAD_IP/computeMetadata/v1/instance/service-accounts/default/token")" \
			403 "a request without Metadata-Flavor gets none"
	}
	# pbx run as the head: a home with no credentials at all (the user's
	# configuration without them), the metadata server found by
	# GCE_METADATA_HOST as on a VM by its name
	as_head() {
		sed "s#credentials: [^,]*,##" "$PBX_HOME/config.yaml" >"$HEAD_HOME/config.yaml"
		grep -q credentials "$HEAD_HOME/config.yaml"
		is "$?" 1 "the head's configuration names no credentials"
		env -u GOOGLE_APPLICATION_CREDENTIALS CLOUDSDK_CONFIG="$HEAD_HOME/gcloud" GCE_METADATA_HOST="$HEAD_IP" \
			PBX_HOME="$HEAD_HOME" PBX_CONFIG="$HEAD_HOME/config.yaml" "$PBX" "$@"
	}
	with_identity() {
		is "$(emu_get calls | json_get 'd["metadata_tokens"]')" "{'$HEAD_ID': 2}" \
			"its token came from the head's metadata server (the test's and pbx's)"
	}
	left() { emu_get state | json_get 'len(d["instances"]), len(d["firewalls"])'; }
	NOTHING="0 0" LEFT="instance or firewall rule"
	# The head alone powered off (a guest shutdown), node1 still running:
	# `cluster list --refresh` says stopped and names what is still billed.
	as_more_name='the head alone powered off: list --refresh names what is still billed'
	as_more() {
		emu_post guest-shutdown "{\"instance\": \"$(emu_get state | python3 -c 'import json,sys; print([i["name"] for i in json.load(sys.stdin)["instances"] if i["name"].endswith("-head")][0])')\"}" >/dev/null
		wait_secs 60 prints "head:TERMINATED node1:RUNNING" states
		is "$(states)" "head:TERMINATED node1:RUNNING" "the head alone is powered off"
		run_pbx cluster list --refresh
		echo "$out" | grep -q "^as  *gce  *stopped (running: node1) "
		ok $? "cluster list --refresh: stopped, node1 still running: $out"
		is "$("$PBX" cluster list --refresh --json | json_get '[(c["state"], c["still_running"]) for c in d if c["name"] == "as"][0]')" \
			"('stopped', ['node1'])" "and in JSON"
		is "$("$PBX" cluster list --json | json_get '[c["still_running"] for c in d if c["name"] == "as"][0]')" \
			"None" "still_running is null without --refresh (not asked)"
		run_pbx -q cluster exec as -- hostname
		echo "$errout" | grep -q "still running, and billed: node1"
		ok $? "exec says node1 still runs: $errout"
		run_pbx cluster start as --autostop off
		ok "$rc" "start brings the head back: $errout"
		is "$(up_states)" "$UP" "both instances run"
	}
	;;
aws)
	template() {
		cloud_template "$1" "$PBX_HOME/id" "autostop: 12s" "head: { machine_type: m5.large, instance_profile: $2 }" \
			"node_groups:" "  - { name: node, count: 1, machine_type: t3.large }" \
			"  - { name: sp, count: 1, machine_type: t3.large, spot: true }"
	}
	HEAD_ID=pbx-head
	UP="head:running node1:running sp1:running" NODES="node1 sp1" OFF_WORD=stopped
	OFF="head:stopped:Client.InstanceInitiatedShutdown node1:stopped:Client.InstanceInitiatedShutdown sp1:terminated:Client.InstanceInitiatedShutdown"
	# NODE:STATE[:REASON CODE] of the cluster's instances, sorted
	states() {
		h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["as"]}])["Reservations"]:
    for i in r["Instances"]:
        s = "%s:%s" % (node_of(i), i["State"]["Name"])
        if i["State"]["Name"] in ("stopped", "terminated"):
            s += ":" + i.get("StateReason", {}).get("Code", "-")
        out.append(s)
print(" ".join(sorted(out)))
PY
	}
	# the running ones (a terminated Spot instance stays listed a while)
	up_states() { states | tr ' ' '\n' | grep ':running$' | tr '\n' ' ' | sed 's/ $//'; }
	runs_as() {
		is "$(h_py <<'PY'
out = []
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["as"]}])["Reservations"]:
    for i in r["Instances"]:
        out.append("%s=%s" % (node_of(i), i.get("IamInstanceProfile", {}).get("Arn", "-").rsplit("/", 1)[-1]))
print(" ".join(sorted(out)))
PY
		)" "head=pbx-head node1=- sp1=-" "the head has its instance profile, the nodes none"
	}
	calls_made() { echo "$(calls calls StartInstances) $(calls calls RunInstances)"; }
	started_stopped() {
		# shellcheck disable=SC2086 # two numbers
		set -- $before_calls
		is "$(($(calls calls StartInstances) - $1)):$(($(calls calls RunInstances) - $2))" "1:1" \
			"one StartInstances for both stopped instances, one RunInstances for the Spot node"
	}
	ip_of() {
		h_py "$1" <<'PY'
for r in c.describe_instances(Filters=[{"Name": "tag:pbx-cluster", "Values": ["as"]},
                                       {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"]:
    for i in r["Instances"]:
        if node_of(i) == sys.argv[1]:
            print(i["PrivateIpAddress"])
PY
	}
	# The head's IMDS gives it its role's temporary credentials (IMDSv2),
	# which EC2 takes; a node, with no instance profile, gets none.
	head_identity() {
		imds() {
			_t=$(curl -s -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "http://$1/latest/api/token")
			curl -s -o "$TEST_TMP/md" -w '%{http_code}' -H "X-aws-ec2-metadata-token: $_t" "http://$1/latest/meta-data/$2"
		}
		is "$(imds "$HEAD_IP" iam/security-credentials/):$(cat "$TEST_TMP/md")" "200:pbx-role" "the head's IMDS names its role"
		is "$(imds "$HEAD_IP" iam/security-credentials/pbx-role):$(json_get 'd["Type"], d["Code"], bool(d["Token"])' <"$TEST_TMP/md")" \
			"200:AWS-HMAC Success True" "and gives it the role's session credentials"
		is "$(imds "$NODE_IP" iam/security-credentials/)" 404 "a node, with no instance profile, gets none"
	}
	# pbx run as the head: no credentials but the IMDS's, found by
	# AWS_EC2_METADATA_SERVICE_ENDPOINT as on a VM at 169.254.169.254
	as_head() {
		cp "$PBX_HOME/config.yaml" "$HEAD_HOME/config.yaml"
		env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_EC2_METADATA_DISABLED HOME="$HEAD_HOME" \
			AWS_EC2_METADATA_SERVICE_ENDPOINT="http://$HEAD_IP" PBX_HOME="$HEAD_HOME" PBX_CONFIG="$HEAD_HOME/config.yaml" \
			"$PBX" "$@"
	}
	with_identity() { is "$(calls role_credentials pbx-role)" 1 "with the credentials the head's IMDS gave out (one set)"; }
	left() { holds; }
	NOTHING="0 0 0" LEFT="instance, security group or key pair"
	# an instance profile the account does not have: EC2 refuses, and
	# nothing of that cluster is left
	as_more_name='an instance profile the account does not have is refused, leaving nothing'
	as_more() {
		held=$(holds)
		cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(template as pbx-head)
$(template np nope)"
		run_pbx -q cluster start np
		is "$rc" 1 "a start with an unknown instance profile fails"
		echo "$errout" | grep -q "InvalidParameterValue.*iamInstanceProfile.name is invalid"
		ok $? "with EC2's reason: $errout"
		"$PBX" -q cluster stop --discard-results np >/dev/null 2>&1
		is "$(aws_instances np):$(holds)" "-:$held" "and leaves nothing"
	}
	;;
esac
cloud_config "$PBX_HOME/config.yaml" "$BODY_PORT_BASE" "$(template as "$HEAD_ID")"
export PBX_AUTOSTOP_TICK=1
alogs() { find "$BODIES" -name pbx-autostop.log -exec cat {} +; }
list_state() { "$PBX" cluster list --json "$@" | json_get '[c["state"] for c in d if c["name"] == "as"][0]'; }
head_instance() { "$PBX" cluster show as --json | json_get '[n["instance_id"] for n in d["nodes"] if n["role"] == "head"][0]'; }
# only the states, without EC2's reasons
bare_states() { states | sed 's/:Client[^ ]*//g'; }

test_expect_success 'a cluster with autostop 12 s starts; only the head has an identity' '
	run_pbx -q cluster start as
	ok $rc "the cluster starts: $errout"
	is "$(up_states)" "$UP" "every instance runs"
	runs_as
	run_pbx cluster show as --json
	is "$(echo "$out" | json_get "d[\"autostop\"]")" 12 "show --json: autostop 12 s"
	head_was=$(head_instance)
	# the body slurmctld runs in
	head_log=$(find "$BODIES" -path "*/var/log/slurm/slurmctld.log" | head -n 1)
	head_root=${head_log%/var/log/slurm/slurmctld.log}
	ok $([ -n "$head_log" ] && [ -d "$head_root/var/lib/pbx" ]; echo $?) "the head'"'"'s body is $head_root"
'
test_expect_success 'idle for 12 s, the cluster powers itself off, keeping the disks' '
	t0=$(date +%s)
	wait_secs 150 prints "$(echo "$OFF" | sed "s/:Client[^ ]*//g")" bare_states
	is "$(states)" "$OFF" "idle for 12 s, every instance stopped itself ($(($(date +%s) - t0)) s)"
	is "$(procs_mentioning "$BODIES/")" "" "no process of any body is left"
	# (a terminated Spot node'"'"'s log went with its disk)
	is "$(alogs | grep -c "the head asks to power off")" 1 "node1 obeyed the head'"'"'s request"
	is "$(alogs | grep -c "not answered")" 0 "and the head had its answer (.pbx-autostop/off/, docs/autostop.md): $(alogs | grep "not answered")"
	is "$(grep answered= "$head_root/var/lib/pbx/autostop.last" | tr "\n" " ")" "answered=$NODES unanswered= " \
		"the head'"'"'s record says every node answered"
	is "$(find "$BODIES" -name slurm.conf -path "*/etc/slurm/*" | grep -c .)" 2 "the stopped bodies'"'"' disks are kept"
	ok $([ -f "$head_root/var/lib/pbx/autostop.last" ]; echo $?) "the head'"'"'s disk is kept, with its record of why"
'
test_expect_success 'show, list and exec say the cluster is stopped' '
	is "$(list_state)" "up" "cluster list, offline, shows the state recorded at the start"
	is "$(list_state --refresh)" "stopped" "cluster list --refresh asks the cloud: stopped"
	is "$(list_state)" "stopped" "and records it"
	run_pbx -q cluster exec as -- hostname
	is "$rc" 1 "exec on the stopped cluster fails"
	echo "$errout" | grep -q "cluster as is stopped: its head instance is $OFF_WORD.*pbx cluster start as"
	ok $? "it says the head instance is $OFF_WORD and how to start it: $errout"
	run_pbx cluster show as --json
	is "$(echo "$out" | json_get "d[\"stopped\"] is not None, d[\"last_autostop\"] is not None")" "True True" \
		"show --json: stopped, and the head'"'"'s record"
'
test_expect_success 'start brings the same head back, and a job runs on every node' '
	before_calls=$(calls_made)
	run_pbx cluster start as --autostop off
	ok $rc "start brings it back: $errout"
	echo "$errout" | grep -q "starting (was $OFF_WORD)"
	ok $? "progress says the stopped instances are started"
	started_stopped
	is "$(up_states)" "$UP" "every instance runs again"
	is "$(head_instance)" "$head_was" "the head is the same instance"
	ok $([ -f "$head_root/var/lib/pbx/autostop.last" ]; echo $?) "on the same disk"
	run_pbx cluster exec as -- timeout 60 srun -N"$(echo "$NODES" | wc -w)" sh -c "echo \$SLURMD_NODENAME"
	is "$rc:$(echo "$out" | sort | tr "\n" " ")" "0:$NODES " "a job runs on every compute node (EC2: the remade Spot node too): $errout"
	[ $rc = 0 ] || { run_pbx cluster exec as -- sinfo -N; printf "# %s\n" "$out"; }
	is "$(list_state)" "up" "after the start, cluster list says up"
	run_pbx cluster show as
	echo "$out" | grep -q "last: stopped itself at .*idle for 12 s (autostop)"
	ok $? "show reads the head'"'"'s record of its last autostop: $(echo "$out" | grep "last:")"
'
test_expect_success "$as_more_name" 'as_more'
# The head's own identity (docs/head-identity.md), and pbx run with it
# deletes the cluster by its id: what a head does when it deletes its own
# cluster.
test_expect_success 'the head'"'"'s identity alone deletes the cluster by its id' '
	HEAD_IP=$(ip_of head) NODE_IP=$(ip_of node1)
	head_identity
	HEAD_HOME=$TEST_TMP/head-home
	mkdir -p "$HEAD_HOME"
	CID=$(sqlite3 "$PBX_HOME/pbx.db" "SELECT uid FROM clusters WHERE name = '"'as'"' AND state != '"'deleted'"'")
	out=$(as_head -q cluster stop --discard-results --id "$CID" as 2>&1)
	ok $? "pbx with the head'"'"'s identity stops the cluster by its id: $out"
	with_identity
	is "$(left)" "$NOTHING" "no $LEFT is left"
	# the last processes of the bodies may still be ending (ASan, load)
	wait_secs 30 prints "" procs_mentioning "$BODIES/"
	is "$(procs_mentioning "$BODIES/")" "" "no body process is left"
'
test_expect_success 'the user'"'"'s stop then finds nothing and forgets the cluster' '
	run_pbx -q cluster stop --discard-results as
	ok $rc "the user'"'"'s stop then finds nothing left and forgets the cluster: $errout"
	is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT state FROM clusters WHERE name = '"'as'"'")" "deleted" "the store says deleted"
'
test_done
