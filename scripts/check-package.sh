#!/bin/sh
# The package as a user gets it (issue 16): from a clean clone of HEAD, build the wheel and the
# sdist; install the wheel with its `jax` extra in a fresh venv and run `jaxcache demo` outside
# any checkout; install the sdist with its test extras, collect its tests and type-check a
# user's script against the installed package.
# Usage: sh scripts/check-package.sh [PYTHON]   (CI: .ci/run; ~3-5 min, mostly installing JAX)
set -eu
PYTHON=${1:-python3}
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 143' TERM  # so that the EXIT trap runs when .ci/run stops us
trap 'exit 130' INT
pip="$tmp/v/bin/python -m pip install --quiet --disable-pip-version-check -c $repo/constraints.txt"

git clone --quiet "$repo" "$tmp/clone"
"$PYTHON" -m venv "$tmp/v"
$pip setuptools
cd "$tmp/clone"
"$tmp/v/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps . -w dist
"$tmp/v/bin/python" -c "from setuptools import build_meta as b; b.build_sdist('dist')" \
  > "$tmp/sdist.log" 2>&1 || { tail -20 "$tmp/sdist.log"; exit 1; }
wheel=$(ls "$PWD"/dist/jaxcache-*.whl)
sdist=$(ls "$PWD"/dist/jaxcache-*.tar.gz)
listing=$("$tmp/v/bin/python" -m zipfile -l "$wheel")
for member in jaxcache/py.typed jaxcache/examples/mlp.py jaxcache/examples/train.py \
              jaxcache-0.1.0.dist-info/licenses/LICENSE; do
  printf '%s\n' "$listing" | grep -q "^$member " \
    || { echo "check-package: $member missing from $wheel"; exit 1; }
done
echo "check-package: built $wheel and $sdist"

$pip "$wheel[jax]"
mkdir "$tmp/user" && cd "$tmp/user"
start=$(date +%s)
HOME="$tmp/user" "$tmp/v/bin/jaxcache" demo > demo.log 2>&1 \
  || { tail -40 demo.log; echo "check-package: jaxcache demo failed"; exit 1; }
echo "check-package: jaxcache demo took $(( $(date +%s) - start )) s"
tail -1 demo.log; grep -q "^demo done" demo.log

mkdir "$tmp/sd" && tar xzf "$sdist" -C "$tmp/sd"
cd "$tmp/sd"/jaxcache-*
$pip ".[test]"
"$tmp/v/bin/python" -m pytest --collect-only -q -p no:cacheprovider > collect.log 2>&1 \
  || { tail -40 collect.log; echo "check-package: the sdist's tests do not collect"; exit 1; }
tail -1 collect.log
# the installed package (not a source tree) as a user's mypy sees it: py.typed at work
"$tmp/v/bin/python" -m pytest -q -p no:cacheprovider tests/test_typing.py
echo "check-package: ok"
