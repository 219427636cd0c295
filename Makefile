# Two entry points: `make demo` and `make test`. Both bootstrap .venv with the pinned set.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt

.PHONY: demo test lint system-deps clean matrix

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# An editable install leaves src/ uncompiled, and PYTHONDONTWRITEBYTECODE (set on some
# machines) keeps Python from caching bytecode: compile once, as pip does for a normal install.
$(VENV)/.demo: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) -e '.[jax,plot]'
	$(BIN)/python -m compileall -q src >/dev/null
	touch $@

$(VENV)/.test: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) -e '.[test]'
	$(BIN)/python -m compileall -q src >/dev/null
	touch $@

demo: $(VENV)/.demo
	$(BIN)/jaxcache demo

# Tests use real users, groups, ACLs and mount namespaces; as root, install what they need.
system-deps:
	@sh scripts/system-deps.sh

lint: $(VENV)/.test
	$(BIN)/ruff check src tests benchmarks

test: system-deps $(VENV)/.test lint
	$(BIN)/python -m pytest

# The JAX-touching tests (marker `matrix`, and tests/test_jaxcompat.py) on the newest patch of
# every supported JAX line, each in its own .venv-jax/<version> (reused while its stamp matches
# the version and the constraints: scripts/jax-venv.sh). docs/jax-versions.md has its timings.
MATRIX ?= 0.5.3 0.6.2 0.7.2 0.8.3 0.9.2 0.10.2
matrix:
	@for v in $(MATRIX); do \
	  echo "== JAX $$v"; \
	  PYTHON=$(PYTHON) sh scripts/jax-venv.sh $$v || exit 1; \
	  .venv-jax/$$v/bin/python -m pytest -q -p no:cacheprovider -m matrix \
	    tests/test_versions_matrix.py tests/test_jaxcompat.py || exit 1; \
	done

clean:
	rm -rf $(VENV) .venv-jax .pytest_cache .ruff_cache
