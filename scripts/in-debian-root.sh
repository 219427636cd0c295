#!/bin/sh
# Run a command inside the Debian 13 root (scripts/debian-root.sh makes it) with this checkout
# at /src, from /src, as root, with a clean environment: `sh scripts/in-debian-root.sh CMD...`.
#
# Everything is mounted in a private mount namespace (unshare -m), so every mount goes away
# when the command ends, however it ends (an error, Ctrl-C, SIGKILL): nothing is left mounted
# on this machine and nothing needs unmounting by hand. Mounted: the root on itself (so the
# audit inside sees a mount at /), proc, /dev, /sys (with its cgroup mount), this machine's / read-only at /host
# (a real mount table below it), the checkout read-write at /src, a tmpfs at /tmp, and
# /etc/hosts and /etc/resolv.conf read-only.
set -eu
[ $# -gt 0 ] || { echo "usage: sh scripts/in-debian-root.sh CMD [ARG...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd -P)
root=$(sh "$here/scripts/debian-root.sh")

# the inner part, run by /bin/sh in the new namespace: $1 = root, $2 = checkout, then CMD
inner='
set -eu
root=$1 src=$2
shift 2
mount --make-rprivate /
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"  # with /sys/fs/cgroup: slurmd needs it
mkdir -p "$root/host" "$root/src"
mount --bind / "$root/host"
mount -o remount,bind,ro "$root/host"
mount --bind "$src" "$root/src"
# a /tmp of its own, as on a machine: nothing left in the cached root, and a plain local mount
# (the root itself is a bind mount, which the quick private check of jaxcache rightly distrusts)
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
# this machine'"'"'s names and resolver, as they are now (gloo, JAX'"'"'s CPU collectives, resolves the
# host name; pip resolves the package index)
for f in /etc/hosts /etc/resolv.conf; do
    [ -f "$f" ] && mount --bind "$f" "$root$f" && mount -o remount,bind,ro "$root$f"
done
exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM=dumb ${CI:+CI=$CI} /bin/sh -c "cd /src && exec \"\$@\"" sh "$@"
'
# a shared lock on the root while it is in use: a rebuild (another checkout's script) waits
# for it before deleting the old root
exec flock -s "$root" unshare -m --propagation private /bin/sh -c "$inner" sh "$root" "$here" "$@"
