# lib-uni.sh - what the "university cluster" tests (t0290, t0291, t0292:
# cloud ssh as an ordinary user) share; sourced after lib.sh.
#
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
