#!/bin/sh
# t0330-harvest-links.sh - harvest's trust boundary against a task or node
# that changes its tree between harvests: links chained across two and
# three harvests (a link that is lexically inside but escapes through
# another link), a directory replaced by a link and a link replaced by a
# directory, a node whose tar stream does not match the manifest (another
# link target, a member not asked for, a file where a link was listed, a
# member the gatekeeper refuses after good ones), and a results file system
# too small for what is wanted.  After each harvest nothing outside
# results/ has changed (a listing of PBX_HOME and the test's HOME, a canary
# ~/.bashrc); what is refused is named with its task and path, and a path
# that cannot be placed, a refused stream or too little space make the
# harvest exit non-zero.
# Addresses and ports: the test's slot (lib.sh).
. "$(dirname "$0")/lib.sh"

local_cluster hl slot "{ name: node, count: 1, gpus: 0, cpus: 2 }"
SHARED="$PBX_HOME/clusters/hl/shared"
RESULTS="$PBX_HOME/results"
export HOME="$TEST_TMP/userhome"
mkdir -p "$HOME"
echo 'echo canary' >"$HOME/.bashrc"
CANARY=$(sha256sum <"$HOME/.bashrc")

run_pbx -q cluster start hl
ok $rc "cluster starts: $errout"

# Everything outside results/ that a harvest could touch, with contents.
outside() {
	tree_outside_results "$HOME"
	sha256sum <"$HOME/.bashrc"
}
# harvest PKG [ARGS]: a harvest, checking that nothing outside results/
# changed (one check).
harvest() {
	outside >"$TEST_TMP/before"
	run_pbx harvest "$@"
	outside >"$TEST_TMP/after"
	is "$(diff "$TEST_TMP/before" "$TEST_TMP/after")" "" "harvest $*: nothing outside results/ changed"
}
# new_package NAME: a package whose one task leaves status files only; the
# test then shapes the task's tree on the node (as the task, or the node,
# could).  Sets PKG, T (the task on the node) and L (its results).
new_package() {
	mkdir -p "$TEST_TMP/$1"
	printf 'name: %s\ncommand: "true"\noutputs: ["*"]\n' "$1" >"$TEST_TMP/$1/experiment.yaml"
	run_pbx parrun --json "$TEST_TMP/$1/experiment.yaml" hl
	PKG=$(echo "$out" | json_get 'd["package"]')
	wait_final "$PKG" 60
	T="$SHARED/pbx/$PKG/tasks/0"
	L="$RESULTS/$PKG/0"
}

# --- links chained across harvests; directories and links swapped ------------
new_package links
ok $? "a one-task package ends"
(
	cd "$T" || exit 1
	# c2: 'd -> .'; next time d is a directory on the node and
	# 'x -> d/d/d/d/d/../../../../../userhome', lexically inside the task,
	# would be $HOME through the local d; then x/.bashrc would land there.
	mkdir c2 && ln -s . c2/d
	# c3: 'x -> ../../..' is the task's c3; next time 'y -> ../../../../../userhome'
	# below x is lexically inside but $HOME through the local x; then y/.bashrc.
	mkdir -p c3/a/b/c && ln -s ../../.. c3/a/b/c/x
	# dl: a directory that becomes a link; ld: a link that becomes a directory
	mkdir -p dl/dir ld/sub && echo f >dl/dir/f && ln -s sub ld/ln && echo g >ld/sub/g
)
harvest "$PKG"
ok $rc "harvest 1 succeeds: $errout"
echo "$errout" | grep -q "refused task 0 link 'c3/a/b/c/x' -> '../../..'"
ok $? "a link with '..' is refused, named with task and path"
[ -L "$L/c2/d" ] && [ "$(readlink "$L/c2/d")" = . ] && [ ! -e "$L/c3/a/b/c/x" ] &&
	[ -L "$L/ld/ln" ] && [ -f "$L/dl/dir/f" ]
ok $? "downward links arrive as links, the others do not arrive"

(
	cd "$T" || exit 1
	rm c2/d && mkdir c2/d && echo f >c2/d/f && ln -s d/d/d/d/d/../../../../../userhome c2/x
	rm c3/a/b/c/x && mkdir c3/a/b/c/x && ln -s ../../../../../userhome c3/a/b/c/x/y
	rm -r dl/dir && mkdir dl/sub && ln -s sub dl/dir && echo s >dl/sub/s
	rm ld/ln && mkdir ld/ln && echo h >ld/ln/h
)
harvest "$PKG"
is "$rc" 4 "harvest 2 fails (exit 4): $errout"
echo "$errout" | grep -q "task 0 'c2/d/f' not placed: '$L/c2/d' is a symbolic link"
ok $? "a file whose directory is a local link is named and not placed"
echo "$errout" | grep -q "task 0 'ld/ln/h' not placed: '$L/ld/ln' is a symbolic link"
ok $? "a link replaced by a directory: named, not placed"
echo "$errout" | grep -q "task 0 'dl/dir' not placed: '$L/dl/dir' is a directory"
ok $? "a directory replaced by a link: named, not placed"
echo "$errout" | grep -q "refused task 0 link 'c3/a/b/c/x/y' -> '../../../../../userhome'" &&
	echo "$errout" | grep -q "refused task 0 link 'c2/x' -> 'd/d/d/d/d/../../../../../userhome'"
ok $? "the second links of both chains are refused"
[ ! -e "$L/c2/x" ] && [ ! -e "$L/c2/f" ] && [ ! -e "$L/ld/sub/h" ] && [ "$(cat "$L/dl/sub/s")" = s ]
ok $? "the rest is placed, inside real directories only"
is "$(sha256sum <"$HOME/.bashrc")" "$CANARY" "the canary ~/.bashrc is untouched"

(
	cd "$T" || exit 1
	rm c2/x && mkdir c2/x && echo evil >c2/x/.bashrc
	rm c3/a/b/c/x/y && mkdir c3/a/b/c/x/y && echo evil >c3/a/b/c/x/y/.bashrc
)
rm "$L/c2/d" "$L/ld/ln" && rm -r "$L/dl/dir"   # what the message says to do
harvest "$PKG"
ok $rc "harvest 3, once the local paths in the way are moved away, succeeds: $errout"
[ "$(cat "$L/c3/a/b/c/x/y/.bashrc")" = evil ] && [ ! -L "$L/c3/a/b/c/x" ] &&
	[ "$(cat "$L/c2/x/.bashrc")" = evil ] && [ ! -L "$L/c2/x" ]
ok $? "the directories the chains would have gone through land inside the task"
[ "$(cat "$L/c2/d/f")" = f ] && [ "$(cat "$L/ld/ln/h")" = h ] && [ "$(readlink "$L/dl/dir")" = sub ]
ok $? "the files that were blocked arrive now"
is "$(sha256sum <"$HOME/.bashrc")" "$CANARY" "the canary ~/.bashrc is still untouched"

# --- a node whose stream does not match the manifest ---------------------------
# The head's login shell reads ~/.bashrc: there a `tar` function answers
# the harvest's tar from another tree ($HOME/alt) and, when $HOME/extra
# exists, with more names than asked for, as a compromised node could.
for h in "$PBX_HOME"/clusters/hl/nodes/*/root; do
	cat >"$h/.bashrc" <<'EOF'
tar() {
	if [ -d "$HOME/alt" ] && [ "$1" = -C ]; then
		shift 2
		{ cat; cat "$HOME/extra" 2>/dev/null; } | command tar -C "$HOME/alt" "$@"
	else
		command tar "$@"
	fi
}
EOF
done
HEAD_HOME=$(ls -d "$PBX_HOME"/clusters/hl/nodes/*/root | head -n 1)
# node_answers SETUP: the node's alternative tree is a copy of the tasks
# directory changed by the shell commands SETUP (run in the copy).
node_answers() {
	rm -rf "$HEAD_HOME/alt" "$HEAD_HOME/extra"
	cp -a "$SHARED/pbx/$PKG/tasks" "$HEAD_HOME/alt"
	(cd "$HEAD_HOME/alt" && eval "$1")
}
node_honest() { rm -rf "$HEAD_HOME/alt" "$HEAD_HOME/extra"; }
# nothing_new: no file of the package (never harvested yet) is home.
nothing_new() { [ -z "$(find "$RESULTS/$PKG" ! -type d 2>/dev/null)" ]; }

new_package mismatch
(cd "$T" && echo a >a.txt && ln -s a.txt l && echo b >b.txt)
node_answers 'rm 0/l && ln -s b.txt 0/l'
harvest "$PKG"
is "$rc" 4 "another link target than the manifest's: exit 4: $errout"
echo "$errout" | grep -q "task 0 'l': the stream does not match the manifest: the manifest lists a link to 'a.txt', the stream carries a link to 'b.txt'; nothing from the stream was installed"
ok $? "the message names task, path and both targets"
nothing_new
ok $? "nothing of that stream is installed (not even the files before the link)"

# (the names added come after every name asked for)
node_answers 'echo x >0/extra.txt && printf "0/extra.txt\0" >"$HEAD_HOME/extra"'
harvest "$PKG"
is "$rc" 4 "a member not asked for: exit 4: $errout"
echo "$errout" | grep -q "task 0 'extra.txt': the stream does not match the manifest: it was not asked for"
ok $? "the message names task and path"
nothing_new
ok $? "nothing of that stream is installed"

node_answers 'rm 0/l && echo notalink >0/l'
harvest "$PKG"
is "$rc" 4 "a file where the manifest lists a link: exit 4: $errout"
echo "$errout" | grep -q "task 0 'l': the stream does not match the manifest: the manifest lists a symlink, the stream carries a regular file"
ok $? "the message names task, path and both types"
nothing_new
ok $? "nothing of that stream is installed"

node_answers 'ln -s /etc/passwd 0/zz && printf "0/zz\0" >"$HEAD_HOME/extra"'
harvest "$PKG"
is "$rc" 4 "a member the gatekeeper refuses after good ones: exit 4: $errout"
echo "$errout" | grep -q "task 0 'zz': symlink target is empty or absolute; nothing from the stream was installed"
ok $? "the message names task and path"
nothing_new
ok $? "nothing of that stream is installed, not even the members before the refused one"

node_honest
harvest "$PKG"
ok $rc "the honest node's stream is harvested: $errout"
[ "$(readlink "$L/l")" = a.txt ] && [ "$(cat "$L/a.txt")" = a ] && [ ! -e "$L/extra.txt" ]
ok $? "the files are the task's"

# --- a results file system with too little room -------------------------------
new_package space
head -c 12000000 /dev/zero >"$T/big.bin"
trap 'umount "$RESULTS" 2>/dev/null; cleanup_cluster' EXIT
mount -t tmpfs -o size=8m pbx-t0330 "$RESULTS"
ok $? "an 8 MB tmpfs as the results directory (the test runs as root)"
harvest "$PKG"
is "$rc" 1 "a harvest that does not fit fails: $errout"
echo "$errout" | grep -q "not enough free space to harvest $PKG: [0-9]* files need 12\.0[0-9]* MB plus a margin of 16 MB, and the file system of $RESULTS has 8\.[0-9] MB free; nothing was written"
ok $? "the message says how much is needed, how much is free, and where"
is "$(find "$RESULTS" -mindepth 1)" "" "nothing was written"
umount "$RESULTS"
done_testing
