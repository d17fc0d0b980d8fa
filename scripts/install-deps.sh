#!/bin/sh
# install-deps.sh - installs every Debian package pbx needs to build, run
# its local cluster and run its tests, on a fresh Debian 12 (run as root).
# It prints a few lines; apt-get's full output goes to a log file whose
# path it prints (PBX_DEPS_LOG, default /var/log/pbx-install-deps.log).
# Every program a script or test runs comes from here (or the test venv,
# scripts/venv.sh), the booted-VM tests' tools aside (scripts/vm-tools.sh):
# a development machine that happens to have more hides a missing one, so
# scripts/clean-check.sh runs the README's commands in a clean root.
# curl: pbx-preempt (templates/preempt.sh) and the tests that ask the
# emulated metadata servers; shellcheck: the bootstrap.shellcheck test;
# nfs-kernel-server and nfs-common: what the bootstrap's install action
# (pbx image build) wants besides SLURM and munge, which the image tests
# (t0440, t0445) run on this machine: without them it apt-gets them here.
# charliecloud-runtime: ch-run, which runs tasks in an experiment's
# container image (pbx-task.sh); zstd: packs and unpacks Python
# environments (pbx-env.sh); busybox-static: the tests' small image;
# skopeo and umoci: a registry image's pull on the head (pbx-env.sh pull).
# slurmdbd, slurm-wlm-mysql-plugin and mariadb-server: SLURM's accounting
# database, which cli.t0292 runs (daemons of its own) so that a job submit
# limit (MaxSubmitJobs) is enforced for real.
# When apt-get fails it prints the end of that log and exits non-zero.
set -eu
export DEBIAN_FRONTEND=noninteractive
log=${PBX_DEPS_LOG:-/var/log/pbx-install-deps.log}
packages="
  cmake make gcc g++ pkg-config git ca-certificates
  libcurl4-openssl-dev libjansson-dev libssh2-1-dev libyaml-dev libsqlite3-dev
  libssl-dev libxml2-dev zlib1g-dev libopenmpi-dev openmpi-bin libopenblas-dev
  protobuf-c-compiler libprotobuf-c-dev
  slurm-wlm slurmdbd slurm-wlm-mysql-plugin mariadb-server munge openssh-server openssh-client nfs-kernel-server nfs-common
  python3 python3-venv python3-pip charliecloud-runtime zstd busybox-static skopeo umoci
  chromium fonts-dejavu-core
  procps iproute2 psmisc sqlite3 rsync man-db sudo curl
  bash-completion zsh clang-format shellcheck
  dataset-fashion-mnist
"

# apt CMD...: apt-get CMD..., its output appended to the log; on failure
# the end of the log, and exit 1.
apt() {
	if ! apt-get "$@" </dev/null >>"$log" 2>&1; then
		echo "install-deps: apt-get $1 failed; the end of $log:" >&2
		tail -n 25 "$log" >&2
		exit 1
	fi
}

missing=
n=0
for p in $packages; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed'; then
		missing="$missing $p"
		n=$((n + 1))
	fi
done
if [ -n "$missing" ]; then
	mkdir -p "$(dirname "$log")"
	echo "installing:$missing" >"$log"
	echo "installing $n Debian packages (a few minutes on a fresh machine; apt-get's output goes to $log)"
	t0=$(date +%s)
	apt update
	# shellcheck disable=SC2086
	apt install -y --no-install-recommends $missing
	echo "installed $n packages in $(($(date +%s) - t0)) s"
fi
# Debian starts munge/slurm services on install where systemd runs; pbx
# runs its own daemons per cluster, so stop any that were started; the NFS
# server and MariaDB too when this run installed them (nothing here serves
# NFS or a database; a machine that already did keeps doing so).
units="slurmctld slurmd slurmdbd munge"
case " $missing " in *" nfs-kernel-server "*) units="$units nfs-server" ;; esac
case " $missing " in *" mariadb-server "*) units="$units mariadb" ;; esac
for s in $units; do
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$s" 2>/dev/null; then
		systemctl stop "$s" || true
	fi
done
mkdir -p /run/sshd
echo "dependencies installed"
