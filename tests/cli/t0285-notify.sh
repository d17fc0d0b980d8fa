#!/bin/sh
# t0285-notify.sh - notify: (docs/notify.md): a
# sweep's owner is told when its last task has ended.  A local webhook
# receiver (an address of the test's slot, a port of its own) takes one JSON POST per
# submission, sent by one small SLURM job after the arrays, as the task
# user: counts by state (2 COMPLETED, 1 FAILED) and the command to harvest;
# the tasks never wait for it (they have ended before it runs); the URL's
# secret path is in no log, state or error; a webhook that answers 500 or
# does not listen changes nothing but the job's log line; a URL pbx cannot
# use is refused with its file and line.  On the same cluster, two more
# first-hour checks: a plain `pbx harvest` skips what is home whole and
# says so once; `pbx rerun` says when the experiment's files changed since
# the package was made; `pbx forget` drops a package (refused while its
# results are not home), keeping its results unless asked.  Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster nt slot "{ name: node, count: 2 }"
# the receiver's address, and one where nothing listens (outside the
# cluster's .0.x)
HOOK_ADDR=$SLOT_NET.1.200 DEAD_ADDR=$SLOT_NET.1.201
SHARED=$PBX_HOME/clusters/nt/shared

# the receiver: each POST's body appended to hooks.jsonl, with its path;
# /fail answers 500
cat >"$TEST_TMP/hook.py" <<'PY'
import http.server, json, sys
out, portfile, addr = sys.argv[1], sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(out, "a") as f:
            f.write(json.dumps({"path": self.path, "type": self.headers.get("Content-Type"),
                                "body": json.loads(body)}) + "\n")
        self.send_response(500 if self.path.startswith("/fail") else 200)
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer((addr, 0), H)
open(portfile, "w").write(str(s.server_port))
s.serve_forever()
PY
python3 "$TEST_TMP/hook.py" "$TEST_TMP/hooks.jsonl" "$TEST_TMP/hook.port" "$HOOK_ADDR" &
HOOK_PID=$!
trap 'kill $HOOK_PID 2>/dev/null; cleanup_cluster' EXIT
wait_secs 20 test -s "$TEST_TMP/hook.port"
HOOK="http://$HOOK_ADDR:$(cat "$TEST_TMP/hook.port")"
SECRET=T00SECRET/B00/xyzSECRETxyz

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<EXP
name: told
command: "if [ {i} = 2 ]; then exit 3; fi; sleep 2; echo r{i}"
sweep: { grid: { i: [0, 1, 2] } }
notify: $HOOK/services/$SECRET
EXP

run_pbx -q cluster start nt
ok $rc "the cluster starts: $errout"
run_pbx parrun -n "$TEST_TMP/exp/experiment.yaml" nt
echo "$out" | grep -qx "notify: the webhook at $HOOK_ADDR:$(cat "$TEST_TMP/hook.port"), when the last task has ended"
ok $? "the dry run names the webhook's host, not its secret path: $(echo "$out" | grep notify)"
run_pbx parrun "$TEST_TMP/exp/experiment.yaml" nt
ok $rc "parrun: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_secs 120 test -s "$TEST_TMP/hooks.jsonl"
ok $? "the webhook was called"
is "$(wc -l <"$TEST_TMP/hooks.jsonl")" 1 "once"
hook() { json_get "$1" <"$TEST_TMP/hooks.jsonl"; }
is "$(hook 'd["path"], d["type"]')" "/services/$SECRET application/json" "at the URL given, with a JSON body"
is "$(hook 'sorted(d["body"]["counts"].items()), d["body"]["tasks"], d["body"]["experiment"], d["body"]["package"], d["body"]["cluster"]')" \
	"[('COMPLETED', 2), ('FAILED', 1)] 3 told $pkg nt" "counts by state, the experiment, package and cluster"
is "$(hook 'd["body"]["text"]')" \
	"pbx: told (package $pkg) on cluster nt ended: 2 COMPLETED, 1 FAILED. Bring the results home: pbx harvest $pkg" \
	"a line a person reads (Slack shows text)"
# the notice came after the tasks: every task had ended when it was sent
is "$(cat "$SHARED/pbx/$pkg"/tasks/*/status | awk '{print $2}' | sort | tr '\n' ' ')" "COMPLETED COMPLETED FAILED " \
	"every task had ended"
wait_secs 30 test -s "$SHARED/pbx/$pkg/slurm/notify.log"
is "$(sed 's/^[^ ]* //' "$SHARED/pbx/$pkg/slurm/notify.log")" \
	"pbx-notify: sent to $HOOK_ADDR:$(cat "$TEST_TMP/hook.port"): 2 COMPLETED, 1 FAILED (HTTP 200)" "the job's log says it was sent"
is "$(stat -c %U "$SHARED/pbx/$pkg/slurm/notify.log")" pbx-task "the notice ran as the task user"
run_pbx state "$pkg"
run_pbx -q harvest "$pkg"
ok $rc "harvest: $errout"
is "$(grep -rl "SECRET" "$SHARED/pbx/$pkg/slurm" "$PBX_HOME/results" 2>/dev/null | wc -l)" 0 \
	"the URL's secret is in no log and no harvested file"

# a webhook that fails, and one that does not listen: logged, nothing else
sed -i "s|^notify: .*|notify: $HOOK/fail/$SECRET|; s/^name: told/name: told2/" "$TEST_TMP/exp/experiment.yaml"
run_pbx parrun "$TEST_TMP/exp/experiment.yaml" nt
ok $rc "parrun with a webhook that answers 500: $errout"
pkg2=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_secs 120 test -s "$SHARED/pbx/$pkg2/slurm/notify.log"
log2=$(cat "$SHARED/pbx/$pkg2/slurm/notify.log" 2>/dev/null)
echo "$log2" | grep -q "pbx-notify: the webhook at $HOOK_ADDR:[0-9]* did not take the notice (HTTP 500)"
ok $? "a 500 is logged, without the URL: $log2"
[ -n "$log2" ] || { ls -la "$SHARED/pbx/$pkg2/slurm" | sed 's/^/#   /'; tail -3 "$TEST_TMP/hooks.jsonl" | sed 's/^/#   /'; "$PBX" cluster exec nt -- squeue -a 2>&1 | sed 's/^/#   /'; }
is "$(echo "$log2" | grep -c SECRET)" 0 "the log holds no secret"
sed -i "s|^notify: .*|notify: http://$DEAD_ADDR:9/$SECRET|; s/^name: told2/name: told3/" "$TEST_TMP/exp/experiment.yaml"
run_pbx parrun "$TEST_TMP/exp/experiment.yaml" nt
pkg3=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_secs 150 test -s "$SHARED/pbx/$pkg3/slurm/notify.log"
log3=$(cat "$SHARED/pbx/$pkg3/slurm/notify.log" 2>/dev/null)
echo "$log3" | grep -q "pbx-notify: the webhook at $DEAD_ADDR:9 did not take the notice (HTTP 000)"
ok $? "nobody listening is logged: $log3"
is "$(echo "$log3" | grep -c SECRET)" 0 "curl's error names the host, not the URL"
wait_final "$pkg3" 60
is "$(json_get '" ".join(sorted(t["state"] for t in d["tasks"]))' <"$TEST_TMP/state.json")" "COMPLETED COMPLETED FAILED" \
	"the tasks ended as without a notice"

# plain `pbx harvest`: what is home whole is skipped, and said once
wait_final "$pkg2" 60
run_pbx harvest
ok $rc "plain harvest: $errout"
is "$(echo "$out" | cut -d: -f1 | sort | tr '\n' ' ')" "$(printf '%s\n' "$pkg2" "$pkg3" | sort | tr '\n' ' ')" \
	"it harvests the two packages not yet home: $out"
echo "$errout" | grep -q "1 package already home whole (every task ended and harvested): skipped"
ok $? "and skips the one that is, saying so: $errout"
run_pbx harvest
is "$rc:$out" "0:" "a second plain harvest has nothing to do"
echo "$errout" | grep -q "3 packages already home whole"
ok $? "and says so: $errout"

# a rerun runs the package as it was made: when the experiment's files
# have changed since (here: the file itself, twice edited above), it says so
run_pbx rerun --failed "$pkg3"
ok $rc "rerun --failed of the newest package: $errout"
is "$errout" "" "its files have not changed: nothing to say"
run_pbx rerun --failed "$pkg"
ok $rc "rerun --failed of the first package: $errout"
is "$errout" "pbx: warning: $TEST_TMP/exp/experiment.yaml or the files next to it changed since package $pkg was made: the rerun runs $pkg as it was; 'pbx parrun $TEST_TMP/exp/experiment.yaml nt' makes a new package with your changes" \
	"its files changed since: the rerun says it runs the package as it was"

# URLs pbx cannot use: refused with the file, line and key, the URL not shown
for bad in "ftp://x/$SECRET" "http:///$SECRET" "http://x/\"$SECRET" "http://x/a b$SECRET"; do
	printf 'name: bad\ncommand: echo\nnotify: %s\n' "'$bad'" >"$TEST_TMP/bad.yaml"
	run_pbx parrun -n "$TEST_TMP/bad.yaml" nt
	is "$rc" 2 "notify: $bad refused"
	echo "$errout" | grep -q "^pbx: error: $TEST_TMP/bad.yaml:3: notify: "
	ok $? "with the file, line and key: $errout"
	is "$(echo "$errout" | grep -c SECRET)" 0 "without the URL"
done
# pbx forget: a package leaves the store; its results stay unless asked
run_pbx forget "$pkg"
is "$rc" 4 "forget of a package whose rerun has not ended is refused (exit 4)"
echo "$errout" | grep -q "package $pkg (told) on cluster nt has results that are not home: 1 task not ended"
ok $? "saying why and what to do: $errout"
run_pbx forget "$pkg2"
ok $rc "forget of a package home whole: $errout"
is "$("$PBX" ls --json | json_get '" ".join(sorted(p["package"] for p in d))')" "$(printf '%s\n' "$pkg" "$pkg3" | sort | tr '\n' ' ' | sed 's/ $//')" \
	"pbx ls no longer lists it"
is "$(ls "$PBX_HOME/results/$pkg2" | wc -l)" 3 "its results stay home"
is "$(sqlite3 "$PBX_HOME/pbx.db" "SELECT count(*) FROM tasks WHERE submission_id NOT IN (SELECT id FROM submissions)")" 0 \
	"no task row is left without its package"
run_pbx forget --discard-results --delete-results "$pkg3"
ok $rc "forget --discard-results --delete-results: $errout"
[ ! -e "$PBX_HOME/results/$pkg3" ]
ok $? "deletes its results too"
run_pbx state "$pkg3"
is "$rc" 3 "the package is gone (exit 3)"

run_pbx -q cluster stop --discard-results nt
done_testing
