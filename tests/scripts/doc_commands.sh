#!/bin/sh
# doc_commands.sh - docs.commands: every pbx command the docs and man pages
# show is one pbx takes (doc_commands.py, through `pbx __check`), and the
# check itself refuses what it should: doc-commands-bad/ holds 8 commands
# pbx refuses of the 10 it shows (an argument short, too many, an unknown verb, subcommand
# and option, in an indented block, a fenced one after a prompt or sudo
# or &&, in prose, in a guide and in a man page's EXAMPLES) and two that
# are not commands.
# Usage: doc_commands.sh SOURCE_DIR PBX
src=$1 pbx=$2
here=$(dirname "$0")
status=0
python3 "$here/doc_commands.py" "$src" "$pbx" || status=1
out=$(python3 "$here/doc_commands.py" "$here/doc-commands-bad" "$pbx")
if [ $? = 1 ] && printf '%s\n' "$out" | tail -n 1 | grep -qx '10 pbx commands in the docs checked, 8 refused'; then
	echo "ok: the check refuses doc-commands-bad's 8 commands"
else
	printf 'not ok: doc-commands-bad should have 8 of 10 refused:\n%s\n' "$out"
	status=1
fi
exit $status
