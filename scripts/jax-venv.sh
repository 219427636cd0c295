#!/bin/sh
# Make (or reuse) .venv-jax/<version>: jaxcache with its test extras and jax/jaxlib <version>.
# Reused when its stamp names the same version and the same constraints (sha256).
set -eu
version=$1
python=${PYTHON:-python3}
venv=.venv-jax/$version
stamp="$version $(sha256sum constraints.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$stamp" ]; then
    exit 0
fi
rm -rf "$venv"
"$python" -m venv "$venv"
sed -e "s/^jax==.*/jax==$version/" -e "s/^jaxlib==.*/jaxlib==$version/" constraints.txt \
    > "$venv/constraints.txt"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$venv/constraints.txt" -e '.[test]'
"$venv/bin/python" -m compileall -q src >/dev/null
echo "$stamp" > "$venv/.stamp"
