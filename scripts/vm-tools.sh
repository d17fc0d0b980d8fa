# vm-tools.sh - sourced by scripts/vm-test.sh and scripts/demo-gce.sh: as
# root, apt-gets what booted-VM tests need (QEMU, dnsmasq, socat,
# debootstrap, apt-cacher-ng...) when a command of it is missing.  The
# tests run their own apt-cacher-ng (tests/vm/lib.sh, vm_apt_cache), not
# the service the package installs.
vm_tools_missing=
for vm_tool in qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils dnsmasq:dnsmasq-base \
	socat:socat debootstrap:debootstrap mkfs.ext4:e2fsprogs ip:iproute2 openssl:openssl \
	ssh-keygen:openssh-client bc:bc apt-cacher-ng:apt-cacher-ng; do
	command -v "${vm_tool%%:*}" >/dev/null 2>&1 || vm_tools_missing="$vm_tools_missing ${vm_tool#*:}"
done
if [ -n "$vm_tools_missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "installing:$vm_tools_missing"
	# a fresh machine has no package lists yet (apt-get would say "Unable
	# to locate package")
	apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
	# shellcheck disable=SC2086 # the package list's words
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q \
		--no-install-recommends $vm_tools_missing >/dev/null
fi
