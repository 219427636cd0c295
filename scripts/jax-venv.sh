#!/bin/sh
# Make (or reuse) a venv (.venv-jax/<version>, or the path given second): jaxcache, pytest,
# filelock (JAX's size-limited cache), jsonschema (documents checked against their schemas)
# and jax/jaxlib <version>, nothing else (the matrix tests need no plotting or linting: scipy
# and matplotlib would double the build). Reused when its stamp names the same version,
# interpreter, constraints and this script (sha256). pip's own download cache is left on, so
# a rebuild after a pin change unpacks, it does not download.
set -eu
version=$1
python=${PYTHON:-python3}
venv=${2:-.venv-jax/$version}
stamp="$version $("$python" -c 'import sys; print(sys.version.split()[0])') $(sha256sum constraints.txt pyproject.toml "$0" | sha256sum | cut -c1-16)"
if [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$stamp" ]; then
    exit 0
fi
rm -rf "$venv"
"$python" -m venv "$venv"
# every jax/jaxlib pin (one per Python range, with its marker) becomes this version
sed -e "s/^jax==.*/jax==$version/" -e "s/^jaxlib==.*/jaxlib==$version/" constraints.txt \
    > "$venv/constraints.txt"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$venv/constraints.txt" -e . pytest filelock jsonschema "jax==$version" "jaxlib==$version"
"$venv/bin/python" -m compileall -q src >/dev/null
echo "$stamp" > "$venv/.stamp"
