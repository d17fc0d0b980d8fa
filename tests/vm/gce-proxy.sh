#!/bin/sh
# gce-proxy.sh - a cluster behind a site's HTTP proxy on booted Debian 12
# VMs (docs/configuration.md, "A cluster behind a proxy"): the template
# says `proxy: http://10.128.0.1:3128`, the VMs' network gateway, where the
# emulator (--vm-proxy) forwards to tests/emulators/proxy/proxy.py on this
# machine, which tunnels CONNECT to pypi.org and files.pythonhosted.org
# only and passes Debian's mirror on to the apt cache (or the mirror).  The
# VMs resolve no other name outside their network, so PyPI is theirs only
# through the proxy.  head + 1 compute node -> every node's env.sh and
# apt's file name the proxy -> parrun of an experiment whose
# requirements.txt names a PyPI package (no wheels: the index) and whose
# apt: names a Debian package the image lacks -> the build job resolves and
# installs from PyPI through the proxy (uv, itself from PyPI, else pip), the
# node's apt-get fetches the package through it -> the tasks import the
# pinned version and run the Debian program -> stop -> nothing left.
#
# The VMs' TLS to PyPI is end to end through CONNECT; where this machine's
# way out inspects TLS, the images carry its CA as a site's images would
# (tests/vm/image.sh, world_ca).  PBX_VM_IMAGE picks the image (default:
# the prebaked one); images are built once into PBX_VM_IMAGES (default:
# build/vm-images).  Skipped, with the reason, where this machine cannot
# boot VMs.  External addresses: 127.0.145.0/24.
. "$PBX_SOURCE_DIR/tests/cli/lib.sh"

. "$PBX_SOURCE_DIR/tests/vm/lib.sh"
IMAGES=${PBX_VM_IMAGES:-$(dirname "$PBX")/../../vm-images}
KIND=${PBX_VM_IMAGE:-baked}
vm_skip_unless "$(vm_why_not)"

gce_vm_test_exit p1
on() { "$PBX" -q cluster exec ${2:+-n "$2"} p1 -- sh -c "$1" 2>&1; }
vm_images_ready "$KIND" "$IMAGES"
vm_user_key gce-proxy

# ------------------------------------------------------ the site's proxy
python3 "$PBX_SOURCE_DIR/tests/emulators/proxy/proxy.py" --log "$TEST_TMP/proxy.log" \
	--port-file "$TEST_TMP/proxy.port" --connect pypi.org:443 --connect files.pythonhosted.org:443 \
	--forward "deb.debian.org=${VM_UPSTREAM:-deb.debian.org:80}" >"$TEST_TMP/proxy.out" 2>&1 &
PROXY_PID=$!
trap 'kill $PROXY_PID 2>/dev/null; gce_vm_cleanup' EXIT
wait_for 50 test -s "$TEST_TMP/proxy.port"
ok $? "the site's proxy listens: $(cat "$TEST_TMP/proxy.out")"

gce_vm_emulator "$TEST_TMP" "$IMAGES/$KIND" 127.0.145.0/24 "--vm-proxy 127.0.0.1:$(cat "$TEST_TMP/proxy.port")"
ok $? "the emulator runs with its VM network, the proxy at its gateway: $(tail -n 3 "$TEST_TMP/emu.out")"
gce_vm_config "$PBX_HOME" p1 "$TEST_TMP/sa.json" "$PBX_HOME/id" \
	"{ name: cpu, count: 1, machine_type: e2-standard-2 }" "proxy: http://10.128.0.1:3128"
sed -i "s|boot_timeout: 900 |boot_timeout: 1800|" "$PBX_HOME/config.yaml"

# ------------------------------------------------------------- start
t0=$(date +%s)
run_pbx cluster start p1
ok $rc "start of a cluster behind a proxy ($(($(date +%s) - t0)) s): $errout"
[ "$rc" = 0 ] || bail_out "the cluster did not start"
is "$(on 'grep -c "^export https_proxy=.http://10.128.0.1:3128.$" /etc/pbx/env.sh; grep -c "Acquire::https::Proxy \"http://10.128.0.1:3128/\";" /etc/apt/apt.conf.d/80pbx-proxy' cpu1)" "1
1" "the compute node's env.sh and apt's file name the proxy"
is "$(on 'getent hosts pypi.org || echo unresolved' cpu1)" unresolved \
	"the node cannot resolve pypi.org: the proxy is its only way there"

# -------------------------------------------------------- the experiment
mkdir -p "$TEST_TMP/exp"
printf 'six==1.17.0\n' >"$TEST_TMP/exp/requirements.txt"
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: proxied
command: python -c 'import six; print("six", six.__version__, {x})' && jq --version
sweep: { grid: { x: [1, 2] } }
environment:
  python: requirements.txt
  apt: [jq]
EXP
: >"$TEST_TMP/proxy.log"
t0=$(date +%s)
run_pbx parrun --json "$TEST_TMP/exp/experiment.yaml" p1
ok $rc "parrun ($(($(date +%s) - t0)) s): $errout"
PKG=$(echo "$out" | json_get 'd["package"]')
wait_final "$PKG" 1500
is "$(task_states "$PKG")" "COMPLETED COMPLETED" "the tasks completed: $(on "tail -n 5 /shared/pbx/$PKG/env/build.log")"
is "$(on "cat /shared/pbx/$PKG/tasks/*/stdout" | grep -c '^six 1.17.0 [12]$')" 2 "each imported six 1.17.0 from PyPI"
is "$(on "cat /shared/pbx/$PKG/tasks/*/stdout" | grep -c '^jq-1')" 2 "each ran jq, installed by apt on the node"
echo "# the proxy's log:" >&2
sort "$TEST_TMP/proxy.log" | uniq -c | sed 's/^/#   /' >&2
grep -q '^CONNECT pypi.org:443 200$' "$TEST_TMP/proxy.log" &&
	grep -q '^CONNECT files.pythonhosted.org:443 200$' "$TEST_TMP/proxy.log"
ok $? "the build went to PyPI through the proxy"
grep -q '^GET http://deb.debian.org/debian/pool/main/j/jq/jq_[^ ]*\.deb 200$' "$TEST_TMP/proxy.log"
ok $? "apt fetched jq through the proxy"
on "cat /shared/pbx/$PKG/env/build.log" >"$TEST_TMP/build.log"
on "cat /shared/pbx/$PKG/env/lock.txt" >"$TEST_TMP/lock.txt"
grep -q '^six==1.17.0 --hash=sha256:[0-9a-f]\{64\}' "$TEST_TMP/lock.txt"
ok $? "the lock pins it with PyPI's hash: $(cat "$TEST_TMP/lock.txt")"
echo "# $(grep '^pbx-env: installer' "$TEST_TMP/build.log")" >&2

# ------------------------------------------------------------- stop
gce_vm_stop_checks p1

done_testing
