#!/bin/sh
# t0279-env-proxy.sh - a cluster behind an HTTP proxy (the template's
# proxy:, docs/configuration.md "A cluster behind a proxy") on a local
# cluster: the package index is one only the proxy can reach
# (tests/emulators/proxy/proxy.py answers http://index.pbx-test.invalid/ from
# a directory of wheels), so the environment's build job installs the
# experiment's requirements only if it goes out through the proxy; the
# tasks see the proxy too and the metadata servers stay outside it; every
# node's env.sh says it; a proxy URL with a password is refused with file,
# line and key, and never shown; a cluster without proxy: asks the index
# straight and fails.  Addresses and ports: the test's slot (lib.sh); the
# proxy takes a port the kernel picks.
. "$(dirname "$0")/lib.sh"

INDEX=index.pbx-test.invalid
mkdir -p "$TEST_TMP/index"
make_wheel "$TEST_TMP/index" pbxproxied 2.5
python3 "$PBX_SOURCE_DIR/tests/emulators/proxy/proxy.py" --log "$TEST_TMP/proxy.log" \
	--port-file "$TEST_TMP/proxy.port" --index "$INDEX=$TEST_TMP/index" \
	>"$TEST_TMP/proxy.out" 2>&1 &
PROXY_PID=$!
wait_for 50 test -s "$TEST_TMP/proxy.port"
ok $? "the site's proxy listens: $(cat "$TEST_TMP/proxy.out")"
PROXY=http://127.0.0.1:$(cat "$TEST_TMP/proxy.port")

local_cluster px slot "{ name: node, count: 2 }" "proxy: $PROXY"
trap 'kill $PROXY_PID 2>/dev/null; cleanup_cluster' EXIT
SHARED=$PBX_HOME/clusters/px/shared

# an experiment whose requirements name the proxy-only index (plain http,
# so pip is told to trust it); each task prints what it imported and the
# proxy and exceptions it was given
mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/requirements.txt" <<REQ
--index-url http://$INDEX/simple/
--trusted-host $INDEX
pbxproxied==2.5
REQ
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: proxied
command: python -c 'import os, pbxproxied; print(pbxproxied.__version__, os.environ.get("https_proxy"), "169.254.169.254" in os.environ.get("no_proxy", "").split(","), {i})'
sweep: { grid: { i: [1, 2] } }
environment: { python: requirements.txt, installer: pip }
EXP

run_pbx -q cluster start px
ok $rc "the cluster starts: $errout"
for n in head node1 node2; do
	grep -qxF "export https_proxy='$PROXY'" "$PBX_HOME/clusters/px/nodes/$n/etc/pbx/env.sh"
	ok $? "$n's env.sh names the proxy"
done

run_pbx cluster show px
case $out in *"outbound: through the proxy $PROXY"*) ok 0 "cluster show says the way out" ;;
*) ok 1 "cluster show says the way out: $out" ;; esac

run_pbx parrun "$TEST_TMP/exp/experiment.yaml" px
ok $rc "parrun: $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg" 300
is "$(task_states "$pkg")" "COMPLETED COMPLETED" "the tasks ran: $(cat "$SHARED/pbx/$pkg/env/build.log" 2>/dev/null | tail -n 5)"
is "$(cat "$SHARED/pbx/$pkg"/tasks/*/stdout | sort | tr '\n' '|')" \
	"2.5 $PROXY True 1|2.5 $PROXY True 2|" \
	"each task imported what the build got through the proxy, and was given the proxy, the metadata server outside it"
grep -q "^GET http://$INDEX/simple/pbxproxied/ 200$" "$TEST_TMP/proxy.log" &&
	grep -q "^GET http://$INDEX/files/pbxproxied-2.5-py3-none-any.whl 200$" "$TEST_TMP/proxy.log"
ok $? "the build job asked the index through the proxy: $(tr '\n' '|' <"$TEST_TMP/proxy.log")"
is "$(grep -c "^GET http://$INDEX/files/" "$TEST_TMP/proxy.log")" 1 "the wheel was fetched once, for both nodes"
grep -q '^pbxproxied==2.5 --hash=sha256:[0-9a-f]\{64\}$' "$SHARED/pbx/$pkg/env/lock.txt"
ok $? "the lock pins it with its hash: $(cat "$SHARED/pbx/$pkg/env/lock.txt")"
run_pbx -q cluster stop --discard-results px
[ "$rc" = 0 ] || bail_out "cluster px does not stop: $errout" # (the trap stops it)

# the same experiment on a cluster without proxy: the index is out of reach
# (its name resolves nowhere), and the build says so
local_cluster direct slot "{ name: node, count: 1 }"
trap 'kill $PROXY_PID 2>/dev/null; cleanup_cluster' EXIT
run_pbx -q cluster start direct
ok $rc "a cluster without proxy starts: $errout"
run_pbx parrun "$TEST_TMP/exp/experiment.yaml" direct
pkg2=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
wait_final "$pkg2" 300
run_pbx state "$pkg2"
case $out in *"environment failed"*"pbxproxied"*) ok 0 "without the proxy the build fails, naming the requirement" ;;
*) ok 1 "without the proxy the build fails, naming the requirement: $out" ;; esac
is "$(grep -c "^GET http://$INDEX/simple/" "$TEST_TMP/proxy.log")" 1 "nothing of it went through the proxy"
run_pbx -q cluster stop --discard-results direct

# a proxy URL with a user and password: refused, the password never shown
cat >"$TEST_TMP/bad.yaml" <<BAD
clusters:
  px:
    cloud: local
    node_groups: [{ name: node, count: 1 }]
    proxy: http://alice:s3cretpw@proxy.example.edu:3128
BAD
run_pbx --config "$TEST_TMP/bad.yaml" config check
is "$rc" 2 "config check refuses a proxy with a password"
case $errout in *"bad.yaml:5: clusters.px.proxy: must not carry a user or password"*) ok 0 "it names file, line and key" ;;
*) ok 1 "it names file, line and key: $errout" ;; esac
case "$out$errout" in *s3cretpw*) ok 1 "the password was shown: $errout" ;; *) ok 0 "the password is not shown" ;; esac

test_done
