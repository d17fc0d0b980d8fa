# lib-uni.sh - what the "university cluster" tests (t0290, t0291, t0292,
# t0306: cloud ssh as an ordinary user) share; sourced after lib.sh.
#
#   uni_campus CLUSTER           the university's cluster: a local cluster
#                                of root's named CLUSTER (2 nodes) started
#                                (a test point), LOGIN_ADDR and LOGIN_PORT
#                                (the slot's) exported, HEADROOT its head's
#                                root directory
#   uni_head_root CLUSTER        prints the root directory of local
#                                cluster CLUSTER's head node
#   uni_cluster NAME USER [LINE...]  clusters.NAME in config.yaml: cloud
#                                ssh to LOGIN_ADDR:LOGIN_PORT as USER with
#                                key $PBX_HOME/uni_id, setup sourcing the
#                                head's env.sh; each LINE ("work_dir: X",
#                                "setup: ...", replacing the default one)
#                                added to it
#   uni_user NAME UID HOME WHO   the account NAME (uid UID, home HOME, WHO in
#                                its comment): ordinary, no sudo, no password
#                                but not locked ("!" would make sshd refuse
#                                it); the work directory HOME/pbx removed
#   uni_login NAME               its login node: an sshd of the test's own
#                                on LOGIN_ADDR:LOGIN_PORT (the test's slot),
#                                keys only, NAME's key $PBX_HOME/uni_id
#                                (made here) authorized; files in
#                                $TEST_TMP/login (sshd.log), pid LOGIN_SSHD

uni_user() {
	if ! getent passwd "$1" >/dev/null; then
		useradd --uid "$2" --user-group --home-dir "$3" --create-home --shell /bin/sh \
			--comment "$4 university user" "$1"
	fi
	usermod -p '*' "$1"
	rm -rf "$3/pbx"
}

uni_login() {
	_ul=$TEST_TMP/login
	mkdir -p "$_ul/keys"
	chmod 755 "$_ul" "$_ul/keys"
	ssh-keygen -q -t ed25519 -N "" -C uni-login-host -f "$_ul/host"
	ssh-keygen -q -t ed25519 -N "" -C "$1" -f "$PBX_HOME/uni_id"
	cp "$PBX_HOME/uni_id.pub" "$_ul/keys/$1"
	chmod 644 "$_ul/keys/$1"
	mkdir -p /run/sshd
	/usr/sbin/sshd -D -f /dev/null -h "$_ul/host" -E "$_ul/sshd.log" \
		-o ListenAddress=$LOGIN_ADDR:$LOGIN_PORT -o "AuthorizedKeysFile=$_ul/keys/%u" \
		-o PidFile="$_ul/sshd.pid" -o StrictModes=no -o PasswordAuthentication=no \
		-o KbdInteractiveAuthentication=no -o PermitRootLogin=no -o UseDNS=no \
		-o "Subsystem=sftp internal-sftp" -o LogLevel=VERBOSE </dev/null >/dev/null 2>&1 &
	LOGIN_SSHD=$!
	wait_secs 10 test -s "$_ul/sshd.pid"
}

uni_head_root() {
	sqlite3 "$PBX_HOME/pbx.db" "SELECT n.root FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE c.name = '$1' AND c.state != 'deleted' AND n.name = 'head'"
}

uni_campus() {
	LOGIN_ADDR=$SLOT_NET.0.100 LOGIN_PORT=$(slot_port 0)
	export LOGIN_ADDR LOGIN_PORT
	local_cluster "$1" slot "{ name: node, count: 2 }"
	run_pbx -q cluster start "$1"
	ok $rc "the university's cluster runs (a local cluster of root's): $errout"
	HEADROOT=$(uni_head_root "$1")
}

uni_cluster() {
	_un=$1 _uu=$2
	shift 2
	_us="setup: . $HEADROOT/etc/pbx/env.sh"
	for _ul in "$@"; do case $_ul in setup:*) _us=$_ul ;; esac; done
	{
		printf '  %s:\n' "$_un"
		printf '    %s\n' "cloud: ssh" "host: $LOGIN_ADDR" "port: $LOGIN_PORT" "login_user: $_uu" \
			"ssh_key: $PBX_HOME/uni_id" "$_us"
		for _ul in "$@"; do case $_ul in setup:*) ;; *) printf '    %s\n' "$_ul" ;; esac; done
	} >"$TEST_TMP/uni-$_un.yaml"
	sed -i "/^clusters:\$/r $TEST_TMP/uni-$_un.yaml" "$PBX_HOME/config.yaml"
}
