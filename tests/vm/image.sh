#!/bin/sh
# image.sh - builds the Debian 12 images that the emulators boot as VMs
# (tests/vm/README.md), from Debian packages only.
#
#   sh tests/vm/image.sh stock DIR          shaped like Compute Engine's
#                                           debian-12 image: systemd,
#                                           openssh-server, sudo, curl,
#                                           Google's guest agent; no SLURM
#   sh tests/vm/image.sh baked DIR STOCK    the stock image (built first in
#                                           STOCK) plus what pbx's bootstrap
#                                           would apt-get: SLURM, munge, NFS,
#                                           pbx-train's libraries (prebaked:
#                                           a boot skips apt)
#   sh tests/vm/image.sh ec2-stock DIR      shaped like Debian's official EC2
#                                           AMI (debian-12-amd64): cloud-init
#                                           with its Ec2 data source (IMDS),
#                                           default user admin with
#                                           passwordless sudo, netplan; no
#                                           guest agent, no SLURM
#   sh tests/vm/image.sh ec2-baked DIR STOCK  ec2-stock (in STOCK) plus the
#                                           packages `baked` adds
#
# DIR gets rootfs.img (raw ext4 made with mkfs.ext4 -d: no loop mount),
# vmlinuz and initrd.img (QEMU boots them with -kernel/-initrd), tree/ (the
# file tree the image was made from) and packages.txt.  A DIR whose
# packages.txt already matches is left as it is.  Needs root, debootstrap,
# e2fsprogs and the Debian mirror; PBX_VM_APT_PROXY (an http:// proxy URL,
# tests/vm/lib.sh's apt cache) is used for every download when set, and the
# image's own apt sources stay deb.debian.org.
set -eu
kind=${1:?usage: image.sh stock|baked|ec2-stock|ec2-baked DIR [STOCK]}
dir=${2:?usage: image.sh stock|baked|ec2-stock|ec2-baked DIR [STOCK]}
mirror=${PBX_VM_MIRROR:-http://deb.debian.org/debian}
proxy=${PBX_VM_APT_PROXY:-}

stock_pkgs=systemd-sysv,udev,dbus,kmod,iproute2,openssh-server,sudo,curl,linux-image-amd64,systemd-resolved,google-guest-agent,ca-certificates,procps,less
# What templates/bootstrap.sh would apt-get, on either role, and pbx-train's
# runtime, Python environments' and pbx's: its own lists (HEAD_PKGS,
# COMPUTE_PKGS, TRAIN_PKGS, ENV_PKGS, HEAD_ENV_PKGS, PBX_PKGS), read from it.
boot=$(dirname "$0")/../../templates/bootstrap.sh
eval "$(grep -E '^(HEAD|COMPUTE|TRAIN|ENV|HEAD_ENV|PBX)_PKGS="[a-z0-9. +-]*"$' "$boot")"
baked_pkgs=$(printf '%s\n' $HEAD_PKGS $COMPUTE_PKGS $TRAIN_PKGS $ENV_PKGS $HEAD_ENV_PKGS $PBX_PKGS | awk '!seen[$0]++' | tr '\n' ' ')
baked_pkgs=${baked_pkgs% }
# Debian's EC2 AMI: cloud-init (the Ec2 data source: IMDS, user data) in
# place of Google's agent, networking by netplan on systemd-networkd
ec2_base=systemd-sysv,udev,dbus,kmod,iproute2,openssh-server,sudo,curl,linux-image-amd64,systemd-resolved,ca-certificates,procps,less
ec2_pkgs="cloud-init netplan.io isc-dhcp-client locales"
ec2_shape="(shape 2)"   # bumped when shape_like_ec2_ami changes: a cached image is made again
baked_shape="(baked 2)" # bumped when the baked part changes, likewise
world_shape="(world-ca 2 $(cat /usr/local/share/ca-certificates/*.crt 2>/dev/null | sha256sum | cut -c1-12))" # the test world's CA and the site's (world_ca below)
gce_shape="(gce shape 2)"  # bumped when shape_like_cloud_image changes, likewise
case $kind in
stock) want="$stock_pkgs $gce_shape $world_shape" ;;
baked) stock=${3:?usage: image.sh baked DIR STOCK}; want="$stock_pkgs $gce_shape $world_shape $baked_pkgs $baked_shape" ;;
ec2-stock) want="$ec2_base $ec2_pkgs $ec2_shape $world_shape" ;;
ec2-baked) stock=${3:?usage: image.sh ec2-baked DIR STOCK}; want="$ec2_base $ec2_pkgs $ec2_shape $world_shape $baked_pkgs $baked_shape" ;;
*) echo "image.sh: unknown kind '$kind' (stock, baked, ec2-stock or ec2-baked)" >&2; exit 2 ;;
esac

mkdir -p "$dir"
if [ -f "$dir/rootfs.img" ] && [ "$(cat "$dir/packages.txt" 2>/dev/null)" = "$want" ]; then
	echo "image.sh: $dir is up to date"
	exit 0
fi
rm -rf "$dir/tree" "$dir/packages.txt"
tree=$(mktemp -d "$dir/.tree.XXXXXX")
chmod 755 "$tree"   # it becomes the image's /
trap 'rm -rf "$tree"' EXIT
trap 'exit 130' INT TERM

# What every stock cloud image has: the root file system on the first
# disk, no host name, no host keys and no machine id until first boot.
shape_first_boot() {
	printf '/dev/vda / ext4 defaults 0 1\n' >"$1/etc/fstab"
	: >"$1/etc/hostname"
	rm -f "$1"/etc/ssh/ssh_host_*
	: >"$1/etc/machine-id"
	rm -f "$1/var/lib/dbus/machine-id"
}

# What Compute Engine's image adds to a Debian install: every NIC by DHCP
# with the search domains of the lease, the hostname from the metadata
# server (Compute Engine's images set it from DHCP/metadata at each boot),
# host keys made by a unit of their own, Google's guest agent.
shape_like_cloud_image() {
	cat >"$1/etc/systemd/network/80-dhcp.network" <<'NET'
[Match]
Name=en* eth*

[Network]
DHCP=ipv4

[DHCPv4]
UseDNS=yes
UseDomains=yes
NET
	cat >"$1/etc/systemd/system/gce-hostname.service" <<'UNIT'
[Unit]
Description=Hostname from the metadata server (the instance's name)
Wants=network-online.target
After=network-online.target
Before=google-guest-agent.service

[Service]
Type=oneshot
TimeoutStartSec=300
# every error retried for 4 minutes: a TCG VM on a loaded machine may ask
# before the metadata server answers (a node once kept "localhost")
ExecStart=/bin/sh -c 'h=$(curl -sf --max-time 10 --retry 240 --retry-all-errors --retry-delay 1 --retry-max-time 240 -H "Metadata-Flavor: Google" http://169.254.169.254/computeMetadata/v1/instance/hostname) && hostnamectl set-hostname "$${h%%%%.*}"'

[Install]
WantedBy=multi-user.target
UNIT
	cat >"$1/etc/systemd/system/ssh-hostkeys.service" <<'UNIT'
[Unit]
Description=SSH host keys made on first boot
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
UNIT
	chroot "$1" systemctl enable systemd-networkd systemd-networkd-wait-online systemd-resolved \
		ssh google-guest-agent gce-hostname ssh-hostkeys >/dev/null 2>&1
	shape_first_boot "$1"
}

# What Debian's EC2 AMI adds (debian-cloud-images, class EC2): cloud-init
# does the first boot from IMDS: the network (netplan, rendered for
# systemd-networkd), the host name (local-hostname, or the user data's),
# host keys, /etc/hosts, and the default user `admin` with passwordless
# sudo and the key pair's key.  The apt sources stay on plain http (the
# VMs' only way out is the emulator's port-80 forward to deb.debian.org).
shape_like_ec2_ami() {
	cat >"$1/etc/cloud/cloud.cfg.d/01_debian_cloud.cfg" <<'CFG'
# as Debian's cloud images have it (but no mirror lists: plain http apt)
manage_etc_hosts: true
system_info:
  default_user:
    name: admin
    sudo: ALL=(ALL) NOPASSWD:ALL
    shell: /bin/bash
    lock_passwd: True
    gecos: Debian
    groups: [adm, audio, cdrom, dialout, dip, floppy, plugdev, sudo, video]
CFG
	# cloud-init's locale module sets en_US.UTF-8 (Debian's default_locale),
	# which update-locale refuses unless it was generated (cloud-init
	# status: error): made here once, as the AMI has it
	# and the system's locale too, else cloud-init generates it again at
	# every first boot (a minute under TCG)
	sed -i 's/^# *\(en_US.UTF-8 UTF-8\)/\1/' "$1/etc/locale.gen"
	chroot "$1" locale-gen >/dev/null
	chroot "$1" update-locale LANG=en_US.UTF-8
	# the package's debconf default stays: every data source, of which
	# ds-identify picks Ec2 from the SMBIOS (product uuid and serial "ec2...")
	chroot "$1" systemctl enable systemd-networkd systemd-resolved ssh \
		cloud-init-local cloud-init cloud-config cloud-final >/dev/null 2>&1
	rm -rf "$1/var/lib/cloud"
	shape_first_boot "$1"
}

# The test world's certificate authority, which the image trusts as a
# cloud image trusts the public CAs that sign Google's and Amazon's API
# certificates: the emulators serve their APIs to the VMs over https under
# the cloud's own host names (compute.googleapis.com, ec2.REGION.amazonaws.com)
# with a certificate they make from it (tests/emulators/gce/vms.py), so
# a head's pbx talks to "the cloud" as on the real one.  Its key stays
# beside the image (DIR/world-ca.key, root's alone), never in it.
world_ca() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=pbx test world CA" \
		-keyout "$dir/world-ca.key.new" -out "$dir/world-ca.crt.new" >>"$dir/build.log" 2>&1 ||
		{ echo "image.sh: openssl could not make the world CA" >&2; exit 1; }
	chmod 600 "$dir/world-ca.key.new"
	mv "$dir/world-ca.key.new" "$dir/world-ca.key"
	mv "$dir/world-ca.crt.new" "$dir/world-ca.crt"
	mkdir -p "$1/usr/local/share/ca-certificates"
	cp "$dir/world-ca.crt" "$1/usr/local/share/ca-certificates/pbx-test-world.crt"
	# and the site's own CAs (this machine's local ones), as a site's images
	# carry them: where the way out inspects TLS (a proxy's CA), the VMs'
	# pip and uv reach PyPI through it only so (tests/vm/gce-proxy.sh)
	for site_ca in /usr/local/share/ca-certificates/*.crt; do
		[ ! -f "$site_ca" ] || cp "$site_ca" "$1/usr/local/share/ca-certificates/site-${site_ca##*/}"
	done
	chroot "$1" update-ca-certificates >>"$dir/build.log" 2>&1 ||
		{ echo "image.sh: update-ca-certificates failed in the image" >&2; exit 1; }
}

# apt_into TREE PKG...: apt-get install of PKGs into TREE (a chroot in
# which no daemon starts; its log appended to build.log)
apt_into() {
	t=$1
	shift
	printf '#!/bin/sh\nexit 101\n' >"$t/usr/sbin/policy-rc.d"
	chmod 755 "$t/usr/sbin/policy-rc.d"
	mount -t proc proc "$t/proc"
	# the image's resolv.conf points at systemd-resolved, which does not
	# run in the chroot: the host's for the install, the image's again after
	mv "$t/etc/resolv.conf" "$t/etc/resolv.conf.image"
	cp /etc/resolv.conf "$t/etc/resolv.conf"
	if ! { chroot "$t" apt-get -o Acquire::http::Proxy="${proxy:-DIRECT}" -o APT::Update::Error-Mode=any update -q &&
		DEBIAN_FRONTEND=noninteractive chroot "$t" apt-get -o Acquire::http::Proxy="${proxy:-DIRECT}" \
		install -y -q --no-install-recommends "$@"; } >>"$dir/build.log" 2>&1 </dev/null; then
		umount "$t/proc"; tail -n 20 "$dir/build.log" >&2; exit 1
	fi
	umount "$t/proc"
	mv "$t/etc/resolv.conf.image" "$t/etc/resolv.conf"
	rm -f "$t/usr/sbin/policy-rc.d"
	rm -rf "$t"/var/lib/apt/lists/*
}

if [ "$kind" = stock ]; then
	echo "image.sh: debootstrap of bookworm into $tree"
	env ${proxy:+http_proxy=$proxy} debootstrap --variant=minbase --include="$stock_pkgs" bookworm "$tree" "$mirror" \
		>"$dir/build.log" 2>&1 || { tail -n 20 "$dir/build.log" >&2; exit 1; }
	shape_like_cloud_image "$tree"
	world_ca "$tree"
elif [ "$kind" = ec2-stock ]; then
	# debootstrap cannot order cloud-init's Python dependencies in its
	# base stage (python3-cryptography fails to configure): apt does them
	echo "image.sh: debootstrap of bookworm into $tree, then $ec2_pkgs"
	env ${proxy:+http_proxy=$proxy} debootstrap --variant=minbase --include="$ec2_base" bookworm "$tree" "$mirror" \
		>"$dir/build.log" 2>&1 || { tail -n 20 "$dir/build.log" >&2; exit 1; }
	# shellcheck disable=SC2086 # word splitting of the package list
	apt_into "$tree" $ec2_pkgs
	shape_like_ec2_ami "$tree"
	world_ca "$tree"
else
	[ -d "$stock/tree" ] || { echo "image.sh: no stock image in $stock (image.sh ${kind%baked}stock $stock)" >&2; exit 1; }
	echo "image.sh: $baked_pkgs onto a copy of $stock/tree"
	: >"$dir/build.log"
	cp -a "$stock/tree/." "$tree/"
	cp -p "$stock/world-ca.key" "$stock/world-ca.crt" "$dir/" # the stock tree trusts it
	# shellcheck disable=SC2086 # word splitting of the package list
	apt_into "$tree" $baked_pkgs
	rm -f "$tree/etc/munge/munge.key"   # every node gets pbx's key
	# as the bootstrap's install action leaves an image: neither SLURM
	# daemon enabled (`up` enables its role's one)
	chroot "$tree" systemctl disable slurmctld slurmd >/dev/null 2>&1 || :
fi
chroot "$tree" apt-get clean
cp -L "$tree/vmlinuz" "$dir/vmlinuz"
cp -L "$tree/initrd.img" "$dir/initrd.img"
size=$(($(du -sm "$tree" | cut -f1) + 1536))
mkfs.ext4 -q -F -L root -d "$tree" "$dir/rootfs.img.new" "${size}M"
mv "$dir/rootfs.img.new" "$dir/rootfs.img"
mv "$tree" "$dir/tree"
printf '%s\n' "$want" >"$dir/packages.txt"
echo "image.sh: $dir/rootfs.img ready (${size} MB)"
