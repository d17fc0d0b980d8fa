# no-cgroup.sh CMD... - shared by the tests of slurmd without a cgroup
# filesystem (tests/bootstrap/cgroup.sh, tests/cli/t0011-demo-failure.sh):
# runs CMD with /sys/fs/cgroup and every mount under it unmounted.  Meant
# for `unshare -m sh no-cgroup.sh CMD...`, in a mount namespace of its own,
# so the host's mounts stay.  Exits 97 when a mount cannot be unmounted.
for m in $(awk '$2 ~ "^/sys/fs/cgroup/" { print $2 }' /proc/self/mounts | sort -r); do
	umount "$m" || exit 97
done
while awk '$2 == "/sys/fs/cgroup" { f = 1 } END { exit !f }' /proc/self/mounts; do
	umount /sys/fs/cgroup || exit 97
done
exec "$@"
