#!/bin/sh
# Run a command inside the Debian 13 root (scripts/debian-root.sh makes it) with this checkout
# at /src, from /src, as root, with a clean environment:
#     sh scripts/in-debian-root.sh [--writable] CMD [ARG...]
#
# Everything is mounted in a private mount namespace (unshare -m), so every mount goes away
# when the command ends, however it ends (an error, Ctrl-C, SIGKILL): nothing is left mounted
# on this machine and nothing needs unmounting by hand. Mounted: the root on itself,
# read-only (the audit inside sees a mount at /, and nothing a run does persists in the cached
# root), proc, /dev, /sys (with its cgroup mount), this machine's / read-only at /host (a real
# mount table below it), the checkout read-write at /src, tmpfs at /tmp, /var/tmp, /run and
# /root, root's pip cache of this machine at /root/.cache/pip (downloads are kept), and
# /etc/hosts and /etc/resolv.conf read-only. --writable leaves the root writable, to install
# Debian packages into the cached root (they stay until it is rebuilt).
# Not a sandbox: the command is root, with this machine's /proc, /dev and /sys.
# Variables passed in: CI, FULL_LINES (scripts/matrix-line.sh).
set -eu
writable=""
if [ "${1:-}" = "--writable" ]; then writable=1; shift; fi
[ $# -gt 0 ] || { echo "usage: sh scripts/in-debian-root.sh [--writable] CMD [ARG...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd -P)
root=$(sh "$here/scripts/debian-root.sh")
pipcache=${HOME:-/root}/.cache/pip
(umask 077 && mkdir -p "$pipcache")

# the inner part, run by /bin/sh in the new namespace: root, checkout, pip cache, writable,
# then CMD
inner='
set -eu
root=$1 src=$2 pipcache=$3 writable=$4
shift 4
mount --make-rprivate /
mount --bind "$root" "$root"
if [ -z "$writable" ]; then mount -o remount,bind,ro "$root"; fi
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount --bind / "$root/host"
mount -o remount,bind,ro "$root/host"
mount --bind "$src" "$root/src"
for dir in /tmp /var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$root$dir"; done
for dir in /run /root; do mount -t tmpfs -o mode=0755 tmpfs "$root$dir"; done
mkdir -p "$root/root/.cache/pip"
mount --bind "$pipcache" "$root/root/.cache/pip"
for f in /etc/hosts /etc/resolv.conf; do
    if [ -f "$f" ]; then
        mount --bind "$f" "$root$f"
        mount -o remount,bind,ro "$root$f"
    fi
done
exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM=dumb ${CI:+CI=$CI} ${FULL_LINES:+FULL_LINES="$FULL_LINES"} \
    /bin/sh -c "cd /src && exec \"\$@\"" sh "$@"
'
# a shared lock while the root is in use: a rebuild (another checkout's script) waits for it;
# -o: the command and what it leaves running do not hold it
exec flock -o -w 1800 -s "$(dirname "$root")/.lock" \
    unshare -m --propagation private /bin/sh -c "$inner" sh "$root" "$here" "$pipcache" "$writable" "$@"
