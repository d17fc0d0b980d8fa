#!/bin/sh
# t0291-ssh-two-factor.sh - a university's SLURM cluster behind a bastion,
# with two-factor login (docs/ssh-clusters.md, "Two-factor login
# and ProxyJump"): cloud ssh with transport: openssh.  The login node's
# sshd (the test's own, run under a name of its own so PAM reads
# /etc/pam.d/pbx-t0291-sshd) wants a key AND a keyboard-interactive code
# (pam_exec checks it); it is reached only through a bastion (another
# sshd, key only), as the user's ~/.ssh/config says (Host alias, HostName,
# Port, User, IdentityFile, ProxyJump).  pbx logs in with the user's own
# ssh: the code is asked once (SSH_ASKPASS stands in for the terminal) and
# every later verb rides on the one control connection: ten verbs, one
# keyboard-interactive login in the login node's log, one question.  The
# experiment cycle runs as the user; `cluster disconnect` closes the
# control connection without a prompt; with the control connection closed and
# no way to answer, a verb fails with a clear message.  Addresses
# and ports: the test's slot (lib.sh); the login node's and the bastion's
# are LOGIN_ADDR:LOGIN_PORT and BASTION_ADDR:BASTION_PORT.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-uni.sh"

UNI_UID=2871
BASTION_ADDR=$SLOT_NET.0.101 BASTION_PORT=$(slot_port 1)
UNI=pbx-uni2
UNI_HOME=/home/$UNI
uni_campus campus2

uni_user "$UNI" "$UNI_UID" "$UNI_HOME" t0291
L=$TEST_TMP/login
mkdir -p "$L/keys"
chmod 755 "$L" "$L/keys"
ssh-keygen -q -t ed25519 -N "" -C t0291-host -f "$L/host"
ssh-keygen -q -t ed25519 -N "" -C t0291-uni -f "$PBX_HOME/uni_id"
cp "$PBX_HOME/uni_id.pub" "$L/keys/$UNI"
chmod 644 "$L/keys/$UNI"
# the second factor: a code the PAM stack of the login node's sshd asks
# for (keyboard-interactive), checked by pam_exec
echo 731904 >"$L/code"
cat >"$L/check" <<EOF
#!/bin/sh
read -r got
echo "\$PAM_USER" >>"$L/checks"
[ "\$got" = "\$(cat "$L/code")" ]
EOF
chmod 755 "$L/check"
cat >/etc/pam.d/pbx-t0291-sshd <<EOF
auth required pam_exec.so type=auth expose_authtok quiet $L/check
auth optional pam_permit.so
account required pam_permit.so
session required pam_permit.so
EOF
ln -s /usr/sbin/sshd "$L/pbx-t0291-sshd"
mkdir -p /run/sshd
"$L/pbx-t0291-sshd" -D -f /dev/null -h "$L/host" -E "$L/login.log" \
	-o ListenAddress=$LOGIN_ADDR:$LOGIN_PORT -o "AuthorizedKeysFile=$L/keys/%u" \
	-o PidFile="$L/login.pid" -o StrictModes=no -o PasswordAuthentication=no \
	-o KbdInteractiveAuthentication=yes -o UsePAM=yes \
	-o AuthenticationMethods=publickey,keyboard-interactive -o PermitRootLogin=no \
	-o UseDNS=no -o LogLevel=VERBOSE </dev/null >/dev/null 2>&1 &
LOGIN_SSHD=$!
/usr/sbin/sshd -D -f /dev/null -h "$L/host" -E "$L/bastion.log" \
	-o ListenAddress=$BASTION_ADDR:$BASTION_PORT -o "AuthorizedKeysFile=$L/keys/%u" \
	-o PidFile="$L/bastion.pid" -o StrictModes=no -o PasswordAuthentication=no \
	-o KbdInteractiveAuthentication=no -o PermitRootLogin=no -o UseDNS=no \
	-o LogLevel=VERBOSE </dev/null >/dev/null 2>&1 &
BASTION_SSHD=$!
wait_secs 10 test -s "$L/login.pid"
ok $? "the login node's sshd runs"
wait_secs 10 test -s "$L/bastion.pid"
ok $? "the bastion's sshd runs"

# the researcher's laptop: an ordinary local user (OpenSSH reads ~/.ssh of
# the passwd entry, not $HOME) with its own PBX_HOME and OpenSSH setup: a
# Host alias through the bastion, host keys known; the terminal's answers
# come from SSH_ASKPASS
LAP_UID=2872
LAP=pbx-laptop
U=$TEST_TMP/you
chmod 711 "$TEST_TMP"
if ! getent passwd "$LAP" >/dev/null; then
	useradd --uid "$LAP_UID" --user-group --home-dir "$U" --no-create-home --shell /bin/sh \
		--comment "t0291 laptop user" "$LAP"
fi
usermod -d "$U" "$LAP"
mkdir -p "$U/.ssh" "$U/.pbx"
mv "$PBX_HOME/uni_id" "$PBX_HOME/uni_id.pub" "$U/.pbx/"
printf '%s\n' "Host campus-login" "    HostName $LOGIN_ADDR" "    Port $LOGIN_PORT" "    User $UNI" \
	"    IdentityFile $U/.pbx/uni_id" "    ProxyJump campus-bastion" "Host campus-bastion" \
	"    HostName $BASTION_ADDR" "    Port $BASTION_PORT" "    User $UNI" "    IdentityFile $U/.pbx/uni_id" \
	>"$U/.ssh/config"
hostkey=$(cut -d' ' -f1,2 "$L/host.pub")
printf '[%s]:%s %s\n[%s]:%s %s\n' "$LOGIN_ADDR" "$LOGIN_PORT" "$hostkey" "$BASTION_ADDR" "$BASTION_PORT" "$hostkey" >"$U/.ssh/known_hosts"
printf '%s\n' '#!/bin/sh' "echo \"\$1\" >>'$L/asked'" "cat '$L/code'" >"$L/askpass"
chmod 755 "$L/askpass"
: >"$L/asked"
chmod 666 "$L/asked"
chmod 644 "$L/code"
# no login_user: ssh_config's User stands in (transport: openssh)
printf '%s\n' "clusters:" "  uni:" "    cloud: ssh" "    host: campus-login" \
	"    transport: openssh" "    setup: . $HEADROOT/etc/pbx/env.sh" >"$U/.pbx/config.yaml"
chown -R "$LAP:$LAP" "$U"
chmod 700 "$U" "$U/.ssh" "$U/.pbx"
chmod 600 "$U/.pbx/config.yaml"
# the laptop user's own copy of pbx: the checkout may be private (/root/pbx)
mkdir -p "$TEST_TMP/bin"
cp "$PBX" "$TEST_TMP/bin/pbx"
chmod 755 "$TEST_TMP/bin" "$TEST_TMP/bin/pbx"
masters() { ps -eo args= | grep -F "ControlPath=$U/.pbx/ssh/" | grep -c -- " -M"; }
stop_login() {
	pkill -f "ControlPath=$U/.pbx/ssh/" 2>/dev/null
	kill "$LOGIN_SSHD" "$BASTION_SSHD" 2>/dev/null
	rm -f /etc/pam.d/pbx-t0291-sshd
	rm -rf "$UNI_HOME/pbx"
	[ "$tap_failed" = 0 ] || tail -n 15 "$L/login.log" "$L/bastion.log" | sed 's/^/# /'
}
trap 'stop_login; cleanup_cluster' EXIT
# uni [ASKPASS] ARGS: pbx as the laptop's user (ASKPASS: a program's path)
uni() {
	_ap=$L/askpass
	case $1 in /*) _ap=$1; shift ;; esac
	out=$(setpriv --reuid="$LAP_UID" --regid="$LAP_UID" --clear-groups env HOME="$U" \
		PBX_HOME="$U/.pbx" SSH_ASKPASS="$_ap" SSH_ASKPASS_REQUIRE=force "$TEST_TMP/bin/pbx" "$@" 2>"$TEST_TMP/stderr")
	rc=$?
	errout=$(cat "$TEST_TMP/stderr")
}
logins() { grep -c "Accepted keyboard-interactive/pam for $UNI" "$L/login.log"; }

# 1: the first verb logs in: the key, then the code (asked once)
uni cluster exec uni -- sh -c 'echo "$(id -u) $(id -un) $PBX_SHARED"'
is "$out" "$UNI_UID $UNI $UNI_HOME/pbx" "exec runs as the user, through the bastion, after the code: $errout"
is "$(cat "$L/asked" 2>/dev/null | wc -l)" 1 "the code was asked once: $(cat "$L/asked" 2>/dev/null)"
is "$(grep -c "Accepted publickey for $UNI" "$L/bastion.log")" 1 "through the bastion (ProxyJump)"
is "$(masters)" 1 "one control connection runs"

mkdir -p "$TEST_TMP/exp"
cat >"$TEST_TMP/exp/experiment.yaml" <<'EXP'
name: campus2
command: echo "x=$PBX_PARAM_X uid=$(id -u)" && echo {x} >out.txt && [ {x} != 3 ]
sweep: { grid: { x: [1, 2, 3] } }
outputs: [out.txt]
EXP
# 2-10: the experiment cycle, on the same login
uni parrun "$TEST_TMP/exp/experiment.yaml" uni
ok $rc "parrun: $out $errout"
pkg=$(echo "$out" | sed -n 's/^package \([0-9a-f]*\) .*/\1/p')
i=0
while [ $i -lt 120 ]; do
	uni state --json "$pkg"
	printf '%s\n' "$out" | json_get 'all(t["state"] not in ("NEW","PENDING","RUNNING") for t in d["tasks"])' 2>/dev/null | grep -q True && break
	sleep 1
	i=$((i + 1))
done
is "$(printf '%s\n' "$out" | json_get '" ".join(sorted(t["state"] for t in d["tasks"]))')" "COMPLETED COMPLETED FAILED" \
	"the tasks ran (x=3 fails, as it should)"
uni log "$pkg:0"
case $out in *"x=1 uid=$UNI_UID"*) r=0 ;; *) r=1 ;; esac
ok $r "pbx log: $out $errout"
uni -q harvest "$pkg"
ok $rc "harvest (files come home over the control connection): $errout"
is "$(cat "$U/.pbx/results/$pkg"/*/out.txt 2>/dev/null | sort | tr '\n' ' ')" "1 2 3 " "the results are home"
uni rerun --failed "$pkg"
ok $rc "rerun --failed: $errout"
uni cluster show uni
case $out in *"login: campus-login (user and port from your ssh_config)"*"limits: MaxArraySize "[0-9]*", MaxJobCount "[0-9]*"partitions: "*[a-z]*"your jobs queued or running: "[0-9]*"your job submit limit (MaxSubmitJobs): not known (no accounting database)"*node1*idle*) r=0 ;; *) r=1 ;; esac
ok $r "cluster show: the login from ssh_config, SLURM's limits, partitions, the user's jobs, no submit limit known (no slurmdbd), the nodes: $out $errout"
uni cancel "$pkg"
ok $rc "cancel: $errout"
uni state "$pkg"
uni cluster exec uni -- true
ok $rc "exec again: $errout"
uni cluster ssh uni -- id -u
is "$rc:$out" "0:$UNI_UID" "cluster ssh: the user's ssh on the same connection: $errout"
is "$(logins)" 1 "ten verbs, one keyboard-interactive login on the login node"
is "$(cat "$L/asked" | wc -l)" 1 "and one question"
is "$(stat -c '%a %U' "$U/.pbx/ssh")" "700 $LAP" "the control sockets' directory is the user's, 0700"

# pbx cluster disconnect closes it (no prompt); a second says none is open
uni cluster disconnect uni
case $rc:$errout in *"0:"*"closed the login connection to uni"*) r=0 ;; *) r=1 ;; esac
ok $r "cluster disconnect closes the login connection: $errout"
wait_secs 10 prints 0 masters
ok $? "no control connection is left"
uni cluster disconnect uni
case $rc:$errout in *"0:"*"no login connection to uni is open"*) r=0 ;; *) r=1 ;; esac
ok $r "a second disconnect finds none: $errout"
is "$(cat "$L/asked" | wc -l)" 1 "and asked nothing"
# the connection closed and nobody to answer: a clear error, no hang
uni /bin/false cluster exec uni -- true
is "$rc" 1 "without the code the login fails (exit 1)"
case $errout in *"could not log in to campus-login with ssh"*) r=0 ;; *) r=1 ;; esac
ok $r "saying so: $errout"
done_testing
