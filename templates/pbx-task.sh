#!/bin/sh
# pbx-task.sh - the task wrapper of a pbx experiment package: the batch
# script of every job array pbx submits (one array element = one task), and
# runnable by hand.  POSIX sh (dash).  Shipped in the package by pbx.
#
# Environment in:
#   PBX_PKG_DIR      the extracted package (tasks.*, env.sh, code/)   required
#   PBX_RUN_DIR      task directories go to PBX_RUN_DIR/tasks/INDEX   required
#   PBX_TASK_INDEX   the global task index; if unset it is
#                    PBX_TASK_OFFSET (default 0) + SLURM_ARRAY_TASK_ID
#   SLURMD_NODENAME, SLURM_RESTART_COUNT, SLURM_ARRAY_JOB_ID,
#   SLURM_ARRAY_TASK_ID, SLURM_JOB_ID                           optional
#   PBX_LAUNCHER     how the command starts (pbx sets it per submission):
#                    none (default: once, in the batch step), srun (one
#                    copy per SLURM task) or mpi (mpirun inside the
#                    allocation, one rank per SLURM task, or per GPU of
#                    a one-task job: CUDA_VISIBLE_DEVICES)          optional
# Environment of the program: PBX_PARAM_<NAME> (each parameter, name in
#   uppercase), PBX_REPEAT, PBX_TASK_INDEX, PBX_TASK_DIR, PBX_PKG_DIR,
#   PBX_RUN_DIR, PBX_EXPERIMENT, PBX_PKG_ID, PBX_NODE (SLURMD_NODENAME, the
#   node it runs on) and the experiment's env:; with
#   an environment: (pbx-env.sh in the package), VIRTUAL_ENV and PATH
#   lead to its node-local Python environment, or the command runs in the
#   container image (ch-run) with the same directory and environment.
# Files out, in the task directory (also the program's working directory,
#   where every top-level entry of code/ appears as a symlink, and each
#   data: path of data.links as a symlink to its staged, read-only copy):
#   status       ONE line, replaced atomically (tmp + mv):
#                INDEX STATE EXIT_CODE NODE ATTEMPT START_EPOCH END_EPOCH JOBID
#                STATE: RUNNING (EXIT_CODE and END_EPOCH "-"), then COMPLETED
#                (exit 0), REQUEUED (exit 75, "checkpointed, run me again",
#                and SLURM took the job back: the next attempt follows),
#                FAILED (non-zero) or CANCELLED (the wrapper got SIGTERM or
#                SIGINT while the program ran, whatever its exit code, e.g.
#                143 when TERM killed it); "-" for unknown fields
#   params.json  the point's parameters, {"name": "value", ...}
#   environment.txt  with an environment: its key, its Python (version and
#                platform), the installer (uv or pip, its version) and its
#                lock, one line per package; with an
#                image: "image KEY" (the archive's sha256) and "archive
#                image NAME", or for a pulled image "image
#                docker://NAME@sha256:DIGEST" and "reference REF"; with
#                apt: "apt NAME=VERSION" per Debian package, as installed
#                on the node
#   stdout       the program's stdout, appended per attempt, nothing else
#   stderr       the program's stderr, appended; each attempt between a
#                "=== pbx task ... start ... ===" and an "... end ... ===" line
# SIGTERM, SIGINT and SIGUSR1 are forwarded to the program (under mpi or
# srun, SIGTERM goes to the launcher as SIGUSR1: see pbx_signal); the wrapper
# exits with the program's exit status, or 125 when the task could not be
# set up (message in stderr, status FAILED 125).  A program that exits 75
# (EX_TEMPFAIL: pbx-train after checkpointing on SIGTERM/SIGUSR1) has its
# job requeued with `scontrol requeue` (the job was submitted --requeue);
# the next attempt runs the same command, which resumes.
set -u

pbx_idx=
pbx_tdir=
pbx_node=-
pbx_attempt=1
pbx_jobid=-
pbx_start=-

# pbx_field VALUE: sets pbx_fv to VALUE as a status field: "-" when empty,
# anything but [A-Za-z0-9._:+-] as '_'.  Usual values fork nothing.
pbx_field() {
	case $1 in
	'') pbx_fv=- ;;
	*[!A-Za-z0-9._:+-]*) pbx_fv=$(printf '%s' "$1" | tr -c 'A-Za-z0-9._:+-' '_') ;;
	*) pbx_fv=$1 ;;
	esac
}

# pbx_status STATE EXIT_CODE END_EPOCH
pbx_status() {
	pbx_tmp=$pbx_tdir/.status.$$
	printf '%s %s %s %s %s %s %s %s\n' "$pbx_idx" "$1" "$2" "$pbx_node" \
		"$pbx_attempt" "$pbx_start" "$3" "$pbx_jobid" >"$pbx_tmp" &&
		mv -f "$pbx_tmp" "$pbx_tdir/status"
}

pbx_die() {
	printf 'pbx-task: %s\n' "$1" >&2
	if [ -n "$pbx_tdir" ] && mkdir -p "$pbx_tdir" 2>/dev/null; then
		printf 'pbx-task: %s\n' "$1" >>"$pbx_tdir/stderr"
		pbx_status FAILED 125 "$(date +%s)"
	fi
	exit 125
}

pbx_number() {
	case $1 in '' | *[!0-9]*) return 1 ;; esac
	return 0
}

# ---- which task ----------------------------------------------------
[ -n "${PBX_PKG_DIR:-}" ] || pbx_die "PBX_PKG_DIR is not set"
[ -n "${PBX_RUN_DIR:-}" ] || pbx_die "PBX_RUN_DIR is not set"
if [ -n "${PBX_TASK_INDEX:-}" ]; then
	pbx_idx=$PBX_TASK_INDEX
else
	pbx_number "${SLURM_ARRAY_TASK_ID:-}" || pbx_die "neither PBX_TASK_INDEX nor SLURM_ARRAY_TASK_ID is set"
	pbx_number "${PBX_TASK_OFFSET:-0}" || pbx_die "PBX_TASK_OFFSET is not a number"
	pbx_idx=$((${PBX_TASK_OFFSET:-0} + SLURM_ARRAY_TASK_ID))
fi
pbx_number "$pbx_idx" || pbx_die "bad task index '$pbx_idx'"
pbx_tdir=$PBX_RUN_DIR/tasks/$pbx_idx

pbx_field "${SLURMD_NODENAME:-}"
pbx_node=$pbx_fv
# the node it runs on (env.sh's PBX_NODE came with sbatch's environment:
# the head's, where pbx submitted)
if [ -n "${SLURMD_NODENAME:-}" ]; then export PBX_NODE="$SLURMD_NODENAME"; fi
if pbx_number "${SLURM_RESTART_COUNT:-}"; then pbx_attempt=$((SLURM_RESTART_COUNT + 1)); fi
if [ -n "${SLURM_ARRAY_JOB_ID:-}" ] && [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
	pbx_field "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
	pbx_jobid=$pbx_fv
elif [ -n "${SLURM_JOB_ID:-}" ]; then
	pbx_field "$SLURM_JOB_ID"
	pbx_jobid=$pbx_fv
fi
pbx_start=$(date +%s)
mkdir -p "$pbx_tdir" || pbx_die "cannot create $pbx_tdir"

# ---- its record: O(1) with dd (format in src/experiment/package.h) ---
read -r pbx_first pbx_count <"$PBX_PKG_DIR/tasks.range" || pbx_die "cannot read $PBX_PKG_DIR/tasks.range"
if ! pbx_number "${pbx_first:-}" || ! pbx_number "${pbx_count:-}"; then pbx_die "bad tasks.range"; fi
pbx_j=$((pbx_idx - pbx_first))
if [ "$pbx_j" -lt 0 ] || [ "$pbx_j" -ge "$pbx_count" ]; then
	pbx_die "task $pbx_idx is not in this package (tasks $pbx_first..$((pbx_first + pbx_count - 1)))"
fi
pbx_line=$(dd if="$PBX_PKG_DIR/tasks.idx" bs=32 skip="$pbx_j" count=1 2>/dev/null)
read -r pbx_off pbx_len <<EOF
$pbx_line
EOF
if ! pbx_number "${pbx_off:-}" || ! pbx_number "${pbx_len:-}"; then pbx_die "bad tasks.idx line $pbx_j"; fi
pbx_rec_end=
pbx_rec_index=
pbx_rec_json=
pbx_rec_cmd=
pbx_rec=$(dd if="$PBX_PKG_DIR/tasks.dat" bs=64 skip=$((pbx_off / 64)) \
	count=$(((pbx_len + 63) / 64)) 2>/dev/null)
eval "$pbx_rec"
if [ "$pbx_rec_end" != 1 ] || [ "$pbx_rec_index" != "$pbx_idx" ]; then pbx_die "bad record for task $pbx_idx"; fi

# ---- the task directory --------------------------------------------
export PBX_TASK_INDEX="$pbx_idx" PBX_TASK_DIR="$pbx_tdir" PBX_PKG_DIR PBX_RUN_DIR
# shellcheck source=/dev/null
. "$PBX_PKG_DIR/env.sh" || pbx_die "cannot read $PBX_PKG_DIR/env.sh"
cd "$pbx_tdir" || pbx_die "cannot enter $pbx_tdir"
printf '%s\n' "$pbx_rec_json" >params.json || pbx_die "cannot write params.json"
pbx_link() {
	pbx_b=${1##*/}
	case $pbx_b in status | stdout | stderr | params.json | environment.txt | .status.*) return 0 ;; esac
	[ -e "$pbx_b" ] || [ -L "$pbx_b" ] || ln -s "$1" "$pbx_b"
}
# the experiment's data: (data.links: "ID TO" lines), staged once per
# cluster in $PBX_SHARED/pbx/data/ID (read-only), linked first at TO
if [ -f "$PBX_PKG_DIR/data.links" ]; then
	while read -r pbx_did pbx_dto; do
		[ -n "$pbx_did" ] || continue
		[ -d "${PBX_SHARED:-}/pbx/data/$pbx_did" ] ||
			pbx_die "data for $pbx_dto ($pbx_did) is not staged in \$PBX_SHARED/pbx/data: run pbx parrun again"
		case $pbx_dto in */*) mkdir -p "${pbx_dto%/*}" || pbx_die "cannot create ${pbx_dto%/*} in $pbx_tdir" ;; esac
		if [ -L "$pbx_dto" ]; then rm -f "$pbx_dto"; fi
		[ -e "$pbx_dto" ] || ln -s "$PBX_SHARED/pbx/data/$pbx_did" "$pbx_dto" ||
			pbx_die "cannot link $pbx_dto in $pbx_tdir"
	done <"$PBX_PKG_DIR/data.links"
fi
if [ -f "$PBX_PKG_DIR/train.yaml" ]; then pbx_link "$PBX_PKG_DIR/train.yaml"; fi
for pbx_f in "$PBX_PKG_DIR"/code/* "$PBX_PKG_DIR"/code/.[!.]* "$PBX_PKG_DIR"/code/..?*; do
	if [ -e "$pbx_f" ] || [ -L "$pbx_f" ]; then pbx_link "$pbx_f"; fi
done

# ---- its Python environment or image (the experiment's environment:) -
# pbx-env.sh unpacks the cluster's build on this node once and names it;
# the task runs with it first on PATH (python is the environment's), or
# inside the image (ch-run, below), with the image's own Python
# environment when it has one (python: with container:)
pbx_image=
# pbx_unpack ACTION: pbx_u, the node-local directory pbx-env.sh ACTION
# names (unpacked first if needed); what else it said (a note, e.g. where
# an image without ldconfig has the node's GPU driver) goes to the task's
# stderr
pbx_unpack() {
	pbx_u=$(sh "$PBX_PKG_DIR/pbx-env.sh" "$1" 2>&1) || pbx_die "$pbx_u"
	printf '%s\n' "$pbx_u" | sed '$d' >>stderr
	pbx_u=$(printf '%s\n' "$pbx_u" | tail -n 1)
}
# pbx_use_venv VENV ENVDIR: VENV first on PATH; what ran (key, interpreter,
# installer, lock: ENVDIR's) appended to environment.txt, harvested
pbx_use_venv() {
	unset PYTHONHOME PYTHONPATH
	export VIRTUAL_ENV="$1" PATH="$1/bin:$PATH"
	{
		printf 'environment %s\npython %s\n' "${1##*/}" "$(cat "$2/python")"
		[ ! -f "$1/pbx-installer" ] || printf 'installer %s\n' "$(head -n 1 "$1/pbx-installer")"
		cat "$2/lock.txt"
	} >>environment.txt || pbx_die "cannot write $pbx_tdir/environment.txt"
}
if [ -f "$PBX_PKG_DIR/pbx-env.sh" ]; then
	pbx_unpack unpack
	pbx_venv=$pbx_u
fi
if [ -f "$PBX_PKG_DIR/pbx-env.sh" ] && { [ -e "$PBX_PKG_DIR/env/image" ] || [ -L "$PBX_PKG_DIR/env/image" ] ||
	[ -f "$PBX_PKG_DIR/env/image-ref" ]; }; then
	pbx_image=$pbx_venv
	command -v ch-run >/dev/null 2>&1 ||
		pbx_die "the experiment's container needs ch-run on $pbx_node (Debian: apt-get install charliecloud-runtime)"
	# a pulled image: its reference by digest, and as the experiment wrote it
	if [ -f "$PBX_PKG_DIR/env/image-ref" ]; then
		printf 'image %s\nreference %s\n' "$(cat "$PBX_RUN_DIR/env/python")" "$(head -n 1 "$PBX_PKG_DIR/env/image-ref")"
	else
		printf 'image %s\narchive %s\n' "${pbx_image##*/}" "$(cat "$PBX_RUN_DIR/env/python")"
	fi >environment.txt || pbx_die "cannot write $pbx_tdir/environment.txt"
	# the image's own Python environment, bound into it at its path
	pbx_pyenv=
	if [ -f "$PBX_PKG_DIR/env/requirements.txt" ]; then
		pbx_unpack unpack-py
		pbx_pyenv=$pbx_u
		pbx_use_venv "$pbx_pyenv" "$PBX_RUN_DIR/env/py"
	fi
elif [ -f "$PBX_PKG_DIR/pbx-env.sh" ]; then
	: >environment.txt || pbx_die "cannot write $pbx_tdir/environment.txt"
	pbx_use_venv "$pbx_venv" "$PBX_RUN_DIR/env"
fi
# the Debian packages the experiment names (apt:, installed by parrun as
# root on the nodes that were up): each must be here, at its version when
# one is named; their versions go into environment.txt
if [ -f "$PBX_PKG_DIR/env/apt.txt" ]; then
	pbx_apt=
	while read -r pbx_p; do
		case $pbx_p in '' | *[!a-z0-9+.=A-Z~:-]*) pbx_die "env/apt.txt: bad line '$pbx_p'" ;; esac
		pbx_s=$(dpkg-query -W -f='${Status} ${Version}' "${pbx_p%%=*}" 2>/dev/null) || pbx_s=
		case $pbx_s in
		"install ok installed "*) ;;
		*) pbx_die "Debian package ${pbx_p%%=*} (apt:) is not installed on $pbx_node: 'pbx parrun' installs them on the nodes that are up; a node made later (power saving, resize) misses them" ;;
		esac
		case $pbx_p in *=*) [ "${pbx_s##* }" = "${pbx_p#*=}" ] ||
			pbx_die "Debian package ${pbx_p%%=*} is at ${pbx_s##* } on $pbx_node, not ${pbx_p#*=} (apt:)" ;;
		esac
		pbx_apt="${pbx_apt}apt ${pbx_p%%=*}=${pbx_s##* }
"
	done <"$PBX_PKG_DIR/env/apt.txt"
	if [ -f "$PBX_PKG_DIR/pbx-env.sh" ]; then
		printf '%s' "$pbx_apt" >>environment.txt
	else
		printf '%s' "$pbx_apt" >environment.txt
	fi || pbx_die "cannot write $pbx_tdir/environment.txt"
fi

# ---- run it, forwarding signals ------------------------------------
# The program runs in its own session (setsid), so a forwarded signal
# reaches its whole process group, as a terminal's would.  Its /bin/sh -c
# traps TERM/INT to exit, with the status of the command that was running,
# once that returns (a compound command does not go on after a cancel, and
# e.g. pbx-train's 75 "checkpointed" survives), and ignores USR1 (which the
# program still gets: traps are reset on exec).  A background job of a
# non-interactive shell starts with SIGINT ignored; env --default-signal
# (coreutils >= 8.31) gives the program its default back.
pbx_child=
pbx_caught=
pbx_nsig=0
pbx_group=
# shellcheck disable=SC2317 # called from the traps below
pbx_signal() {
	pbx_nsig=$((pbx_nsig + 1))
	case $1 in TERM | INT) pbx_caught=$1 ;; esac
	[ -n "$pbx_child" ] || return 0
	# A launcher ends its copies on SIGTERM: mpirun kills its ranks and
	# exits 1, srun SIGKILLs them ("forcing job termination"), so a
	# checkpoint's 75 would be lost and a preempted task never requeued.
	# Both forward SIGUSR1 to every copy instead: pbx-train checkpoints on
	# it and exits 75, and so does the launcher (docs/spot.md)
	case $1:${PBX_LAUNCHER:-none} in
	TERM:mpi | TERM:srun)
		kill -s USR1 "$pbx_child" 2>/dev/null
		return 0
		;;
	esac
	if [ -n "$pbx_group" ] && kill -s "$1" -- "-$pbx_child" 2>/dev/null; then return 0; fi
	kill -s "$1" "$pbx_child" 2>/dev/null
}
trap 'pbx_signal TERM' TERM
trap 'pbx_signal INT' INT
trap 'pbx_signal USR1' USR1

pbx_hdr="=== pbx task $pbx_idx attempt $pbx_attempt node $pbx_node job $pbx_jobid start $pbx_start ==="
printf '%s\n' "$pbx_hdr" >>stderr
pbx_status RUNNING - - || pbx_die "cannot write $pbx_tdir/status"
set -- /bin/sh -c 'trap "exit \$?" TERM; trap "exit \$?" INT; trap : USR1
'"$pbx_rec_cmd"
# In a container image, that shell is the image's, run by ch-run
# (Charliecloud: unprivileged, the node's /dev, /proc, /sys, /tmp and the
# user's passwd entry bound in, the shared disk at its own path, the task
# user's home at /home/USER, the task directory its working directory);
# the node's library paths mean nothing there.
if [ -n "$pbx_image" ]; then
	case $PBX_SHARED in /tmp/*) pbx_bind= ;; *) pbx_bind=$PBX_SHARED ;; esac
	export USER="${USER:-$(id -un)}"
	# the user's home on the node, writable as outside (caches, configs)
	pbx_home=
	if [ -d "${HOME:-}" ] && [ "$HOME" = "/home/$USER" ]; then pbx_home=--home; fi
	case $pbx_pyenv in /tmp/*) pbx_pyenv= ;; esac
	set -- ch-run --unset-env=LD_LIBRARY_PATH --unset-env=LD_PRELOAD ${pbx_bind:+-b "$pbx_bind"} \
		${pbx_pyenv:+-b "$pbx_pyenv"} $pbx_home -c "$pbx_tdir" "$pbx_image" -- "$@"
fi
# The launcher runs that shell once per rank: every rank sees the same
# environment and directory; MPI programs find their rank in it.
case ${PBX_LAUNCHER:-none} in
none) ;;
srun) set -- srun --kill-on-bad-exit=1 "$@" ;;
mpi)
	command -v mpirun >/dev/null 2>&1 || pbx_die "PBX_LAUNCHER=mpi but mpirun is not on PATH (install openmpi-bin)"
	if [ "$(id -u)" = 0 ]; then
		export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	fi
	# One rank per SLURM task, threads left to the program (cpus-per-task);
	# a one-task job with several GPUs (--gres=gpu:N): one rank per GPU
	# SLURM gave it (CUDA_VISIBLE_DEVICES), each rank using the GPU of its
	# local rank (pbx-train device: cuda).
	pbx_np=${SLURM_NTASKS:-}
	if [ "${pbx_np:-1}" -le 1 ] && [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
		pbx_ngpu=$(printf '%s\n' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c '^[0-9A-Za-z-]')
		[ "$pbx_ngpu" -le 1 ] || pbx_np=$pbx_ngpu
	fi
	set -- mpirun --bind-to none ${pbx_np:+-np "$pbx_np"} "$@"
	;;
*) pbx_die "unknown PBX_LAUNCHER '$PBX_LAUNCHER' (none, srun or mpi)" ;;
esac
if env --default-signal=INT true 2>/dev/null; then set -- env --default-signal=INT,QUIT "$@"; fi
if setsid -w true 2>/dev/null; then
	set -- setsid -w "$@"
	pbx_group=1
fi
"$@" </dev/null >>stdout 2>>stderr &
pbx_child=$!
while :; do
	pbx_n=$pbx_nsig
	wait "$pbx_child"
	pbx_rc=$?
	[ "$pbx_n" != "$pbx_nsig" ] || break     # the program ended
	# wait was cut short by a forwarded signal: wait again while it lives
	if kill -0 "$pbx_child" 2>/dev/null; then continue; fi
	wait "$pbx_child"
	pbx_rc2=$?
	[ "$pbx_rc2" -eq 127 ] || pbx_rc=$pbx_rc2
	break
done
pbx_child=

# The end as the file system's clock reads it: the store counts a task's
# results as home when the status file brought home is no older than this
# END (src/store/experiments.c), and the kernel stamps files from a coarse
# clock that may still read the last second when `date +%s` reads the next
# (a clean-root demo: end 1796222971, status mtime 1796222970).  A file
# made now has that clock's time; the status written after it cannot be
# older.  On NFS both are the server's.
pbx_end=$(: >"$pbx_tdir/.end.$$" && stat -c %Y "$pbx_tdir/.end.$$" 2>/dev/null) || pbx_end=$(date +%s)
rm -f "$pbx_tdir/.end.$$"
# 75: checkpointed, run me again.  The status comes first: the requeue ends
# this script.  SLURM refuses to requeue a job that is being cancelled (pbx
# cancel, scancel), which then reads CANCELLED.
if [ "$pbx_rc" -eq 75 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
	printf '=== pbx task %s attempt %s REQUEUED exit 75 end %s ===\n' "$pbx_idx" \
		"$pbx_attempt" "$pbx_end" >>stderr
	pbx_status REQUEUED 75 "$pbx_end"
	if scontrol requeue "$SLURM_JOB_ID" >>stderr 2>&1; then exit 75; fi
fi
if [ -n "$pbx_caught" ]; then
	pbx_state=CANCELLED
elif [ "$pbx_rc" -eq 0 ]; then
	pbx_state=COMPLETED
else
	pbx_state=FAILED
fi
printf '=== pbx task %s attempt %s %s exit %s end %s ===\n' "$pbx_idx" "$pbx_attempt" \
	"$pbx_state" "$pbx_rc" "$pbx_end" >>stderr
pbx_status "$pbx_state" "$pbx_rc" "$pbx_end"
exit "$pbx_rc"
