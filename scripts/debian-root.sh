#!/bin/sh
# Make (or reuse) a Debian 13 root for the JAX lines this machine's Python cannot install
# (JAX 0.11+ needs Python >= 3.12; Debian 13 ships 3.13), and print its path.
#
# The root is cached between runs on this machine at $JAXCACHE_DEBIAN_ROOT
# (default /var/cache/jaxcache/debian13), reused while its stamp matches this script and is
# under 30 days old, and rebuilt from nothing otherwise. A root is code this machine runs as
# root, so it is used only where nobody but root could have changed it: the root, its parent
# and every ancestor must be real directories owned by root that nobody else can write, else
# this script refuses and names what is wrong (it never chmods or deletes a place it did not
# make). The root has no directory others can write (made so at build time) and
# scripts/in-debian-root.sh mounts it read-only. debootstrap checks the archive's signatures
# and runs in a private mount namespace (whatever it mounts goes away with it, also on
# failure); the root is built beside its final path and renamed into place only when whole,
# under an exclusive lock on PARENT/.lock (users of the root hold it shared). The mirror is
# the one this machine's apt already uses (its sources), never a fixed address.
set -eu
root=${JAXCACHE_DEBIAN_ROOT:-/var/cache/jaxcache/debian13}
suite=trixie  # Debian 13: Python 3.13
packages=python3,python3-venv,python3-pip,ca-certificates,e2fsprogs  # e2fsprogs: chattr
max_age_days=30  # then rebuilt: the root gets no security updates in between
stamp="$suite $packages $(sha256sum "$0" | cut -c1-16)"

say() { echo "debian-root: $*" >&2; }
die() { say "$*"; exit 2; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mounts); run as root or skip the JAX 0.11+ lines"
while [ "${root%/}" != "$root" ] && [ "$root" != / ]; do root=${root%/}; done
case $root in
    /) die "JAXCACHE_DEBIAN_ROOT cannot be /" ;;
    /*) ;;
    *) die "JAXCACHE_DEBIAN_ROOT must be an absolute path, not '$root'" ;;
esac
case $root in
    *[!A-Za-z0-9._/-]*) die "JAXCACHE_DEBIAN_ROOT may hold only letters, digits and . _ - /: '$root'" ;;
    *//*|*/./*|*/../*|*/.|*/..) die "JAXCACHE_DEBIAN_ROOT must be a plain path (no //, . or ..): '$root'" ;;
esac
parent=$(dirname "$root")

# a real directory (no symlink) owned by root, writable by nobody else: else someone else
# chose what is in it
private() {
    [ -d "$1" ] && [ ! -L "$1" ] || return 1
    [ "$(stat -c '%u' "$1")" = 0 ] || return 1
    [ $(( 0$(stat -c '%a' "$1") & 022 )) = 0 ]
}
# every directory from / down to $1
private_path() {
    p=$1
    while :; do
        private "$p" || { echo "$p"; return 1; }
        [ "$p" = / ] && return 0
        p=$(dirname "$p")
    done
}
# never rm -rf across a mount point (a bind of something else into an old root); the path
# holds no character that mountinfo escapes (checked above)
unmounted() {
    ! awk -v p="$1" '$5 == p || index($5, p "/") == 1 {found=1} END {exit !found}' /proc/self/mountinfo
}

anchor=$parent  # the nearest existing directory on the way: what is made below it is ours
while [ ! -e "$anchor" ] && [ ! -L "$anchor" ]; do anchor=$(dirname "$anchor"); done
bad=$(private_path "$anchor") \
    || die "$bad is not a root-owned directory only root can write; refusing to keep a root under it"
# searchable (0755): an audit inside, as any user, judges this path
(umask 022 && mkdir -p "$parent")
exec 8>>"$parent/.lock"
flock -w 1800 -x 8 || die "another build or use of $root held $parent/.lock for 30 minutes"
fresh() {
    [ -f "$root/.jaxcache-stamp" ] && [ "$(cat "$root/.jaxcache-stamp")" = "$stamp" ] \
        && [ -z "$(find "$root/.jaxcache-stamp" -mtime +$max_age_days)" ]
}
if fresh; then
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
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || die "no $keyring: install debian-archive-keyring (debootstrap must check the archive's signatures)"

new="$root.new.$$"
old="$root.old.$$"
cleanup() { unmounted "$new" && rm -rf "$new"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
say "building Debian 13 ($suite) at $root (about a minute, ~300 MB)"
start=$(date +%s)
# its own mount namespace: the proc and sys that debootstrap mounts inside vanish with it
unshare -m --propagation private \
    debootstrap --variant=minbase --force-check-gpg --keyring="$keyring" \
    --include="$packages" "$suite" "$new" "$mirror" \
    > "$parent/debootstrap.log" 2>&1 \
    || { tail -n 20 "$parent/debootstrap.log" >&2; die "debootstrap failed (log: $parent/debootstrap.log)"; }
# pip inside must trust the CAs this machine trusts beyond Debian's (a proxy's)
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$new/usr/local/share/ca-certificates/"
fi
chroot "$new" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin update-ca-certificates >/dev/null
# mount points for scripts/in-debian-root.sh, made now: it mounts the root read-only
mkdir -p "$new/host" "$new/src"
# nothing in the root that others can write (/tmp, /var/tmp, /run/lock are tmpfs when in use)
find "$new" -xdev -perm -0002 \( -type d -o -type f \) -exec chmod o-w {} +
chmod 0755 "$new"
echo "$stamp" > "$new/.jaxcache-stamp"
if [ -e "$root" ]; then
    mv -T "$root" "$old"
fi
mv -T "$new" "$root"
if [ -e "$old" ]; then
    if unmounted "$old"; then rm -rf "$old"; else say "left $old: something is mounted inside it"; fi
fi
say "built in $(( $(date +%s) - start )) s"
echo "$root"
