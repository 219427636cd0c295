#!/bin/sh
# Debian packages the test suite drives for real: setfacl/getfacl (acl), useradd (passwd),
# unshare/setpriv (util-linux), a single-node Slurm cluster (slurmctld, slurmd, slurm-client,
# munge), a FUSE mount (bindfs, which brings fusermount), rsync (a cache arriving as CI
# restores it), a PKCS#11 token (softhsm2: signing keys in an HSM), libfaketime (faketime: a
# process whose clock is a day off, for the fault campaign). Installed only when running
# as root and missing. `sh scripts/system-deps.sh podman`: only what scripts/podman-check.sh
# needs instead (rootless podman: podman, uidmap's newuidmap, runc, which takes the hybrid
# cgroups crun refuses, and fuse-overlayfs, podman's overlay where the kernel's cannot be used).
missing=""
if [ "${1:-}" = podman ]; then
    command -v podman >/dev/null 2>&1 || missing="$missing podman"
    command -v newuidmap >/dev/null 2>&1 || missing="$missing uidmap"
    command -v runc >/dev/null 2>&1 || missing="$missing runc"
    command -v fuse-overlayfs >/dev/null 2>&1 || missing="$missing fuse-overlayfs"
else
command -v setfacl >/dev/null 2>&1 || missing="$missing acl"
command -v useradd >/dev/null 2>&1 || missing="$missing passwd"
command -v unshare >/dev/null 2>&1 || missing="$missing util-linux"
command -v slurmctld >/dev/null 2>&1 || missing="$missing slurmctld"
command -v slurmd >/dev/null 2>&1 || missing="$missing slurmd"
command -v srun >/dev/null 2>&1 || missing="$missing slurm-client"
command -v munged >/dev/null 2>&1 || missing="$missing munge"
command -v bindfs >/dev/null 2>&1 || missing="$missing bindfs"
command -v rsync >/dev/null 2>&1 || missing="$missing rsync"
command -v softhsm2-util >/dev/null 2>&1 || missing="$missing softhsm2"
command -v faketime >/dev/null 2>&1 || missing="$missing faketime"
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "system-deps: missing$missing (not root: tests needing them will skip, saying why)"
    exit 0
fi
echo "system-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1 || {
    apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends $missing >/dev/null
} || echo "system-deps: could not install$missing; tests needing them will skip"
