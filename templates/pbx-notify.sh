#!/bin/sh
# pbx-notify.sh - the notice that a submission has ended (the experiment's
# notify:, docs/notify.md).  The submission (src/jobs/arrays.c) runs it as
# the task user in one small SLURM job that depends (afterany) on every
# array it submitted, so it starts once their last task has ended; tasks
# never wait for it.  It counts the package's tasks by state from their
# status files and POSTs one JSON message to the webhook URL in the
# package's notify.url:
#   {"text": "pbx: NAME (package ID) on cluster C ended: 2 COMPLETED, 1 FAILED. ...",
#    "experiment", "package", "cluster", "tasks", "counts": {"STATE": N, ...}}
# Slack's incoming webhooks show "text"; any other endpoint reads the rest.
# The URL often holds a secret: it goes to curl on its standard input
# (never on a command line, which `ps` shows every user of the node), and
# never into this job's log (RUN/slurm/notify.log), where curl's own words about
# it are cut to the host.
# Environment (the submission's): PBX_PKG_DIR, PBX_RUN_DIR, PBX_CLUSTER.
set -u
P=${PBX_PKG_DIR:?PBX_PKG_DIR is not set}
R=${PBX_RUN_DIR:?PBX_RUN_DIR is not set}
say() { printf '%s pbx-notify: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }

url=$(head -n 1 "$P/notify.url") || { say "no notify.url in $P"; exit 0; }
host=${url#*://}
host=${host%%[/?#]*}
host=${host##*@}
. "$P/env.sh" || { say "cannot read $P/env.sh"; exit 0; }
command -v curl >/dev/null 2>&1 || { say "curl is not installed on $(hostname): no notice sent"; exit 0; }

# Counts by state: the status files (regular files only: a task wrote
# them) of the tasks of this package; a task with none has not started.
first=0 count=0
read -r first count <"$P/tasks.range" 2>/dev/null || :
counts=$(for f in "$R"/tasks/*/status; do
	[ -f "$f" ] && [ ! -L "$f" ] && cut -d' ' -f2 "$f" 2>/dev/null
done | grep -E '^[A-Z_]{1,20}$' | sort | uniq -c | awk '{ print $2 " " $1 }')
seen=$(printf '%s\n' "$counts" | awk 'NF == 2 { n += $2 } END { print n + 0 }')
[ "$seen" -ge "$count" ] || counts=$(printf '%s\n%s\n' "$counts" "NOT_STARTED $((count - seen))" | grep .)
total=$((seen > count ? seen : count))

# Every value below is of safe characters by construction (the names are
# pbx's [A-Za-z0-9_.-], ids hex, states [A-Z_]): no JSON escaping needed.
cluster=$(printf %s "${PBX_CLUSTER:-}" | tr -cd 'A-Za-z0-9_.-')
name=$(printf %s "${PBX_EXPERIMENT:-}" | tr -cd 'A-Za-z0-9_.-')
pkg=$(printf %s "${PBX_PKG_ID:-}" | tr -cd '0-9a-f' | cut -c1-12)
summary=$(printf '%s\n' "$counts" | awk 'NF == 2 { printf "%s%s %s", (n++ ? ", " : ""), $2, $1 }')
jcounts=$(printf '%s\n' "$counts" | awk 'NF == 2 { printf "%s\"%s\": %s", (n++ ? ", " : ""), $1, $2 }')
body=$(mktemp "${TMPDIR:-/tmp}/pbx-notify.XXXXXX") || exit 0
errf=$(mktemp "${TMPDIR:-/tmp}/pbx-notify.XXXXXX") || { rm -f "$body"; exit 0; }
trap 'rm -f "$body" "$errf"' EXIT
printf '{"text": "pbx: %s (package %s) on cluster %s ended: %s. Bring the results home: pbx harvest %s", "experiment": "%s", "package": "%s", "cluster": "%s", "tasks": %s, "counts": {%s}}\n' \
	"$name" "$pkg" "$cluster" "$summary" "$pkg" "$name" "$pkg" "$cluster" "$total" "$jcounts" >"$body"

code=$(printf 'url = "%s"\n' "$url" | curl -sS --max-time 30 --retry 3 --retry-delay 5 \
	-o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
	--data-binary "@$body" -K - 2>"$errf") || :
case $code in
2??) say "sent to $host: $summary (HTTP $code)" ;;
*)
	why=$(awk -v u="$url" -v h="$host" '{ while ((i = index($0, u)) > 0) $0 = substr($0, 1, i - 1) h substr($0, i + length(u)); print }' "$errf" | head -3 | tr '\n' ' ')
	say "the webhook at $host did not take the notice (HTTP ${code:-none}) ${why}"
	;;
esac
exit 0
