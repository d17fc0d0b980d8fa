# lib.sh - what the booted-VM tests (tests/vm/*.sh) and scripts/demo-gce.sh
# share (sourced): the images, the Compute Engine emulator with its VMs,
# a service-account key it accepts and a pbx configuration pointing at it.
#
#   vm_why_not                 prints why VMs cannot boot here ("" when they can)
#   vm_skip_unless WHY         with WHY not empty: a TAP skip saying why, exit 77
#   vm_images_ready KIND IMAGES  the apt cache, then image KIND built (one check)
#   vm_user_key COMMENT        PBX_HOME with the user's key PBX_HOME/id
#   emu_get WHAT               GET /_emulator/WHAT of the emulator at PORT
#   vm_image KIND IMAGES LOG   builds the stock image (ec2-stock for the ec2-*
#                              kinds; and KIND=baked or ec2-baked on it) into
#                              IMAGES/KIND once; status of image.sh
#   gce_vm_emulator DIR IMAGE NAT_BLOCK [ARGS]
#                              starts the emulator with --backend vm (state in
#                              DIR/emu; ARGS: more of its options, split at
#                              blanks, such as --bucket NAME), sets EMU_PID and
#                              PORT, writes DIR/sa.json and registers it;
#                              status 0 when up
#   gce_vm_config HOME NAME SA KEY GROUP [MORE]
#                              HOME/config.yaml: one gce template NAME (login
#                              user pbx, ssh key KEY, node group GROUP, a YAML
#                              flow mapping; MORE: more lines of the
#                              template, indented by 4) for the emulator at PORT
#   gce_vm_emulator_stop       ends the emulator (and so every VM)
#   ec2_vm_harness NET BLOCK   the EC2 harness with its VM network (one
#                              check): URL, env_get, the user pbx's AWS keys
#   ec2_vm_holds               "INSTANCES GROUPS KEY_PAIRS" left in moto
#   ec2_vm_test_setup CLUSTER  an EC2 booted-VM test's start: HARNESS, IMAGES and
#                              KIND (ec2-baked or ec2-stock) set, skipped (77)
#                              where VMs or moto cannot run, no AWS setting of
#                              the tester's (HOME of its own), h_stop to end
#                              the harness (H_PID), and at exit (a signal too)
#                              CLUSTER stopped, the harness and the apt cache
#                              gone, TEST_TMP removed
#   gce_vm_test_exit CLUSTER...  at the test's exit (a signal too): the clusters
#                              stop, the emulator and the apt cache go,
#                              TEST_TMP is removed
#   vm_apt_cache IMAGES        the apt cache every VM and image build shares
#                              (apt-cacher-ng on 127.0.0.1, its packages in
#                              IMAGES/apt-cache, started by the first user):
#                              sets VM_UPSTREAM (the emulators' --vm-upstream)
#                              and PBX_VM_APT_PROXY (image.sh's), both empty
#                              without apt-cacher-ng; holds a shared lock
#   vm_apt_cache_release       drops it; the last user stops the cache
# Needs PBX_SOURCE_DIR.

vm_why_not() {
	python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import vms; print(vms.why_not("/") or "")' \
		"$PBX_SOURCE_DIR/tests/emulators/gce" 2>&1 | grep -v "no VM image" || :   # (none: status 1)
	for t in debootstrap mkfs.ext4 openssl ssh-keygen; do
		command -v "$t" >/dev/null 2>&1 || echo "image.sh needs $t (apt-get install debootstrap e2fsprogs openssl openssh-client)"
	done
}

vm_skip_unless() {
	[ -n "$1" ] || return 0
	echo "1..0 # SKIP $(echo "$1" | tr '\n' ' ')"
	rm -rf "$TEST_TMP"
	exit 77
}

vm_images_ready() {
	vm_apt_cache "$2"
	vir_t0=$(date +%s)
	vm_image "$1" "$2" "$TEST_TMP/image.log"
	ok $? "the $1 image is built ($(($(date +%s) - vir_t0)) s): $(tail -n 3 "$TEST_TMP/image.log" | tr '\n' ' ')"
}

vm_user_key() {
	mkdir -p "$PBX_HOME"
	chmod 755 "$TEST_TMP"
	ssh-keygen -q -t ed25519 -N "" -C "$1" -f "$PBX_HOME/id"
}

emu_get() {
	python3 -c 'import sys, urllib.request; print(urllib.request.urlopen("http://127.0.0.1:%s/_emulator/%s" % (sys.argv[1], sys.argv[2])).read().decode())' "$PORT" "$1"
}

vm_image() {
	case $1 in ec2-*) vi_stock=ec2-stock ;; *) vi_stock=stock ;; esac
	sh "$PBX_SOURCE_DIR/tests/vm/image.sh" "$vi_stock" "$2/$vi_stock" >"$3" 2>&1 || return 1
	[ "$1" = "$vi_stock" ] || sh "$PBX_SOURCE_DIR/tests/vm/image.sh" "$1" "$2/$1" "$2/$vi_stock" >>"$3" 2>&1
}

gce_vm_emulator() {
	rm -f "$1/port"
	python3 "$PBX_SOURCE_DIR/tests/emulators/gce/emulator.py" --port 0 --port-file "$1/port" \
		--state-dir "$1/emu" --project pbx-test --backend vm --vm-image "$2" \
		--network-block 10.128.0.0/20 --nat-block "$3" --vm-upstream "${VM_UPSTREAM:-deb.debian.org:80}" --log "$1/emu.log" ${4:-} >"$1/emu.out" 2>&1 &
	EMU_PID=$!
	gve_i=0
	while [ ! -s "$1/port" ] && [ $gve_i -lt 300 ]; do
		kill -0 "$EMU_PID" 2>/dev/null || return 1
		sleep 0.1
		gve_i=$((gve_i + 1))
	done
	PORT=$(cat "$1/port" 2>/dev/null) || return 1
	[ -s "$1/sa.pem" ] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1/sa.pem" 2>/dev/null
	python3 - "$1/sa.pem" "$1/sa.json" "$PORT" <<'PY'
import json, os, sys
pem, out, port = sys.argv[1:]
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump({"type": "service_account", "project_id": "pbx-test", "private_key_id": "k1",
               "private_key": open(pem).read(), "client_email": "pbx-vm@pbx-test.iam.gserviceaccount.com",
               "client_id": "1", "token_uri": "http://127.0.0.1:%s/token" % port}, f)
PY
	python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/_emulator/service-accounts" % sys.argv[1], data=sys.argv[2].encode(), headers={"Content-Type": "application/json"}))' \
		"$PORT" "{\"key_file\": \"$1/sa.json\"}"
}

gce_vm_config() {
	mkdir -p "$1"
	cat >"$1/config.yaml" <<CONFIG
clusters:
  $2:
    cloud: gce
    login_user: pbx
    ssh_key: $4
    image: projects/debian-cloud/global/images/family/debian-12
    boot_timeout: 900                  # TCG VMs sharing this machine's cores boot slowly
    ${6:-}
    node_groups:
      - $5
clouds:
  gce: { project: pbx-test, zone: us-central1-a, credentials: $3,
         endpoint: "http://127.0.0.1:$PORT/compute/v1/" }
CONFIG
	chmod 600 "$1/config.yaml"
}

gce_vm_emulator_stop() {
	[ -n "${EMU_PID:-}" ] && kill "$EMU_PID" 2>/dev/null && wait "$EMU_PID" 2>/dev/null
	EMU_PID=
}

gce_vm_test_exit() {
	GVT_CLUSTERS=$*
	trap gce_vm_cleanup EXIT
	# dash runs no EXIT trap on a signal by itself
	trap "exit 129" HUP
	trap "exit 130" INT
	trap "exit 143" TERM
}

# gce_vm_stop_checks CLUSTER: the user's stop of CLUSTER, then the checks
# every booted Compute Engine test ends with: no instance, no VM left
gce_vm_stop_checks() {
	run_pbx cluster stop --discard-results "$1"
	ok $rc "stop: $errout"
	is "$(emu_get state | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["instances"]))')" 0 "no instance left"
	sleep 1
	is "$(pgrep -f "qemu-system.*$TEST_TMP" | wc -l)" "0" "no VM is left running"
}

gce_vm_cleanup() {
	for gvc in $GVT_CLUSTERS; do "$PBX" -q cluster stop --discard-results "$gvc" >/dev/null 2>&1; done
	gce_vm_emulator_stop
	vm_apt_cache_release
	rm -rf "$TEST_TMP"
}

vm_apt_cache() {
	VM_UPSTREAM='' PBX_VM_APT_PROXY=''
	export PBX_VM_APT_PROXY
	command -v apt-cacher-ng >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v apt-cacher-ng >/dev/null 2>&1 ||
		{ echo "# no apt cache (apt-get install apt-cacher-ng): every VM downloads its packages"; return 0; }
	vac_dir=$1/apt-cache
	mkdir -p "$vac_dir/cache" "$vac_dir/log"
	# fd 6: fd 7 holds the test's slot (tests/cli/lib.sh, test_slot)
	exec 6>>"$vac_dir/users.lock"
	flock -s 6
	# one user at a time decides whether it runs, and starts it
	(
		flock -x 8
		if [ -s "$vac_dir/pid" ] && kill -0 "$(cat "$vac_dir/pid")" 2>/dev/null; then exit 0; fi
		# a free port below 32768: apt-cacher-ng 3.7 cannot bind one above
		vac_port=$(python3 -c '
import random, socket
for port in random.sample(range(20000, 32768), 200):
    try:
        socket.socket().bind(("127.0.0.1", port))
        print(port)
        break
    except OSError:
        pass')
		# Debian's mirror and its security archive, by URL path (what the
		# VMs' port-80 forward sends) or as a proxy (image.sh): one cache
		cat >"$vac_dir/acng.conf" <<ACNG
CacheDir: $vac_dir/cache
LogDir: $vac_dir/log
SupportDir: /usr/lib/apt-cacher-ng
Port: $vac_port
BindAddress: 127.0.0.1
SocketPath: $vac_dir/socket
PidFile: $vac_dir/pid
ForeGround: 1
Remap-debrep: /debian deb.debian.org/debian ; http://deb.debian.org/debian/
Remap-secdeb: /debian-security deb.debian.org/debian-security ; http://deb.debian.org/debian-security/
ACNG
		rm -f "$vac_dir/pid"
		PATH=$PATH:/usr/sbin setsid apt-cacher-ng -c "$vac_dir" </dev/null >>"$vac_dir/log/daemon.out" 2>&1 6>&- 7>&- 8>&- &
		vac_i=0
		until [ -s "$vac_dir/pid" ] && curl -s -o /dev/null "http://127.0.0.1:$vac_port/acng-report.html"; do
			vac_i=$((vac_i + 1))
			[ $vac_i -lt 100 ] || exit 1
			sleep 0.1
		done
		echo "$vac_port" >"$vac_dir/port"
	) 8>>"$vac_dir/start.lock" || { echo "# the apt cache did not start: $(tail -n 3 "$vac_dir/log/daemon.out")"; return 0; }
	VM_UPSTREAM=127.0.0.1:$(cat "$vac_dir/port")
	PBX_VM_APT_PROXY=http://$VM_UPSTREAM
}

vm_apt_cache_release() {
	[ -n "${VM_UPSTREAM:-}" ] || return 0
	VM_UPSTREAM=
	if flock -n -x 6; then   # no other user: this one stops it
		kill "$(cat "$vac_dir/pid" 2>/dev/null)" 2>/dev/null
		rm -f "$vac_dir/pid"
	fi
	exec 6>&-
}

ec2_vm_test_setup() {
	EVT_CLUSTER=$1
	HARNESS=$PBX_SOURCE_DIR/tests/emulators/aws/ec2_harness.py
	IMAGES=${PBX_VM_IMAGES:-$(dirname "$PBX")/../../vm-images}
	KIND=${PBX_VM_IMAGE:-baked}
	KIND=ec2-${KIND#ec2-}
	evt_why=$(vm_why_not)
	python3 -c 'import moto.server, boto3' 2>/dev/null ||
		evt_why="${evt_why:+$evt_why
}the EC2 harness needs moto[server] and boto3 (scripts/test-requirements.txt)"
	vm_skip_unless "$evt_why"
	unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_SECURITY_TOKEN AWS_PROFILE \
		AWS_DEFAULT_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE
	export AWS_EC2_METADATA_DISABLED=true HOME="$TEST_TMP/user"   # no ~/.aws of the tester
	mkdir -p "$HOME"
	trap ec2_vm_cleanup EXIT
	# dash runs no EXIT trap on a signal by itself
	trap "exit 129" HUP
	trap "exit 130" INT
	trap "exit 143" TERM
}

# ec2_vm_harness NET PUBLIC_BLOCK: the EC2 harness on the KIND image with
# its VM network - VPC 10.NET.0.0/16, subnet 10.NET.1.0/24, public
# addresses from the loopback block PUBLIC_BLOCK - (one check), its
# environment in TEST_TMP/env.json (env_get CODE reads it), URL its proxy,
# and the harness's user pbx's keys exported as AWS_ACCESS_KEY_ID and
# AWS_SECRET_ACCESS_KEY.
ec2_vm_harness() {
	python3 "$HARNESS" --state-dir "$TEST_TMP/h" --env-file "$TEST_TMP/env.json" \
		--backend vm --vm-image "$IMAGES/$KIND" --vpc "10.$1.0.0/16" --subnet "10.$1.1.0/24" \
		--public-block "$2" --vm-upstream "${VM_UPSTREAM:-deb.debian.org:80}" >"$TEST_TMP/h.log" 2>&1 &
	H_PID=$!
	evh_i=0
	while [ ! -s "$TEST_TMP/env.json" ] && [ $evh_i -lt 600 ] && kill -0 "$H_PID" 2>/dev/null; do
		sleep 0.1
		evh_i=$((evh_i + 1))
	done
	[ -s "$TEST_TMP/env.json" ]
	ok $? "the harness runs with its VM network: $(tail -n 3 "$TEST_TMP/h.log")"
	URL=$(env_get 'd["url"]')
	AWS_ACCESS_KEY_ID=$(env_get 'd["pbx"]["access_key"]')
	AWS_SECRET_ACCESS_KEY=$(env_get 'd["pbx"]["secret_key"]')
	export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
}

env_get() { json_get "$1" <"$TEST_TMP/env.json"; }

# ec2_vm_holds: "LIVE_INSTANCES GROUPS KEY_PAIRS" in moto, asked as the
# harness's admin on moto itself
ec2_vm_holds() {
	python3 - "$TEST_TMP/env.json" <<'PY'
import boto3, json, sys
e = json.load(open(sys.argv[1]))
c = boto3.client("ec2", region_name="us-east-1", endpoint_url=e["moto_url"],
                 aws_access_key_id=e["admin"]["access_key"], aws_secret_access_key=e["admin"]["secret_key"])
n = sum(1 for r in c.describe_instances(Filters=[{"Name": "instance-state-name", "Values": [
    "pending", "running", "stopping", "stopped", "shutting-down"]}])["Reservations"] for i in r["Instances"])
g = sum(1 for s in c.describe_security_groups()["SecurityGroups"] if s["GroupName"] != "default")
k = len(c.describe_key_pairs()["KeyPairs"])
print(n, g, k)
PY
}

h_stop() {
	[ -n "${H_PID:-}" ] && kill "$H_PID" 2>/dev/null && wait "$H_PID" 2>/dev/null
	H_PID=
}

ec2_vm_cleanup() {
	"$PBX" -q cluster stop --discard-results "$EVT_CLUSTER" >/dev/null 2>&1
	h_stop
	vm_apt_cache_release
	rm -rf "$TEST_TMP"
}
