#!/bin/sh
# Rootless podman (issue 39, class 8): tests/containers/test_podman.py runs the audit, `run`
# and `run --sealed` in real containers, as a rootless user made for the run, from an image
# `podman import` makes of the Debian 13 root (scripts/debian-root.sh; no registry). Not part of
# `make test` (it would add a minute); .ci/run calls it after the matrix, whose Debian 13 venv
# with JAX (.venv-jax/debian13-VERSION, scripts/jax-venv.sh) it reuses: the container gets it
# read-only, beside a copy of jaxcache's source. Containers run with --network=none.
#     sh scripts/podman-check.sh
# As another user than root it says so and exits 0 (nothing to make a rootless user with).
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
    echo "podman-check: skipped (needs root to make a rootless user and its image)"
    exit 0
fi
start=$(date +%s)
sh scripts/system-deps.sh podman
version=${JAXCACHE_PODMAN_JAX:-0.12.0.1}
venv=.venv-jax/debian13-$version
sh scripts/debian-root.sh >/dev/null
sh scripts/in-debian-root.sh sh -c "PYTHON=python3 sh scripts/jax-venv.sh $version $venv"
ready=$(date +%s)
python=${PYTHON_TESTS:-.venv/bin/python}
JAXCACHE_PODMAN=1 JAXCACHE_PODMAN_VENV="$PWD/$venv" \
    "$python" -m pytest -q -p no:cacheprovider -n 0 tests/containers/test_podman.py
echo "podman-check: $(( ready - start )) s to get ready, $(( $(date +%s) - ready )) s of tests"
