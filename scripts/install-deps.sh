#!/bin/sh
# install-deps.sh - installs every Debian package pbx needs to build, run
# its local cluster and run its tests, on a fresh Debian 12 (run as root).
set -eu
export DEBIAN_FRONTEND=noninteractive
packages="
  cmake make gcc g++ pkg-config git ca-certificates
  libcurl4-openssl-dev libjansson-dev libssh2-1-dev libyaml-dev libsqlite3-dev
  libssl-dev libxml2-dev zlib1g-dev libopenmpi-dev openmpi-bin libopenblas-dev
  slurm-wlm munge openssh-server openssh-client
  python3 python3-venv python3-pip
  chromium fonts-dejavu-core
  procps iproute2 psmisc sqlite3 rsync sudo
  dataset-fashion-mnist
"
missing=
for p in $packages; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "installing:$missing"
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing
fi
# Debian starts munge/slurm services on install where systemd runs; pbx
# runs its own daemons per cluster, so stop any that were started.
for s in slurmctld slurmd munge; do
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$s" 2>/dev/null; then
		systemctl stop "$s" || true
	fi
done
mkdir -p /run/sshd
echo "dependencies installed"
