#!/bin/sh
# Make (or reuse) a Debian 13 root for the JAX lines this machine's Python cannot install
# (JAX 0.11+ needs Python >= 3.12; Debian 13 ships 3.13), and print its path.
#
# The root is cached between runs on this machine at $JAXCACHE_DEBIAN_ROOT
# (default /var/cache/jaxcache/debian13), reused while its stamp matches this script, and
# rebuilt from nothing when missing. A root is code this machine runs as root, so it is reused
# only when it and its parent belong to root and nobody else can write them; otherwise this
# script refuses and names what is wrong (it never chmods or deletes a place it did not make).
# debootstrap runs in a private mount namespace, so whatever it mounts goes away with it, also
# on failure; the root is built beside its final path and renamed into place only when whole.
# The mirror is the one this machine's apt already uses (its sources), never a fixed address.
set -eu
root=${JAXCACHE_DEBIAN_ROOT:-/var/cache/jaxcache/debian13}
suite=trixie  # Debian 13: Python 3.13
packages=python3,python3-venv,python3-pip,ca-certificates,e2fsprogs  # e2fsprogs: chattr
stamp="$suite $packages $(sha256sum "$0" | cut -c1-16)"

say() { echo "debian-root: $*" >&2; }
die() { say "$*"; exit 2; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mounts); run as root or skip the JAX 0.11+ lines"
case $root in /*) ;; *) die "JAXCACHE_DEBIAN_ROOT must be an absolute path, not '$root'" ;; esac
parent=$(dirname "$root")

# owned by root and writable by nobody else, and not a symlink: else someone else chose its code
private() {
    [ -d "$1" ] && [ ! -L "$1" ] || return 1
    [ "$(stat -c '%u' "$1")" = 0 ] || return 1
    [ $(( 0$(stat -c '%a' "$1") & 022 )) = 0 ]
}

if [ -e "$parent" ] || [ -L "$parent" ]; then
    private "$parent" || die "$parent is not a root-owned directory only root can write; refusing to keep a root there"
else
    mkdir -p -m 0755 "$parent"  # searchable: an audit inside, as any user, judges this path
fi
if [ -f "$root/.jaxcache-stamp" ] && [ "$(cat "$root/.jaxcache-stamp")" = "$stamp" ]; then
    private "$root" || die "$root is not a root-owned directory only root can write; refusing to use it"
    echo "$root"
    exit 0
fi
if [ -e "$root" ] || [ -L "$root" ]; then
    # a root this script made earlier (an older stamp) is replaced; anything else is left alone
    [ -f "$root/.jaxcache-stamp" ] && private "$root" \
        || die "$root exists and is not a root this script made; move it away or set JAXCACHE_DEBIAN_ROOT"
fi

mirror=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" && $2 !~ /^\[/ && $3 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"

if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -q --no-install-recommends debootstrap >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 \
             && apt-get install -y -q --no-install-recommends debootstrap >/dev/null; }; } \
        || die "could not install debootstrap"
fi

# never rm -rf across a mount point (a bind of something else into an old root)
unmounted() {
    ! awk -v p="$1" '$5 == p || index($5, p "/") == 1 {found=1} END {exit !found}' /proc/self/mountinfo
}

new="$root.new.$$"
old="$root.old.$$"
trap 'unmounted "$new" && rm -rf "$new"' EXIT INT TERM
say "building Debian 13 ($suite) at $root (about a minute, ~300 MB)"
start=$(date +%s)
# its own mount namespace: the proc and sys that debootstrap mounts inside vanish with it
unshare -m --propagation private \
    debootstrap --variant=minbase --include="$packages" "$suite" "$new" "$mirror" \
    > "$parent/debootstrap.log" 2>&1 \
    || { tail -n 20 "$parent/debootstrap.log" >&2; die "debootstrap failed (log: $parent/debootstrap.log)"; }
# pip inside must reach the package index as this machine does: its resolver and the CAs it
# trusts beyond Debian's (a proxy's)
cp /etc/resolv.conf "$new/etc/resolv.conf"
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$new/usr/local/share/ca-certificates/"
fi
chroot "$new" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin update-ca-certificates >/dev/null
chmod 0755 "$new"
echo "$stamp" > "$new/.jaxcache-stamp"
if [ -e "$root" ]; then
    mv "$root" "$old"
fi
mv "$new" "$root"
trap - EXIT INT TERM
# a run still inside the old root holds a shared lock on it (scripts/in-debian-root.sh): wait
if unmounted "$old"; then flock -x "$old" rm -rf "$old"; else say "left $old: something is mounted inside it"; fi
say "built in $(( $(date +%s) - start )) s"
echo "$root"
