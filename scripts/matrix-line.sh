#!/bin/sh
# One line of `make matrix`: `sh scripts/matrix-line.sh VERSION` makes (or reuses) a venv with
# that JAX (scripts/jax-venv.sh) and runs the JAX-touching tests in it: the matrix-marked ones
# of tests/jaxcompat/test_versions_matrix.py and tests/jaxcompat/test_jaxcompat.py, and on the
# lines in $FULL_LINES the suites of `make test` that touch JAX most: the sealed backend's
# parity and sealed ones, explain, seal-unhittable, the version gate, enable() and disable(),
# and audit, run and a sealed run as a user starts (tests/test_declared_pythons.py: on a line
# run in the Debian 13 root, that is the highest Python the package declares).
# JAX 0.11+ needs Python >= 3.12: when $PYTHON is older, the line runs inside a Debian 13 root
# (scripts/in-debian-root.sh, Python 3.13), in .venv-jax/debian13-VERSION; otherwise here.
set -eu
version=$1
python=${PYTHON:-python3}
FULL_LINES=${FULL_LINES:-0.12.0.1}
cd "$(dirname "$0")/.."
tests="tests/jaxcompat/test_versions_matrix.py tests/jaxcompat/test_jaxcompat.py"

needs_312() {  # JAX 0.11.0 and later require Python >= 3.12
    echo "$1" | awk -F. '{exit !($1 > 0 || $2 >= 11)}'
}

if [ "${2:-}" = "--inside" ]; then
    venv=.venv-jax/debian13-$version
else
    if needs_312 "$version" && ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
        echo "   ($("$python" -V 2>&1) cannot install JAX $version: running it in a Debian 13 root)"
        exec sh scripts/in-debian-root.sh sh scripts/matrix-line.sh "$version" --inside
    fi
    venv=.venv-jax/$version
fi
PYTHON=$python sh scripts/jax-venv.sh "$version" "$venv"
"$venv/bin/python" -m pytest -q -p no:cacheprovider -m matrix $tests
case " $FULL_LINES " in
    *" $version "*)
        "$venv/bin/python" -m pytest -q -p no:cacheprovider \
            tests/seal/test_parity.py tests/seal/test_sealed.py tests/explain/test_explain.py \
            tests/seal/test_seal_unhittable.py tests/run/test_version_gate.py \
            tests/lifecycle/test_enable.py tests/lifecycle/test_enable_undo.py \
            tests/test_declared_pythons.py ;;
esac
